"""One Redis of the fleet: its name, its labels, and the settings lockguard uses for it.

A target's `settings` are the environment's settings with that target's Redis (url, cluster or
sentinels, password, TLS), patterns, Slack channel and scan schedule put in: everything built for
one Redis (`bot.compose.build_engine(target.settings)`) works for any target unchanged, and each
target's state (`{lockguard}:` keys) stays in that target's own Redis.
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
        """Where this target's Redis is, for people: `host:port/db`, never a password."""
        return self.settings.endpoint

    @property
    def channel(self) -> str | None:
        """The Slack channel this target's findings go to (the target's own, or the default)."""
        return self.settings.slack_channel

    @property
    def schedule(self) -> str:
        """When this target is scanned (the target's own schedule, or the default)."""
        return self.settings.scan_schedule

    def label_text(self) -> str:
        """`team=payments, env=prod`: the labels in the file's order, for messages."""
        return ", ".join(f"{k}={v}" for k, v in self.labels.items())


def implicit_target(settings: Settings) -> Target:
    """The fleet without a targets file: one target, the environment's Redis, as always."""
    return Target(name=IMPLICIT_NAME, settings=settings, implicit=True)
