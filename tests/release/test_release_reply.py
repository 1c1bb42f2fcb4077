"""The release scripts' reply protocol: `Reply.decode` and what each reply means, as tables.

No Redis here: raw replies as redis-py hands them over (ints and bytes), decoded and read as the
release and the verification read them. The scripts that produce them run in test_release.py.
"""

from __future__ import annotations

import inspect

import pytest
import redis

from bot.core.layouts import COUNTER_IDENTITY
from bot.core.model import Layout
from bot.release import ApprovedLock, Outcome, Result, scripts
from bot.release.reply import Reply
from bot.release.runner import Call, ScriptRunner
from bot.release.scripts import Code, Event
from bot.release.verifier import Verifier
from tests.conftest import free_port

TOKEN = ApprovedLock(b"lock:a", Layout.STRING, b"tok", 30_000, 0)
PRL = ApprovedLock(b"lock:job", Layout.PYTHON_REDIS_LOCK, b"QUJD", -1, 0)
COUNTER = ApprovedLock(b"\x17ctr", Layout.COUNTER, COUNTER_IDENTITY, 30_000, 0, counter=5)

# -- decoding -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "reply"),
    [
        ([1, -2, b"", 0, b"sent"], Reply(Code.DELETED, -2, "", 0, Event.SENT)),
        ([1, -2, b"", 7, b"refused"], Reply(Code.DELETED, -2, "", 7, Event.REFUSED)),
        ([2, 5000, b"", 0, b""], Reply(Code.DELAYED, 5000, "", 0, Event.NONE)),
        ([3, 800, b"", 0, b"sent"], Reply(Code.DELAY_KEPT, 800, "", 0, Event.SENT)),
        ([4, -1, b"", 3, b""], Reply(Code.MATCH, -1, "", 3)),
        ([5, -2, b"recovered", 0, b""], Reply(Code.EARLIER, -2, "recovered", 0)),
        ([0, -2, b"", 0, b""], Reply(Code.GONE, -2, "", 0)),
        ([-1, -2, b"count_grew", 9, b""], Reply(Code.CHANGED, -2, "count_grew", 9)),
        ([-2, 60000, b"rearmed", 1500, b""], Reply(Code.RENEWED, 60000, "rearmed", 1500)),
        ([-3, -2, b"refused", 0, b""], Reply(Code.REFUSED, -2, "refused", 0)),
        (["1", "-2", "", "0", "sent"], Reply(Code.DELETED, -2, "", 0, Event.SENT)),  # text replies
    ],
)
def test_decode(raw: object, reply: Reply) -> None:
    assert Reply.decode(raw) == reply


@pytest.mark.parametrize(
    "raw",
    [
        None,
        b"OK",
        [1, -2, b"", 0],  # the four-element shape of before: not this protocol
        [1, -2, b"", 0, b"", b"extra"],
        [9, -2, b"", 0, b""],  # no such code
        [b"x", -2, b"", 0, b""],
        [1, None, b"", 0, b""],
        [1, -2, b"", 0, b"maybe"],  # no such event
    ],
)
def test_decode_refuses_what_is_not_a_reply(raw: object) -> None:
    assert Reply.decode(raw) is None


def test_every_code_and_event_is_in_the_documented_table() -> None:
    source = inspect.getsource(scripts)
    assert scripts.__doc__ is not None
    assert "{code, pttl, why, number, event}" in scripts.__doc__
    for code in Code:
        assert f"    {code.name} = {code.value}\n" in source
    for event in Event:
        assert f"'{event.value}'" in scripts.__doc__


# -- what a release reply means -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "target", "grace", "outcome", "detail", "extra"),
    [
        (
            [1, -2, b"", 0, b""],
            TOKEN,
            None,
            Outcome.RELEASED,
            "deleted: the approved holder still held it",
            {},
        ),
        (
            [1, -2, b"", 0, b"sent"],
            TOKEN,
            None,
            Outcome.RELEASED,
            "deleted: the approved holder still held it",
            {"event_published": True},
        ),
        (
            [1, -2, b"", 0, b"refused"],
            TOKEN,
            None,
            Outcome.RELEASED,
            "deleted: the approved holder still held it; the reclaim event was NOT published: "
            "Redis refused PUBLISH on the release channel (ACL)",
            {},
        ),
        (
            [1, -2, b"", 0, b"sent"],
            PRL,
            None,
            Outcome.RELEASED,
            "deleted: the approved holder still held it",
            {
                "event_published": True,
                "wake": (
                    "python-redis-lock: pushed one wake-up onto "
                    "lock-signal:job (one blocked waiter retries)",
                ),
            },
        ),
        (
            [2, 5000, b"", 0, b"sent"],
            TOKEN,
            5000,
            Outcome.RELEASED,
            "lock-delay: TTL shortened to 5000 ms; the key expires then unless its holder renews "
            "it",
            {"now_ttl_ms": 5000, "event_published": True},
        ),
        (
            [3, 800, b"", 0, b"refused"],
            TOKEN,
            5000,
            Outcome.RELEASED,
            "lock-delay: TTL already 800 ms, within the 5000 ms grace, left as is; the reclaim "
            "event was NOT published: Redis refused PUBLISH on the release channel (ACL)",
            {"now_ttl_ms": 800},
        ),
        (
            [5, -2, b"released", 0, b""],
            TOKEN,
            None,
            Outcome.RELEASED,
            "decided by an earlier run: released",
            {"earlier": True},
        ),
        (
            [5, -2, b"already_gone", 0, b""],
            TOKEN,
            5000,
            Outcome.ALREADY_GONE,
            "decided by an earlier run: already_gone",
            {"earlier": True},
        ),
        (
            [5, -2, b"no-such", 0, b""],
            TOKEN,
            None,
            Outcome.ERROR,
            "decided by an earlier run: no-such",
            {"earlier": True},
        ),
        (
            [0, -2, b"", 0, b""],
            TOKEN,
            None,
            Outcome.ALREADY_GONE,
            "already gone: the key no longer exists",
            {},
        ),
        (
            [-1, -2, b"type", 0, b""],
            TOKEN,
            None,
            Outcome.SKIPPED_REACQUIRED,
            "skipped: the key is now another type, so it was re-created since approval",
            {},
        ),
        (
            [-1, -2, b"value", 0, b""],
            TOKEN,
            None,
            Outcome.SKIPPED_REACQUIRED,
            "skipped: re-acquired or changed since approval (not the approved value)",
            {},
        ),
        (
            [-1, -2, b"field", 0, b""],
            TOKEN,
            None,
            Outcome.SKIPPED_REACQUIRED,
            "skipped: an approved holder field is gone, so it was re-acquired since approval",
            {},
        ),
        (
            [-1, -2, b"extra", 0, b""],
            TOKEN,
            None,
            Outcome.SKIPPED_REACQUIRED,
            "skipped: another holder joined the lock since approval",
            {},
        ),
        (
            [-1, -2, b"integer", 0, b""],
            COUNTER,
            None,
            Outcome.SKIPPED_REACQUIRED,
            "skipped: the value is no longer an integer counter, so it was re-created",
            {},
        ),
        (
            [-1, -2, b"count", 1, b""],
            COUNTER,
            None,
            Outcome.SKIPPED_REACQUIRED,
            "skipped: the count is 1, below the approved 5, so the key was deleted and re-created",
            {},
        ),
        (
            [-1, -2, b"count_grew", 8, b""],
            COUNTER,
            None,
            Outcome.SKIPPED_REACQUIRED,
            "skipped: the count grew to 8 from the approved 5: someone is still using it",
            {},
        ),
        (
            [-1, -2, b"rearmed", 5, b""],
            COUNTER,
            None,
            Outcome.SKIPPED_REACQUIRED,
            "skipped: the count is unchanged but the TTL was re-armed, so it was re-created by a "
            "new owner or renewed by its holder since approval",
            {},
        ),
        (
            [-1, -2, b"novel", 0, b""],
            TOKEN,
            None,
            Outcome.SKIPPED_REACQUIRED,
            "skipped: changed since approval",
            {},
        ),
        (
            [-2, 60000, b"rearmed", 1500, b""],
            TOKEN,
            None,
            Outcome.RECOVERED,
            "recovered: the same holder renewed it since approval (TTL 60000 ms, about 1500 ms "
            "expected); nothing changed",
            {},
        ),
        (
            [-2, 60000, b"rearmed", -40, b""],
            TOKEN,
            None,
            Outcome.RECOVERED,
            "recovered: the same holder renewed it since approval (TTL 60000 ms, about 0 ms "
            "expected); nothing changed",
            {},
        ),
        (
            [-2, 30000, b"expiry_added", -1, b""],
            TOKEN,
            None,
            Outcome.RECOVERED,
            "recovered: an expiry (30000 ms) was set on this lock since it was approved without "
            "one, so its owner looks alive; nothing changed",
            {},
        ),
        (
            [-2, -1, b"expiry_removed", 9000, b""],
            TOKEN,
            None,
            Outcome.RECOVERED,
            "recovered: the lock's expiry was removed since approval, so its owner looks alive; "
            "nothing changed",
            {},
        ),
        (
            [-3, -2, b"refused", 0, b""],
            TOKEN,
            None,
            Outcome.ERROR,
            "not released: Redis refused the delete (NOPERM: the ACL user may not run DEL or "
            "PEXPIRE); nothing changed",
            {},
        ),
        (
            [4, 100, b"", 0, b""],
            TOKEN,
            None,
            Outcome.ERROR,  # a 'check' reply to a release
            "not released: unexpected reply from Redis",
            {},
        ),
    ],
)
def test_release_reply_means(
    raw: object,
    target: ApprovedLock,
    grace: int | None,
    outcome: Outcome,
    detail: str,
    extra: dict[str, object],
) -> None:
    reply = Reply.decode(raw)
    assert reply is not None
    expected = Result(target.key, outcome, detail, **extra)  # type: ignore[arg-type]
    assert reply.result(target, grace) == expected


# -- what a verification reply means --------------------------------------------------------------

DELETED = Result(b"lock:a", Outcome.RELEASED, "deleted: the approved holder still held it")


class _Canned(ScriptRunner):
    """A runner that answers every call with the same reply, and counts the calls."""

    def __init__(self, answer: Reply | str, grace_ms: int | None) -> None:
        super().__init__(redis.Redis(port=free_port()), grace_ms)  # never connects
        self.answer = answer
        self.calls: list[Call] = []

    def run(self, calls: list[Call]) -> list[Reply | str]:
        self.calls += calls
        return [self.answer] * len(calls)


@pytest.mark.parametrize(
    ("answer", "grace", "outcome", "detail"),
    [
        (Reply(Code.GONE, -2, "", 0), None, Outcome.RELEASED, DELETED.detail),
        (
            Reply(Code.CHANGED, -2, "value", 0),
            None,
            Outcome.RELEASED,
            DELETED.detail + "; a new holder has acquired it since",
        ),
        (Reply(Code.MATCH, 1500, "", 0), 2000, Outcome.RELEASED, DELETED.detail),
        (Reply(Code.MATCH, 2000, "", 0), 2000, Outcome.RELEASED, DELETED.detail),
        (
            Reply(Code.MATCH, -1, "", 0),
            None,
            Outcome.ERROR,
            "verification failed: the approved holder still holds it with no expiry after the "
            "delete",
        ),
        (
            Reply(Code.MATCH, 800, "", 0),
            None,
            Outcome.ERROR,
            "verification failed: the approved holder still holds it with a TTL of 800 ms after "
            "the "
            "delete",
        ),
        (
            Reply(Code.MATCH, 60000, "", 0),
            2000,
            Outcome.ERROR,
            "verification failed: the approved holder still holds it with a TTL of 60000 ms, "
            "above the "
            "2000 ms grace",
        ),
        (
            Reply(Code.MATCH, -1, "", 0),
            2000,
            Outcome.ERROR,
            "verification failed: the approved holder still holds it with no expiry, above the "
            "2000 ms "
            "grace",
        ),
        (
            Reply(Code.DELETED, -2, "", 0),
            None,
            Outcome.ERROR,
            "verification failed: unexpected reply from Redis",
        ),
        (
            "not released: Redis timed out",
            None,
            Outcome.ERROR,
            "verification failed: could not read the key back (not released: Redis timed out)",
        ),
    ],
)
def test_verify_reply_means(
    answer: Reply | str, grace: int | None, outcome: Outcome, detail: str
) -> None:
    runner = _Canned(answer, grace)
    checked = Verifier(runner).verify(TOKEN, DELETED)
    assert checked == Result(DELETED.key, outcome, detail)
    assert [op for _, _, op in runner.calls] == ["check"]


@pytest.mark.parametrize(
    "result",
    [
        Result(b"lock:a", Outcome.RELEASED, "decided by an earlier run: released", earlier=True),
        Result(b"lock:a", Outcome.SKIPPED_REACQUIRED, "skipped"),
        Result(b"lock:a", Outcome.ERROR, "not released: Redis timed out"),
    ],
)
def test_verify_reads_back_only_what_was_released_now(result: Result) -> None:
    runner = _Canned(Reply(Code.MATCH, -1, "", 0), None)
    assert Verifier(runner).verify(TOKEN, result) == result
    assert runner.calls == []
