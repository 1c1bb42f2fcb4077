"""The scan: every lock matching the patterns read batch by batch, counted, and recorded.

`loop.run_scan` is one scan; `scanner.Scanner` reads one server (Lua batches, or `pipelined`
where scripting is refused); `cluster_scanner` reads every primary of a Redis Cluster.
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
