"""The fleet: every Redis one lockguard watches (`LOCKGUARD_TARGETS_FILE`), each a `Target` with
its own settings, state and leader lease; without a targets file, one: the environment's Redis."""

from bot.fleet.target import Target

__all__ = ["Target"]
