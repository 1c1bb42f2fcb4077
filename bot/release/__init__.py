"""Releasing approved locks: the Releaser (`releaser`), its Lua compare-and-delete scripts with
their reply table (`scripts`), and the libraries' waiters (`waiters`)."""

from bot.release.releaser import (
    Outcome,
    Recording,
    Releaser,
    Result,
    Target,
    describe_error,
)

__all__ = ["Outcome", "Recording", "Releaser", "Result", "Target", "describe_error"]
