"""The error tree. Each message names what was wrong and what was expected; none echoes a secret."""

from __future__ import annotations


class LockguardError(Exception):
    """Base of every error lockguard reports to a person. `exit_code` follows the CLI contract."""

    exit_code = 2


class ConfigError(LockguardError):
    """Bad configuration or input: exit 2, nothing touched."""


class RedisUnavailableError(LockguardError):
    """Redis is down, refused us (auth), or timed out: exit 3. The message names the endpoint."""

    exit_code = 3


class RedisRefusedError(RedisUnavailableError):
    """Redis refused the request (ACL, OOM, read-only replica, loading, ...): exit 3. The message
    names the endpoint, the code word and the command, never the reply (it can quote values)."""


class ScanBusyError(LockguardError):
    """Another lockguard scan holds the scan lease on this Redis."""

    exit_code = 3


class ScanInterruptedError(LockguardError):
    """A scan that could not promise to have seen every lock (a Redis Cluster's slots moved
    under it): exit 3. Nothing was recorded; the next scan starts again."""

    exit_code = 3


class CaseError(LockguardError):
    """A case id that is malformed, unknown, expired or already decided: exit 2, nothing changed."""


class CaseDecidedError(CaseError):
    """Someone decided the case (or it expired) first: nothing changed; says who and when."""

    def __init__(
        self, message: str, *, state: str, decided_by: str = "", decided_ms: int | None = None
    ) -> None:
        super().__init__(message)
        self.state = state
        self.decided_by = decided_by
        self.decided_ms = decided_ms


class SameApproverError(CaseError):
    """A second approval from the person who gave the first: two distinct people are needed."""
