"""Structured log lines: one per scan, case opened, decision, release outcome and error.

Every line is an event name plus fields, written to stderr (the CLI's own output stays on
stdout, as it was). `LOCKGUARD_LOG_FORMAT=text` (default) gives `time level event k=v ...`;
`json` gives one JSON object a line, for log shippers. `LOCKGUARD_LOG_LEVEL` (default `warning`:
a CLI run prints only what goes wrong; `info` shows every event).

Fields are given by the caller already safe: lock keys escaped (`bot.display.escape`), no value
or token bytes, no secrets. As a second line of defence the handler scrubs every secret it was
given (`configure(secrets=...)`) from the finished line.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any, TextIO

from bot.clock import iso_utc

ROOT = "lockguard"
LEVELS = ("debug", "info", "warning", "error")
FORMATS = ("text", "json")
_HANDLER_NAME = "lockguard-stderr"


def logger(name: str) -> logging.Logger:
    """The logger of one part of lockguard: `lockguard.<name>`."""
    return logging.getLogger(f"{ROOT}.{name}")


def event(log: logging.Logger, name: str, level: int = logging.INFO, **fields: Any) -> None:
    """Log one event with its fields (JSON-serialisable values)."""
    if log.isEnabledFor(level):
        log.log(level, name, extra={"lockguard_fields": fields})


class _Formatter(logging.Formatter):
    def __init__(self, fmt: str, secrets: tuple[str, ...]) -> None:
        super().__init__()
        self.json = fmt == "json"
        self.secrets = tuple(s for s in secrets if s)

    def format(self, record: logging.LogRecord) -> str:
        fields: dict[str, Any] = getattr(record, "lockguard_fields", {})
        when = iso_utc(int(record.created * 1000))
        if self.json:
            line = json.dumps({"ts": when, "level": record.levelname.lower(),
                               "logger": record.name, "event": record.getMessage(), **fields},
                              separators=(",", ":"), default=str)
        else:
            parts = [when, record.levelname.lower(), record.getMessage()]
            parts += [f"{k}={_text(v)}" for k, v in fields.items()]
            line = " ".join(parts)
        for s in self.secrets:
            line = line.replace(s, "***")
        return line


def _text(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value) if (not value or any(c in value for c in ' "=\n')) else value
    return json.dumps(value, separators=(",", ":"), default=str)


def configure(level: str = "warning", fmt: str = "text", secrets: tuple[str, ...] = (),
              stream: TextIO | None = None) -> None:
    """Send lockguard's events to `stream` (stderr). Called once by each entry point; calling
    it again replaces the handler rather than adding a second one."""
    if level not in LEVELS:
        raise ValueError(f"log level must be one of {', '.join(LEVELS)}")
    if fmt not in FORMATS:
        raise ValueError(f"log format must be one of {', '.join(FORMATS)}")
    root = logging.getLogger(ROOT)
    for h in list(root.handlers):
        if h.get_name() == _HANDLER_NAME:
            root.removeHandler(h)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(_Formatter(fmt, secrets))
    root.addHandler(handler)
    root.setLevel(level.upper())
    root.propagate = False
