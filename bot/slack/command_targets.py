"""A fleet's targets for `/lockguard` (`bot.slack.commands`): `scan TARGET [pattern]` scans
that target (its Redis, its channel); a first word shaped like a target's name (`[a-z0-9-]`,
no `*` nor `:`) that names none gets the target names instead, the word escaped; anything else
is a pattern for the first target, as without a fleet. `status` lists every target and
`cases` every target's open cases (`bot.slack.blocks.status`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Generic, TypeVar

from bot.core.model import TARGET_NAME
from bot.slack.blocks.home import TargetHome
from bot.slack.blocks.kit import Message
from bot.slack.blocks.status import TargetLine, targets_blocks
from bot.slack.blocks.text import code, redis_text

#: A first word after `scan` that is meant as a target's name (patterns have `*`, `:`, ...).
TARGET_WORD = TARGET_NAME
#: Targets asked at once for `/lockguard cases` (a dead one holds one thread, for its timeout).
THREADS = 8
R = TypeVar("R")
T = TypeVar("T")


class CommandTargets(Generic[T]):
    """name -> the commands of that target (`T`: `Commands`); empty without a fleet."""

    def __init__(self) -> None:
        self.by_name: dict[str, T] = {}
        self.lines: Callable[[], Sequence[TargetLine]] | None = None
        #: Every target for the Home tab (`bot.slack.home_tab`); None without a fleet.
        self.homes: Callable[[], Sequence[TargetHome]] | None = None

    def route(self, home: T, rest: str) -> tuple[T, str, str]:
        """(whose scan, its pattern, a refusal to answer instead: "" when none)."""
        first, _, pattern = rest.partition(" ")
        if not self.by_name:
            return home, rest, ""
        if first in self.by_name:
            return self.by_name[first], pattern.strip(), ""
        if TARGET_WORD.fullmatch(first):
            names = ", ".join(code(n) for n in list(self.by_name)[:50])
            return (
                home,
                "",
                (
                    f"No target {redis_text(first, 40)}. Type `/lockguard scan TARGET [pattern]`, "
                    f"TARGET one of: {names}."
                ),
            )
        return home, rest, ""

    def each(self, work: Callable[[str, T], R]) -> list[R]:
        """`work(name, commands)` for every target, at most THREADS at once, in their order."""
        items = list(self.by_name.items())
        with ThreadPoolExecutor(
            max(1, min(THREADS, len(items))), thread_name_prefix="lockguard-slash-targets"
        ) as pool:
            return list(pool.map(lambda item: work(*item), items))

    def with_targets(self, message: Message) -> Message:
        """`/lockguard status` with the fleet's targets listed after it."""
        if self.lines is None:
            return message
        blocks: list[dict[str, Any]] = [*message.get("blocks", []), *targets_blocks(self.lines())]
        return {**message, "blocks": blocks}
