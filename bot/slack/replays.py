"""A signed Slack request taken twice runs once: `Replays.middleware`, a global Bolt middleware.

Bolt checks a request's signature and 5-minute window, not that it is new: a copied request is
valid again. Every signed request is recorded with one `SET {lockguard}:slack:seen:<sha256> 1 NX
PX 360000`, shared by every replica; a repeat is acked empty and nothing runs. When Redis does
not answer within `WAIT_SECONDS` (the ack must stay within 3 s), a slash command is not run;
anything else goes on: each decision is one atomic change in Redis, which says the same trouble.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as WaitTimeout

from slack_bolt import BoltRequest, BoltResponse
from slack_bolt.request.payload_utils import is_slash_command

from bot.core import logs
from bot.core.errors import LockguardError, RedisUnavailableError
from bot.engine import Engine
from bot.slack.alerts import Notifier
from bot.slack.blocks.text import refusal_text
from bot.slack.work import Work
from bot.store.slack_marks import SeenRequests

SIGNATURE_HEADER = "x-slack-signature"
TIMESTAMP_HEADER = "x-slack-request-timestamp"
#: How long the ack waits for Redis to record the request.
WAIT_SECONDS = 2.0
#: Bolt verified both already ("v0=" + 64 hex digits; Unix seconds); longer is not Slack's.
_SIGNATURE_MAX = 80
_TIMESTAMP_MAX = 20
_log = logs.logger("slack.replays")


def _header(req: BoltRequest, name: str) -> str:
    values = req.headers.get(name) or []
    return str(values[0]).strip() if values else ""


class Replays:
    def __init__(
        self, engine: Engine, notifier: Notifier, work: Work, *, wait_seconds: float = WAIT_SECONDS
    ) -> None:
        self._engine = engine
        self._seen = SeenRequests(engine.door)
        self._notifier = notifier
        self._work = work
        self._wait = wait_seconds
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="lockguard-replays")

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def middleware(self, req: BoltRequest, next: Callable[[], None]) -> BoltResponse | None:
        signature, timestamp = _header(req, SIGNATURE_HEADER), _header(req, TIMESTAMP_HEADER)
        if not signature or not timestamp:  # Socket Mode (or unsigned: Bolt refused it before)
            next()
            return None
        try:
            first = self._first_time(signature[:_SIGNATURE_MAX], timestamp[:_TIMESTAMP_MAX])
        except LockguardError as exc:
            return self._unrecorded(req, exc, next)
        if not first:
            logs.event(
                _log,
                "slack_replay_ignored",
                logging.WARNING,
                kind="slash command" if is_slash_command(req.body) else "interaction",
            )
            return BoltResponse(status=200, body="")
        next()
        return None

    def _first_time(self, signature: str, timestamp: str) -> bool:
        """True when this request was not seen before (it is now)."""
        future = self._pool.submit(self._seen.first_time, signature, timestamp)
        try:
            return future.result(timeout=self._wait)
        except WaitTimeout:
            future.cancel()
            raise RedisUnavailableError(
                f"Redis at {self._engine.endpoint} did not answer within {self._wait:g} s"
            ) from None

    def _unrecorded(
        self, req: BoltRequest, exc: LockguardError, next: Callable[[], None]
    ) -> BoltResponse | None:
        slash = is_slash_command(req.body)
        logs.event(
            _log,
            "slack_request_not_recorded",
            logging.WARNING,
            kind="slash command" if slash else "interaction",
            error=str(exc)[:300],
        )
        self._work.submit("replay check alert", lambda: self._notifier.error_seen(exc))
        if not slash:
            next()
            return None
        text = refusal_text(
            f"{exc}. lockguard records every command in Redis so that a "
            "copy sent again runs nothing; it could not, so it ran nothing. "
            "Try again when Redis answers."
        )
        return BoltResponse(
            status=200,
            body=json.dumps({"response_type": "ephemeral", "text": text}),
            headers={"content-type": "application/json;charset=utf-8"},
        )
