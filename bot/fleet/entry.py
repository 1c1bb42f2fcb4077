"""One entry of the targets file checked and turned into a `Target`.

Its fields become the variables they stand for (`url` is REDIS_URL, ...) over the environment's
settings without its Redis, validated again as `Settings`: the same checks and words as in the
environment, naming the file's field. The password is never in the file: a `url` holding one is
refused, and `password_file` names a file holding it.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any
from urllib.parse import parse_qs, urlsplit

from pydantic import SecretStr, ValidationError
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

from bot.config import Settings, format_validation_error, read_secret_file
from bot.core.model import TARGET_NAME
from bot.fleet.target import Target

#: Each field of an entry, and the variable it stands for (None: the entry's own).
FIELDS: Mapping[str, str | None] = MappingProxyType(
    {
        "name": None,
        "url": "REDIS_URL",
        "cluster": "REDIS_CLUSTER",
        "sentinels": "REDIS_SENTINELS",
        "master": "REDIS_SENTINEL_MASTER",
        "password_file": "REDIS_PASSWORD",
        "tls": None,
        "patterns": "LOCKGUARD_LOCK_PATTERNS",
        "labels": None,
        "channel": "LOCKGUARD_SLACK_CHANNEL",
        "schedule": "LOCKGUARD_SCAN_SCHEDULE",
    }
)
TLS_FIELDS: Mapping[str, str] = MappingProxyType(
    {
        "ca_file": "REDIS_TLS_CA_FILE",
        "cert_file": "REDIS_TLS_CERT_FILE",
        "key_file": "REDIS_TLS_KEY_FILE",
    }
)
#: The settings of where Redis is: a target's come from its entry, never the environment's.
CONNECTION_FIELDS = frozenset(
    {
        "redis_url",
        "redis_host",
        "redis_port",
        "redis_password",
        "redis_cluster",
        "redis_sentinels",
        "redis_sentinel_master",
        "redis_tls_ca_file",
        "redis_tls_cert_file",
        "redis_tls_key_file",
    }
)
_LABEL = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,39}")
MAX_LABELS, MAX_LABEL_VALUE, MAX_PATTERNS = 16, 100, 64
#: A label named so would clash with the `target` label every per-target metric carries.
RESERVED_LABELS = frozenset({"target"})
_VARIABLE = re.compile(r"\b(?:REDIS|LOCKGUARD)_[A-Z_]+\*?")
_SPOKEN = {
    **{env: name for name, env in FIELDS.items() if env},
    **{env: f"tls.{name}" for name, env in TLS_FIELDS.items()},
    "REDIS_TLS_*": "tls",
}


class TargetSettings(Settings):
    """`Settings` from the values given only: a target's settings never read the environment
    or `.env` again (its REDIS_* would leak into a target that names its own Redis)."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings,)


class EntryError(ValueError):
    """What is wrong with one entry: one line per problem, without the entry's prefix."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


def closest(name: str, known: Mapping[str, object]) -> str:
    """`; did you mean url?`, or what the known names are."""
    found = difflib.get_close_matches(name, list(known), n=1, cutoff=0.5)
    return f"did you mean {found[0]}?" if found else f"expected one of {', '.join(known)}"


def shown(value: object) -> str:
    """A value of the file quoted for a message: cut, control characters escaped."""
    return repr(str(value)[:40])


def field_text(key: object) -> str:
    """A field's name as the file has it, quoted when it is odd."""
    if isinstance(key, str) and key.isprintable() and 0 < len(key) <= 40:
        return key
    return shown(key)


def entry_name(entry: object) -> str | None:
    """The entry's name when it is a well-formed one (for messages), else None."""
    if isinstance(entry, Mapping):
        name = entry.get("name")
        if isinstance(name, str) and TARGET_NAME.fullmatch(name):
            return name
    return None


def target_of(entry: object, settings: Settings, base: str) -> Target:
    """The Target `entry` describes, or EntryError. `base`: the targets file's folder, which
    relative paths in it start from. Reads the password file; touches no Redis."""
    if not isinstance(entry, Mapping):
        raise EntryError([f"expected a mapping of name, url, ...; got {type(entry).__name__}"])
    problems = [
        f"{field_text(k)}: unknown field; {closest(str(k)[:40], FIELDS)}"
        for k in entry
        if k not in FIELDS
    ]
    name = entry.get("name")
    if not isinstance(name, str) or not TARGET_NAME.fullmatch(name):
        what = "missing" if name is None else f"got {shown(name)}"
        problems.append(f"name: expected 1 to 40 of a-z, 0-9 and -; {what}")
    env: dict[str, Any] = {}
    problems += _redis_fields(entry, env, base)
    problems += _lists(entry, env)
    labels, bad = _labels(entry.get("labels"))
    problems += bad
    for field in ("channel", "schedule"):
        if field in entry:
            if isinstance(entry[field], str):
                env[str(FIELDS[field])] = entry[field]
            else:
                problems.append(f"{field}: expected text, got {type(entry[field]).__name__}")
    try:
        validated = _validated(settings, env)
    except EntryError as exc:
        problems += exc.problems
    if problems:
        raise EntryError(problems)
    return Target(name=str(name), settings=validated, labels=MappingProxyType(labels))


def _redis_fields(  # noqa: C901, PLR0912 (each field of a target checked in turn, each problem kept)
    entry: Mapping[Any, Any], env: dict[str, Any], base: str
) -> list[str]:
    """url, cluster, sentinels + master, password_file and tls into `env`; the problems."""
    out: list[str] = []
    url, cluster, sentinels = entry.get("url"), entry.get("cluster", False), entry.get("sentinels")
    if url is not None:
        if not isinstance(url, str):
            out.append(f"url: expected text (redis://host:port/db), got {type(url).__name__}")
        elif _has_password(url):
            out.append(
                "url: holds a password; the password is never in the targets file: put it in a "
                "file of its own and name that file in password_file"
            )
        else:
            env["REDIS_URL"] = url
    elif sentinels is None:
        out.append(
            "url: missing: expected url (redis://host:port/db; with cluster: true any node of "
            "the cluster), or sentinels with master"
        )
    if not isinstance(cluster, bool):
        out.append(f"cluster: expected true or false, got {shown(cluster)}")
    elif cluster:
        env["REDIS_CLUSTER"] = True
    if sentinels is not None:
        if not isinstance(sentinels, list) or not sentinels:
            out.append("sentinels: expected a list of host:port, e.g. [10.0.0.1:26379]")
        elif not all(isinstance(s, str) and "," not in s for s in sentinels):
            out.append("sentinels: expected each entry as text host:port, e.g. 10.0.0.1:26379")
        else:
            env["REDIS_SENTINELS"] = ",".join(sentinels)
    if "master" in entry:
        if isinstance(entry["master"], str):
            env["REDIS_SENTINEL_MASTER"] = entry["master"]
        else:
            out.append(f"master: expected text, got {type(entry['master']).__name__}")
    if "password_file" in entry:
        try:
            env["REDIS_PASSWORD"] = SecretStr(read_password(entry["password_file"], base))
        except ValueError as exc:
            out.append(f"password_file: {exc}")
    out += _tls(entry.get("tls"), env, base)
    return out


def _has_password(url: str) -> bool:
    try:
        parts = urlsplit(url.strip())
        return bool(parts.password or parse_qs(parts.query).get("password"))
    except ValueError:  # not a URL: its own check says so, without quoting it
        return False


def read_password(path: object, base: str) -> str:
    """The password a password file holds (one trailing newline dropped), or ValueError naming
    the file and what is wrong, never its content."""
    if not isinstance(path, str) or not path.strip():
        raise ValueError("expected the path of a file holding the password")
    full = os.path.join(base, os.path.expanduser(path.strip()))
    text = read_secret_file(full)
    if not text.isprintable():
        raise ValueError(f"{full} holds control characters: expected the password alone")
    return text


def _tls(tls: object, env: dict[str, Any], base: str) -> list[str]:
    if tls is None:
        return []
    if not isinstance(tls, Mapping):
        return ["tls: expected a mapping of ca_file, cert_file, key_file"]
    out = [
        f"tls.{field_text(k)}: unknown field; {closest(str(k)[:40], TLS_FIELDS)}"
        for k in tls
        if k not in TLS_FIELDS
    ]
    for field, variable in TLS_FIELDS.items():
        value = tls.get(field)
        if value is None:
            continue
        if not isinstance(value, str) or not value.strip():
            out.append(f"tls.{field}: expected the path of a PEM file")
        else:
            env[variable] = os.path.join(base, os.path.expanduser(value.strip()))
    return out


def _lists(entry: Mapping[Any, Any], env: dict[str, Any]) -> list[str]:
    patterns = entry.get("patterns")
    if patterns is None:
        return []
    if not isinstance(patterns, list) or not patterns or len(patterns) > MAX_PATTERNS:
        return [f"patterns: expected a list of 1 to {MAX_PATTERNS} glob patterns, e.g. [lock:*]"]
    for p in patterns:
        if not isinstance(p, str):
            return [f"patterns: expected each pattern as text, got {type(p).__name__}"]
        if "," in p:
            return [f"patterns: {shown(p)} holds a comma: write it \\x2c"]
    env["LOCKGUARD_LOCK_PATTERNS"] = ",".join(patterns)
    return []


def _labels(labels: object) -> tuple[dict[str, str], list[str]]:
    if labels is None:
        return {}, []
    if not isinstance(labels, Mapping) or len(labels) > MAX_LABELS:
        return {}, [f"labels: expected a mapping of up to {MAX_LABELS} name: value"]
    out: dict[str, str] = {}
    problems: list[str] = []
    for k, v in labels.items():
        bad = _label_name_problem(k)
        if bad:
            problems.append(f"labels: {shown(k)} {bad}")
        elif not isinstance(v, str) or not v or len(v) > MAX_LABEL_VALUE or not v.isprintable():
            problems.append(
                f"labels.{k}: expected text of 1 to {MAX_LABEL_VALUE} printable characters "
                "(quote numbers and yes/no)"
            )
        else:
            out[k] = v
    return out, problems


def _label_name_problem(k: object) -> str:
    if not isinstance(k, str) or not _LABEL.fullmatch(k):
        return "is no label name: expected a letter or _ then up to 39 letters, digits or _"
    if k in RESERVED_LABELS:
        return "is reserved (every per-target metric has a `target` label)"
    if k.startswith("__"):
        return "is reserved: label names starting with __ are Prometheus' own"
    return ""


def _validated(settings: Settings, env: Mapping[str, Any]) -> Settings:
    """The environment's settings without its Redis, with the entry's put in, validated again;
    EntryError in the file's words."""
    kept = settings.model_fields_set - CONNECTION_FIELDS
    merged = {**settings.model_dump(by_alias=True, include=kept), **env}
    try:
        return TargetSettings.model_validate(merged)
    except ValidationError as exc:
        lines = format_validation_error(exc).splitlines()[1:]
        raise EntryError([spoken(line.strip()) for line in lines]) from None


def spoken(line: str) -> str:
    """A settings message in the targets file's words: REDIS_URL -> url, ..."""
    return _VARIABLE.sub(lambda m: _SPOKEN.get(m.group(0), m.group(0)), line)
