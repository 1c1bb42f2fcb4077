"""The pipelined read, for servers where scripting is refused (some managed services): SCAN,
then two non-transactional pipelines per batch (facts, then values), one batch at a time."""

from __future__ import annotations

import time
from collections.abc import Generator, Iterable
from typing import cast

import redis

from bot.core.model import Snapshot
from bot.core.pacing import Pacer
from bot.scan.batch_size import BatchSizer, Measure
from bot.scan.types import MAX_KEY_BYTES, OVERSIZED_SHOWN, Batch, ScanStats
from bot.store.keyspace import OWN_PREFIXES
from bot.store.scans import WRITE_CHUNK, time_ms

#: Tenure records per HMGET, as they are written: one HMGET of hundreds is one long command.
HMGET_CHUNK = WRITE_CHUNK

#: A key's facts from the first pipeline: key, type, PTTL, idle seconds, previous record.
_Live = list[tuple[bytes, str, int, int, bytes | None]]


class PipelinedReader:
    def __init__(
        self,
        client: redis.Redis,
        stats: ScanStats,
        *,
        count: int,
        max_fields: int,
        max_value_bytes: int,
        sizer: BatchSizer | None = None,
        pacer: Pacer | None = None,
    ) -> None:
        self.client = client
        self.stats = stats
        self.count = count
        self.sizer = sizer  # sizes SCAN COUNT by each SCAN's round trip (an upper bound)
        self.max_fields = max_fields
        self.max_value_bytes = max_value_bytes
        self.pacer = pacer  # paced by each batch's round trips (an upper bound of server time)

    def batches(
        self, patterns: Iterable[bytes], prev_table: bytes, new_table: bytes
    ) -> Generator[Batch, None, None]:
        for pattern in patterns:
            self.stats.pattern = pattern
            cursor = 0
            while True:
                count = self.sizer.next().count if self.sizer is not None else self.count
                started = time.perf_counter()
                cursor, found = self.client.scan(cursor=cursor, match=pattern, count=count)
                took_us = (time.perf_counter() - started) * 1e6
                keys = cast("list[bytes]", found)  # bytes: the client never decodes
                if self.sizer is not None:  # SCAN's time alone: its keys are read apart, in
                    n = len(keys)  # commands of their own (so no time per key read here)
                    self.sizer.measured(Measure(count, 1, n, n, took_us, took_us))
                self.stats.scan_calls += 1
                self.stats.keys_returned += len(keys)
                unique = [k for k in dict.fromkeys(keys) if not k.startswith(OWN_PREFIXES)]
                over = [k for k in unique if len(k) > MAX_KEY_BYTES]
                if over:  # SCAN sent them whole here; they go no further (MAX_KEY_BYTES)
                    self.stats.skipped_oversized(
                        len(over), [(k[:OVERSIZED_SHOWN], len(k)) for k in over]
                    )
                    unique = [k for k in unique if len(k) <= MAX_KEY_BYTES]
                self.stats.own_keys_skipped += sum(1 for k in keys if k.startswith(OWN_PREFIXES))
                self.stats.duplicates += len(keys) - len(set(keys))
                batch = (
                    self._values(*self._facts(unique, prev_table, new_table)) if unique else None
                )
                if self.pacer is not None:
                    self.pacer.pause(time.perf_counter() - started)
                if batch is not None:
                    yield batch
                if cursor == 0:
                    break

    def _facts(self, keys: list[bytes], prev_table: bytes, new_table: bytes) -> tuple[_Live, int]:
        """The first pipeline: TIME, each key's type, idle time, PTTL and two records; the keys
        still there and not yet seen."""
        with self.client.pipeline(transaction=False) as pipe:
            pipe.time()
            for k in keys:
                pipe.type(k)
                pipe.object("idletime", k)
                pipe.pttl(k)
            chunks = [keys[i : i + HMGET_CHUNK] for i in range(0, len(keys), HMGET_CHUNK)]
            for table in (prev_table, new_table):  # HMGETs of at most HMGET_CHUNK fields
                for chunk in chunks:
                    pipe.hmget(table, chunk)
            facts = pipe.execute(raise_on_error=False)
        # On a Redis Cluster node, a key of a slot being resharded to it is redirected (MOVED,
        # ASK): counted as moving and skipped, as the cluster batch script does.
        moving = {i for i in range(len(keys)) if isinstance(facts[1 + 3 * i], _REDIRECTS)}
        # A refused TYPE, PTTL, TIME or HMGET is the scan's error; OBJECT IDLETIME may fail.
        _raise_first(
            x
            for i, x in enumerate(facts)
            if i == 0 or i > 3 * len(keys) or (i % 3 != 2 and (i - 1) // 3 not in moving)
        )
        records = facts[1 + 3 * len(keys) :]
        prev = [r for chunk in records[: len(chunks)] for r in chunk]
        seen = [r for chunk in records[len(chunks) :] for r in chunk]
        live: _Live = []
        self.stats.moving += len(moving)
        for i, k in enumerate(keys):
            if i in moving:
                continue
            t, idle, pttl = facts[1 + 3 * i : 4 + 3 * i]
            tname = t.decode() if isinstance(t, bytes) else str(t)
            if tname == "none":
                self.stats.vanished += 1
            elif seen[i] is not None:
                self.stats.duplicates += 1
            else:
                live.append((k, tname, int(pttl), idle if isinstance(idle, int) else -1, prev[i]))
        return live, time_ms(facts[0])

    def _values(self, live: _Live, now_ms: int) -> Batch:
        """The second pipeline: each string's length and bytes, each hash's size and fields."""
        with self.client.pipeline(transaction=False) as pipe:
            for k, tname, _, _, _ in live:
                if tname == "string":
                    pipe.strlen(k)
                    pipe.getrange(k, 0, self.max_value_bytes - 1)
                elif tname == "hash":
                    pipe.hlen(k)
                    pipe.hscan(k, 0, count=self.max_fields)
            replies = pipe.execute(raise_on_error=False)
        _raise_first(
            x
            for x in replies  # WRONGTYPE: a key that changed type in between; a redirect: its
            if isinstance(x, redis.ResponseError)  # slot began moving since the first pipeline
            and not isinstance(x, _REDIRECTS)
            and not str(x).startswith("WRONGTYPE")
        )
        values = iter(replies)
        out: Batch = []
        for k, tname, pttl, idle, prev_rec in live:
            if tname not in ("string", "hash"):
                snap = _snapshot(k, tname, pttl, idle, now_ms, None, 0, self.max_fields)
                out.append((snap, prev_rec))
                continue
            size, second = next(values), next(values)
            if isinstance(size, _REDIRECTS) or isinstance(second, _REDIRECTS):
                self.stats.moving += 1  # read on its new node, as a key moving in _facts
                continue
            if isinstance(size, redis.ResponseError) or isinstance(second, redis.ResponseError):
                self.stats.vanished += 1  # WRONGTYPE: the key seen was replaced by another type
                continue
            if tname == "string":  # GETRANGE: at most max_value_bytes
                snap = _snapshot(k, tname, pttl, idle, now_ms, second, size, self.max_fields)
            else:
                if not size:
                    self.stats.vanished += 1
                    continue
                flat = (
                    [x for pair in second[1].items() for x in pair]
                    if isinstance(second, tuple)
                    else []
                )
                snap = _snapshot(k, tname, pttl, idle, now_ms, flat, size, self.max_fields)
            out.append((snap, prev_rec))
        return out


_REDIRECTS = (redis.exceptions.MovedError, redis.exceptions.AskError)


def _snapshot(
    key: bytes,
    t: str,
    pttl: int,
    idle: int,
    now_ms: int,
    payload: object,
    size: int,
    max_fields: int,
) -> Snapshot:
    if t == "string":
        value = payload if isinstance(payload, bytes) else None
        return Snapshot(key, t, pttl, idle, now_ms, value=value, value_len=size)
    if t == "hash":
        flat = payload if isinstance(payload, list) else []
        pairs = tuple(zip(flat[0::2], flat[1::2], strict=True))[:max_fields]
        return Snapshot(key, t, pttl, idle, now_ms, fields=pairs, hash_len=size)
    return Snapshot(key, t, pttl, idle, now_ms)


def _raise_first(results: Iterable[object]) -> None:
    for x in results:
        if isinstance(x, redis.ResponseError):
            raise x
