"""The batch sizer (`bot.scan.batch_size`): each batch sized from the server times the ones
before measured, so that one call holds Redis for about the target, which the scan budget sets.
Pure: fed a fake server whose cost per slot visited and per key read is known."""

from __future__ import annotations

from dataclasses import dataclass

import fakeredis

from bot.core.pacing import DEFAULT_BUDGET, UNPACED, Pacer
from bot.scan import ReadMode, Scanner
from bot.scan.batch_size import (
    FIRST_COUNT,
    MIN_COUNT,
    TARGET_US,
    BatchSizer,
    Measure,
    Size,
    target_for,
)


@dataclass
class FakeServer:
    """A keyspace where a SCAN visit costs `slot_us` per slot and returns `density` keys per
    slot, and reading a key costs `key_us`: what one sized call would measure."""

    slot_us: float
    density: float
    key_us: float

    def run(self, size: Size) -> Measure:
        calls, found = 0, 0.0
        while True:
            calls += 1
            found += size.count * self.density
            if found >= size.keys or calls >= size.calls:
                break
        keys = int(found)
        scan_us = calls * size.count * self.slot_us
        return Measure(size.count, calls, keys, keys, scan_us, scan_us + keys * self.key_us)


def drive(sizer: BatchSizer, server: FakeServer, n: int) -> list[Measure]:
    out = []
    for _ in range(n):
        m = server.run(sizer.next())
        sizer.measured(m)
        out.append(m)
    return out


def sizer(target_us: float = 500, **caps: int) -> BatchSizer:
    return BatchSizer(
        max_count=caps.get("max_count", 1000),
        max_keys=caps.get("max_keys", 250),
        max_calls=caps.get("max_calls", 16),
        target_us=target_us,
    )


def test_the_first_call_is_small_and_scans_once() -> None:
    assert sizer().next() == Size(FIRST_COUNT, 250, 1)
    assert sizer(max_count=10).next() == Size(10, 250, 1)


def test_a_dense_keyspace_settles_just_under_the_target() -> None:
    """Half the slots hold a lock, 6 µs to read one: ~160 slots per call make 0.5 ms."""
    calls = drive(sizer(), FakeServer(slot_us=0.2, density=0.5, key_us=6.0), 30)
    assert all(m.total_us <= 500 for m in calls[1:])
    assert all(m.total_us >= 400 for m in calls[5:])
    assert all(m.calls == 1 for m in calls)


def test_a_slower_keyspace_gets_smaller_batches_not_longer_calls() -> None:
    fast = drive(sizer(), FakeServer(0.2, 0.5, 6.0), 20)[-1]
    slow = drive(sizer(), FakeServer(0.2, 0.5, 30.0), 20)[-1]
    assert slow.count < fast.count / 3
    assert slow.total_us <= 500


def test_one_slow_call_shrinks_the_next_at_once() -> None:
    s = sizer()
    drive(s, FakeServer(0.2, 0.5, 6.0), 20)
    before = s.next().count
    s.measured(FakeServer(0.2, 0.5, 30.0).run(s.next()))  # the server was busy: 5x slower
    assert s.next().count < before / 2


def test_recovers_slowly_after_a_slow_call() -> None:
    s = sizer()
    server = FakeServer(0.2, 0.5, 6.0)
    drive(s, server, 20)
    settled = s.next().count
    s.measured(FakeServer(0.2, 0.5, 30.0).run(s.next()))
    after = [m.count for m in drive(s, server, 30)]
    assert after[0] < after[-1]
    assert after == sorted(after)  # step by step, never past what the target allows
    assert after[-1] <= settled + 1


def test_a_sparse_keyspace_scans_several_times_per_call_within_the_target() -> None:
    """One lock per 1,000 slots: the full COUNT, and as many SCAN calls as fit in 0.5 ms."""
    calls = drive(sizer(), FakeServer(slot_us=0.05, density=0.001, key_us=6.0), 10)
    last = calls[-1]
    assert last.count == 1000
    assert 5 <= last.calls <= 10
    assert all(m.total_us <= 500 for m in calls[1:])


def test_the_callers_caps_hold() -> None:
    s = sizer(max_count=50, max_keys=20, max_calls=3)
    calls = drive(s, FakeServer(0.01, 0.001, 0.1), 10)
    assert max(m.count for m in calls) == 50
    assert max(m.calls for m in calls) <= 3
    assert s.next().keys <= 20


def test_never_below_the_smallest_count() -> None:
    calls = drive(sizer(), FakeServer(slot_us=5.0, density=1.0, key_us=500.0), 10)
    assert min(m.count for m in calls) == MIN_COUNT


def test_target_zero_uses_the_caps_unsized() -> None:
    s = BatchSizer(max_count=1000, max_keys=250, max_calls=4, target_us=0)
    s.measured(Measure(1000, 1, 500, 500, 100, 5000))
    assert s.next() == Size(1000, 250, 4)


def test_a_call_that_read_nothing_still_sizes_the_next() -> None:
    s = sizer()
    s.measured(Measure(100, 1, 0, 0, 10.0, 10.0))  # nothing matched
    size = s.next()
    assert size.count == 1000
    assert size.calls > 1


def test_calls_aim_at_half_a_ms_up_to_the_default_budget_and_lengthen_above_it() -> None:
    """The budget decides how long a call may hold Redis: 0.5 ms at the default (0.5) and at
    any lower budget (a busy server gets no longer calls), to 1 ms unpaced (`off`)."""
    assert target_for(0.1) == target_for(0.25) == target_for(DEFAULT_BUDGET) == TARGET_US == 500
    assert target_for(0.75) == 750
    assert target_for(UNPACED) == 1000
    assert target_for(5.0) == 1000  # nothing above unpaced


def test_an_unpaced_scan_reads_twice_the_keys_per_call_each_under_a_ms() -> None:
    server = FakeServer(slot_us=0.2, density=0.5, key_us=3.5)
    paced = drive(sizer(target_us=target_for(DEFAULT_BUDGET)), server, 30)[10:]
    unpaced = drive(sizer(target_us=target_for(UNPACED), max_keys=1000), server, 30)[10:]
    assert all(m.total_us <= 500 for m in paced)
    assert all(m.total_us <= 1000 for m in unpaced)
    assert min(m.read for m in unpaced) >= 1.8 * max(m.read for m in paced)


def test_a_scanner_sizes_its_calls_by_its_pacers_budget() -> None:
    client = fakeredis.FakeRedis()
    target = {
        budget: Scanner(client, mode=ReadMode.PIPELINE, pacer=Pacer(budget)).sizer.target_us
        for budget in (0.25, DEFAULT_BUDGET, UNPACED)
    }
    assert target == {0.25: 500, DEFAULT_BUDGET: 500, UNPACED: 1000}
    assert Scanner(client, mode=ReadMode.PIPELINE).sizer.target_us == TARGET_US  # no pacer
