"""The fleet from `LOCKGUARD_TARGETS_FILE`.

# placeholder: task E's loader replaces this file at merge
"""

from __future__ import annotations

from bot.config import Settings
from bot.fleet.target import Target, implicit_target


def load_fleet(settings: Settings) -> list[Target]:
    """Every target of the fleet (without a targets file: the one implicit target)."""
    return [implicit_target(settings)]
