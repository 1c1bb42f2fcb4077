"""Read every lock matching the patterns: one SCAN cursor loop, one server-side read per batch.

Per key, in this order: `TYPE` (a `GET` on a hash is WRONGTYPE; the Lua read skips it when the
previous lease record says the key's type, see `bot.scan.batch_script`), `OBJECT
IDLETIME` (before the value is read: reading resets it), `PTTL`, then the value by type (string:
the bytes, cut at `max_value_bytes` with the full length and SHA-1 kept; hash: at most
`max_fields` pairs; other types: not read). The batch also carries the server's `TIME` and each
key's previous lease record, and skips keys this scan already wrote (SCAN may repeat keys, and a
key may match two patterns), keys that vanished since SCAN returned them, and lockguard's own
keys (`bot.store.keyspace.OWN_PREFIXES`).

Two ways to read a batch, same results:
- `lua` (default): one read-only script per batch runs the SCAN call(s) itself (calling SCAN
  again while it has fewer keys than it may read, so that sparse replies make one batch) and
  returns every fact of every key it found, all from one instant. Each script is sized
  (`bot.scan.batch_size`: SCAN COUNT, keys, SCAN calls, within `count`, `batch_keys` and
  `max_scan_calls`) by the server time the ones before took, as they measure it themselves, so
  that it holds Redis for about `target_us` (0.5 ms by default) while the application waits.
  The next batch's script is sent before the current batch is handed to the caller, so Redis
  reads batch i+1 while Python classifies batch i (one connection, replies in order). Repeats
  are still skipped: the script skips keys already in this scan's lease table, which, when the
  script for batch i+1 runs, holds every batch but batch i; the scanner skips batch i's keys
  itself.
  With a budget (`pacer`, `bot.core.pacing`) each script's own server time paces the scan: the
  next is sent only after the wait the budget asks for (nothing is in flight meanwhile).
- `pipeline`: for servers where scripting is disabled (some managed services): SCAN, then two
  non-transactional pipelines per batch (facts, then values), one batch at a time; paced by
  their round trips (an upper bound of their server time).
"""

from __future__ import annotations

import enum
from collections.abc import Generator, Iterable
from typing import Any

import redis
from redis.typing import EncodableT

from bot.core import globs, pacing
from bot.core.pacing import Pacer
from bot.scan.batch_script import BATCH_KEYS, MAX_SCAN_CALLS, READ_BATCH_LUA
from bot.scan.batch_size import TARGET_US, BatchSizer, Measure
from bot.scan.pipelined import PipelinedReader
from bot.scan.reply import parse_reply
from bot.scan.script_reader import ScriptReader
from bot.scan.types import MAX_FIELDS, MAX_VALUE_BYTES, Batch, ScanStats
from bot.store.keyspace import OWN_PREFIXES, PREFIX

_PROBE_TABLE = PREFIX + b"leases:probe"  # never written: the probe finds no key
_PROBE_PATTERN = PREFIX + b"probe"  # one own key at most: nothing the script would read
LUA_MODE_NEEDS = (
    "the lua read mode needs EVALSHA and every command its script calls (SCAN "
    "TIME HMGET TYPE OBJECT PTTL GET HLEN HGETALL HSCAN); --read-mode auto falls "
    "back to pipelined reads"
)


def _refused(exc: redis.ResponseError) -> bool:
    """Scripting or a command refused here (ACL, disabled, renamed), in or out of a script."""
    text = str(exc)
    return isinstance(exc, redis.exceptions.NoPermissionError) or any(
        s in text
        for s in (
            "The user executing the script",
            "no permissions",
            "nknown command",
            "nknown Redis command",
        )
    )


class ReadMode(enum.StrEnum):
    AUTO = "auto"
    LUA = "lua"
    PIPELINE = "pipeline"


class Scanner:
    """Reads lock snapshots in batches. Build one per scan; `mode` decides how batches are read."""

    #: The Lua batch read (`bot.scan.cluster` runs another); `_request` gives its KEYS and ARGV.
    _SCRIPT = READ_BATCH_LUA

    def __init__(
        self,
        client: redis.Redis,
        *,
        count: int = 1000,
        mode: ReadMode = ReadMode.AUTO,
        max_fields: int = MAX_FIELDS,
        max_value_bytes: int = MAX_VALUE_BYTES,
        batch_keys: int = BATCH_KEYS,
        max_scan_calls: int = MAX_SCAN_CALLS,
        target_us: float = TARGET_US,
        pacer: Pacer | None = None,
    ) -> None:
        self.client, self.pacer = client, pacer  # pacer: waits for the scan budget (None: never)
        self.count = count
        self.max_fields, self.max_value_bytes = max_fields, max_value_bytes
        self.batch_keys = batch_keys
        self.max_scan_calls = max_scan_calls
        self.stats = ScanStats()
        #: Sizes each Lua batch (SCAN COUNT, keys, SCAN calls; the arguments above are the
        #: caps) so that it holds Redis for about `target_us` (0: the caps as they are).
        self.sizer = BatchSizer(
            max_count=count, max_keys=batch_keys, max_calls=max_scan_calls, target_us=target_us
        )
        self._script = client.register_script(self._SCRIPT)
        self._auto = mode is ReadMode.AUTO
        #: Lua mode only: the caller writes lease records every few batches and then calls
        #: `written`; until then the scanner itself skips the batches' keys as repeats.
        self.deferred = False
        self._unwritten: set[bytes] = set()
        self.reader: ScriptReader | None = None  # Lua batches' connection, while they are read
        self.mode = self._choose_mode(mode)

    def _choose_mode(self, mode: ReadMode) -> ReadMode:
        """AUTO: lua, unless the probe (`_probe`) is refused."""
        return _probe(self) if mode is ReadMode.AUTO else mode

    def _probe_keys(self) -> list[bytes]:
        return [_PROBE_TABLE, _PROBE_TABLE]

    def batches(
        self, patterns: Iterable[bytes], prev_table: bytes, new_table: bytes
    ) -> Generator[Batch, None, None]:
        """Yield the locks batch by batch. The caller must write a batch's lease records to
        `new_table` before asking for the next batch (that is how repeats are skipped), or, in
        Lua mode with `deferred` set, every few batches, calling `written` after each write."""
        if self.mode is ReadMode.LUA:
            return _lua_or_pipeline(self, list(patterns), prev_table, new_table)
        return _pipelined(self).batches(patterns, prev_table, new_table)

    # -- lua ---------------------------------------------------------------------------------

    def _lua_batches(
        self, patterns: Iterable[bytes], prev_table: bytes, new_table: bytes
    ) -> Generator[Batch, None, None]:
        reader = self.reader = ScriptReader(self.client, self._script)
        skip: set[bytes] = set()  # keys yielded, maybe unwritten when the script in flight ran
        try:
            for pattern in patterns:
                self.stats.pattern = pattern
                keys, args = self._request(pattern, prev_table, new_table)
                reader.send(keys, _sized(self.sizer, args))
                skip = self._unwritten
                while True:
                    reply = reader.receive()
                    _measured(self, reply, int(args[2]))  # sized, paced: then the next is sent
                    cursor = reply[0]
                    done = cursor == b"0" or cursor == 0
                    in_hand = skip
                    if not done:  # sent before this reply is parsed: Redis reads it meanwhile
                        args[0] = cursor
                        reader.send(keys, _sized(self.sizer, args))
                        skip = self._unwritten  # ...before this batch is written
                    batch = self._parse_lua(reply, in_hand)
                    self._unwritten.update(snap.key for snap, _ in batch)
                    if batch:
                        yield batch
                    if not self.deferred:
                        self.written()  # the caller wrote it before asking for the next
                    if done:
                        break
            reader.flush()  # the writes sent behind the last call ran, or an error raises
        finally:
            self.reader = None
            reader.close()

    def written(self) -> None:
        """The lease records of every batch yielded so far are written (see `deferred`)."""
        self._unwritten = set()  # a new set: the one the script in flight skips stays whole

    def _request(
        self, pattern: bytes, prev_table: bytes, new_table: bytes
    ) -> tuple[list[bytes], list[EncodableT]]:
        """The first batch's KEYS and ARGV (ARGV[1], the cursor, changes from batch to batch)."""
        return [prev_table, new_table], [
            b"0",
            pattern,
            self.count,
            self.batch_keys,
            self.max_scan_calls,
            self.max_fields,
            self.max_value_bytes,
            *(OWN_PREFIXES if _may_match_own(pattern) else (b"", b"", b"")),
        ]

    def _parse_lua(self, reply: list[Any], in_hand: set[bytes]) -> Batch:
        return parse_reply(reply, in_hand, self.stats, self.max_fields)


def _probe(scanner: Scanner) -> ReadMode:
    """LUA, unless one empty batch (EVALSHA, loading the script, and the script's own SCAN and
    TIME, on a pattern nothing matches) is refused: PIPELINE."""
    keys, args = scanner._request(_PROBE_PATTERN, *scanner._probe_keys())
    args[2:7] = [1, 1, 1, 0, 0]  # COUNT 1, one key, one SCAN call, nothing of a value
    try:
        scanner._script(keys=keys, args=args)
    except redis.ResponseError as exc:
        if not _refused(exc):
            raise
        return ReadMode.PIPELINE  # scripting disabled or not permitted here
    return ReadMode.LUA


def _lua_or_pipeline(
    scanner: Scanner, patterns: list[bytes], prev_table: bytes, new_table: bytes
) -> Generator[Batch, None, None]:
    """Lua batches. A first batch refused (an ACL that passed the probe but refuses a
    command the script calls on a lock) falls back to pipelined reads in AUTO mode, before
    anything was yielded; an explicit lua mode says what it needs instead."""
    lua = scanner._lua_batches(patterns, prev_table, new_table)
    try:
        try:
            first = next(lua)
        except StopIteration:
            return
        except redis.ResponseError as exc:
            if not _refused(exc):
                raise
            if not scanner._auto:
                exc.lockguard_hint = LUA_MODE_NEEDS  # type: ignore[attr-defined]
                raise
            scanner.mode, scanner.stats = ReadMode.PIPELINE, ScanStats()
            yield from _pipelined(scanner).batches(patterns, prev_table, new_table)
            return
        yield first
        yield from lua
    finally:
        lua.close()


def _may_match_own(pattern: bytes) -> bool:
    """Could `pattern` match a key under one of lockguard's own prefixes? Only when its literal
    start and that prefix agree as far as both go (`lock:*` cannot: the script then checks no
    key SCAN returns against them)."""
    head = b""
    for kind, text in globs.tokens(pattern):
        if kind != "lit":
            break
        head += text
    return any(own.startswith(head) or head.startswith(own) for own in OWN_PREFIXES)


def _pipelined(scanner: Scanner) -> PipelinedReader:
    return PipelinedReader(
        scanner.client,
        scanner.stats,
        count=scanner.count,
        max_fields=scanner.max_fields,
        max_value_bytes=scanner.max_value_bytes,
        sizer=scanner.sizer,
        pacer=scanner.pacer,
    )


def _sized(sizer: BatchSizer, args: list[EncodableT]) -> list[EncodableT]:
    """`args` with the next batch's SCAN COUNT, keys and SCAN calls (ARGV[3..5])."""
    size = sizer.next()
    args[2:5] = [size.count, size.keys, size.calls]
    return args


def _measured(scanner: Scanner, reply: list[Any], count: int) -> None:
    """A batch script's measures given to the sizer, and its server time to the pacer (which
    waits here, with no call in flight, as long as the scan budget asks)."""
    measure = _measure(reply, count)
    scanner.sizer.measured(measure)
    if scanner.pacer is not None:
        scanner.pacer.pause(pacing.script_cost(measure.total_us / 1e6))


def _measure(reply: list[Any], count: int) -> Measure:
    """A batch script's own measures (reply items 4, 5 and 11 to 13)."""
    return Measure(count, int(reply[3]), int(reply[4]), int(reply[10]), reply[11], reply[12])
