"""The fleet: every Redis one lockguard deployment watches (`LOCKGUARD_TARGETS_FILE`), each a
`Target` with its own settings, its own state in its own Redis, and its own leader lease.

Without a targets file the fleet is one implicit target: the environment's Redis, exactly as
before the fleet existed.
"""

from bot.fleet.target import IMPLICIT_NAME, Target, implicit_target

__all__ = ["IMPLICIT_NAME", "Target", "implicit_target"]
