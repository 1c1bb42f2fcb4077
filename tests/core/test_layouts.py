"""Layout recognition (pure): which library made a lock, its identity, its owner and, where the
value carries it, when it was acquired. Shapes from research/lock-layouts.md §0 and §13.2."""

from __future__ import annotations

import base64
import uuid
from datetime import UTC, datetime

import pytest

from bot.core.layouts import COUNTER_IDENTITY, decode_fields, encode_fields, recognize
from bot.core.model import Layout, Snapshot

NOW_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z, the "server time" of every snapshot here
NOW_S = NOW_MS // 1000

UUID4 = "6f1c2c1e-6f3a-4a5b-9c1d-2b3c4d5e6f70"
UUID4_B = UUID4.encode()
PRL_ID = base64.b64encode(bytes(range(18)))  # python-redis-lock: b64encode(urandom(18)), 24 chars
NODE_REDLOCK_HEX = b"0123456789abcdef0123456789abcdef"  # 13th hex char 'c': not a uuid1


def uuid1_hex(acquired_ms: int, node: int = 0x0242AC110002, clock_seq: int = 0x1234) -> bytes:
    """A redis-py token (uuid1().hex) as minted at `acquired_ms`."""
    ticks = acquired_ms * 10_000 + 0x01B21DD213814000
    u = uuid.UUID(
        fields=(
            ticks & 0xFFFFFFFF,
            (ticks >> 32) & 0xFFFF,
            ((ticks >> 48) & 0x0FFF) | 0x1000,
            0x80 | ((clock_seq >> 8) & 0x3F),
            clock_seq & 0xFF,
            node,
        )
    )
    assert u.version == 1
    return u.hex.encode()


def iso_ms(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1000)


def string_snap(key: bytes, value: bytes, pttl: int = -1) -> Snapshot:
    return Snapshot(
        key=key,
        type="string",
        pttl_ms=pttl,
        idle_s=0,
        observed_ms=NOW_MS,
        value=value,
        value_len=len(value),
    )


def hash_snap(key: bytes, fields: dict[bytes, bytes]) -> Snapshot:
    pairs = tuple(fields.items())
    return Snapshot(
        key=key,
        type="hash",
        pttl_ms=30_000,
        idle_s=0,
        observed_ms=NOW_MS,
        fields=pairs,
        hash_len=len(pairs),
    )


ACQUIRED = NOW_MS - 3_600_000  # an hour before "now"

# (id, key, value, layout, identity, owner substring, acquired_ms)
STRING_CASES = [
    (
        "redis-py uuid1 token",
        b"report-job",
        uuid1_hex(ACQUIRED),
        Layout.REDIS_PY,
        uuid1_hex(ACQUIRED),
        "node 02:42:ac:11:00:02",
        ACQUIRED,
    ),
    (
        "celery-once qo_ key: redis-py layout",
        b"qo_tasks.example_a-1_b-2",
        uuid1_hex(ACQUIRED - 5),
        Layout.REDIS_PY,
        uuid1_hex(ACQUIRED - 5),
        "node ",
        ACQUIRED - 5,
    ),
    (
        "redis-py >= 8.2 uuid4 token: no time in it",
        b"report-job",
        UUID4_B.replace(b"-", b""),
        Layout.REDIS_PY,
        UUID4_B.replace(b"-", b""),
        "",
        None,
    ),
    (
        "32 hex with a uuid4 version digit but no RFC 4122 variant: node-redlock",
        b"{redlock}printer",
        b"0123456789ab4def0123456789abcdef",
        Layout.NODE_REDLOCK,
        b"0123456789ab4def0123456789abcdef",
        "",
        None,
    ),
    (
        "uuid1 minted >10 years away is not trusted as a time",
        b"k",
        uuid1_hex(10_000),
        Layout.NODE_REDLOCK,
        uuid1_hex(10_000),
        "",
        None,
    ),
    ("python-redis-lock", b"lock:report", PRL_ID, Layout.PYTHON_REDIS_LOCK, PRL_ID, "", None),
    (
        "python-redis-lock shape without lock: prefix is a plain string",
        b"other:report",
        PRL_ID,
        Layout.STRING,
        PRL_ID,
        "",
        None,
    ),
    ("pottery", b"redlock:printer", UUID4_B, Layout.POTTERY, UUID4_B, "", None),
    (
        "node-redlock",
        b"{redlock}printer",
        NODE_REDLOCK_HEX,
        Layout.NODE_REDLOCK,
        NODE_REDLOCK_HEX,
        "",
        None,
    ),
    ("redis-semaphore mutex", b"mutex:billing", UUID4_B, Layout.REDIS_SEMAPHORE, UUID4_B, "", None),
    (
        "redis-semaphore mutex with identifier suffix",
        b"mutex:billing",
        UUID4_B + b"-worker-3",
        Layout.REDIS_SEMAPHORE,
        UUID4_B + b"-worker-3",
        "",
        None,
    ),
    (
        "ShedLock >= 6.7 (host and uuid)",
        b"job-lock:default:nightly",
        b"ADDED:2025-12-31T23:00:00.250Z@app-host-1:" + UUID4_B,
        Layout.SHEDLOCK,
        b"ADDED:2025-12-31T23:00:00.250Z@app-host-1:" + UUID4_B,
        "host app-host-1",
        iso_ms("2025-12-31T23:00:00.250"),
    ),
    (
        "ShedLock < 6.7 (host only)",
        b"job-lock:default:nightly",
        b"ADDED:2025-12-31T23:00:00.250Z@app-host-1",
        Layout.SHEDLOCK,
        b"ADDED:2025-12-31T23:00:00.250Z@app-host-1",
        "host app-host-1",
        iso_ms("2025-12-31T23:00:00.250"),
    ),
    (
        "ShedLock host with a dot and dash",
        b"job-lock:prod:x",
        b"ADDED:2025-12-31T23:59:59.000Z@ip-10-0-0-1.ec2.internal",
        Layout.SHEDLOCK,
        b"ADDED:2025-12-31T23:59:59.000Z@ip-10-0-0-1.ec2.internal",
        "host ip-10-0-0-1.ec2.internal",
        iso_ms("2025-12-31T23:59:59"),
    ),
    (
        "BullMQ job lock",
        b"bull:q:42:lock",
        UUID4_B + b":7",
        Layout.BULLMQ,
        UUID4_B + b":7",
        f"worker {UUID4} job 42",
        None,
    ),
    (
        "BullMQ-shaped token on a key not ending :lock",
        b"jobs:q:42",
        UUID4_B + b":7",
        Layout.STRING,
        UUID4_B + b":7",
        "",
        None,
    ),
    (
        "celery-singleton",
        b"SINGLETONLOCK_0cc175b9c0f1b6a831c399e269772661",
        UUID4_B,
        Layout.CELERY_SINGLETON,
        UUID4_B,
        f"task {UUID4}",
        None,
    ),
    (
        "Stalwart 0.12 counter",
        b"\x17\x00\x00\x00\x00\x00\x00\x00\x07",
        b"3",
        Layout.COUNTER,
        COUNTER_IDENTITY,
        "",
        None,
    ),
    ("counter at 1", b"\x15\x01", b"1", Layout.COUNTER, COUNTER_IDENTITY, "", None),
    (
        "Stalwart >= 0.16.16 expiry timestamp",
        b"\x17\x00\x00\x00\x00\x00\x00\x00\x07",
        str(NOW_S + 3600).encode(),
        Layout.EXPIRY_STAMP,
        str(NOW_S + 3600).encode(),
        "",
        None,
    ),
    (
        "generic string token",
        b"app:anything",
        b"my-own-token",
        Layout.STRING,
        b"my-own-token",
        "",
        None,
    ),
    (
        "node redis-lock: expiry in ms",
        b"lock:mail",
        str(NOW_MS + 9000).encode(),
        Layout.EXPIRY_STAMP,
        str(NOW_MS + 9000).encode(),
        "",
        None,
    ),
    (
        "home-made SET NX token with a pid",
        b"app:cron",
        b"host-7:4312",
        Layout.STRING,
        b"host-7:4312",
        "",
        None,
    ),
    (
        "python-redis-lock with its own id= (lock:NAME is its naming)",
        b"lock:cron",
        b"host-7:4312",
        Layout.PYTHON_REDIS_LOCK,
        b"host-7:4312",
        "",
        None,
    ),
]


@pytest.mark.parametrize(
    ("key", "value", "layout", "identity", "owner", "acquired_ms"),
    [pytest.param(*c[1:], id=c[0]) for c in STRING_CASES],
)
def test_string_layouts(
    key: bytes, value: bytes, layout: Layout, identity: bytes, owner: str, acquired_ms: int | None
) -> None:
    rec = recognize(string_snap(key, value, pttl=60_000))
    assert rec.not_a_lock == ""
    assert rec.layout is layout
    assert rec.identity == identity
    assert owner in rec.owner
    if not owner:
        assert rec.owner == ""
    assert rec.acquired_ms == acquired_ms


def test_real_uuid1_token_age_is_decoded() -> None:
    """A token minted by uuid.uuid1() right now decodes to (about) now."""
    import time

    now_ms = int(time.time() * 1000)
    token = uuid.uuid1().hex.encode()
    rec = recognize(Snapshot(b"job", "string", -1, 0, now_ms, value=token, value_len=32))
    assert rec.layout is Layout.REDIS_PY
    assert rec.acquired_ms is not None
    assert abs(rec.acquired_ms - now_ms) < 1000


def test_real_uuid4_token_is_a_redis_py_lock_of_unknown_age() -> None:
    """redis-py 8.2 mints uuid.uuid4().hex: the same layout, its age known only across scans."""
    token = uuid.uuid4().hex.encode()
    rec = recognize(Snapshot(b"job", "string", -1, 0, NOW_MS, value=token, value_len=32))
    assert (rec.layout, rec.identity, rec.owner, rec.acquired_ms) == (
        Layout.REDIS_PY,
        token,
        "",
        None,
    )


@pytest.mark.parametrize(
    ("value", "counter"),
    [(b"1", 1), (b"2", 2), (b"17", 17), (b"999999", 999_999)],
)
def test_counter_value_is_the_count(value: bytes, counter: int) -> None:
    rec = recognize(string_snap(b"\x17\x01", value, pttl=300_000))
    assert rec.layout is Layout.COUNTER
    assert rec.counter == counter
    # Identity of a counter is the key's existence, never the count: contenders change it.
    assert rec.identity == COUNTER_IDENTITY


def test_every_counter_has_the_same_identity() -> None:
    a = recognize(string_snap(b"\x17\x01", b"1", pttl=5000))
    b = recognize(string_snap(b"\x17\x01", b"50", pttl=5000))
    assert a.identity == b.identity


HOLDER = UUID4_B + b":1"
HOLDER2 = b"1b2c3d4e-0000-4000-8000-000000000001:57"

# (id, fields, layout, identity, owner substrings)
HASH_CASES = [
    ("Redisson RLock", {HOLDER: b"1"}, Layout.REDISSON, HOLDER, [f"client {UUID4} thread 1"]),
    ("Redisson RLock re-entered", {HOLDER: b"3"}, Layout.REDISSON, HOLDER, ["thread 1"]),
    (
        "Redisson read lock, two readers",
        {b"mode": b"read", HOLDER: b"1", HOLDER2: b"2"},
        Layout.REDISSON_RW,
        b"\n".join(sorted([HOLDER, HOLDER2])),
        ["thread 1", "thread 57"],
    ),
    (
        "Redisson write lock",
        {b"mode": b"write", HOLDER + b":write": b"1"},
        Layout.REDISSON_RW,
        HOLDER + b":write",
        ["thread 1"],
    ),
    (
        "hash without holder fields (loose recognition only)",
        {b"b": b"1", b"a": b"2"},
        Layout.HASH,
        b"a\nb",
        [],
    ),
]


@pytest.mark.parametrize(
    ("fields", "layout", "identity", "owners"),
    [pytest.param(*c[1:], id=c[0]) for c in HASH_CASES],
)
def test_hash_layouts(
    fields: dict[bytes, bytes], layout: Layout, identity: bytes, owners: list[str]
) -> None:
    rec = recognize(hash_snap(b"myLock", fields), loose=layout is Layout.HASH)
    assert rec.layout is layout
    assert rec.not_a_lock == ""
    # Every field and value: a changed reentrancy count is activity, never the same reading.
    assert rec.identity == encode_fields(tuple(fields.items()))
    assert decode_fields(rec.identity) == sorted(fields.items())
    assert set(identity.split(b"\n")) <= {f for f, _ in fields.items()}
    for o in owners:
        assert o in rec.owner


def test_hash_identity_does_not_depend_on_field_order() -> None:
    a = recognize(hash_snap(b"k", {b"mode": b"read", HOLDER: b"1", HOLDER2: b"1"}))
    b = recognize(hash_snap(b"k", {HOLDER2: b"1", HOLDER: b"1", b"mode": b"read"}))
    assert a.identity == b.identity


@pytest.mark.parametrize("rtype", ["list", "set", "zset", "stream"])
def test_other_types_are_recorded_not_read(rtype: str) -> None:
    rec = recognize(Snapshot(b"semaphore:x", rtype, 10_000, 0, NOW_MS))
    assert rec.layout is Layout.OTHER
    assert rec.identity == b""


def test_huge_value_is_not_a_lock_even_when_recognition_is_loose() -> None:
    full = b"x" * 100_000
    snap = Snapshot(b"lock:big", "string", -1, 0, NOW_MS, value=full[:65536], value_len=len(full))
    for loose in (False, True):
        rec = recognize(snap, loose)
        assert "100000-byte string" in rec.not_a_lock


REDISSON_SHAPED = UUID4_B + b":1"

# (id, key, type, value or fields, pttl, words of the reason, a lock when loose?)
NOT_A_LOCK_CASES = [
    (
        "hash of counters",
        b"lock:stats:acquisitions",
        "hash",
        {b"total": b"912", b"failed": b"3"},
        -1,
        "not a lock holder",
        True,
    ),
    (
        "Redisson-shaped field with a non-count value",
        b"lock:x",
        "hash",
        {REDISSON_SHAPED: b'{"job":1}'},
        30_000,
        "not a lock holder",
        True,
    ),
    (
        "Redisson-shaped field beside another field",
        b"lock:x",
        "hash",
        {REDISSON_SHAPED: b"1", b"owner": b"me"},
        30_000,
        "not a lock holder",
        True,
    ),
    ("empty hash reading", b"lock:x", "hash", {}, -1, "empty hash", False),
    ("integer counter with no TTL", b"lock:count", "string", b"17", -1, "no expiry", True),
    ("integer 1 with no TTL", b"lock:flag", "string", b"1", -1, "no expiry", True),
    (
        "seconds stamp with no TTL",
        b"lock:last-run",
        "string",
        str(NOW_S).encode(),
        -1,
        "no expiry",
        True,
    ),
    ("big id with no TTL", b"lock:seq", "string", b"98765432101234", -1, "no expiry", True),
    (
        "JSON cache entry with a 1 h TTL",
        b"lock:cache:user:7",
        "string",
        b'{"name":"ann","plan":"pro"}',
        3_600_000,
        "JSON",
        True,
    ),
    ("JSON list", b"lock:cache:x", "string", b"[1,2,3]", 3_600_000, "JSON", True),
    ("text with spaces", b"lock:note", "string", b"do not delete me", 60_000, "spaces", True),
    ("binary blob", b"lock:bin", "string", b"\x00\xff\x10tok", 60_000, "printable", True),
    ("empty string", b"lock:empty", "string", b"", -1, "empty", True),
    ("BullMQ id counter", b"bull:emails:id", "string", b"57", -1, "BullMQ", False),
    (
        "BullMQ stalled-check",
        b"bull:emails:stalled-check",
        "string",
        str(NOW_MS).encode(),
        30_000,
        "BullMQ",
        False,
    ),
    (
        "BullMQ limiter with another prefix",
        b"myq:emails:limiter",
        "string",
        b"3",
        1000,
        "BullMQ",
        False,
    ),
    ("BullMQ dedup key", b"bull:emails:de:abc", "string", b"job-abc", -1, "BullMQ", False),
]


@pytest.mark.parametrize(
    ("key", "rtype", "value", "pttl", "words", "loose_lock"),
    [pytest.param(*c[1:], id=c[0]) for c in NOT_A_LOCK_CASES],
)
def test_keys_that_are_not_locks_say_why(
    key: bytes, rtype: str, value: object, pttl: int, words: str, loose_lock: bool
) -> None:
    if rtype == "hash":
        pairs = tuple(value.items())  # type: ignore[attr-defined]
        snap = Snapshot(key, "hash", pttl, 0, NOW_MS, fields=pairs, hash_len=len(pairs))
    else:
        snap = string_snap(key, value, pttl)  # type: ignore[arg-type]
    assert words in recognize(snap).not_a_lock
    assert (recognize(snap, loose=True).not_a_lock == "") is loose_lock


@pytest.mark.parametrize("rtype", ["list", "set", "zset", "stream"])
def test_other_types_are_never_locks(rtype: str) -> None:
    for loose in (False, True):
        rec = recognize(Snapshot(b"lock:x", rtype, -1, 0, NOW_MS), loose)
        assert f"a {rtype}" in rec.not_a_lock


def test_python_redis_lock_s_signal_list_is_named_as_its_wake_up_list() -> None:
    rec = recognize(Snapshot(b"lock-signal:report", "list", 1000, 0, NOW_MS))
    assert rec.not_a_lock.startswith("python-redis-lock's wake-up list")
    other = recognize(Snapshot(b"lock-signal:report", "set", 1000, 0, NOW_MS))
    assert other.not_a_lock == "a set: no lock library keeps a lock in one"


def test_every_layout_is_covered_by_these_tables() -> None:
    covered = {c[3] for c in STRING_CASES} | {c[2] for c in HASH_CASES} | {Layout.OTHER}
    assert covered == set(Layout)
