"""Posts the case messages Slack did not take, once it takes messages again: at start, every
`EVERY` seconds, and on the next Slack call that succeeds (at most every `MIN_GAP` s, on the
worker pool, never a thread that still has to ack).

Each entry is claimed first, so two replicas never post one case twice. A case no longer pending
is dropped without posting. A refusal about one channel moves on to the next entry; any other
(Slack down, rate-limited) ends the round; a Redis failure ends that Redis's part of it.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from contextlib import suppress

from bot.core import logs
from bot.core.errors import CaseError, LockguardError
from bot.slack.case_posts import CasePosts
from bot.slack.chat import SendError
from bot.slack.work import Work
from bot.store.unposted import Unposted, UnpostedQueue

#: Seconds between two rounds of the timer.
EVERY = 30.0
#: Seconds at least between two rounds started by a Slack call that succeeded.
MIN_GAP = 5.0
#: Refusals about one channel or one message: the other entries may still go out.
CHANNEL_ERRORS = frozenset(
    {
        "not_in_channel",
        "channel_not_found",
        "is_archived",
        "invalid_blocks",
        "msg_too_long",
        "no_permission",
    }
)
_log = logs.logger("slack.reposter")


def about_one_channel(code: str) -> bool:
    return code in CHANNEL_ERRORS or code.startswith("restricted_action")


class _RoundOver(Exception):
    """Slack (`slack`) or this queue's Redis is still failing: the rest waits for the next round."""

    def __init__(self, *, slack: bool) -> None:
        super().__init__()
        self.slack = slack


class Reposter:
    def __init__(
        self, posts: CasePosts, work: Work, *, every: float = EVERY, min_gap: float = MIN_GAP
    ) -> None:
        self._all = [posts]
        self._work = work
        self.every = every
        self.min_gap = min_gap
        self._round = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_poke = float("-inf")
        self._poke_lock = threading.Lock()

    def add(self, posts: CasePosts) -> None:
        self._all.append(posts)

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._loop, name="lockguard-reposter", daemon=True
            )
            self._thread.start()

    def close(self, timeout: float = 5.0) -> None:
        """Stop the timer; a round under way finishes its current post first."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def poke(self) -> None:
        if self._stop.is_set():
            return
        with self._poke_lock:
            now = time.monotonic()
            if now - self._last_poke < self.min_gap:
                return
            self._last_poke = now
        with suppress(RuntimeError):  # the pool is shut down: serve is stopping
            self._work.submit("repost", self.run_once)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.run_once()
            if self._stop.wait(self.every):
                return

    def run_once(self, *, wait: bool = False) -> int:
        """How many case messages one round posted; 0 while another round runs, unless `wait`."""
        if not self._round.acquire(blocking=wait):
            return 0
        posted = 0
        try:
            for posts in list(self._all):
                done, slack_down = self._round_of(posts)
                posted += done
                if slack_down:  # Slack is still failing: no other target's turn either
                    break
        finally:
            self._round.release()
        return posted

    def _round_of(self, posts: CasePosts) -> tuple[int, bool]:
        """How many of this target's messages were posted, and whether Slack failed."""
        try:
            entries = posts.unposted.entries()
        except LockguardError as exc:
            logs.event(_log, "unposted_not_read", logging.WARNING, error=str(exc)[:200])
            return 0, False
        posted = 0
        for entry in entries:
            if self._stop.is_set():
                break
            try:
                posted += self._one(posts, entry)
            except _RoundOver as over:
                return posted, over.slack
        return posted, False

    def _one(self, posts: CasePosts, entry: Unposted) -> int:
        token, queue = secrets.token_hex(8), posts.unposted
        try:
            claimed = queue.claim(entry.case_id, token)
            if claimed is None:
                return 0  # taken by another round or replica, or gone
            entry = claimed
            ref = posts.repost(entry.case_id, entry.channel, entry.queued_ms)
        except SendError as exc:
            self._give_back(queue, entry, token, exc.code)
            if about_one_channel(exc.code):
                return 0
            raise _RoundOver(slack=True) from None
        except CaseError as exc:  # no such case any more (retention)
            ref = None
            logs.event(_log, "unposted_case_gone", case_id=entry.case_id, error=str(exc)[:200])
        except LockguardError as exc:
            self._give_back(queue, entry, token, "redis")
            logs.event(_log, "repost_stopped", logging.WARNING, error=str(exc)[:200])
            raise _RoundOver(slack=False) from None
        try:
            queue.done(entry.case_id, token)
        except LockguardError as exc:
            logs.event(
                _log,
                "unposted_not_dropped",
                logging.WARNING,
                case_id=entry.case_id,
                error=str(exc)[:200],
            )
        if ref is None:
            logs.event(_log, "unposted_case_dropped", case_id=entry.case_id)
            return 0
        logs.event(
            _log,
            "case_message_reposted",
            case_id=entry.case_id,
            channel=ref.channel,
            ts=ref.ts,
            attempts=entry.attempts + 1,
        )
        return 1

    def _give_back(self, queue: UnpostedQueue, entry: Unposted, token: str, code: str) -> None:
        logs.event(
            _log,
            "case_message_repost_failed",
            logging.WARNING,
            case_id=entry.case_id,
            channel=entry.channel,
            error=code,
            attempts=entry.attempts + 1,
        )
        with suppress(LockguardError):  # else its lease runs out by itself
            queue.failed(entry.case_id, token)
