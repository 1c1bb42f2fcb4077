"""The one decoder of the release scripts' replies (`bot.release.scripts.Code`), and what each
means for the lock. Details are human sentences that never quote a value or token."""

from __future__ import annotations

from dataclasses import dataclass, replace

from bot.release.outcome import ApprovedLock, Outcome, Result
from bot.release.scripts import Code, Event
from bot.release.waiters import wake_lines

UNEXPECTED = "unexpected reply from Redis"

_CHANGED = {
    "type": "skipped: the key is now another type, so it was re-created since approval",
    "value": "skipped: re-acquired or changed since approval (not the approved value)",
    "field": "skipped: an approved holder field is gone, so it was re-acquired since approval",
    "extra": "skipped: another holder joined the lock since approval",
    "integer": "skipped: the value is no longer an integer counter, so it was re-created",
    "rearmed": "skipped: the count is unchanged but the TTL was re-armed, so it was re-created "
    "by a new owner or renewed by its holder since approval",
}
_EVENT_REFUSED = (
    "; the reclaim event was NOT published: Redis refused PUBLISH on the release channel (ACL)"
)


@dataclass(frozen=True, slots=True)
class Reply:
    """One script reply, decoded; what `pttl`, `why` and `number` carry depends on `code`."""

    code: Code
    pttl: int
    why: str
    number: int
    event: Event = Event.NONE

    @classmethod
    def decode(cls, raw: object) -> Reply | None:
        if not isinstance(raw, list) or len(raw) != 5:
            return None
        try:
            return cls(
                Code(int(raw[0])), int(raw[1]), _text(raw[2]), int(raw[3]), Event(_text(raw[4]))
            )
        except (TypeError, ValueError):
            return None

    def result(self, target: ApprovedLock, grace_ms: int | None) -> Result:
        result = self._outcome(target, grace_ms)
        if self.event is Event.SENT:
            return replace(result, event_published=True)
        if self.event is Event.REFUSED:
            return replace(result, detail=result.detail + _EVENT_REFUSED)
        return result

    def _outcome(self, target: ApprovedLock, grace_ms: int | None) -> Result:
        key = target.key
        match self.code:
            case Code.DELETED:
                return Result(
                    key,
                    Outcome.RELEASED,
                    "deleted: the approved holder still held it",
                    wake=tuple(wake_lines(target)),
                )
            case Code.DELAYED:
                return Result(
                    key,
                    Outcome.RELEASED,
                    f"lock-delay: TTL shortened to {self.pttl} ms; the key expires "
                    "then unless its holder renews it",
                    now_ttl_ms=self.pttl,
                )
            case Code.DELAY_KEPT:
                return Result(
                    key,
                    Outcome.RELEASED,
                    f"lock-delay: TTL already {self.pttl} ms, within the "
                    f"{grace_ms} ms grace, left as is",
                    now_ttl_ms=self.pttl,
                )
            case Code.EARLIER:
                try:
                    earlier = Outcome(self.why)
                except ValueError:
                    earlier = Outcome.ERROR
                return Result(key, earlier, f"decided by an earlier run: {self.why}", earlier=True)
            case Code.GONE:
                return Result(key, Outcome.ALREADY_GONE, "already gone: the key no longer exists")
            case Code.CHANGED:
                return Result(key, Outcome.SKIPPED_REACQUIRED, self._changed_detail(target))
            case Code.RENEWED:
                return Result(key, Outcome.RECOVERED, self._renewed_detail())
            case Code.REFUSED:
                return Result(
                    key,
                    Outcome.ERROR,
                    "not released: Redis refused the delete "
                    "(NOPERM: the ACL user may not run DEL or PEXPIRE); nothing changed",
                )
        return Result(key, Outcome.ERROR, f"not released: {UNEXPECTED}")  # MATCH: 'check' only

    def _changed_detail(self, target: ApprovedLock) -> str:
        if self.why == "count":
            return (
                f"skipped: the count is {self.number}, below the approved "
                f"{target.counter}, so the key was deleted and re-created"
            )
        if self.why == "count_grew":
            return (
                f"skipped: the count grew to {self.number} from the approved "
                f"{target.counter}: someone is still using it"
            )
        return _CHANGED.get(self.why, "skipped: changed since approval")

    def _renewed_detail(self) -> str:
        if self.why == "expiry_added":
            return (
                f"recovered: an expiry ({self.pttl} ms) was set on this lock since it was "
                "approved without one, so its owner looks alive; nothing changed"
            )
        if self.why == "expiry_removed":
            return (
                "recovered: the lock's expiry was removed since approval, so its owner looks "
                "alive; nothing changed"
            )
        return (
            f"recovered: the same holder renewed it since approval (TTL {self.pttl} ms, "
            f"about {max(self.number, 0)} ms expected); nothing changed"
        )


def _text(raw: object) -> str:
    return raw.decode() if isinstance(raw, bytes) else str(raw)
