"""Settings from the environment (and an optional `.env`), validated once by the entry points.

Every bad variable goes into one `ConfigError` (exit 2) before Redis is touched; a secret is
never echoed, not even as the bad value. An unknown `LOCKGUARD_*` name is a warning naming the
closest setting, never a failure. Each secret but REDIS_URL may come from `NAME_FILE` (one line);
NAME and NAME_FILE both set is refused, and an error names the path, never what the file holds.
"""

from __future__ import annotations

import difflib
import os
import sys
from collections.abc import Mapping
from functools import cache
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, TextIO

from dotenv import dotenv_values
from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import SettingsConfigDict

from bot.core.errors import ConfigError
from bot.core.files import read_regular
from bot.core.pacing import DEFAULT_BUDGET, parse_budget
from bot.ops.ops_settings import OpsSettings
from bot.slack.slack_settings import SlackSettings
from bot.store.patterns import parse_patterns
from bot.store.redis_target import RedisTarget

if TYPE_CHECKING:
    from bot.cases.reclaim_config import ReclaimConfig
    from bot.core.rules import Policy
    from bot.scan import ReadMode
    from bot.scan.result import ScanOptions

#: The variables whose values are secrets: masked wherever settings are shown, never echoed.
SECRET_VARIABLES = frozenset(
    {
        "REDIS_PASSWORD",
        "SLACK_BOT_TOKEN",
        "SLACK_SIGNING_SECRET",
        "SLACK_APP_TOKEN",
        "LOCKGUARD_WEBHOOK_KEY",
        "LOCKGUARD_METRICS_TOKEN",
        "REDIS_URL",
    }
)
#: `serve` refuses a shorter secret: every secret is masked in logs and messages, and masking a
#: very short one garbles every line (a one-letter signing secret turned each `s` into `***`).
MIN_SECRET_LENGTH = 8
#: NAME -> `NAME_FILE`, the variable naming a file that holds NAME's value: every secret but
#: REDIS_URL (a URL is no secret of its own: its password can be REDIS_PASSWORD_FILE).
SECRET_FILE_VARIABLES: Mapping[str, str] = MappingProxyType(
    {name: f"{name}_FILE" for name in sorted(SECRET_VARIABLES - {"REDIS_URL"})}
)
#: The most a secret's file may hold, in bytes: a token or a password, with room to spare.
MAX_SECRET_FILE = 4096
_OWN = "LOCKGUARD_"
#: Not a setting: a URL is not read from a file (the Docker images' convention has no such thing).
_URL_FILE = "REDIS_URL_FILE"
#: Other names of a setting: LOCKGUARD_HTTP_PORT is what a user looks for beside
#: LOCKGUARD_HTTP_HOST; PORT (the platforms' convention) keeps working.
ALIASES = {"LOCKGUARD_HTTP_PORT": "PORT"}
#: `LOCKGUARD_*` variables that are read, but are no setting: never called unknown.
_NOT_SETTINGS = frozenset({"LOCKGUARD_BENCH_BOT_PATH", *SECRET_FILE_VARIABLES.values(), *ALIASES})


class Settings(RedisTarget, OpsSettings, SlackSettings):
    """Every part's settings, and what to scan for and do. `RedisTarget` first keeps the
    variables' order: Slack's, the always-on side's, Redis's, the rest."""

    model_config = SettingsConfigDict(
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",
        populate_by_name=True,
        case_sensitive=False,
    )

    lock_patterns: str = Field(default="lock:*", alias="LOCKGUARD_LOCK_PATTERNS")
    stale_threshold_seconds: int = Field(
        default=900, alias="LOCKGUARD_STALE_THRESHOLD_SECONDS", ge=30
    )
    flag_infinite_ttl: bool = Field(default=True, alias="LOCKGUARD_FLAG_INFINITE_TTL")
    auto_remediate: bool = Field(default=True, alias="LOCKGUARD_AUTO_REMEDIATE")
    dry_run: bool = Field(default=True, alias="LOCKGUARD_DRY_RUN")
    publish_release_event: bool = Field(default=True, alias="LOCKGUARD_PUBLISH_RELEASE_EVENT")
    release_channel: str = Field(
        default="locks:reclaimed", alias="LOCKGUARD_RELEASE_CHANNEL", min_length=1
    )
    scan_count: int = Field(default=1000, alias="LOCKGUARD_SCAN_COUNT", ge=10, le=100_000)
    #: The share of Redis's time a scan (and a release) may use; `off` is 1, unpaced
    #: (`bot.core.pacing`).
    scan_budget: float = Field(default=DEFAULT_BUDGET, alias="LOCKGUARD_SCAN_BUDGET")
    case_ttl_seconds: int = Field(default=3600, alias="LOCKGUARD_CASE_TTL_SECONDS", ge=60)
    reject_snooze_seconds: int = Field(
        default=86_400, alias="LOCKGUARD_REJECT_SNOOZE_SECONDS", ge=60
    )
    loose_recognition: bool = Field(default=False, alias="LOCKGUARD_LOOSE_RECOGNITION")
    lock_delay_seconds: int = Field(default=0, alias="LOCKGUARD_LOCK_DELAY_SECONDS", ge=0)
    audit_retention_days: int = Field(default=30, alias="LOCKGUARD_AUDIT_RETENTION_DAYS", ge=1)

    # A fleet: the targets file names every Redis (REDIS_* are then not used).
    targets_file: str | None = Field(default=None, alias="LOCKGUARD_TARGETS_FILE")
    target_concurrency: int = Field(default=8, alias="LOCKGUARD_TARGET_CONCURRENCY", ge=1, le=64)

    log_level: Literal["debug", "info", "warning", "error"] = Field(
        default="warning", alias="LOCKGUARD_LOG_LEVEL"
    )
    log_format: Literal["text", "json"] = Field(default="text", alias="LOCKGUARD_LOG_FORMAT")

    @field_validator("log_level", "log_format", mode="before")
    @classmethod
    def _lower(cls, v: object) -> object:
        return v.strip().lower() if isinstance(v, str) else v

    @field_validator("scan_budget", mode="before")
    @classmethod
    def _budget(cls, v: object) -> float:
        return parse_budget(v)  # ValueError saying what is expected

    @field_validator("lock_patterns")
    @classmethod
    def _patterns_ok(cls, v: str) -> str:
        parse_patterns(v)  # raises ValueError with the reason
        return v

    @field_validator("targets_file")
    @classmethod
    def _targets_file(cls, v: str | None) -> str | None:
        return v.strip() if v is not None and v.strip() else None

    @property
    def patterns(self) -> list[bytes]:
        return parse_patterns(self.lock_patterns)

    def policy(self) -> Policy:
        from bot.core.rules import Policy

        return Policy(
            stale_threshold_ms=self.stale_threshold_seconds * 1000,
            flag_infinite_ttl=self.flag_infinite_ttl,
            loose_recognition=self.loose_recognition,
        )

    def scan_options(self, mode: ReadMode | None = None) -> ScanOptions:
        from bot.scan import ReadMode
        from bot.scan.result import ScanOptions

        return ScanOptions(
            patterns=self.patterns,
            policy=self.policy(),
            scan_count=self.scan_count,
            budget=self.scan_budget,
            mode=mode or ReadMode.AUTO,
            endpoint=self.endpoint,
        )

    def reclaim_config(self) -> ReclaimConfig:
        from bot.cases.reclaim_config import ReclaimConfig

        return ReclaimConfig(
            dry_run=self.dry_run,
            publish_release_event=self.publish_release_event,
            release_channel=self.release_channel,
            case_ttl_ms=self.case_ttl_seconds * 1000,
            lock_delay_ms=self.lock_delay_seconds * 1000,
            retention_ms=self.audit_retention_days * 86_400_000,
            reject_snooze_ms=self.reject_snooze_seconds * 1000,
            required_approvals=self.required_approvals,
            policy=self.policy(),
            patterns=tuple(self.patterns),
            budget=self.scan_budget,
        )

    def serve_problems(self) -> list[str]:
        """What stops `lockguard serve` from starting, one `VARIABLE: why` line each (Slack,
        approvers, secrets too short to mask). Names only, never a value."""
        held = {
            "SLACK_BOT_TOKEN": self.slack_bot_token,
            "SLACK_SIGNING_SECRET": self.slack_signing_secret,
            "SLACK_APP_TOKEN": self.slack_app_token,
            "LOCKGUARD_WEBHOOK_KEY": self.webhook_key,
            "LOCKGUARD_METRICS_TOKEN": self.metrics_token,
            "REDIS_PASSWORD": self.redis_password,
        }
        short = [
            f"{name}: shorter than {MIN_SECRET_LENGTH} characters; serve masks every secret in "
            "its logs and messages, and masking one this short would garble them: use the "
            "whole secret (a longer one)"
            for name, secret in held.items()
            if secret is not None and 0 < len(secret.get_secret_value()) < MIN_SECRET_LENGTH
        ]
        if self.url_password is not None and len(self.url_password) < MIN_SECRET_LENGTH:
            short.append(
                f"REDIS_URL: its password is shorter than {MIN_SECRET_LENGTH} characters; serve "
                "masks every secret in its logs and messages, and masking one this short would "
                "garble them: use a longer password"
            )
        return self.slack_problems() + self.approver_problems() + short

    def redacted(self) -> dict[str, Any]:
        """The effective configuration for a start-up log line, secrets masked."""
        out: dict[str, Any] = {}
        for name, info in type(self).model_fields.items():
            value = getattr(self, name)
            env = info.alias or name.upper()
            if env in SECRET_VARIABLES or isinstance(value, SecretStr):
                out[env] = "***" if value else None
            else:
                out[env] = value
        out["REDIS"] = self.endpoint
        return out


def load_settings(
    env: Mapping[str, str] | None = None, env_file: str | None = ".env", err: TextIO | None = None
) -> Settings:
    """Settings from the environment and `env_file` (or `env` alone, for tests), the secrets'
    `NAME_FILE`s read, or one ConfigError naming each bad variable. Unknown `LOCKGUARD_*` names
    go to `err` (stderr)."""
    environ = env if env is not None else os.environ
    file_values = env_file_values(env_file) if env is None else {}
    for line in [*unknown_variables(environ, file_values), *shadowed(environ, file_values)]:
        print(f"lockguard: warning: {line}", file=err or sys.stderr)
    from_files, problems = _secret_files(environ, file_values)
    aliased, alias_problems = _aliased(environ, file_values)
    from_files.update(aliased)
    problems += alias_problems
    try:
        if env is not None:
            settings = Settings.model_validate({**env, **from_files})
        else:
            init: dict[str, Any] = {"_env_file": env_file, **from_files}  # over a blank NAME
            settings = Settings(**init)
    except ValidationError as exc:  # with the files' problems: every bad variable at once
        lines = format_validation_error(exc).splitlines()
        raise ConfigError("\n".join([lines[0], *problems, *lines[1:]])) from None
    if problems:
        raise ConfigError("\n".join(["invalid configuration:", *problems]))
    return settings


#: The settings that say where Redis is: with none of them, lockguard uses localhost:6379.
REDIS_LOCATION = frozenset(
    {
        "REDIS_URL",
        "REDIS_HOST",
        "REDIS_PORT",
        "REDIS_SENTINELS",
        "LOCKGUARD_TARGETS_FILE",
    }
)


def unconfigured_note(endpoint: str, env_file: str | None = ".env") -> str:
    """What to say on stderr when nothing says where Redis is ("" when something does): run
    outside the checkout (no `.env`), lockguard would otherwise talk to whatever answers on
    localhost:6379 without a word."""
    if _given(os.environ, env_file_values(env_file)).keys() & REDIS_LOCATION:
        return ""
    if env_file and os.path.exists(env_file):
        where = f"the environment nor {os.path.abspath(env_file)}"
    else:
        where = f"the environment, and no {env_file or '.env'} in {os.getcwd()}"
    return (
        "lockguard: note: no Redis configured (none of REDIS_URL, REDIS_HOST, REDIS_PORT, "
        f"REDIS_SENTINELS, LOCKGUARD_TARGETS_FILE in {where}): using the default, {endpoint}. "
        "`lockguard config` shows every setting and where it came from"
    )


def _aliased(
    environ: Mapping[str, str], file_values: Mapping[str, str | None]
) -> tuple[dict[str, str], list[str]]:
    """The settings given by another name (`ALIASES`), the environment winning over `.env` as
    for every setting; both names set to different values is a problem naming them."""
    out: dict[str, str] = {}
    problems: list[str] = []
    for alias, name in ALIASES.items():
        values = {k.upper(): v for k, v in [*file_values.items(), *environ.items()] if v}
        given, plain = values.get(alias), values.get(name)
        if given is None:
            continue
        if plain is not None and plain.strip() != given.strip():
            problems.append(
                f"  {alias} and {name} are both set, to different values: they are one setting "
                f"(the port `lockguard serve` listens on); set one"
            )
            continue
        out[name] = given.strip()
    return out, problems


def shadowed(environ: Mapping[str, str], file_values: Mapping[str, str | None]) -> list[str]:
    """REDIS_URL set beside REDIS_HOST or REDIS_PORT: the URL is used and they are not, which
    is silent otherwise (a REDIS_URL left in `.env` beats compose's REDIS_HOST)."""
    where = {name: source for name, (_, source) in _given(environ, file_values).items()}
    if "REDIS_URL" not in where:
        return []
    return [
        f"{name} ({where[name]}) is ignored: REDIS_URL ({where['REDIS_URL']}) says where Redis "
        f"is; unset one of them"
        for name in ("REDIS_HOST", "REDIS_PORT")
        if name in where
    ]


def secret_file_paths(
    environ: Mapping[str, str], file_values: Mapping[str, str | None] | None = None
) -> dict[str, tuple[str, str]]:
    """NAME -> (`NAME_FILE`, the path it names) for each secret whose `NAME_FILE` is set (not
    blank), the environment winning over `.env` as for every setting."""
    given = _given(environ, file_values)
    return {
        name: (variable, given[variable][0])
        for name, variable in SECRET_FILE_VARIABLES.items()
        if variable in given
    }


def read_secret_file(path: str) -> str:
    """The one line the file at `path` holds, one trailing newline (`\\n` or `\\r\\n`) dropped;
    ValueError naming `path` and what is wrong, never what the file holds."""
    raw = read_regular(path, MAX_SECRET_FILE)  # a small regular file: never /proc, a FIFO...
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not UTF-8 text") from None
    text = text.removesuffix("\r\n") if text.endswith("\r\n") else text.removesuffix("\n")
    if "\n" in text or "\r" in text:
        raise ValueError(f"{path} has more than one line: expected the secret alone on one line")
    if not text.strip():
        raise ValueError(f"{path} is empty: expected the secret on one line")
    return text


def _secret_files(
    environ: Mapping[str, str], file_values: Mapping[str, str | None]
) -> tuple[dict[str, str], list[str]]:
    """NAME -> the value its `NAME_FILE` holds, for each one set; and a `  VARIABLE: why` line
    for each that cannot be used (NAME set too, or a file that is no one-line secret)."""
    given = _given(environ, file_values)
    values: dict[str, str] = {}
    problems: list[str] = []
    for name, (variable, path) in secret_file_paths(environ, file_values).items():
        if name in given:
            problems.append(
                f"  {name} ({given[name][1]}) and {variable} ({given[variable][1]}) are both "
                "set: set only one of them"
            )
            continue
        try:
            values[name] = read_secret_file(path)
        except ValueError as exc:
            problems.append(f"  {variable}: {exc}")
    return values, problems


def _given(
    environ: Mapping[str, str], file_values: Mapping[str, str | None] | None
) -> dict[str, tuple[str, str]]:
    """The variables that are set (not blank), upper-cased, with their value (stripped) and where
    they were set (`environment` or `.env`); the environment wins over `.env`."""
    out: dict[str, tuple[str, str]] = {}
    for where, values in ((".env", file_values or {}), ("environment", environ)):
        for key, value in values.items():
            if value is not None and value.strip():
                out[key.upper()] = (value.strip(), where)
    return out


@cache
def known_variables() -> tuple[str, ...]:
    """Every setting's variable, in the settings' order."""
    return tuple((f.alias or n).upper() for n, f in Settings.model_fields.items())


def env_file_values(env_file: str | None) -> dict[str, str | None]:
    """What `env_file` sets (as `Settings` reads it), or nothing when there is no such file."""
    if not env_file or not os.path.isfile(env_file):
        return {}
    return dict(dotenv_values(env_file, encoding="utf-8"))


def unknown_variables(
    environ: Mapping[str, str], file_values: Mapping[str, str | None] | None = None
) -> list[str]:
    """One line for each `LOCKGUARD_*` variable that is no setting (and REDIS_URL_FILE, which
    looks like one), with where it was set and the closest setting's name. Names only: a value
    is never shown."""
    known = known_variables()
    # Compared without the common prefix, which would make every name look alike.
    stems = {
        name.removeprefix(_OWN): name
        for name in (*known, *SECRET_FILE_VARIABLES.values(), *ALIASES)
    }
    out: list[str] = []
    seen: set[str] = set()
    for where, names in (("environment", environ), (".env", file_values or {})):
        for name in names:
            upper = name.upper()
            if upper in seen or not _is_unknown(upper, known):
                continue
            seen.add(upper)
            shown = name if name.isprintable() else repr(name)
            out.append(
                f"{shown[:80]} ({where}) is not a lockguard setting, ignored; {_hint(upper, stems)}"
            )
    return out


def _is_unknown(upper: str, known: tuple[str, ...]) -> bool:
    """A `LOCKGUARD_*` name that is no setting, or REDIS_URL_FILE (REDIS_URL is no secret file)."""
    return upper == _URL_FILE or (
        upper.startswith(_OWN) and upper not in known and upper not in _NOT_SETTINGS
    )


def _hint(upper: str, stems: Mapping[str, str]) -> str:
    if upper == _URL_FILE:
        return (
            "REDIS_URL is not read from a file: set REDIS_URL without its password, and "
            "REDIS_PASSWORD_FILE"
        )
    close = closest(upper.removeprefix(_OWN), stems)
    return f"did you mean {stems[close]}?" if close else "`lockguard config` lists the settings"


def closest(stem: str, stems: Mapping[str, str]) -> str | None:
    """The setting `stem` (a name without LOCKGUARD_) most likely means: the most shared words,
    its last word counting double (HTTP_PORT is PORT, not HTTP_HOST); by spelling among equals,
    or when no word is shared."""
    words = [w.rstrip("S") for w in stem.split("_")]  # APPROVER is APPROVERS

    def score(candidate: str) -> int:
        theirs = [w.rstrip("S") for w in candidate.split("_")]
        return len(set(words) & set(theirs)) + (2 if words[-1] == theirs[-1] else 0)

    best = max((score(c) for c in stems), default=0)
    pool = [c for c in stems if score(c) == best] if best else list(stems)
    pool = [c for c in pool if stems[c].startswith(_OWN)] or pool  # asked under our prefix
    close = difflib.get_close_matches(stem, pool, n=1, cutoff=0.0 if best else 0.6)
    return close[0] if close else None


def format_validation_error(exc: ValidationError) -> str:
    lines = ["invalid configuration:"]
    fields = Settings.model_fields
    for err in exc.errors():
        msg = err["msg"].removeprefix("Value error, ")
        if not err["loc"]:  # a check across variables: its lines name them (`_topology`)
            lines.extend(f"  {line}" for line in msg.splitlines())
            continue
        loc = str(err["loc"][0])
        info = fields.get(loc)
        env = (info.alias if info is not None and info.alias else loc).upper()
        shown = ""
        if (
            env not in SECRET_VARIABLES
            and "input" in err
            and not isinstance(err["input"], dict)
            and not (env.startswith("REDIS_") and "@" in str(err["input"]))
        ):
            shown = f" (got {str(err['input'])[:80]!r})"
        lines.append(f"  {env}: {msg}{shown}")
    return "\n".join(lines)
