from __future__ import annotations

import redis

from bot.core.model import Layout, Reason
from bot.core.rules import Policy
from bot.scan import ReadMode
from bot.scan.loop import run_scan
from bot.scan.result import ScanOptions

OPTS = ScanOptions(patterns=[b"lock:*", b"\x17*"], policy=Policy(stale_threshold_ms=30_000))


def test_scan_reads_strings_hashes_and_binary(r: redis.Redis) -> None:
    r.set(b"lock:a", b"tok")
    r.set(b"lock:b", b"tok2", px=60_000)
    r.hset(b"lock:h", mapping={b"6f1c2c1e-6f3a-4a5b-9c1d-2b3c4d5e6f70:1": b"1"})
    r.set(b"\x17\x00\x01", b"3", ex=300)
    r.set(b"other", b"x")
    for mode in (ReadMode.LUA, ReadMode.PIPELINE):
        res = run_scan(r, ScanOptions(OPTS.patterns, OPTS.policy, mode=mode))
        assert res.scanned == 4
        assert res.by_reason[Reason.INFINITE_TTL] == 2
        assert res.by_layout[Layout.REDISSON] == 1
        assert res.by_layout[Layout.COUNTER] == 1
