"""Releasing approved locks: the Lua compare-and-delete per layout (`scripts`, its replies
decoded by `reply`), run pipelined (`runner`) by the `Releaser` and read back by the `Verifier`;
`waiters` names what wakes each library's own waiters."""

from bot.release.outcome import ApprovedLock, Outcome, Recording, Result
from bot.release.releaser import Releaser
from bot.release.runner import describe_error
from bot.release.verifier import Verifier

__all__ = [
    "ApprovedLock",
    "Outcome",
    "Recording",
    "Releaser",
    "Result",
    "Verifier",
    "describe_error",
]
