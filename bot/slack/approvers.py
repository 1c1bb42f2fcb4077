"""Who may decide a case, run a slash scan, or view status: checked before the engine.

Refusing whenever a check cannot be made (never allowing by accident): the person's team must
be the bot token's (in a Slack Connect channel other organisations see the buttons too); then,
unless `LOCKGUARD_APPROVERS=*`, they must be listed or in the user group, whose members are
cached for a minute. If Slack will not say who is in the group, the answer is a refusal. Nobody
named (and no `*`) refuses everyone: `serve` refuses to start that way, and anything else that
builds the Slack app gets no one who may decide, never everyone.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from slack_sdk import WebClient

from bot.core import logs
from bot.slack.blocks.case_message import approvers_note, not_approver_text
from bot.slack.blocks.text import code
from bot.slack.chat import error_code, slack_errors
from bot.slack.slack_settings import ANYONE

#: How long a user group's members are trusted before Slack is asked again.
GROUP_CACHE_SECONDS = 60.0
_log = logs.logger("slack.approvers")


@dataclass(frozen=True, slots=True)
class Verdict:
    """`allowed`, or the mrkdwn to tell the refused clicker (ephemeral)."""

    allowed: bool
    refusal: str = ""


ALLOWED = Verdict(True)
NOBODY_NAMED = "No one is named to decide (LOCKGUARD_APPROVERS, LOCKGUARD_APPROVER_GROUP)."


@dataclass(frozen=True, slots=True)
class Person:
    """Who acted; `channel` to tell them in ("": the case's message channel)."""

    user: str
    team: str
    our_team: str | None
    channel: str = ""


class Approvers:
    def __init__(
        self,
        client: WebClient,
        users: tuple[str, ...] = (),
        group: str | None = None,
        *,
        required: int = 1,
        cache_seconds: float = GROUP_CACHE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = client
        #: `*` among the users: any member of the channel may decide.
        self.anyone = ANYONE in users
        users = tuple(u for u in users if u != ANYONE)
        self.users = frozenset(users)
        self._users_shown = users
        self.group = group or ""
        self.required = required
        self._cache_seconds = cache_seconds
        self._clock = clock
        self._members: frozenset[str] = frozenset()
        self._members_until = 0.0
        self._lock = threading.Lock()

    def note(self, *, notify: bool = True) -> str:
        if not (self.anyone or self.users or self.group):
            return NOBODY_NAMED
        return approvers_note(self._users_shown, self.group, self.required, notify=notify)

    def check(self, user_id: str, user_team: str, our_team: str | None) -> Verdict:
        quick = self.quick_check(user_id, user_team, our_team)
        if quick is not None:
            return quick
        members = self._group_members()
        if isinstance(members, str):
            return Verdict(
                False,
                f"Not done: lockguard could not check the approver group "
                f"{code(self.group)} ({members}), so it refuses rather "
                "than guess. Try again in a minute.",
            )
        return ALLOWED if user_id in members else self._refused()

    def quick_check(self, user_id: str, user_team: str, our_team: str | None) -> Verdict | None:
        """The verdict when it needs no call to Slack, else None: then `check` asks Slack."""
        if not our_team or user_team != our_team:
            return Verdict(
                False,
                "Only members of the workspace that runs lockguard may decide "
                "its cases; this click came from another team.",
            )
        if self.anyone or user_id in self.users:
            return ALLOWED
        if not self.group:
            return self._refused()
        with self._lock:
            if self._clock() < self._members_until:
                return ALLOWED if user_id in self._members else self._refused()
        return None

    def _refused(self) -> Verdict:
        return Verdict(False, not_approver_text(self.note(notify=False)))

    def _group_members(self) -> frozenset[str] | str:
        """The members, or why Slack would not say (nothing is cached then)."""
        with self._lock:
            if self._clock() < self._members_until:
                return self._members
        try:
            reply = self._client.usergroups_users_list(usergroup=self.group)
        except slack_errors() as exc:
            error = error_code(exc)
            logs.event(
                _log, "approver_group_unreadable", logging.WARNING, group=self.group, error=error
            )
            return f"Slack answered {code(error)}"
        users = reply.get("users")
        if not isinstance(users, list):
            return "Slack's answer had no member list"
        members = frozenset(str(u) for u in users)
        with self._lock:
            self._members, self._members_until = members, self._clock() + self._cache_seconds
        return members


class Scanners(Approvers):
    """Who may run `/lockguard scan`: the same checks over `LOCKGUARD_SCANNERS`."""

    def _refused(self) -> Verdict:
        names = [code(u[:40]) for u in sorted(self.users)]
        if self.group:
            names.append(f"members of the group {code(self.group[:40])}")
        return Verdict(
            False,
            "Not started: you may not run `/lockguard scan` here. Scans may "
            f"be started by {', '.join(names)} (LOCKGUARD_SCANNERS, else the "
            "approvers).",
        )


def scanners_of(
    client: WebClient, scanners: tuple[str, ...], scanner_group: str | None, approvers: Approvers
) -> Scanners:
    if scanners or scanner_group:
        return Scanners(client, scanners, scanner_group)
    users = (ANYONE,) if approvers.anyone else tuple(sorted(approvers.users))
    return Scanners(client, users, approvers.group)


#: Said to someone of another workspace, before anything is read.
OTHER_TEAM = (
    "lockguard answers only members of the workspace that runs it; this came from another team."
)


def same_team(team: str, our_team: str | None, enterprise: str = "", ours_e: str = "") -> bool:
    """Our workspace (and, on Enterprise Grid, our organisation)."""
    return bool(our_team) and team == our_team and (not ours_e or enterprise in ("", ours_e))


class Viewers:
    """Who may see status, cases and the Home tab's details; anyone else is told to ask in
    `channel`, and nothing about the locks, cases, targets or patterns."""

    def __init__(self, groups: tuple[Approvers, ...], channel: str) -> None:
        self.groups = groups
        self.channel = channel

    def check(self, user: str, team: str, our_team: str | None) -> Verdict:
        if not same_team(team, our_team):
            return Verdict(False, OTHER_TEAM)
        for group in self.groups:
            if group.check(user, team, our_team).allowed:
                return ALLOWED
        where = f" in <#{self.channel}>" if self.channel else ""
        return Verdict(
            False,
            "lockguard shows its status, cases and locks to its approvers and scanners "
            f"(LOCKGUARD_VIEWERS); ask{where}.",
        )


def viewers_of(
    client: WebClient,
    viewers: tuple[str, ...],
    viewer_group: str | None,
    approvers: Approvers,
    scanners: Scanners,
    channel: str,
) -> Viewers:
    if viewers or viewer_group:
        return Viewers((Approvers(client, viewers, viewer_group),), channel)
    return Viewers((approvers, scanners), channel)
