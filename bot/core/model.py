"""Plain values passed between the scanner, the tenure tracker, the rules and presentation.

Keys, values, fields and identities are `bytes`, exactly as Redis holds them. Times are integer
milliseconds of the Redis server's clock (`TIME`), never the local clock.
"""

from __future__ import annotations

import enum
import hashlib
import re
from dataclasses import dataclass, field


class Reason(enum.StrEnum):
    """Verdict reason codes, stable: they appear in JSON, events and messages."""

    INFINITE_TTL = "infinite_ttl"
    STALE_LEASE = "stale_lease"
    KEPT_ALIVE_BY_CONTENDERS = "kept_alive_by_contenders"
    LONG_HELD_RENEWING = "long_held_renewing"
    HEALTHY = "healthy"
    #: A key under a lock pattern that is no lock layout lockguard recognises: counted and
    #: shown, never flagged, put in a case, released or announced.
    NOT_A_LOCK = "not_a_lock"
    #: A wait-for cycle of Redisson fair locks (`bot.core.waitfor`): no TTL ends it, so it is
    #: flagged and offered on first sight, one finding per cycle (`Finding.cycle`).
    DEADLOCK = "deadlock"


#: Reasons a routine approval may release.
RELEASABLE_REASONS = frozenset(
    {Reason.INFINITE_TTL, Reason.STALE_LEASE, Reason.KEPT_ALIVE_BY_CONTENDERS, Reason.DEADLOCK}
)
#: Reasons worth a human's attention (exit code 1). `long_held_renewing` is reported, never
#: released on a routine approval; `healthy` is only counted and aged.
FINDING_REASONS = RELEASABLE_REASONS | {Reason.LONG_HELD_RENEWING}
#: Worst first: used to order findings for people.
SEVERITY = {
    Reason.DEADLOCK: 0,
    Reason.KEPT_ALIVE_BY_CONTENDERS: 1,
    Reason.STALE_LEASE: 2,
    Reason.INFINITE_TTL: 3,
    Reason.LONG_HELD_RENEWING: 4,
    Reason.HEALTHY: 5,
    Reason.NOT_A_LOCK: 6,
}


class Layout(enum.StrEnum):
    """Which library (or shape) made a lock. Decides identity, owner parsing and release script."""

    REDIS_PY = "redis_py"  # redis-py Lock / celery-once: uuid1 hex (uuid4 from 8.2)
    PYTHON_REDIS_LOCK = "python_redis_lock"  # lock:NAME, 24-char base64 id
    POTTERY = "pottery_redlock"  # redlock:NAME, uuid4
    NODE_REDLOCK = "node_redlock"  # 32 hex chars, not uuid-shaped
    REDIS_SEMAPHORE = "redis_semaphore_mutex"  # mutex:NAME, uuid4 (+ -suffix)
    SHEDLOCK = "shedlock"  # ADDED:<iso>@<host>[:<uuid>]
    BULLMQ = "bullmq"  # <prefix>:<queue>:<job>:lock, <worker uuid>:<n>
    CELERY_SINGLETON = "celery_singleton"  # SINGLETONLOCK_<md5>, task id
    REDISSON = "redisson"  # hash, field <uuid>:<thread> -> reentrancy count
    REDISSON_RW = "redisson_rw"  # hash with a `mode` field
    COUNTER = "counter"  # INCR+EXPIRE, integer value, no owner (Stalwart <= 0.16.15)
    EXPIRY_STAMP = "expiry_timestamp"  # decimal Unix time of intended expiry (Stalwart >= 0.16.16)
    STRING = "string"  # any other string value: the value is the token
    HASH = "hash"  # a hash with no recognised holder fields (a lock only when recognition is loose)
    OTHER = "other"  # list, set, zset, stream...: recorded, not read, never a lock


#: A fleet target's name: in the targets file, a webhook body or a slash command.
TARGET_NAME = re.compile(r"[a-z0-9-]{1,40}")

#: Layouts whose identity is a token that a compare-and-delete can check.
TOKEN_LAYOUTS = frozenset(
    {
        Layout.REDIS_PY,
        Layout.PYTHON_REDIS_LOCK,
        Layout.POTTERY,
        Layout.NODE_REDLOCK,
        Layout.REDIS_SEMAPHORE,
        Layout.SHEDLOCK,
        Layout.BULLMQ,
        Layout.CELERY_SINGLETON,
        Layout.EXPIRY_STAMP,
        Layout.STRING,
    }
)
HASH_LAYOUTS = frozenset({Layout.REDISSON, Layout.REDISSON_RW, Layout.HASH})

#: PTTL replies with special meaning.
NO_EXPIRY = -1
GONE = -2


#: The first and the last bytes of an oversized key that lockguard keeps (`BigKey`).
BIG_KEY_SHOWN = 64


@dataclass(frozen=True, slots=True)
class BigKey:
    """A key longer than a scan reads whole (`bot.scan.types.MAX_KEY_BYTES`), kept only as its
    first and last bytes and its length, so it costs no more than a short one. `sha256` is set
    once it was read whole to open a case: the release finds the key again by it."""

    head: bytes
    tail: bytes
    size: int
    sha256: str = ""

    @classmethod
    def of(cls, key: bytes) -> BigKey:
        shown = BIG_KEY_SHOWN
        return cls(key[:shown], key[-shown:], len(key), hashlib.sha256(key).hexdigest())

    @property
    def name(self) -> bytes:
        """What lockguard files it under where it would file a key: bounded, and the same for
        the same head, tail and length (a release tells such keys apart by `sha256`)."""
        return b"\x00lockguard:oversized\x00%d\x00%b\x00%b" % (self.size, self.head, self.tail)

    @property
    def recognisable(self) -> bytes:
        """What the layout rules read of its name: its first and last bytes."""
        return self.head + self.tail


@dataclass(slots=True)  # not frozen (treat as frozen): built once per lock, see Recognized
class Snapshot:
    """One atomic server-side read of one key. `value` (strings, cut; full length `value_len`)
    and `fields` (hashes, at most the configured pairs; real count `hash_len`)."""

    key: bytes
    type: str
    pttl_ms: int
    idle_s: int
    observed_ms: int
    value: bytes | None = None
    value_len: int = 0
    fields: tuple[tuple[bytes, bytes], ...] = ()
    hash_len: int = 0
    #: An oversized key (`BigKey`): `key` is then its `BigKey.name`, never the key itself.
    big: BigKey | None = None


@dataclass(slots=True)  # not frozen: built once per lock, and a frozen __init__ costs more
class Recognized:
    """What the value says: the library, the identity to compare on release, and the owner."""

    layout: Layout
    identity: bytes
    owner: str = ""  # human-readable holder: host, worker, client+thread; "" when unknown
    acquired_ms: int | None = None  # acquisition time carried by the value itself
    counter: int | None = None  # for counter locks: the current count
    #: Why this key is not a lock ("" when it is one): shown to people, decides `not_a_lock`.
    not_a_lock: str = ""


@dataclass(slots=True)  # not frozen (treat as frozen): built twice per lock, see Recognized
class Tenure:
    """One holder's tenure of one lock, as tracked across scans (stored in Redis between scans)."""

    first_seen_ms: int  # when lockguard first saw this identity (or the value's own time)
    last_seen_ms: int
    last_pttl_ms: int
    observations: int  # scans that saw this same tenure
    rearms: int  # scans at which the TTL was found re-armed since the previous one
    last_rearm_ms: int | None
    max_pttl_ms: int  # the longest TTL seen: an estimate of the lease length
    counter_start: int | None  # counter locks: the count when the tenure began
    counter_last: int | None  # counter locks: the count at the latest scan
    identity_digest: bytes

    @property
    def counter_grew(self) -> bool:
        return (
            self.counter_start is not None
            and self.counter_last is not None
            and self.counter_last > self.counter_start
        )


@dataclass(frozen=True, slots=True)
class Impact:
    """Evidence about one finding, from read-only commands (counts are exact when not None)."""

    waiters: int | None = None  # clients blocked waiting for this lock
    woken: int | None = None  # of the waiters, those the release's own wake-up reaches
    backlog: int | None = None  # jobs queued behind it (BullMQ: wait + paused + prioritized)
    owner_alive: bool | None = None  # True seen alive, False provably gone, None unknown
    owner_evidence: str = ""  # what shows it (or why nothing could be read)
    score: float = 0.0

    @property
    def blocking(self) -> bool:
        """Someone waits, or work is queued, behind the lock."""
        return bool(self.waiters) or bool(self.backlog)


@dataclass(frozen=True, slots=True)
class Finding:
    """A lock with its verdict: everything a person or a release needs, exact bytes included."""

    key: bytes
    type: str
    layout: Layout
    reason: Reason
    identity: bytes
    owner: str
    ttl_ms: int  # PTTL: -1 no expiry
    held_seconds: float
    idle_seconds: int
    observations: int
    rearms: int
    counter: int | None
    observed_ms: int
    fields: tuple[tuple[bytes, bytes], ...] = field(default=())
    #: A hash with more fields than the scanner reads: its holders are not all known, so no
    #: compare-and-delete can prove the approved holders are the only ones.
    partial: bool = False
    #: May a routine approval release it? `bot.core.rules.releasable` decides (the engine sets it).
    releasable: bool = False
    #: Why it is not offered for release, or not a lock at all ("" when there is nothing to say).
    note: str = ""
    #: Who waits, what is queued, whether the owner is alive (`bot.evidence`); None: not read.
    impact: Impact | None = None
    #: A `deadlock` finding's cycle, in order: (lock key, its holder field), each holder waiting
    #: in the next lock's queue; `key` is the one proposed for release. Empty otherwise.
    cycle: tuple[tuple[bytes, bytes], ...] = ()
    #: What renewal says of the holder (`bot.core.renewal.said`), or "".
    renewal: str = ""
    #: An oversized key (`BigKey`): `key` is then its `BigKey.name`, never the key itself.
    big: BigKey | None = None

    def sort_key(self) -> tuple[int, float]:
        """Worst first, then oldest first."""
        return (SEVERITY[self.reason], -self.held_seconds)
