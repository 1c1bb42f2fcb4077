"""The scan: every lock matching the patterns read batch by batch, counted, and recorded.

- `loop`: one scan, step by step (`run_scan`); `result`: what it is asked (`ScanOptions`) and
  what it found (`ScanResult`); `tally`: the per-lock hot loop;
- `cluster`: every primary of a Redis Cluster at once; `cluster_node`: one primary of it, with
  its tables and its own scanner; `slot_moves`: keys whose slot moved, since the last scan or
  during this one;
- `reader`: the Scanner, which chooses the read mode and yields batches;
- `batch_script`: the Lua batch read (default: a SCAN call, then a read of the keys found), with
  its reply layout; `batch_size`: how big each batch may be so that it holds Redis for about
  half a millisecond;
- `script_reader`: keeps the next batches' calls in flight while the caller classifies the last;
  `repeats`: the keys a read in flight must skip as repeats;
- `pipelined`: the read for servers where scripting is refused;
- `types`: the limits, the counters and a batch's shape.
"""

from bot.scan.scanner import ReadMode, Scanner
from bot.scan.script_reader import ScriptReader
from bot.scan.types import MAX_FIELDS, MAX_VALUE_BYTES, Batch, ScanStats

__all__ = [
    "MAX_FIELDS",
    "MAX_VALUE_BYTES",
    "Batch",
    "ReadMode",
    "ScanStats",
    "Scanner",
    "ScriptReader",
]
