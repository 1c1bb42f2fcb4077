"""Read every lock matching the patterns, batch by batch (see `bot.scan.reader`).

- `reader`: the Scanner, which chooses the read mode and yields batches;
- `batch_script`: the Lua batch read (default), with its reply layout;
- `script_reader`: keeps one batch script in flight while the caller classifies the last;
- `pipelined`: the read for servers where scripting is refused;
- `types`: the limits, the counters and a batch's shape.
"""

from bot.scan.reader import ReadMode, Scanner
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
