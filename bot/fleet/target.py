"""One Redis of the fleet. Its `settings` are the environment's with the target's Redis, patterns,
channel and schedule put in, so everything built for one Redis works for any target unchanged and
its state stays in its own Redis.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from bot.config import Settings

#: The name of the one target there is without a targets file: the environment's Redis.
IMPLICIT_NAME = "default"


@dataclass(frozen=True)
class Target:
    """One Redis lockguard watches. `implicit`: no targets file, the environment's Redis."""

    name: str
    settings: Settings
    labels: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    implicit: bool = False

    @property
    def redis(self) -> str:
        """`host:port/db`, for people: never a password."""
        return self.settings.endpoint

    @property
    def channel(self) -> str | None:
        return self.settings.slack_channel

    @property
    def schedule(self) -> str:
        return self.settings.scan_schedule

    def label_text(self) -> str:
        """`team=payments, env=prod`: the labels in the file's order, for messages."""
        return ", ".join(f"{k}={v}" for k, v in self.labels.items())


def implicit_target(settings: Settings) -> Target:
    return Target(name=IMPLICIT_NAME, settings=settings, implicit=True)
