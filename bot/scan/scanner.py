"""Read every lock matching the patterns: one SCAN cursor loop, one server-side read per batch.

Per key: `TYPE` (skipped when the previous tenure record says it), `OBJECT IDLETIME` (before
the value is read: reading resets it), `PTTL`, then a string's bytes (cut at `max_value_bytes`)
or a hash's first `max_fields` pairs. Keys this scan already wrote (SCAN repeats keys, patterns
overlap), vanished keys and lockguard's own keys are skipped.

- `lua` (default): two read-only scripts per batch (`bot.scan.batch_script`): SCAN, then every
  fact of the keys found at one instant. The next batch's SCAN is sent just before a batch's
  read, so Redis never waits for the client between batches. Each batch is sized by the server
  time the ones before took (`bot.scan.batch_size`) and paced to the scan budget.
- `pipeline`, where scripting is refused: SCAN, then two pipelines per batch (facts, values),
  paced by their round trips.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Generator, Iterable
from collections.abc import Set as AbstractSet
from typing import Any

import redis
from redis.typing import EncodableT

from bot.core import globs, pacing
from bot.core.pacing import Pacer
from bot.scan.batch_reply import parse_oversized, parse_reply
from bot.scan.batch_script import (
    BATCH_KEYS,
    MAX_SCAN_CALLS,
    READ_KEYS_LUA,
    SCAN_KEYS_ARGS,
    SCAN_KEYS_LUA,
)
from bot.scan.batch_size import BatchSizer, Measure, target_for
from bot.scan.pipelined import PipelinedReader
from bot.scan.repeats import Repeats
from bot.scan.script_reader import ScriptReader
from bot.scan.types import (
    MAX_FIELDS,
    MAX_KEY_BYTES,
    MAX_TRACKED_KEY_BYTES,
    MAX_VALUE_BYTES,
    OVERSIZED_KEPT,
    OVERSIZED_SHOWN,
    Batch,
    ScanStats,
)
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

    #: The Lua batch read's two calls (a cluster node runs others).
    _SCAN = SCAN_KEYS_LUA
    _READ = READ_KEYS_LUA
    #: Whether the SCAN reads the oversized keys it names (`ScanStats.oversized_read`).
    _READ_BIG = True

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
        target_us: float | None = None,
        pacer: Pacer | None = None,
    ) -> None:
        self.client, self.pacer = client, pacer  # pacer: waits for the scan budget (None: never)
        self.count = count
        self.max_fields, self.max_value_bytes = max_fields, max_value_bytes
        self.batch_keys = batch_keys
        self.max_scan_calls = max_scan_calls
        self.stats = ScanStats()
        #: Sizes each batch within the caps above to about `target_us` (0: the caps; None: as
        #: the pacer's budget asks).
        target_us = target_for(pacer.budget if pacer else None) if target_us is None else target_us
        self.sizer = BatchSizer(
            max_count=count, max_keys=batch_keys, max_calls=max_scan_calls, target_us=target_us
        )
        self._scan_script = client.register_script(self._SCAN)
        self._read_script = client.register_script(self._READ)
        self._auto = mode is ReadMode.AUTO
        #: Lua mode only: the caller writes tenure records every few batches and then calls
        #: `written`; until then the scanner itself skips the batches' keys as repeats.
        self.deferred = False
        self._repeats = Repeats()
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
        """The locks batch by batch. The caller writes a batch's tenure records to `new_table`
        before asking for the next (so repeats are skipped), or, in Lua mode with `deferred`
        set, every few batches, calling `written` after each write."""
        if self.mode is ReadMode.LUA:
            return _lua_or_pipeline(self, list(patterns), prev_table, new_table)
        return _pipelined(self).batches(patterns, prev_table, new_table)

    # -- lua ---------------------------------------------------------------------------------

    def _lua_batches(
        self, patterns: Iterable[bytes], prev_table: bytes, new_table: bytes
    ) -> Generator[Batch, None, None]:
        reader = self.reader = ScriptReader(self.client)
        try:
            for pattern in patterns:
                self.stats.pattern = pattern
                yield from self._pattern_batches(reader, pattern, prev_table, new_table)
            reader.flush()  # the writes sent behind the last call ran, or an error raises
        finally:
            self.reader = None
            reader.close()

    def _pattern_batches(
        self, reader: ScriptReader, pattern: bytes, prev_table: bytes, new_table: bytes
    ) -> Generator[Batch, None, None]:
        """One pattern's batches. The next SCAN is sent just before this batch's read and taken
        before the batch is handed over: Redis always has a read queued behind the one it runs."""
        keys, args = self._request(pattern, prev_table, new_table)
        sent: deque[tuple[int, int | None]] = deque()  # per call: its SCAN COUNT; a read's mark
        repeats = self._repeats

        def scan(cursor: EncodableT) -> None:
            size = self.sizer.next()  # ARGV[3..5]: SCAN COUNT, keys, SCAN calls
            args[0], args[2:5] = cursor, [size.count, size.keys, size.calls]
            reader.send(self._scan_script, [], args[:SCAN_KEYS_ARGS])
            sent.append((int(args[2]), None))

        def scanned(reply: list[Any], count: int) -> None:
            if reply[7]:
                self._oversized(reply, args)
            if reply[0] != b"0" and reply[0] != 0:
                scan(reply[0])
            if reply[6]:
                reader.send(self._read_script, keys, self._read_args(reply, args))
                sent.append((count, repeats.mark()))
            else:
                _scanned_only(self, reply, count)

        scan(b"0")
        while sent:
            count, mark = sent.popleft()
            reply = reader.receive()
            if mark is None:
                scanned(reply, count)
                continue
            _measured(self, reply, count)  # sized, paced: then the next pair is sent
            batch = self._parse_lua(reply, repeats.since(mark))
            if sent and sent[0][1] is None:  # the next SCAN, queued right behind this read
                scanned(reader.receive(), sent.popleft()[0])
            repeats.add({snap.key for snap, _ in batch})
            repeats.forget(min((m for _, m in sent if m is not None), default=repeats.unwritten))
            if batch:
                yield batch
            if not self.deferred:
                self.written()  # the caller wrote it before asking for the next

    def _oversized(self, reply: list[Any], args: list[EncodableT]) -> None:
        """The oversized keys a SCAN call counted, named and read; once `OVERSIZED_KEPT` are
        read, the next calls only count and name them."""
        flat = reply[8]
        self.stats.skipped_oversized(
            int(reply[7]),
            [(bytes(p), int(n)) for p, n in zip(flat[::2], flat[1::2], strict=True)],
        )
        if reply[9]:
            self.stats.read_oversized(
                parse_oversized(reply[9], reply[10], reply[11], self.max_fields)
            )
            if len(self.stats.oversized_read) >= OVERSIZED_KEPT:
                args[13] = 0

    def written(self) -> None:
        """The tenure records of every batch yielded so far are written (see `deferred`)."""
        self._repeats.written()

    def _read_args(self, found: list[Any], args: list[EncodableT]) -> list[EncodableT]:
        """READ_KEYS_LUA's ARGV for the keys a SCAN call found (`found`, its reply), with what
        `_request` gives beyond the SCAN's ARGV (a cluster node's) before the keys."""
        extra = args[SCAN_KEYS_ARGS:]
        return [*found[:6], self.max_fields, self.max_value_bytes, *extra, *found[6]]

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
            MAX_KEY_BYTES,
            OVERSIZED_SHOWN,
            OVERSIZED_KEPT,
            MAX_TRACKED_KEY_BYTES if self._READ_BIG else 0,
        ]

    def _parse_lua(self, reply: list[Any], in_hand: AbstractSet[bytes]) -> Batch:
        return parse_reply(reply, in_hand, self.stats, self.max_fields)


def _probe(scanner: Scanner) -> ReadMode:
    """LUA, unless one empty batch (both calls, on a pattern nothing matches) is refused."""
    keys, args = scanner._request(_PROBE_PATTERN, *scanner._probe_keys())
    args[2:7] = [1, 1, 1, 0, 0]  # COUNT 1, one key, one SCAN call, nothing of a value
    try:
        found = scanner._scan_script(keys=[], args=args[:SCAN_KEYS_ARGS])
        scanner._read_script(keys=keys, args=scanner._read_args([*found[:6], []], args))
    except redis.ResponseError as exc:
        if not _refused(exc):
            raise
        return ReadMode.PIPELINE
    return ReadMode.LUA


def _lua_or_pipeline(
    scanner: Scanner, patterns: list[bytes], prev_table: bytes, new_table: bytes
) -> Generator[Batch, None, None]:
    """Lua batches. A first batch refused (an ACL that passed the probe) falls back to pipelined
    reads in AUTO mode; an explicit lua mode says what it needs instead."""
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
    """Could `pattern` match a key under one of lockguard's own prefixes (`lock:*` cannot: the
    script then checks no key against them)?"""
    head = globs.literal_head(pattern)
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


def _scanned_only(scanner: Scanner, reply: list[Any], count: int) -> None:
    """A SCAN call that found no key to read: counted, measured and paced as a read is."""
    calls, returned, own, dups, scan_us = (int(x) for x in reply[1:6])
    stats = scanner.stats
    stats.scan_calls += calls
    stats.keys_returned += returned
    stats.own_keys_skipped += own
    stats.duplicates += dups
    scanner.sizer.measured(Measure(count, calls, returned, 0, scan_us, scan_us))
    if scanner.pacer is not None:
        scanner.pacer.pause(pacing.script_cost(scan_us / 1e6))


def _measured(scanner: Scanner, reply: list[Any], count: int) -> None:
    """A batch's measures to the sizer, and its two calls' server time to the pacer (which waits
    here as the budget asks, before the next pair is sent)."""
    measure = Measure(count, int(reply[3]), int(reply[4]), int(reply[10]), reply[11], reply[12])
    scanner.sizer.measured(measure)
    if scanner.pacer is not None:
        scan_s, read_s = measure.scan_us / 1e6, (measure.total_us - measure.scan_us) / 1e6
        scanner.pacer.pause(pacing.script_cost(scan_s) + pacing.script_cost(read_s))
