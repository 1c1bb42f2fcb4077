"""What went wrong, in `LOCKGUARD_SLACK_CHANNEL`: an alert, the one message of an outage, and its
recovery. Details are clean sentences, never a traceback.

An outage (Redis unreachable, a scheduled scan failing, scans overdue, the digest not posted) has
one message, rewritten in place as problems join or clear; when the last clears, one recovery
message is posted.
"""

from __future__ import annotations

from collections.abc import Sequence

from bot.slack.blocks.kit import Block, Message, context, header, message, section
from bot.slack.blocks.text import code, plain

#: Problems listed in one message at most (the others are counted).
SHOWN = 10
Problem = tuple[str, str]  # (title, detail)


def alert_message(title: str, detail: str, *, endpoint: str) -> Message:
    # The title may carry a configured name (a watched key): escaped in the notification text.
    return message(
        f"lockguard: {plain(title, 300)} ({plain(endpoint, 200)})",
        [
            header(f"lockguard: {title}"),
            section(plain(detail, 2900) or "(no detail)"),
            context(f"Redis {code(endpoint)}"),
        ],
    )


def outage_message(
    problems: Sequence[Problem], *, endpoint: str, cleared: Sequence[str] = ()
) -> Message:
    first = problems[0][0] if problems else "a problem"
    more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
    blocks: list[Block] = [header(f"lockguard: {first}{more}")]
    for title, detail in problems[:SHOWN]:
        blocks.append(section(f"*{plain(title, 300)}*\n{plain(detail, 2600) or '(no detail)'}"))
    if len(problems) > SHOWN:
        blocks.append(context(f"and {len(problems) - SHOWN} more problems"))
    if cleared:
        blocks.append(context("Cleared meanwhile: " + plain("; ".join(cleared), 1500)))
    blocks.append(context(f"Redis {code(endpoint)} · this message is updated as it changes"))
    titles = "; ".join(t for t, _ in problems[1:4])
    also = f" (+{len(problems) - 1} more: {plain(titles, 300)})" if more else ""
    return message(f"lockguard: {plain(first, 300)}{also} ({plain(endpoint, 200)})", blocks)


def outage_over_message(
    problems: Sequence[Problem], words: Sequence[str], *, endpoint: str
) -> Message:
    said = "; ".join(words) or "every problem cleared"
    blocks: list[Block] = [header("lockguard: resolved")]
    for title, _ in problems[:SHOWN]:
        blocks.append(section(f"~{plain(title, 300)}~"))
    blocks.append(section(f"Resolved: {plain(said, 2000)}."))
    blocks.append(context(f"Redis {code(endpoint)}"))
    return message(f"lockguard: resolved: {plain(said, 500)} ({plain(endpoint, 200)})", blocks)


def recovery_message(words: Sequence[str], *, endpoint: str) -> Message:
    said = "; ".join(words) or "every problem cleared"
    return message(
        f"lockguard: resolved: {plain(said, 500)} ({plain(endpoint, 200)})",
        [
            header("lockguard: resolved"),
            section(f"{plain(said, 2900)}."),
            context(f"Redis {code(endpoint)}"),
        ],
    )
