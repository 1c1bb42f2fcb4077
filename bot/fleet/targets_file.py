"""`LOCKGUARD_TARGETS_FILE`: the YAML file naming every Redis of the fleet, read and checked once.

```yaml
targets:
  - name: orders                  # [a-z0-9-]{1,40}, unique
    url: redis://10.0.0.5:6379/0  # or cluster: true + url, or sentinels: [...] + master: NAME
    password_file: /run/secrets/orders-redis
    tls: {ca_file: ca.pem, cert_file: client.pem, key_file: client.key}
    patterns: ["lock:*"]          # else LOCKGUARD_LOCK_PATTERNS
    labels: {team: payments}
    channel: C0PAYMENTS           # else LOCKGUARD_SLACK_CHANNEL
    schedule: "every 5m"          # else LOCKGUARD_SCAN_SCHEDULE
```

Relative paths start from the file's folder. A bad file is one ConfigError (exit 2) naming each
bad entry and what is wrong, before any Redis is touched (docs/fleet.md).
"""

from __future__ import annotations

import os
import sys
from typing import Any, TextIO

import yaml  # type: ignore[import-untyped]  # no stubs installed; checked by hand below

from bot.config import Settings
from bot.core.errors import ConfigError
from bot.core.files import read_regular
from bot.fleet.entry import (
    CONNECTION_FIELDS,
    EntryError,
    closest,
    entry_name,
    field_text,
    target_of,
)
from bot.fleet.target import Target, implicit_target

MAX_FILE_BYTES = 1 << 20
MAX_TARGETS = 1000
_TOP = {"targets": None}


class _Loader(yaml.SafeLoader):  # type: ignore[misc]
    """`yaml.safe_load`, but a key given twice is an error (PyYAML keeps the last silently: a
    second `url` would win unseen), and so is an alias (`*name`): a few aliases of one long
    string let a small file expand into gigabytes."""

    def compose_node(self, parent: yaml.Node | None, index: object) -> yaml.Node:
        if self.check_event(yaml.AliasEvent):
            event = self.get_event()
            raise yaml.composer.ComposerError(
                None,
                None,
                "aliases (*name) are not allowed: write each value out",
                event.start_mark,
            )
        node: yaml.Node = super().compose_node(parent, index)
        return node

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[object] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, str) and key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"field {key[:40]!r} given twice", key_node.start_mark
                )
            seen.add(key if isinstance(key, str) else id(key_node))
        mapping: dict[Any, Any] = super().construct_mapping(node, deep=deep)
        return mapping


def load_fleet(settings: Settings, err: TextIO | None = None) -> list[Target]:
    """Every target, in the file's order (without a file, the implicit one), or ConfigError;
    touches no Redis. REDIS_* connection variables set beside the file: a warning on `err`."""
    if not settings.targets_file:
        return [implicit_target(settings)]
    path = os.path.abspath(os.path.expanduser(settings.targets_file))
    entries = _entries(path, read_text(path))
    base = os.path.dirname(path)
    targets: list[Target] = []
    problems: list[str] = []
    first: dict[str, int] = {}
    for i, entry in enumerate(entries):
        name = entry_name(entry)
        where = f"{path}: targets[{i}]" + (f" ({name})" if name else "")
        try:
            target = target_of(entry, settings, base)
        except EntryError as exc:
            problems += [f"{where}: {p}" for p in exc.problems]
            continue
        if target.name in first:
            problems.append(
                f"{where}: name: {target.name!r} is already the name of "
                f"targets[{first[target.name]}]; each target's name must be unique"
            )
            continue
        first[target.name] = i
        targets.append(target)
    if problems:
        raise ConfigError(
            "invalid targets file (LOCKGUARD_TARGETS_FILE):\n  " + "\n  ".join(problems)
        )
    unused = unused_variables(settings)
    if unused:
        print(
            f"lockguard: warning: {', '.join(unused)} not used: LOCKGUARD_TARGETS_FILE names the "
            "Redis (each target's url, cluster or sentinels, password_file and tls)",
            file=err or sys.stderr,
        )
    return targets


def unused_variables(settings: Settings) -> list[str]:
    """The environment's REDIS_* connection variables that are set (the file overrides them)."""
    fields = type(settings).model_fields
    return [
        str(info.alias)
        for name, info in fields.items()
        if name in CONNECTION_FIELDS and name in settings.model_fields_set
    ]


def read_text(path: str) -> str:
    say = f"LOCKGUARD_TARGETS_FILE: {path}"
    if not os.path.exists(path):
        raise ConfigError(f"{say}: no such file")
    if os.path.isdir(path):
        raise ConfigError(f"{say}: is a folder, expected a YAML file")
    try:
        raw = read_regular(path, MAX_FILE_BYTES)
    except ValueError as exc:
        raise ConfigError(f"LOCKGUARD_TARGETS_FILE: {exc}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{say}: not UTF-8 text (byte {exc.start})") from None


def _entries(path: str, text: str) -> list[object]:
    """The `targets:` list, or ConfigError. A YAML error names its line and column, never the
    text there (a line could hold a secret)."""
    try:
        doc = yaml.load(text, Loader=_Loader)  # a SafeLoader
    except RecursionError:
        raise ConfigError(f"{path}: YAML nested too deeply; expected a list of targets") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "not valid YAML"
        raise ConfigError(f"{path}: YAML error{at}: {problem}") from None
    example = "expected `targets:` with a list of targets (name, url, ...)"
    if not isinstance(doc, dict):
        raise ConfigError(
            f"{path}: {example}; got {'nothing' if doc is None else type(doc).__name__}"
        )
    for key in doc:
        if key != "targets":
            raise ConfigError(
                f"{path}: {field_text(key)}: unknown field; {closest(str(key)[:40], _TOP)}"
            )
    entries = doc.get("targets")
    if not isinstance(entries, list):
        raise ConfigError(f"{path}: targets: {example}")
    if not entries:
        raise ConfigError(f"{path}: targets: the list is empty; {example}")
    if len(entries) > MAX_TARGETS:
        raise ConfigError(f"{path}: targets: {len(entries)} targets; at most {MAX_TARGETS}")
    return entries
