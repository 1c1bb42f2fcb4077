"""Where lockguard looks for a BullMQ job lock's queue and workers (bot/evidence/names.py), pure:
the queue of every job lock key BullMQ writes (plain, UUID and scheduler job ids, custom
prefixes), and which connection names are that queue's workers. The same names against the real
library: tests/evidence/test_bullmq_real.py."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.evidence.names import BullQueue, bull_queue

UUID = b"3f2c8e4a-9b1d-4c6e-8a7f-0d5e6b4c3a21"


@pytest.mark.parametrize(
    ("key", "prefix", "queue"),
    [
        (b"bull:emails:7:lock", b"bull", b"emails"),
        (b"bull:emails:" + UUID + b":lock", b"bull", b"emails"),  # a flow child's job
        (b"{jobs}:emails:7:lock", b"{jobs}", b"emails"),
        (b"app:bull:emails:7:lock", b"app:bull", b"emails"),  # a prefix may hold `:`
        # a job scheduler's job `repeat:<scheduler id>:<millis>`, the id holding `:` or not
        (b"bull:reports:repeat:user:42:digest:1796226993350:lock", b"bull", b"reports"),
        (b"bull:reports:repeat:hourly:1796226993350:lock", b"bull", b"reports"),
        (b"app:bull:reports:repeat:a:b:17:lock", b"app:bull", b"reports"),
        # 5.x legacy repeatable job: `repeat:<md5 of the repeat key>:<millis>`
        (
            b"bull:reports:repeat:0cc175b9c0f1b6a831c399e269772661:1700000000000:lock",
            b"bull",
            b"reports",
        ),
        # a queue named `repeat`
        (b"bull:repeat:5:lock", b"bull", b"repeat"),
        (b"bull:repeat:repeat:s:17:lock", b"bull", b"repeat"),
        (b"bull:emails:repeat:5:lock", b"bull:emails", b"repeat"),  # no `<id>:<millis>` after it
    ],
)
def test_the_queue_of_each_job_lock(key: bytes, prefix: bytes, queue: bytes) -> None:
    assert bull_queue(key) == BullQueue(prefix=prefix, queue=queue)


@pytest.mark.parametrize(
    "key",
    [
        b"bull:emails:7",
        b"bull:emails:lock",
        b":emails:7:lock",
        b"bull::7:lock",
        b"bull:emails::lock",
    ],
)
def test_other_shapes_have_no_queue(key: bytes) -> None:
    assert bull_queue(key) is None


def test_a_hostile_key_is_read_at_once() -> None:
    """A key of 100,000 `:repeat:` parts, none of them starting a job id: one pass over the key,
    not one per part (that would copy 80 GB here)."""
    key = b"bull:" + b":repeat:" * 100_000 + b"1:lock"
    queue = bull_queue(key)
    assert queue is not None
    assert queue.queue == b"repeat"
    assert len(queue.prefix) == len(key) - len(b":repeat:1:lock")


segment = st.text("abcdefgh0123456789-_{}", min_size=1, max_size=8).map(str.encode)
# `repeat` as a part of the prefix or as the queue: the ambiguous readings bull_queue documents
name = segment.filter(lambda s: s != b"repeat")
prefixes = st.lists(name, min_size=1, max_size=3)
job_ids = st.one_of(
    segment,  # a number, a UUID or a custom id: no `:`
    st.builds(
        lambda sid, ms: b"repeat:" + b":".join(sid) + b":" + str(ms).encode(),
        st.lists(segment, min_size=1, max_size=3),  # the scheduler id may hold `:`
        st.integers(0, 2**53),
    ),
)


@given(prefixes, name, job_ids)
def test_any_lock_bullmq_writes_names_its_prefix_and_queue(
    prefix: list[bytes], queue: bytes, job: bytes
) -> None:
    key = b":".join([*prefix, queue, job]) + b":lock"
    assert bull_queue(key) == BullQueue(prefix=b":".join(prefix), queue=queue)


def test_worker_connection_names() -> None:
    emails = BullQueue(prefix=b"bull", queue=b"emails")
    assert emails.keys == (b"bull:emails:wait", b"bull:emails:paused", b"bull:emails:prioritized")
    b64 = base64.b64encode(b"emails")
    assert emails.worker_name == b"bull:" + b64 == b"bull:ZW1haWxz"
    assert emails.is_worker(b"bull:ZW1haWxz")  # a Worker without a name
    assert emails.is_worker(b"bull:ZW1haWxz:w:mailer-7")  # Worker({name: "mailer-7"})
    assert not emails.is_worker(b"bull:ZW1haWxz:qe")  # a QueueEvents listener, no worker
    assert not emails.is_worker(b"bull:" + base64.b64encode(b"emailsx"))  # another queue
    assert not emails.is_worker(b"{jobs}:ZW1haWxz")  # the same name under another prefix
    assert not emails.is_worker(b"")
