"""What lockguard's codes mean, in words a person understands (reasons, outcomes, states)."""

from __future__ import annotations

from bot.cases.case import State
from bot.core.model import Reason

#: Short names, for counts and compact lines.
REASON_LABEL = {
    Reason.INFINITE_TTL: "no expiry",
    Reason.STALE_LEASE: "stale lease",
    Reason.KEPT_ALIVE_BY_CONTENDERS: "kept alive by contenders",
    Reason.LONG_HELD_RENEWING: "long held, renewing",
    Reason.HEALTHY: "healthy",
    Reason.NOT_A_LOCK: "not a lock",
    Reason.DEADLOCK: "deadlock",
}

#: What the verdict means for the lock.
REASON_WORDS = {
    Reason.INFINITE_TTL: "nobody will ever release it",
    Reason.STALE_LEASE: "held past the threshold with no renewal",
    Reason.KEPT_ALIVE_BY_CONTENDERS: "abandoned, but failed contenders keep resetting its TTL",
    Reason.LONG_HELD_RENEWING: (
        "held long, but its owner keeps renewing it (looks alive; not offered)"
    ),
    Reason.HEALTHY: "healthy",
    Reason.NOT_A_LOCK: "not a lock lockguard recognises: counted, never touched",
    Reason.DEADLOCK: (
        "its holder and the holders of other locks wait in each other's queues: no TTL will "
        "ever end it; releasing this one lock breaks the cycle"
    ),
}

#: What happened to a lock on approval (`bot.release.Outcome` values, and `dry_run`).
OUTCOME_WORDS = {
    "released": "released",
    "skipped_reacquired": "skipped: re-acquired since it was seen",
    "already_gone": "already gone",
    "recovered": "recovered: its owner renewed it",
    "skipped_unproven": "refused: not provably the holder that was approved",
    "error": "error",
    "dry_run": "dry run: not touched",
}


def outcome_words(outcome: str) -> str:
    return OUTCOME_WORDS.get(outcome, outcome.replace("_", " "))


#: The state of a case, as its message's header says it.
STATE_WORDS = {
    State.OPENING: "Being opened",
    State.PENDING: "Waiting for a decision",
    State.APPROVED: "Releasing",
    State.REJECTED: "Rejected",
    State.EXPIRED: "Expired",
    State.RELEASED: "Released",
    State.INCOMPLETE: "Incomplete",
}
