"""What every decision click shares: who clicked, whether they may decide, what they are told.

Every click is authorised first; a refused person is told so, only them, and nothing else
happens (anyone else's click writes nothing). The message clicked on is only used to find the
case's message when Redis has no record of it; its content is never trusted. Our team is the
bot token's, from Bolt's `auth.test` at start.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from slack_bolt import BoltContext

from bot.cases.case import check_case_id
from bot.core.errors import CaseDecidedError, CaseError, LockguardError
from bot.core.model import TARGET_NAME
from bot.engine import Engine
from bot.slack.alerts import Notifier
from bot.slack.approvers import Approvers, Person, Verdict
from bot.slack.blocks.case_message import already_decided_text
from bot.slack.blocks.text import refusal_text
from bot.slack.case_posts import CasePosts
from bot.slack.chat import Chat
from bot.store.keyspace import case_key
from bot.store.message_refs import MessageRef
from bot.store.redis_errors import REDIS_FAILURES


def clicker(body: Mapping[str, Any], context: BoltContext) -> Person:
    user = body.get("user") or {}
    result = context.authorize_result
    channel = (
        (body.get("container") or {}).get("channel_id")
        or (body.get("channel") or {}).get("id")
        or ""
    )
    return Person(
        user=str(user.get("id") or ""),
        team=str(user.get("team_id") or ""),
        our_team=result.team_id if result is not None else None,
        channel=str(channel),
    )


def clicked_message(body: Mapping[str, Any]) -> MessageRef | None:
    container = body.get("container") or {}
    channel, ts = container.get("channel_id"), container.get("message_ts")
    if isinstance(channel, str) and isinstance(ts, str) and channel and ts:
        return MessageRef(channel, ts)
    return None


class Decider:
    def __init__(
        self,
        engine: Engine,
        posts: CasePosts,
        approvers: Approvers,
        notifier: Notifier,
        chat: Chat,
    ) -> None:
        self.engine = engine
        self.posts = posts
        self.notifier = notifier
        self._approvers = approvers
        self._chat = chat

    def allowed(self, who: Person, case_id: str) -> bool:
        """May `who` decide? A refused person is told why, only them."""
        verdict = self._approvers.check(who.user, who.team, who.our_team)
        if not verdict.allowed:
            self.tell(who, case_id, verdict.refusal)
        return verdict.allowed

    def quick_verdict(self, who: Person) -> Verdict | None:
        """The verdict when it needs no call to Slack, else None (`allowed` asks, on the pool)."""
        return self._approvers.quick_check(who.user, who.team, who.our_team)

    def refused(
        self, who: Person, case_id: str, exc: LockguardError, shown: MessageRef | None
    ) -> None:
        """`who` is told why the engine refused (who decided first, if so)."""
        self.notifier.error_seen(exc)
        if not isinstance(exc, CaseDecidedError):
            self.tell(who, case_id, refusal_text(str(exc)))
            return
        try:
            case = self.engine.case(case_id)
            text = already_decided_text(case, now_ms=self.engine.now_ms())
        except LockguardError:
            text = refusal_text(str(exc))
        self.tell(who, case_id, text)
        self.refresh(case_id, shown)  # the message may not show the decision yet

    def adopt(self, case_id: str, shown: MessageRef | None, *, relist: bool = False) -> bool:
        """A modal opened from `shown`: its submission finds that message. Only for a person
        already authorised."""
        if shown is None:
            return False
        try:
            return self.posts.adopt(case_id, shown, relist=relist)
        except LockguardError as exc:  # no such case (refused later), or Redis: logged
            self.notifier.error_seen(exc)
            return False

    def refresh(
        self, case_id: str, shown: MessageRef | None, progress: tuple[int, int] | None = None
    ) -> None:
        try:
            self.posts.refresh(case_id, shown, progress=progress)
        except LockguardError as exc:  # decided in Redis; the message catches up next time
            self.notifier.error_seen(exc)

    def tell(self, who: Person, case_id: str, text: str) -> None:
        channel = who.channel
        if not channel:
            try:
                ref = self.posts.where(case_id)
            except LockguardError:
                ref = None
            channel = ref.channel if ref is not None else self.notifier.channel
        self._chat.ephemeral(channel, who.user, text)


class Router:
    """Which `Decider` a click acts on: the one of the Redis that holds the case.

    The case id and a named target are hostile: a malformed id goes to `home`, which refuses it
    without any lookup; a named target is the only one looked in, and refused (not echoed)
    unless it holds the case. Without a name, every up target is looked in; two holding the same
    id are told apart by the message clicked on, else the click is refused and nothing decided."""

    def __init__(self, home: Decider) -> None:
        self.home = home
        self._targets: list[tuple[str, Decider, Callable[[], bool]]] = []

    def add(self, name: str, decider: Decider, up: Callable[[], bool]) -> None:
        self._targets.append((name, decider, up))

    def name_of(self, decider: Decider) -> str | None:
        return next((n for n, d, _ in self._targets if d is decider), None)

    def pick(self, case_id: str, shown: MessageRef | None, target: str | None = None) -> Decider:
        if not self._targets:
            return self.home
        try:
            check_case_id(case_id)
        except CaseError:
            return self.home
        if target is not None:
            return self._named(case_id, target)
        holding = [(n, d) for n, d, up in self._targets if up() and _holds(d, case_id)]
        if len(holding) > 1 and shown is not None:
            holding = [(n, d) for n, d in holding if _message_of(d, case_id) == shown] or holding
        if len(holding) == 1:
            return holding[0][1]
        if not holding:
            return self.home
        names = ", ".join(n for n, _ in holding)
        raise CaseError(
            f"case {case_id} is open on several targets ({names}); nothing was decided: "
            f"decide it with `lockguard approve` or `reject` naming the target"
        )

    def _named(self, case_id: str, target: str) -> Decider:
        named = TARGET_NAME.fullmatch(target) is not None
        found = [d for n, d, _ in self._targets if named and n == target]
        if not found:
            raise CaseError(
                f"case {case_id}: the message clicked on names no target lockguard has; "
                "nothing was decided"
            )
        try:
            held = bool(found[0].engine.client.exists(case_key(case_id)))
        except REDIS_FAILURES:
            return found[0]  # its engine says what is wrong with its Redis
        if not held:
            raise CaseError(f"case {case_id} is not on target {target}; nothing was decided")
        return found[0]


def _holds(decider: Decider, case_id: str) -> bool:
    try:
        return bool(decider.engine.client.exists(case_key(case_id)))
    except REDIS_FAILURES:
        return False


def _message_of(decider: Decider, case_id: str) -> MessageRef | None:
    try:
        return decider.posts.where(case_id)
    except LockguardError:
        return None
