"""The release lease: which process is releasing a case's locks right now.

An approval or resume holds `{lockguard}:case:<id>:releasing` (`SET NX PX`, renewed by a daemon
thread, given back by compare-and-delete). A killed releaser's lease lapses within `LEASE_MS`, so
an approved, unfinished case with no lease may be resumed at once by any replica. An ACL refusing
the key releases without it (resumed only once progress stalls). A second resume waits one lease
period, then raises `ReleaseBusyError`. Not what prevents a double release: the release script
skips every lock that already has an outcome.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
import time
from contextlib import suppress
from types import TracebackType

import redis
from redis.exceptions import RedisClusterException

from bot.core import logs
from bot.core.errors import CaseError
from bot.store import lease_keys
from bot.store.keyspace import case_key, releasing_key

#: How long a lease lasts unrenewed, and how often its holder renews it.
LEASE_MS = 5_000
RENEW_EVERY_S = 1.5
#: The case hash's field saying a release of it has held the lease.
LEASED_FIELD = b"release_leased"
_log = logs.logger("release")

# KEYS[1] the case hash. ARGV[1] the field. Marked only while the case exists (never a stray hash).
_MARK_LUA = """
if redis.call('EXISTS', KEYS[1]) == 1 then return redis.call('HSET', KEYS[1], ARGV[1], '1') end
return 0
"""


class ReleaseBusyError(CaseError):
    """Another process holds the case's release lease: it is releasing the case now."""


#: `lease_states`: someone releases it now; its releaser stopped; no release ever held one.
HELD, LAPSED, NEVER = "held", "lapsed", "never"


def lease_states(client: redis.Redis, case_ids: list[str]) -> dict[str, str]:
    """Each case of `case_ids` -> HELD, LAPSED or NEVER (one pipeline)."""
    if not case_ids:
        return {}
    with client.pipeline(transaction=False) as pipe:
        for case_id in case_ids:
            pipe.exists(releasing_key(case_id))
            pipe.hget(case_key(case_id), LEASED_FIELD)
        replies = pipe.execute()
    out = {}
    for n, case_id in enumerate(case_ids):
        held, marked = replies[2 * n], replies[2 * n + 1]
        out[case_id] = HELD if held else LAPSED if marked else NEVER
    return out


def holder(client: redis.Redis, case_id: str) -> str:
    """Who holds the case's release lease (`host:pid`), or "" when nobody does."""
    raw = client.get(releasing_key(case_id))
    if not isinstance(raw, bytes):
        return ""
    return raw.rsplit(b"|", 1)[0].decode("utf-8", "replace")


class ReleaseLease:
    """Holds the lease for a `with` block, or raises `ReleaseBusyError` when another process
    still holds it after one lease period; with `required=False` it goes on at once without it.
    `lost`: another process took it over (the release stops between batches)."""

    def __init__(
        self,
        client: redis.Redis,
        case_id: str,
        *,
        lease_ms: int = LEASE_MS,
        renew_every_s: float = RENEW_EVERY_S,
        required: bool = True,
    ) -> None:
        self.client = client
        self.case_id = case_id
        self.lease_ms = lease_ms
        self.renew_every_s = renew_every_s
        self.key = releasing_key(case_id)
        replica = f"{socket.gethostname()}:{os.getpid()}"
        self.value = f"{replica}|{secrets.token_hex(8)}".encode()
        self.required = required
        self.held = False
        self.lost = False
        self._refused = False
        self._mark = client.register_script(_MARK_LUA)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> ReleaseLease:
        try:
            took = self._take()
        except redis.ResponseError as exc:  # refused (ACL): the release is as safe without it
            self._refused = True
            logs.event(
                _log,
                "release_lease_refused",
                logging.WARNING,
                case_id=self.case_id,
                error=str(exc).split(" ", 1)[0][:40],
                hint="a cut-short release is then resumed only once its progress stalls",
            )
            return self
        if took or (self.required and self._wait_take()):
            self._hold()
        elif self.required:
            who = holder(self.client, self.case_id) or "another process"
            raise ReleaseBusyError(
                f"case {self.case_id} is being released by {who} right now; if that process "
                f"has stopped, its lease lapses within {self.lease_ms // 1000} s and the case "
                "can be resumed then"
            )
        return self

    def ensure(self) -> None:
        """One more try before the release, at a lease busy on entry (a concurrent approval that
        lost the case); without it the release goes on, as safe."""
        if self._thread is None and not self._refused and self._take():
            self._hold()

    def _hold(self) -> None:
        with suppress(redis.ResponseError):  # unmarked: resumed once its progress stalls
            self._mark(keys=[case_key(self.case_id)], args=[LEASED_FIELD])
        self._thread = threading.Thread(
            target=self._renew_loop, name=f"lockguard-release-{self.case_id}", daemon=True
        )
        self._thread.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._thread is None:
            return  # never held
        self._thread.join(timeout=5)
        try:
            lease_keys.give_back(self.client, self.key, self.value)
        except (redis.RedisError, RedisClusterException) as error:  # it lapses by itself
            logs.event(
                _log,
                "release_lease_not_returned",
                logging.WARNING,
                case_id=self.case_id,
                error=type(error).__name__,
            )

    def _wait_take(self) -> bool:
        """Up to one lease period: a killed holder's lease lapses by then, a live one's does not."""
        deadline = time.monotonic() + self.lease_ms / 1000 + 0.5
        while time.monotonic() < deadline:
            time.sleep(0.1)
            if self._take():
                return True
        return False

    def _take(self) -> bool:
        self.held = lease_keys.take(self.client, self.key, self.value, self.lease_ms)
        return self.held

    def _renew_loop(self) -> None:
        while not self._stop.wait(self.renew_every_s):
            try:
                ours = lease_keys.renew(self.client, self.key, self.value, self.lease_ms)
                if not ours and not self._take():  # lapsed (a pause): taken again if free
                    self.lost = True
                    logs.event(_log, "release_lease_lost", logging.WARNING, case_id=self.case_id)
                    return
            except (redis.RedisError, RedisClusterException):
                continue  # Redis away: the release fails too; the lease lapses if it lasts
