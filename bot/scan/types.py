"""What the readers share: the size limits, the per-scan counters and a batch's shape."""

from __future__ import annotations

from dataclasses import dataclass

from bot.core.model import Snapshot

MAX_FIELDS = 32
MAX_VALUE_BYTES = 64 * 1024


@dataclass(slots=True)
class ScanStats:
    scan_calls: int = 0
    keys_returned: int = 0  # by SCAN, before de-duplication
    duplicates: int = 0
    vanished: int = 0
    own_keys_skipped: int = 0
    #: On a Redis Cluster: keys of a slot being resharded, which the node could not serve (the
    #: scan reads their slot again from its new primary once the move is done).
    moving: int = 0
    pattern: bytes = b""  # the pattern of the batch last yielded


Batch = list[tuple[Snapshot, bytes | None]]
