"""`lockguard config`: every effective setting and where it came from, as a table or `--json`;
exit 0 once the settings load. A secret is `***` when set, never its length; so is REDIS_URL's
password (in the userinfo or `?password=`)."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TextIO
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from pydantic import SecretStr

from bot.config import (
    ALIASES,
    SECRET_VARIABLES,
    Settings,
    env_file_values,
    known_variables,
    secret_file_paths,
    unknown_variables,
)
from bot.core.display import escape

ENV_FILE = ".env"
MASK = "***"
_VALUE_WIDTH = 60


class TargetView(Protocol):
    """What `config` shows of a fleet's target (`bot.fleet.Target`, which sits above)."""

    @property
    def name(self) -> str: ...
    @property
    def settings(self) -> Settings: ...
    @property
    def labels(self) -> Mapping[str, str]: ...
    @property
    def implicit(self) -> bool: ...
    @property
    def redis(self) -> str: ...


@dataclass(frozen=True, slots=True)
class Row:
    """One setting: its variable, its value as JSON has it (secrets masked), where it came from
    (`environment`, `.env`, `default`, or `NAME_FILE (path)` for a secret read from a file)."""

    name: str
    value: str | int | float | bool | None
    source: str
    secret: bool


def add_config_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "config", help="the effective settings and where each came from, secrets masked"
    )
    p.add_argument("--json", action="store_true", help="one JSON object for scripts")
    p.set_defaults(func=cmd_config)


def cmd_config(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    environ, file_values = os.environ, env_file_values(ENV_FILE)
    found = rows(settings, environ, file_values)
    env_file = os.path.abspath(ENV_FILE) if os.path.isfile(ENV_FILE) else None
    fleet: Sequence[TargetView] = [t for t in getattr(args, "fleet", None) or () if not t.implicit]
    if args.json:
        body: dict[str, Any] = {
            "redis": settings.endpoint,
            "mode": settings.mode,
            "env_file": env_file,
            "settings": [
                {"name": r.name, "value": r.value, "source": r.source, "secret": r.secret}
                for r in found
            ],
            "warnings": unknown_variables(environ, file_values),
        }
        if fleet:
            body["targets"] = [target_json(t) for t in fleet]
        out.write(json.dumps(body, indent=1) + "\n")
    else:
        out.write(config_text(found, settings.endpoint, env_file) + "\n")
        if fleet:
            out.write(targets_text(fleet, os.path.abspath(settings.targets_file or "")) + "\n")
    return 0


def target_json(t: TargetView) -> dict[str, Any]:
    """A target of LOCKGUARD_TARGETS_FILE for `config --json`: never a secret."""
    s = t.settings
    return {
        "name": t.name,
        "redis": t.redis,
        "mode": s.mode,
        "password": MASK if s.redis_password is not None else None,
        "patterns": [escape(p) for p in s.patterns],
        "labels": dict(t.labels),
        "channel": s.slack_channel,
        "schedule": s.scan_schedule,
    }


def targets_text(fleet: Sequence[TargetView], path: str) -> str:
    lines = ["", f"{len(fleet)} target(s) in LOCKGUARD_TARGETS_FILE {path}:"]
    for t in fleet:
        j = target_json(t)
        labels = ", ".join(f"{k}={v}" for k, v in t.labels.items())
        lines.append(
            f"  {t.name}: {t.redis} ({j['mode']}); patterns {', '.join(j['patterns'])}"
            + (f"; labels {labels}" if labels else "")
            + (f"; channel {j['channel']}" if j["channel"] else "")
            + f"; schedule {j['schedule']}"
            + ("; password from password_file" if j["password"] else "")
        )
    lines.append(
        "  (with the targets file, REDIS_URL, REDIS_HOST, REDIS_PORT and the other REDIS_* "
        "connection settings above are not used)"
    )
    return "\n".join(lines)


def rows(
    settings: Settings, environ: Mapping[str, str], file_values: Mapping[str, str | None]
) -> list[Row]:
    """Every setting in the settings' order, with its source (the environment wins over `.env`,
    as when the settings are read)."""
    in_env = {k.upper() for k in environ}
    in_file = {k.upper() for k in file_values}
    from_files = secret_file_paths(environ, file_values)
    by_name = {(f.alias or n).upper(): n for n, f in type(settings).model_fields.items()}
    out = []
    for name in known_variables():
        source = "environment" if name in in_env else ".env" if name in in_file else "default"
        for alias in (a for a, n in ALIASES.items() if n == name):
            if alias in in_env or alias in in_file:
                source = f"{'environment' if alias in in_env else '.env'} ({alias})"
        if name in from_files:  # loaded, so NAME itself is blank or unset
            variable, path = from_files[name]
            source = f"{variable} ({path if path.isprintable() else repr(path)[1:-1]})"
        raw = getattr(settings, by_name[name])
        out.append(Row(name, _value(name, raw), source, name in SECRET_VARIABLES))
    return out


def _value(name: str, raw: object) -> str | int | float | bool | None:
    if name == "REDIS_URL":
        return masked_url(raw) if isinstance(raw, str) else None
    if isinstance(raw, SecretStr):
        return MASK if raw.get_secret_value() else None
    if name in SECRET_VARIABLES:
        return MASK if raw else None
    if raw is None or isinstance(raw, (str, int, float, bool)):
        return raw
    return str(raw)


def masked_url(url: str) -> str:
    """`redis://user:pw@host:6379/0?password=pw` -> `redis://user:***@host:6379/0?password=***`."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        user = userinfo.split(":", 1)[0]
        netloc = f"{user}:{MASK}@{host}" if ":" in userinfo else f"{user}@{host}"
    query = [(k, MASK if k.lower() == "password" else v) for k, v in parse_qsl(parts.query)]
    return urlunsplit((parts.scheme, netloc, parts.path, urlencode(query, safe="*"), ""))


def config_text(found: list[Row], endpoint: str, env_file: str | None) -> str:
    width = max(len(r.name) for r in found)
    shown = [_text(r.value, r.source) for r in found]
    wide = min(_VALUE_WIDTH, max(len("VALUE"), *(len(v) for v in shown)))
    head = f"lockguard config: Redis {endpoint}; .env file: " + (
        env_file or f"none ({os.path.join(os.getcwd(), ENV_FILE)} does not exist)"
    )
    lines = [head, "", f"{'VARIABLE':<{width}}  {'VALUE':<{wide}}  FROM"]
    for r, value in zip(found, shown, strict=True):
        lines.append(f"{r.name:<{width}}  {value:<{wide}}  {r.source}")
    changed = sum(r.source != "default" for r in found)
    lines += ["", f"{changed} of {len(found)} setting(s) set; the rest are defaults"]
    return "\n".join(lines)


def _text(value: str | int | float | bool | None, source: str) -> str:
    if value is None or (value == "" and source == "default"):
        return "(unset)"
    if isinstance(value, bool):
        return "true" if value else "false"
    text = str(value)
    if not text:
        return "(empty)"
    if not text.isprintable():
        text = repr(text)[1:-1]
    return text if len(text) <= _VALUE_WIDTH else text[: _VALUE_WIDTH - 3] + "..."
