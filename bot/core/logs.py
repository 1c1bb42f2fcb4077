"""Structured log lines on stderr: an event name plus fields (`LOCKGUARD_LOG_FORMAT`,
`LOCKGUARD_LOG_LEVEL`: docs/settings.md).

Callers pass fields already safe (keys escaped, no token bytes, no secrets); whatever they pass,
every value is cut at VALUE_LIMIT characters and the text format escapes every control character,
so a hostile value can neither forge a line nor drive a terminal. As a second line of defence,
every secret given to `configure` is scrubbed from each value and from the finished line.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Mapping
from itertools import islice
from typing import Any, TextIO

from bot.core.clock import iso_utc

ROOT = "lockguard"
LEVELS = ("debug", "info", "warning", "error")
FORMATS = ("text", "json")
_HANDLER_NAME = "lockguard-stderr"
#: Values are cut at this many characters (`…(+N)`), lists and objects at this many items.
VALUE_LIMIT = 200
VALUE_ITEMS = 50


def logger(name: str) -> logging.Logger:
    return logging.getLogger(f"{ROOT}.{name}")


def event(log: logging.Logger, name: str, level: int = logging.INFO, **fields: Any) -> None:
    if log.isEnabledFor(level):
        log.log(level, name, extra={"lockguard_fields": fields})


class _Formatter(logging.Formatter):
    """Every field of a line, the event name and keys included, is bounded and inert: no value
    can end a line, move the cursor or pose as another field."""

    def __init__(self, fmt: str, secrets: tuple[str, ...]) -> None:
        super().__init__()
        self.json = fmt == "json"
        self.secrets = tuple(s for s in secrets if s)

    def format(self, record: logging.LogRecord) -> str:
        fields: dict[str, Any] = getattr(record, "lockguard_fields", {})
        when = iso_utc(int(record.created * 1000))
        if self.json:
            line = json.dumps(
                {
                    "ts": when,
                    "level": record.levelname.lower(),
                    "logger": record.name,
                    "event": self._bounded(record.getMessage()),
                    **{_cut(k): self._bounded(v) for k, v in fields.items()},
                },
                separators=(",", ":"),
            )
        else:
            parts = [
                when,
                record.levelname.lower(),
                _field(self._scrub(record.getMessage()), _QUOTE_EVENT),
            ]
            parts += [f"{_field(k, _QUOTE_STR)}={self._text(v)}" for k, v in fields.items()]
            line = " ".join(parts)
        for s in self.secrets:
            line = line.replace(s, "***")
        return line

    def _scrub(self, text: str) -> str:
        """Secrets out before a value is cut (a cut secret would escape the final scrub)."""
        for s in self.secrets:
            text = text.replace(s, "***")
        return text

    def _bounded(self, value: Any) -> Any:
        """`value` as JSON-ready data: strings cut, containers cut, anything else as its text."""
        if value is None or isinstance(value, bool | int | float):
            return value
        if isinstance(value, str):
            return _cut(self._scrub(value))
        if isinstance(value, Mapping):
            out = {
                _cut(self._scrub(str(k))): self._bounded(v)
                for k, v in islice(value.items(), VALUE_ITEMS)
            }
            if len(value) > VALUE_ITEMS:
                out["…"] = f"+{len(value) - VALUE_ITEMS} items"
            return out
        if isinstance(value, list | tuple | set | frozenset):
            items = [self._bounded(v) for v in islice(value, VALUE_ITEMS)]
            more = len(value) - VALUE_ITEMS
            return [*items, f"…(+{more} items)"] if more > 0 else items
        return _cut(self._scrub(str(value)))

    def _text(self, value: Any) -> str:
        if isinstance(value, str):
            return _field(self._scrub(value), _QUOTE_STR)
        text = json.dumps(self._bounded(value), separators=(",", ":"), ensure_ascii=False)
        return _field(text, _QUOTE_JSON)  # JSON leaves U+007F-U+009F raw: `_field` escapes them


#: A string value is written bare unless it has one of these (or an unprintable character).
_QUOTE_STR = frozenset(' "=\\')
#: The event (a sentence, for a library's own line) is bare unless it has one of these.
_QUOTE_EVENT = frozenset('"\\')
#: A value written as JSON (numbers, lists, objects) is bare unless it has one of these.
_QUOTE_JSON = frozenset(" =")


def _cut(text: str, limit: int = VALUE_LIMIT) -> str:
    return text if len(text) <= limit else f"{text[:limit]}{_note(len(text) - limit)}"


def _note(left_out: int) -> str:
    return f"…(+{left_out})"


def _field(text: str, quote: frozenset[str]) -> str:
    """One field of a text line: bare when plain, else a JSON string literal (unprintable
    characters escaped); cut at VALUE_LIMIT characters either way."""
    if text and text.isprintable() and quote.isdisjoint(text):
        return _cut(text)
    out: list[str] = []
    size = 0
    for i, ch in enumerate(text):
        piece = ch if ch.isprintable() and ch not in '"\\' else json.dumps(ch)[1:-1]
        if size + len(piece) > VALUE_LIMIT:
            out.append(_note(len(text) - i))
            break
        out.append(piece)
        size += len(piece)
    return '"' + "".join(out) + '"'


class _Stderr(logging.StreamHandler):  # type: ignore[type-arg]
    """stderr as it is when a line is written, not when logging was configured (a test's
    capture or a daemon may swap it)."""

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, value: TextIO) -> None:
        pass  # always the current sys.stderr


def configure(
    level: str = "warning",
    fmt: str = "text",
    secrets: tuple[str, ...] = (),
    stream: TextIO | None = None,
) -> None:
    """Send lockguard's events to `stream` (stderr); calling it again replaces the handler."""
    if level not in LEVELS:
        raise ValueError(f"log level must be one of {', '.join(LEVELS)}")
    if fmt not in FORMATS:
        raise ValueError(f"log format must be one of {', '.join(FORMATS)}")
    root = logging.getLogger(ROOT)
    for h in list(root.handlers):
        if h.get_name() == _HANDLER_NAME:
            root.removeHandler(h)
    handler: logging.Handler = logging.StreamHandler(stream) if stream is not None else _Stderr()
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(_Formatter(fmt, secrets))
    root.addHandler(handler)
    root.setLevel(level.upper())
    root.propagate = False
