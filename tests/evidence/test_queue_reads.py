"""Fair-lock queues are read in short pipelines: Redis runs a pipeline's commands back to back
before anyone else's, and 500 `LRANGE`s of full queues held it 2.7 ms. Both the scan's queue
read and the recheck of an approved deadlock (`cycles_hold`) send at most `LRANGE_PER_TRIP`
queue reads a round trip, and still read every queue (real server)."""

from __future__ import annotations

import pytest
import redis

from bot.evidence.cycle_check import cycles_hold
from bot.evidence.queues import LRANGE_PER_TRIP, QUEUE_READ, read_queues
from tests.conftest import CountPipelines, named
from tests.evidence.test_deadlock import hold, queue, server_ms

pytestmark = pytest.mark.real
LOCKS = 3 * LRANGE_PER_TRIP + 5


@pytest.fixture
def lranges(count_pipelines: CountPipelines) -> list[int]:
    """The number of LRANGEs each pipeline sent."""
    return count_pipelines(lambda stack: [len(named(stack, "LRANGE"))])


def holder(i: int) -> bytes:
    return b"3f2a9b1c-0d4e-4f5a-8b6c-7d8e9f0a%04d:%d" % (i, i)


def test_every_full_queue_is_read_in_short_pipelines(
    real_redis: redis.Redis, lranges: list[int]
) -> None:
    names = [b"lock:q%03d" % i for i in range(LOCKS)]
    for i, name in enumerate(names):
        hold(real_redis, name, holder(i))
        real_redis.rpush(
            b"redisson_lock_queue:{" + name + b"}", *[b"w%d:1" % j for j in range(120)]
        )
    lranges.clear()
    queues = read_queues(real_redis, names)
    assert sorted(queues) == names
    assert all(len(q) == QUEUE_READ and q[0] == b"w0:1" for q in queues.values())
    assert sum(lranges) == LOCKS
    assert max(lranges) == LRANGE_PER_TRIP


def test_many_approved_cycles_are_rechecked_in_short_pipelines(
    real_redis: redis.Redis, lranges: list[int]
) -> None:
    cycles = []
    for i in range(LOCKS // 2):  # two-lock cycles: a holds x, waits for y; b holds y, waits for x
        x, y, a, b = b"lock:x%03d" % i, b"lock:y%03d" % i, holder(2 * i), holder(2 * i + 1)
        hold(real_redis, x, a)
        hold(real_redis, y, b)
        queue(real_redis, y, a)
        queue(real_redis, x, b)
        cycles.append(((x, a), (y, b)))
    real_redis.hdel(b"lock:x005", holder(10))  # one cycle broken since it was approved
    lranges.clear()
    verdicts = cycles_hold(real_redis, cycles, server_ms(real_redis))
    assert sum(lranges) == 2 * len(cycles)
    assert max(lranges) <= LRANGE_PER_TRIP
    assert "lock:x005 is no longer held by" in verdicts[5]
    assert [v for i, v in enumerate(verdicts) if i != 5] == [""] * (len(cycles) - 1)
