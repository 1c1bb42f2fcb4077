"""The error tree. Each message names what was wrong and what was expected; none echoes a secret."""

from __future__ import annotations


class LockguardError(Exception):
    """Base of every error lockguard reports to a person. `exit_code` follows the CLI contract."""

    exit_code = 2


class ConfigError(LockguardError):
    """Bad configuration or input: exit 2, nothing touched."""

    exit_code = 2


class RedisUnavailableError(LockguardError):
    """Redis is down, refused us (auth), or timed out: exit 3. The message names the endpoint
    only."""

    exit_code = 3


class RedisRefusedError(RedisUnavailableError):
    """Redis answered but refused the request (ACL, out of memory, read-only replica, loading,
    busy, ...): exit 3. The message names the endpoint, the refusal's code word and the command,
    never Redis's reply itself (it can quote arguments, such as lock values)."""


class ScanBusyError(LockguardError):
    """Another lockguard scan holds the scan lease on this Redis."""

    exit_code = 3


class ScanInterruptedError(LockguardError):
    """A scan that could not promise to have seen every lock (a Redis Cluster's slots moved
    under it): exit 3. Nothing was recorded; the next scan starts again."""

    exit_code = 3


class CaseError(LockguardError):
    """A case id that is malformed, unknown, expired or already decided: exit 2, nothing changed."""

    exit_code = 2


class CaseDecidedError(CaseError):
    """Someone decided the case (or it expired) before this decision: nothing changed. Carries
    the state and who decided when, for a reply such as "already decided by ..."."""

    def __init__(
        self, message: str, *, state: str, decided_by: str = "", decided_ms: int | None = None
    ) -> None:
        super().__init__(message)
        self.state = state
        self.decided_by = decided_by
        self.decided_ms = decided_ms


class SameApproverError(CaseError):
    """A second approval from the person who gave the first: two distinct people are needed."""
