"""BullMQ's keys under any prefix (bot/core/bullmq.py, through bot/core/layouts.py `recognize`):
each string BullMQ keeps for itself is no lock under `bull:`, `{jobs}:`, `myapp:` and a prefix
holding `:`, strict or loose, while its job locks and apps' own locks that merely hold such a
word stay locks. The same against the real library: tests/evidence/test_bullmq_real.py."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.core.bullmq import GATE, JobLock, bookkeeping, job_lock
from bot.core.layouts import recognize
from bot.core.model import Layout
from tests.core.test_layouts import NOW_MS, UUID4, UUID4_B, hash_snap, string_snap, uuid1_hex

PREFIXES = [b"bull", b"{jobs}", b"myapp", b"app:jobs"]
TOKEN = UUID4_B + b":7"  # a worker's job lock token `<uuid>:<n>`
SCHEDULED = b"repeat:user:42:digest:1796226993350"  # a scheduler's job id, `:` and all

# (what, kind under `<prefix>:emails:`, value, pttl): every string BullMQ writes but its locks
BOOKKEEPING = [
    ("job id counter", b"id", b"57", -1),
    ("priority counter", b"pc", b"3", -1),
    ("stalled check", b"stalled-check", str(NOW_MS).encode(), 30_000),
    ("rate limiter", b"limiter", b"3", 1_000),
    ("rate limit set by Queue.rateLimit", b"limiter", b"9007199254740991", 60_000),
    ("dedup key, a job id with a TTL", b"de:welcome", b"12", 600_000),  # a counter's shape
    ("dedup key, no TTL", b"de:digest", b"11", -1),
    ("dedup id holding `:`", b"de:welcome:ann@example.com", b"12", 600_000),
    ("dedup key of a custom job id", b"de:sync", b"sync-2026-01-01", 600_000),
    ("dedup key of a UUID job id (a flow's)", b"de:flow", UUID4_B, 600_000),
    ("dedup key of a scheduler's job", b"de:digest", SCHEDULED, 600_000),
    ("dedup key of a three-part custom id", b"de:x", b"a:b:c", 600_000),
    ("dedup key named `lock`", b"de:lock", b"7", 600_000),
    ("dedup key of a uuid1 hex job id", b"de:x", uuid1_hex(NOW_MS - 1000), -1),
]


@pytest.mark.parametrize("prefix", PREFIXES, ids=[p.decode() for p in PREFIXES])
@pytest.mark.parametrize(
    ("kind", "value", "pttl"), [pytest.param(*c[1:], id=c[0]) for c in BOOKKEEPING]
)
@pytest.mark.parametrize("loose", [False, True], ids=["strict", "loose"])
def test_bullmq_bookkeeping_is_no_lock_under_any_prefix(
    prefix: bytes, kind: bytes, value: bytes, pttl: int, loose: bool
) -> None:
    rec = recognize(string_snap(prefix + b":emails:" + kind, value, pttl), loose)
    assert rec.not_a_lock.startswith("BullMQ's own bookkeeping, not a lock"), rec
    assert rec.layout is Layout.STRING


@pytest.mark.parametrize("prefix", PREFIXES, ids=[p.decode() for p in PREFIXES])
@pytest.mark.parametrize(
    ("job", "owner_job"),
    [(b"7", "7"), (UUID4_B, UUID4), (SCHEDULED, SCHEDULED.decode()), (b"de", "de")],
)
def test_a_job_lock_is_a_lock_and_names_its_whole_job(
    prefix: bytes, job: bytes, owner_job: str
) -> None:
    key = prefix + b":emails:" + job + b":lock"
    for loose in (False, True):
        rec = recognize(string_snap(key, TOKEN, 30_000), loose)
        assert (rec.layout, rec.not_a_lock) == (Layout.BULLMQ, "")
        assert rec.owner == f"worker {UUID4} job {owner_job}"


def test_a_scheduler_id_holding_de_still_makes_a_job_lock() -> None:
    key = b"{jobs}:reports:repeat:team:de:weekly:1796226993350:lock"
    rec = recognize(string_snap(key, TOKEN, 30_000))
    assert (rec.layout, rec.not_a_lock) == (Layout.BULLMQ, "")
    assert rec.owner.endswith(" job repeat:team:de:weekly:1796226993350")


# Apps' locks with `de`, `id` or `pc` in them that BullMQ could not have written: still locks
APP_LOCKS = [
    ("one part before `:de:`", b"lock:de:x", uuid1_hex(NOW_MS - 1000), 30_000, Layout.REDIS_PY),
    ("a counter lock at lock:de:x", b"lock:de:x", b"2", 30_000, Layout.COUNTER),
    ("`de` as the last part", b"lock:i18n:de", UUID4_B, 30_000, Layout.PYTHON_REDIS_LOCK),
    ("`de` inside a part", b"lock:jobs:dedupe:x", UUID4_B, 30_000, Layout.PYTHON_REDIS_LOCK),
    ("an empty part before `:de:`", b"lock::de:x", b"2", 30_000, Layout.COUNTER),
    ("nothing after `:de:`", b"lock:x:de:", b"2", 30_000, Layout.COUNTER),
    ("a `host:pid` token (no job id)", b"app:jobs:de:sync", b"host-1:4242", -1, Layout.STRING),
    (
        "a ShedLock value (no job id)",
        b"job-lock:prod:de:nightly",
        b"ADDED:2025-12-31T23:00:00.250Z@app-host-1",
        60_000,
        Layout.SHEDLOCK,
    ),
    ("a BullMQ-shaped token on a dedup key", b"app:jobs:de:x", TOKEN, 30_000, Layout.STRING),
    ("a counter lock ending `:id`", b"lock:order:id", b"2", 30_000, Layout.COUNTER),
    ("a token lock ending `:pc`", b"lock:host:pc", UUID4_B, 30_000, Layout.PYTHON_REDIS_LOCK),
    ("`:id` with one part before", b"lock:id", b"2", 30_000, Layout.COUNTER),
]


@pytest.mark.parametrize(
    ("key", "value", "pttl", "layout"), [pytest.param(*c[1:], id=c[0]) for c in APP_LOCKS]
)
def test_app_locks_that_merely_look_like_bullmq_stay_locks(
    key: bytes, value: bytes, pttl: int, layout: Layout
) -> None:
    rec = recognize(string_snap(key, value, pttl))
    assert (rec.layout, rec.not_a_lock) == (layout, "")


def test_the_trade_off_an_app_lock_shaped_like_a_dedup_key_is_declined() -> None:
    """`app:jobs:de:sync` holding a token a job id could be: declined (never deleted), with the
    reason; docs/layouts.md says so."""
    rec = recognize(string_snap(b"app:jobs:de:sync", uuid1_hex(NOW_MS - 1000), 30_000))
    assert "deduplication key" in rec.not_a_lock


def test_an_integer_with_no_ttl_at_id_is_bullmq_s_counter_even_loose() -> None:
    snap = string_snap(b"myapp:emails:id", b"57", -1)
    assert "counter `<prefix>:<queue>:id`" in recognize(snap, loose=True).not_a_lock
    # with a TTL BullMQ never set: an INCR+EXPIRE lock like any other
    assert recognize(string_snap(b"myapp:emails:id", b"57", 5_000)).layout is Layout.COUNTER


def test_a_hostile_key_of_many_de_parts_is_read_at_once() -> None:
    """100,000 `:de:` with nothing before them but `x`, then a queue: one pass over the key."""
    key = b"x" + b":de:" * 100_000 + b"q:de:x"
    assert "deduplication key" in bookkeeping(key, b"7", -1)
    assert bookkeeping(b"x" + b":de:" * 100_000, b"7", -1) == ""  # one part before each


segment = st.text("abcdefgh0123456789-_{}@.", min_size=1, max_size=8).map(str.encode)
name = segment.filter(lambda s: s not in (b"repeat", b"de"))
prefixes = st.lists(name, min_size=1, max_size=3).map(b":".join)
job_ids = st.one_of(
    st.integers(1, 2**53).map(lambda n: str(n).encode()),
    segment,  # a custom id or a UUID: no `:`
    st.builds(
        lambda sid, ms: b"repeat:" + b":".join(sid) + b":" + str(ms).encode(),
        st.lists(name, min_size=1, max_size=3),
        st.integers(0, 2**53),
    ),
)
pttls = st.sampled_from([-1, 1, 30_000, 3_600_000])


@given(prefixes, name, st.lists(segment, min_size=1, max_size=3).map(b":".join), job_ids, pttls)
def test_any_dedup_key_bullmq_writes_is_no_lock(
    prefix: bytes, queue: bytes, dedup_id: bytes, job: bytes, pttl: int
) -> None:
    snap = string_snap(prefix + b":" + queue + b":de:" + dedup_id, job, pttl)
    for loose in (False, True):
        assert "deduplication key" in recognize(snap, loose).not_a_lock


@given(prefixes, name, job_ids)
def test_any_job_lock_bullmq_writes_is_a_lock_of_that_job(
    prefix: bytes, queue: bytes, job: bytes
) -> None:
    key = b":".join([prefix, queue, job]) + b":lock"
    assert job_lock(key) == JobLock(prefix, queue, job)
    rec = recognize(string_snap(key, TOKEN, 30_000))
    assert (rec.layout, rec.not_a_lock) == (Layout.BULLMQ, "")
    assert rec.owner == f"worker {UUID4} job {job.decode()}"


plain = st.text("abcdefgh0123456789-_.", min_size=1, max_size=8).map(str.encode)


@given(st.lists(plain.filter(lambda s: s not in (b"de", b"id", b"pc")), min_size=1, max_size=4))
def test_keys_without_a_bullmq_word_are_never_its_bookkeeping(parts: list[bytes]) -> None:
    key = b"lock:" + b":".join(parts)
    assert bookkeeping(key, b"7", -1) == ""


words = st.sampled_from(
    [b"bull", b"{bull}", b"de", b"id", b"pc", b"limiter", b"stalled-check", b"lock", b"", b"q"]
)


@given(st.lists(st.one_of(words, plain), min_size=1, max_size=6), st.sampled_from([b"7", b"x"]))
def test_the_gate_layouts_runs_first_lets_every_bookkeeping_key_through(
    parts: list[bytes], value: bytes
) -> None:
    key = b":".join(parts)
    if bookkeeping(key, value, -1):
        assert GATE.match(key) is not None, key


JOB_FIELDS = {
    b"name": b"welcome",
    b"data": b'{"to":"ann@example.com"}',
    b"opts": b'{"attempts":1}',
    b"timestamp": str(NOW_MS).encode(),
    b"delay": b"0",
    b"priority": b"0",
}
# (what, kind under `<prefix>:emails:`, fields): BullMQ's hashes, which loose recognition would
# otherwise take for home-made hash locks (a job hash has no TTL: `infinite_ttl` at once)
HASHES = [
    ("job", b"9", JOB_FIELDS),
    ("a scheduler's next job", SCHEDULED, JOB_FIELDS),
    ("a deduplicated next job", b"dn:digest:42", {b"name": b"d", b"data": b"{}", b"opts": b"{}"}),
    ("queue meta", b"meta", {b"opts.maxLenEvents": b"10000", b"version": b"bullmq:6.7.0"}),
    ("a parent's processed children", b"P1:processed", {b"{jobs}:emails:4": b'"ok"'}),
    ("a parent's failed children", b"P1:failed", {b"{jobs}:emails:5": b"550"}),
    ("a job scheduler", b"repeat:hourly", {b"name": b"digest", b"every": b"3600000"}),
    ("metrics", b"metrics:completed", {b"count": b"7", b"prevTS": b"1", b"prevCount": b"6"}),
]


@pytest.mark.parametrize("prefix", PREFIXES, ids=[p.decode() for p in PREFIXES])
@pytest.mark.parametrize(("kind", "fields"), [pytest.param(*c[1:], id=c[0]) for c in HASHES])
def test_bullmq_hashes_are_no_locks_even_loose(
    prefix: bytes, kind: bytes, fields: dict[bytes, bytes]
) -> None:
    snap = hash_snap(prefix + b":emails:" + kind, fields)
    assert recognize(snap).not_a_lock  # strict: no holder layout
    assert "BullMQ's own bookkeeping" in recognize(snap, loose=True).not_a_lock


@pytest.mark.parametrize(
    ("key", "fields", "layout"),
    [
        (b"lock:report", {b"owner": b"host-1", b"since": b"1767225600"}, Layout.HASH),
        (b"app:jobs:metadata", {b"owner": b"host-1"}, Layout.HASH),  # `:meta` inside a part
        (b"lock:meta", {b"owner": b"host-1"}, Layout.HASH),  # one part before `:meta`
        (b"{jobs}:emails:meta", {UUID4_B + b":1": b"1"}, Layout.REDISSON),  # a holder layout
    ],
)
def test_home_made_hash_locks_stay_locks_when_loose(
    key: bytes, fields: dict[bytes, bytes], layout: Layout
) -> None:
    rec = recognize(hash_snap(key, fields), loose=True)
    assert (rec.layout, rec.not_a_lock) == (layout, "")
