"""Where BullMQ keeps what shows a job lock's backlog and owner (pure; Redisson's names are
`bot.core.redisson`'s, its key parsing `bot.core.bullmq`'s). Checked against the real library in
tests/evidence/test_bullmq_real.py: a job lock `<prefix>:<queue>:<job>:lock`; the waiting work is
the lists `<prefix>:<queue>:wait` and `:paused` (5.x's pause moves `wait` there) and the sorted set
`:prioritized`; a worker names its blocking connection `<prefix>:<base64 queue>`, plus
`:w:<worker name>` when it has one (`QueueGetters.getWorkers` matches the same two forms). The
lock of a custom job id `a:b:c` (legacy, let through by `job.ts`) is misread as queue `b`.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass

from bot.core.bullmq import job_lock


@dataclass(frozen=True, slots=True)
class BullQueue:
    prefix: bytes  # `bull`, or a custom prefix such as `{bull}` (it may hold `:`)
    queue: bytes

    @property
    def keys(self) -> tuple[bytes, bytes, bytes]:
        base = self.prefix + b":" + self.queue + b":"
        return base + b"wait", base + b"paused", base + b"prioritized"

    @property
    def worker_name(self) -> bytes:
        return self.prefix + b":" + base64.b64encode(self.queue)

    def is_worker(self, client_name: bytes) -> bool:
        base = self.worker_name
        return client_name == base or client_name.startswith(base + b":w:")


def bull_queue(key: bytes) -> BullQueue | None:
    """The queue of a job lock, or None for another shape."""
    lock = job_lock(key)
    return None if lock is None else BullQueue(prefix=lock.prefix, queue=lock.queue)
