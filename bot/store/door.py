"""A client with the endpoint and secrets its failures are named and scrubbed with.

The engine holds one (`Engine.door`); the Slack layer gets the store objects built on it and never
sends a Redis command itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import redis

from bot.store.redis_errors import redis_errors


@dataclass(frozen=True, slots=True)
class Door:
    client: redis.Redis
    endpoint: str
    secrets: tuple[str, ...] = ()

    @contextmanager
    def errors(self) -> Iterator[None]:
        """Redis failures inside as `LockguardError`s naming the endpoint, never a secret."""
        with redis_errors(self.endpoint, self.secrets):
            yield
