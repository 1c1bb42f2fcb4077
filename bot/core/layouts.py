"""Recognise which library made a lock, what its identity is and who holds it (pure).

The identity proves "the same holder still holds it": the token of a string lock, every field and
value of a Redisson hash (a changed reentrancy count is activity), and for a counter lock only
the key's unbroken existence (the count changes on every contender). What counts as a lock, and
what `loose` (LOCKGUARD_LOOSE_RECOGNITION) widens, is in docs/layouts.md; anything else is
`not_a_lock` with its reason. Shapes are tried from the most specific (key and value) to the least.
"""

from __future__ import annotations

import binascii
import re
from datetime import datetime

from bot.core import bullmq
from bot.core.model import NO_EXPIRY, Layout, Recognized, Snapshot

_HEX32 = re.compile(rb"[0-9a-f]{32}")
_UUID = rb"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_UUID_RE = re.compile(_UUID)
_MUTEX = re.compile(_UUID + rb"(-.*)?", re.DOTALL)
_B64_24 = re.compile(rb"[A-Za-z0-9+/]{22}[A-Za-z0-9+/=]{2}")
_BULL_TOKEN = re.compile(rb"(" + _UUID + rb"):(\d+)")
_SHEDLOCK = re.compile(
    rb"ADDED:(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z)@(.*?)(?::(" + _UUID + rb"))?",
    re.DOTALL,
)
_REDISSON_FIELD = re.compile(rb"(" + _UUID + rb"):(\d+)(:write)?")
_INTEGER = re.compile(rb"-?\d{1,18}")  # fits the tenure record's int64; longer is a string
_RW_MODES = (b"read", b"write")

# RFC 4122 variant digits. node-redlock's random hex may match (1 in 64) and read as redis-py:
# harmless, both are released by the same compare-and-delete.
_RFC4122_VARIANT = (b"8", b"9", b"a", b"b")
# 100-ns intervals between the uuid1 epoch (1582-10-15) and the Unix epoch.
_UUID1_EPOCH_OFFSET = 0x01B21DD213814000
# A decimal value this many ms either side of the server time reads as a Unix timestamp.
_STAMP_WINDOW_S = 10 * 365 * 86400

_SIGNAL_LIST = (
    "python-redis-lock's wake-up list: a release pushes onto it to wake a waiter of "
    "lock:NAME; not a lock"
)
COUNTER_IDENTITY = b"<counter>"
#: No lock token is longer (the longest seen, ShedLock's, is about 100 bytes).
MAX_TOKEN_BYTES = 512
#: An INCR+EXPIRE lock's count (contenders' attempts) is below this; larger are times or ids.
MAX_COUNTER = 1_000_000_000
_MS_WINDOW = _STAMP_WINDOW_S * 1000
_TOKEN = re.compile(rb"[\x21-\x7e]+")  # printable ASCII, no space
_bull_key = bullmq.GATE.match
_bull_bookkeeping = bullmq.bookkeeping
_JSON_START = frozenset(b'{["')
# Bound once: `Layout.X` is a lookup through the enum's metaclass, and these run once per lock.
_BULLMQ, _STRING, _REDIS_PY = Layout.BULLMQ, Layout.STRING, Layout.REDIS_PY
_NODE_REDLOCK, _PYTHON_REDIS_LOCK = Layout.NODE_REDLOCK, Layout.PYTHON_REDIS_LOCK
_REDISSON, _REDISSON_RW, _HASH = Layout.REDISSON, Layout.REDISSON_RW, Layout.HASH
_EXPIRY_STAMP, _COUNTER = Layout.EXPIRY_STAMP, Layout.COUNTER
# The hot paths build Recognized with positional arguments: they rely on this field order.
assert Recognized.__match_args__ == (
    "layout",
    "identity",
    "owner",
    "acquired_ms",
    "counter",
    "not_a_lock",
), "bot.core.model.Recognized changed: update the positional Recognized(...) calls here"
_INT_LAYOUTS = frozenset({Layout.COUNTER, Layout.EXPIRY_STAMP})


def recognize(snap: Snapshot, loose: bool = False) -> Recognized:
    """Layout, identity, owner and (when the value carries it) the acquisition time of a lock;
    for a key that is no lock, `Recognized.not_a_lock` says why."""
    t, key = snap.type, snap.key if snap.big is None else snap.big.recognisable
    if t == "string" and snap.value is not None:
        if snap.value_len > MAX_TOKEN_BYTES:
            return Recognized(
                Layout.STRING,
                b"",
                not_a_lock=(
                    f"a {snap.value_len}-byte string: longer than any lock token "
                    f"({MAX_TOKEN_BYTES} bytes at most)"
                ),
            )
        return _recognize_string(key, snap.value, snap.observed_ms, snap.pttl_ms, loose)
    if t == "hash":
        rec = _recognize_hash(snap.fields, loose)
        if loose and not rec.not_a_lock and rec.layout is Layout.HASH:  # any hash, when loose
            why = bullmq.hash_bookkeeping(key, snap.fields)
            if why:
                return replace_not_a_lock(rec, why)
        return rec
    if t == "list" and key.startswith(b"lock-signal:"):
        return Recognized(Layout.OTHER, b"", not_a_lock=_SIGNAL_LIST)
    return Recognized(Layout.OTHER, b"", not_a_lock=f"a {t}: no lock library keeps a lock in one")


def _recognize_string(
    key: bytes, value: bytes, now_ms: int, pttl_ms: int, loose: bool
) -> Recognized:
    # The hot path: a library's lock outside BullMQ's key space takes the first return.
    rec = _library_string(key, value, now_ms, pttl_ms)
    bull = _bull_bookkeeping(key, value, pttl_ms) if _bull_key(key) is not None else ""
    if rec is not None:
        layout = rec.layout
        if layout is _BULLMQ or (
            not bull and not rec.not_a_lock and (pttl_ms != NO_EXPIRY or layout not in _INT_LAYOUTS)
        ):
            return rec
    if bull:
        return Recognized(Layout.STRING, value, not_a_lock=bull)
    if rec is None:
        if loose or (_TOKEN.fullmatch(value) is not None and value[0] not in _JSON_START):
            if key.startswith(b"lock:"):
                # python-redis-lock's naming with its own `id=`: its renewal rule and wake-up apply.
                return Recognized(_PYTHON_REDIS_LOCK, value)
            return Recognized(_STRING, value)  # looks like a lock token
        why = _not_token(value)
        return Recognized(
            Layout.STRING, value, not_a_lock=f"the value {why}: not a lock token" if why else ""
        )
    if loose:
        return replace_not_a_lock(rec, "")
    if rec.not_a_lock:
        return rec
    return replace_not_a_lock(
        rec,
        "an integer with no expiry: a counter or a time someone "
        "keeps, not a lease (an INCR+EXPIRE lock always has a TTL)",
    )


def replace_not_a_lock(rec: Recognized, why: str) -> Recognized:
    return Recognized(rec.layout, rec.identity, rec.owner, rec.acquired_ms, rec.counter, why)


def _not_token(value: bytes) -> str:
    if not value:
        return "is empty"
    if value[:1] in (b"{", b"[", b'"'):
        return "looks like JSON"
    if _TOKEN.fullmatch(value) is None:
        if b" " in value or b"\n" in value or b"\t" in value:
            return "has spaces in it"
        return "is not printable ASCII"
    return ""


def _library_string(  # noqa: C901, PLR0912 (one shape after another, in order, per key of a scan: the hot path)
    key: bytes, value: bytes, now_ms: int, pttl_ms: int
) -> Recognized | None:
    if value.startswith(b"ADDED:"):
        m = _SHEDLOCK.fullmatch(value)
        if m is not None:
            host = m.group(2).decode("utf-8", "replace")
            return Recognized(
                Layout.SHEDLOCK, value, owner=f"host {host}", acquired_ms=_iso_ms(m.group(1))
            )
    if key.endswith(b":lock"):
        m = _BULL_TOKEN.fullmatch(value)
        if m is not None:
            lock = bullmq.job_lock(key)
            job = lock.job.decode("utf-8", "replace") if lock is not None else "?"
            worker = m.group(1).decode()
            return Recognized(Layout.BULLMQ, value, owner=f"worker {worker} job {job}")
    if len(value) == 32 and _HEX32.fullmatch(value) is not None:
        version, variant = value[12:13], value[16:17]
        if variant in _RFC4122_VARIANT:
            if version == b"1":  # redis-py < 8.2: uuid1().hex, its time and node in it
                acquired, node = _uuid1_time_node(value)
                if abs(acquired - now_ms) < _STAMP_WINDOW_S * 1000:
                    return Recognized(_REDIS_PY, value, f"node {node}", acquired)
            elif version == b"4":  # redis-py >= 8.2: uuid4().hex, no time in it
                return Recognized(_REDIS_PY, value)
        return Recognized(_NODE_REDLOCK, value)
    if key.startswith(b"lock:") and len(value) == 24 and _B64_24.fullmatch(value) is not None:
        return Recognized(_PYTHON_REDIS_LOCK, value)
    if key.startswith(b"redlock:") and _UUID_RE.fullmatch(value) is not None:
        return Recognized(Layout.POTTERY, value)
    if key.startswith(b"mutex:") and _MUTEX.fullmatch(value) is not None:
        return Recognized(Layout.REDIS_SEMAPHORE, value)
    if key.startswith(b"SINGLETONLOCK_"):
        return Recognized(
            Layout.CELERY_SINGLETON, value, owner=f"task {value.decode('utf-8', 'replace')[:64]}"
        )
    if _INTEGER.fullmatch(value) is not None:
        number = int(value)
        if abs(number - now_ms // 1000) < _STAMP_WINDOW_S or abs(number - now_ms) < _MS_WINDOW:
            # Stalwart >= 0.16.16 (s) or node `redis-lock` (ms): the value is the intended
            # expiry, a token of sorts.
            return Recognized(_EXPIRY_STAMP, value)
        if 1 <= number < MAX_COUNTER:
            return Recognized(_COUNTER, COUNTER_IDENTITY, "", None, number)
        if pttl_ms == NO_EXPIRY:
            return Recognized(
                Layout.STRING,
                value,
                not_a_lock=("an integer with no expiry: a counter or an id, not a lease"),
            )
    return None


def _recognize_hash(fields: tuple[tuple[bytes, bytes], ...], loose: bool) -> Recognized:
    match = _REDISSON_FIELD.fullmatch
    found = []  # (holder field, its match), sorted by field: one regex match per field
    others = []
    for n, v in fields:
        m = match(n)
        if m is not None and _INTEGER.fullmatch(v) is not None:
            found.append((n, m))
        else:
            others.append((n, v))
    found.sort(key=_first)
    identity = encode_fields(fields)
    owner = ", ".join(_owner_of(m) for _, m in found)
    if found and len(others) == 1 and others[0][0] == b"mode" and others[0][1] in _RW_MODES:
        return Recognized(_REDISSON_RW, identity, owner)
    if found and not others:
        return Recognized(_REDISSON, identity, owner)
    if loose and fields:
        return Recognized(_HASH, identity, owner)
    why = (
        "a hash whose fields are not a lock holder's (Redisson: <uuid>:<thread> -> count)"
        if fields
        else "an empty hash"
    )
    return Recognized(Layout.HASH, identity, owner=owner, not_a_lock=why)


def encode_fields(fields: tuple[tuple[bytes, bytes], ...] | list[tuple[bytes, bytes]]) -> bytes:
    """A hash's identity: every field and value, sorted, as netstrings (`<len>:<bytes>,`), so
    no byte in a field name can make two different hashes look alike."""
    return b"".join([b"%d:%s,%d:%s," % (len(n), n, len(v), v) for n, v in sorted(fields)])


def decode_fields(identity: bytes) -> list[tuple[bytes, bytes]]:
    """The (field, value) pairs `encode_fields` wrote; ValueError when it is malformed."""
    parts: list[bytes] = []
    pos = 0
    while pos < len(identity):
        colon = identity.index(b":", pos)
        n = int(identity[pos:colon])
        start = colon + 1
        if n < 0 or identity[start + n : start + n + 1] != b",":
            raise ValueError("malformed hash identity")
        parts.append(identity[start : start + n])
        pos = start + n + 1
    if len(parts) % 2:
        raise ValueError("malformed hash identity")
    return list(zip(parts[0::2], parts[1::2], strict=True))


def _first(pair: tuple[bytes, object]) -> bytes:
    return pair[0]


def _owner_of(m: re.Match[bytes]) -> str:
    return f"client {m.group(1).decode()} thread {m.group(2).decode()}"


def _uuid1_time_node(hex32: bytes) -> tuple[int, str]:
    # (time_hi << 48) | (time_mid << 32) | time_low, in one parse of the hex digits (hot path)
    ticks = int(hex32[13:16] + hex32[8:12] + hex32[0:8], 16)
    ms = (ticks - _UUID1_EPOCH_OFFSET) // 10_000
    node = binascii.unhexlify(hex32[20:32]).hex(":")  # lowercase: _HEX32 matched already
    return ms, node


def _iso_ms(text: bytes) -> int | None:
    try:
        dt = datetime.fromisoformat(text.decode().replace("Z", "+00:00"))
    except ValueError:
        return None
    return int(dt.timestamp() * 1000)
