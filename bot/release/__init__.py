"""Releasing approved locks, one module each:

- `model`: what a release is given (`ApprovedLock`, `Recording`) and gives back (`Result`,
  `Outcome`);
- `scripts`: the Lua compare-and-delete scripts and their reply table (`Code`, `Event`);
- `reply`: the one decoder of those replies (`Reply`) and what each means for the lock;
- `runner`: the scripts run for many locks in one pipeline (`ScriptRunner`, `describe_error`);
- `releaser`: the `Releaser`, which deletes (or, with lock-delay, shortens the TTL of) locks;
- `verifier`: the `Verifier`, which reads released keys back;
- `waiters`: which key or channel wakes each library's own waiters.
"""

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
