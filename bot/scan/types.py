"""What the readers share: the size limits, the per-scan counters and a batch's shape."""

from __future__ import annotations

from dataclasses import dataclass, field

from bot.core.model import BIG_KEY_SHOWN, Snapshot

MAX_FIELDS = 32
MAX_VALUE_BYTES = 64 * 1024
#: The longest key a scan reads whole (bytes): longer ones kept in tenures, cases and messages
#: would cost gigabytes. A longer key is counted and named (first `OVERSIZED_SHOWN` bytes,
#: length); the first `OVERSIZED_KEPT` a Lua batch meets are read in Redis and tracked as a
#: `BigKey`, never whole until a case is opened or released for one (`bot.scan.oversized`).
MAX_KEY_BYTES = 4096
OVERSIZED_SHOWN = BIG_KEY_SHOWN
#: Oversized keys a scan names (each batch's script returns at most this many too), and reads.
OVERSIZED_KEPT = 10
#: The longest oversized key read, offered and released: Redis copies and hashes a key's name
#: for every command naming it. A longer key is only counted and named: no command names it.
MAX_TRACKED_KEY_BYTES = 64 * 1024


@dataclass(slots=True)
class ScanStats:
    scan_calls: int = 0
    keys_returned: int = 0  # by SCAN, before de-duplication
    duplicates: int = 0
    vanished: int = 0
    own_keys_skipped: int = 0
    #: Cluster: keys of a slot being resharded, read again from the new primary after the move.
    moving: int = 0
    pattern: bytes = b""  # the pattern of the batch last yielded
    #: Keys over MAX_KEY_BYTES, skipped unread; the first OVERSIZED_KEPT as (head, length).
    oversized: int = 0
    oversized_keys: list[tuple[bytes, int]] = field(default_factory=list)
    #: The first OVERSIZED_KEPT read as locks (Lua, one server), with the pattern that found each.
    oversized_read: dict[bytes, tuple[Snapshot, bytes]] = field(default_factory=dict)

    def skipped_oversized(self, count: int, named: list[tuple[bytes, int]]) -> None:
        self.oversized += count
        room = OVERSIZED_KEPT - len(self.oversized_keys)
        if room > 0:
            self.oversized_keys.extend(named[:room])

    def read_oversized(self, snaps: list[Snapshot]) -> None:
        for snap in snaps:
            if len(self.oversized_read) < OVERSIZED_KEPT:
                self.oversized_read.setdefault(snap.key, (snap, self.pattern))


Batch = list[tuple[Snapshot, bytes | None]]
