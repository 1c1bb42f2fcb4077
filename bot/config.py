"""Configuration from the environment (and an optional `.env`), validated once at start-up.

`load_settings()` is called by the entry points only; nothing here runs at import time. A bad value
becomes one `ConfigError` naming every bad variable and what was expected (exit 2), before Redis is
touched. Secrets are `SecretStr` and never echoed, not even when they are the bad value.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from bot.core.errors import ConfigError
from bot.ops.schedules import Schedule, parse_schedule
from bot.store.keyspace import OWN_PREFIXES, PREFIX
from bot.store.redis_target import RedisTarget, parse_sentinels

if TYPE_CHECKING:
    from bot.cases.reclaim import ReclaimConfig
    from bot.core.rules import Policy
    from bot.scan import ReadMode
    from bot.scan.loop import ScanOptions

# `parse_sentinels` lives in `bot.store.redis_target` with the rest of the REDIS_* checks.
__all__ = ["Settings", "SlackSettings", "format_validation_error", "load_settings",
           "parse_patterns", "parse_sentinels"]

_GLOB_META = b"*?[]\\"
_HEX_ESCAPE = re.compile(r"\\x([0-9a-fA-F]{2})")
_SLACK_ID = re.compile(r"[A-Z][A-Z0-9]{2,20}")
_SECRET_ENV = {"REDIS_PASSWORD", "SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_APP_TOKEN",
               "LOCKGUARD_WEBHOOK_KEY", "LOCKGUARD_METRICS_TOKEN", "REDIS_URL"}


class SlackSettings(BaseSettings):
    """The Slack app's part of the settings (`lockguard serve`, DESIGN §6); `Settings` adds the
    rest. Nothing here is needed by the CLI's scan and case commands."""

    model_config = SettingsConfigDict(
        env_file=".env", env_file_encoding="utf-8", extra="ignore", populate_by_name=True,
        case_sensitive=False,
    )

    slack_channel: str | None = Field(default=None, alias="LOCKGUARD_SLACK_CHANNEL")
    slack_bot_token: SecretStr | None = Field(default=None, alias="SLACK_BOT_TOKEN")
    slack_signing_secret: SecretStr | None = Field(default=None, alias="SLACK_SIGNING_SECRET")
    slack_app_token: SecretStr | None = Field(default=None, alias="SLACK_APP_TOKEN")
    slack_api_url: str = Field(default="https://slack.com/api/", alias="SLACK_API_URL")
    port: int = Field(default=3000, alias="PORT", gt=0, lt=65536)
    #: Loopback unless told otherwise: the container sets 0.0.0.0 (Dockerfile, compose.yaml).
    http_host: str = Field(default="127.0.0.1", alias="LOCKGUARD_HTTP_HOST", min_length=1)
    approvers: str = Field(default="", alias="LOCKGUARD_APPROVERS")
    approver_group: str | None = Field(default=None, alias="LOCKGUARD_APPROVER_GROUP")
    required_approvals: int = Field(default=1, alias="LOCKGUARD_REQUIRED_APPROVALS", ge=1, le=2)
    #: Who may run `/lockguard scan`: Slack user ids and at most one user group id (S...);
    #: unset, the approvers (`LOCKGUARD_APPROVERS` / `LOCKGUARD_APPROVER_GROUP`).
    scanners: str = Field(default="", alias="LOCKGUARD_SCANNERS")
    #: A case of more locks is approved by typing their number in a modal (`bot.slack.actions`).
    confirm_typed_above: int = Field(default=1000, alias="LOCKGUARD_CONFIRM_TYPED_ABOVE", ge=1)
    # When the scheduled jobs run (`bot.ops.schedules`): cron, `every 30s`-style, or `off`.
    scan_schedule: str = Field(default="*/15 * * * *", alias="LOCKGUARD_SCAN_SCHEDULE")
    digest_schedule: str = Field(default="0 9 * * *", alias="LOCKGUARD_DIGEST_SCHEDULE")
    #: The one-active-replica lease (`bot.ops.leader`): another replica takes over within this.
    leader_lease_seconds: int = Field(default=30, alias="LOCKGUARD_LEADER_LEASE_SECONDS", ge=5,
                                      le=3600)

    #: `POST /hooks/scan` (`bot.ops.webhook`): unset, the webhook answers 404.
    webhook_key: SecretStr | None = Field(default=None, alias="LOCKGUARD_WEBHOOK_KEY")
    #: `GET /metrics` (`bot.ops.metrics`): set, a scrape needs `Authorization: Bearer <token>`.
    metrics_token: SecretStr | None = Field(default=None, alias="LOCKGUARD_METRICS_TOKEN")
    #: Silence watches for the user's own jobs (`bot.ops.watches`): `KEY=MAX_AGE_SECONDS,...`.
    watches: str = Field(default="", alias="LOCKGUARD_WATCHES")

    @field_validator("webhook_key", "metrics_token", mode="before")
    @classmethod
    def _header_secret(cls, v: object) -> object:
        from bot.ops.webhook import check_webhook_key

        raw = v.get_secret_value() if isinstance(v, SecretStr) else v
        if raw is None or isinstance(raw, str):
            key = check_webhook_key(raw)
            return SecretStr(key) if key is not None else None
        return v

    @field_validator("watches")
    @classmethod
    def _watches(cls, v: str) -> str:
        from bot.ops.watches import check_watches

        return check_watches(v)

    @field_validator("scan_schedule", "digest_schedule")
    @classmethod
    def _schedule(cls, v: str) -> str:
        parse_schedule(v)  # raises ValueError saying what was expected
        return " ".join(v.split())

    @property
    def scan_schedule_spec(self) -> Schedule:
        """`LOCKGUARD_SCAN_SCHEDULE`, parsed (it was validated at load)."""
        return parse_schedule(self.scan_schedule)

    @property
    def digest_schedule_spec(self) -> Schedule:
        """`LOCKGUARD_DIGEST_SCHEDULE`, parsed (it was validated at load)."""
        return parse_schedule(self.digest_schedule)

    @field_validator("approvers")
    @classmethod
    def _user_ids(cls, v: str) -> str:
        for item in (s.strip() for s in v.split(",") if s.strip()):
            if not _SLACK_ID.fullmatch(item):
                raise ValueError(f"expected comma-separated Slack user ids such as U012AB3CD, "
                                 f"found {item[:40]!r}")
        return v

    @field_validator("approver_group", "slack_channel")
    @classmethod
    def _slack_id(cls, v: str | None) -> str | None:
        if v is None or not v.strip():
            return None
        if not _SLACK_ID.fullmatch(v.strip()):
            raise ValueError(f"expected a Slack id such as C012AB3CD or S012AB3CD, "
                             f"found {v.strip()[:40]!r}")
        return v.strip()

    @field_validator("scanners")
    @classmethod
    def _scanners(cls, v: str) -> str:
        items = [s.strip() for s in v.split(",") if s.strip()]
        for item in items:
            if not _SLACK_ID.fullmatch(item):
                raise ValueError(f"expected comma-separated Slack user ids (U012AB3CD) and at "
                                 f"most one user group id (S012AB3CD), found {item[:40]!r}")
        if sum(item.startswith("S") for item in items) > 1:
            raise ValueError("expected at most one user group id (S...)")
        return v

    @property
    def approver_ids(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(s.strip() for s in self.approvers.split(",") if s.strip()))

    @property
    def scanner_ids(self) -> tuple[str, ...]:
        """`LOCKGUARD_SCANNERS`' user ids (its group is `scanner_group`)."""
        return tuple(dict.fromkeys(s.strip() for s in self.scanners.split(",")
                                   if s.strip() and not s.strip().startswith("S")))

    @property
    def scanner_group(self) -> str | None:
        return next((s.strip() for s in self.scanners.split(",") if s.strip().startswith("S")),
                    None)

    def slack_problems(self) -> list[str]:
        """What `lockguard serve` is missing, one line a setting (empty: ready to serve)."""
        out = []
        token = self.slack_bot_token.get_secret_value() if self.slack_bot_token else ""
        if not token:
            out.append("SLACK_BOT_TOKEN: required by serve (the bot token, xoxb-...)")
        elif not token.startswith("xoxb-"):
            out.append("SLACK_BOT_TOKEN: expected a bot token starting with xoxb-")
        app = self.slack_app_token.get_secret_value() if self.slack_app_token else ""
        if app and not app.startswith("xapp-"):
            out.append("SLACK_APP_TOKEN: expected an app-level token starting with xapp-")
        if not app and not (self.slack_signing_secret
                            and self.slack_signing_secret.get_secret_value()):
            out.append("SLACK_SIGNING_SECRET: required in HTTP mode (without SLACK_APP_TOKEN)")
        if not self.slack_channel:
            out.append("LOCKGUARD_SLACK_CHANNEL: required by serve (the channel id for "
                       "findings, alerts and digests, e.g. C012AB3CD)")
        url = urlsplit(self.slack_api_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            out.append("SLACK_API_URL: expected an http(s) URL such as https://slack.com/api/")
        return out


class Settings(RedisTarget, SlackSettings):
    """All of it: the Slack part, where Redis is (`bot.store.redis_target`), and what to scan for
    and
    do. `RedisTarget` first, so that the variables keep their order: Slack's, Redis's, the rest."""

    model_config = SettingsConfigDict(
        env_file=".env", env_file_encoding="utf-8", extra="ignore", populate_by_name=True,
        case_sensitive=False,
    )

    lock_patterns: str = Field(default="lock:*", alias="LOCKGUARD_LOCK_PATTERNS")
    stale_threshold_seconds: int = Field(default=900, alias="LOCKGUARD_STALE_THRESHOLD_SECONDS",
                                         ge=30)
    flag_infinite_ttl: bool = Field(default=True, alias="LOCKGUARD_FLAG_INFINITE_TTL")
    auto_remediate: bool = Field(default=True, alias="LOCKGUARD_AUTO_REMEDIATE")
    dry_run: bool = Field(default=True, alias="LOCKGUARD_DRY_RUN")
    publish_release_event: bool = Field(default=True, alias="LOCKGUARD_PUBLISH_RELEASE_EVENT")
    release_channel: str = Field(default="locks:reclaimed", alias="LOCKGUARD_RELEASE_CHANNEL",
                                 min_length=1)
    scan_count: int = Field(default=1000, alias="LOCKGUARD_SCAN_COUNT", ge=10, le=100_000)
    case_ttl_seconds: int = Field(default=3600, alias="LOCKGUARD_CASE_TTL_SECONDS", ge=60)
    reject_snooze_seconds: int = Field(default=86_400, alias="LOCKGUARD_REJECT_SNOOZE_SECONDS",
                                       ge=60)
    loose_recognition: bool = Field(default=False, alias="LOCKGUARD_LOOSE_RECOGNITION")
    lock_delay_seconds: int = Field(default=0, alias="LOCKGUARD_LOCK_DELAY_SECONDS", ge=0)
    audit_retention_days: int = Field(default=30, alias="LOCKGUARD_AUDIT_RETENTION_DAYS", ge=1)

    log_level: Literal["debug", "info", "warning", "error"] = Field(
        default="warning", alias="LOCKGUARD_LOG_LEVEL")
    log_format: Literal["text", "json"] = Field(default="text", alias="LOCKGUARD_LOG_FORMAT")

    @field_validator("log_level", "log_format", mode="before")
    @classmethod
    def _lower(cls, v: object) -> object:
        return v.strip().lower() if isinstance(v, str) else v

    @field_validator("lock_patterns")
    @classmethod
    def _patterns_ok(cls, v: str) -> str:
        parse_patterns(v)  # raises ValueError with the reason
        return v

    @property
    def patterns(self) -> list[bytes]:
        return parse_patterns(self.lock_patterns)

    def policy(self) -> Policy:
        from bot.core.rules import Policy

        return Policy(stale_threshold_ms=self.stale_threshold_seconds * 1000,
                      flag_infinite_ttl=self.flag_infinite_ttl,
                      loose_recognition=self.loose_recognition)

    def scan_options(self, mode: ReadMode | None = None) -> ScanOptions:
        from bot.scan import ReadMode
        from bot.scan.loop import ScanOptions

        return ScanOptions(patterns=self.patterns, policy=self.policy(),
                           scan_count=self.scan_count, mode=mode or ReadMode.AUTO,
                           endpoint=self.endpoint)

    def reclaim_config(self) -> ReclaimConfig:
        from bot.cases.reclaim import ReclaimConfig

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
        )

    def redacted(self) -> dict[str, Any]:
        """The effective configuration for a start-up log line, secrets masked."""
        out: dict[str, Any] = {}
        for name, info in type(self).model_fields.items():
            value = getattr(self, name)
            env = info.alias or name.upper()
            if env in _SECRET_ENV or isinstance(value, SecretStr):
                out[env] = "***" if value else None
            else:
                out[env] = value
        out["REDIS"] = self.endpoint
        return out




def parse_patterns(text: str) -> list[bytes]:
    """`lock:*, \\x17*` -> [b"lock:*", b"\\x17*"]. `\\xHH` names a byte; a glob character named
    that way is matched literally. Refuses empty patterns and patterns that would also match
    lockguard's own keys."""
    out: list[bytes] = []
    for raw in text.split(","):
        item = raw.strip()
        if not item:
            raise ValueError(
                "expected comma-separated glob patterns such as 'lock:*,job-lock:*', "
                "found an empty pattern"
            )
        pattern = _pattern_bytes(item)
        if _may_match_own_keys(pattern):
            raise ValueError(
                f"pattern {item!r} would also match lockguard's own keys ({PREFIX.decode()}*); "
                "narrow it, e.g. 'lock:*'"
            )
        if pattern not in out:
            out.append(pattern)
    return out


def _pattern_bytes(item: str) -> bytes:
    out = bytearray()
    pos = 0
    for m in _HEX_ESCAPE.finditer(item):
        out += item[pos : m.start()].encode("utf-8")
        byte = int(m.group(1), 16)
        if byte in _GLOB_META:
            out += b"\\"
        out.append(byte)
        pos = m.end()
    out += item[pos:].encode("utf-8")
    return bytes(out)


def _may_match_own_keys(pattern: bytes) -> bool:
    """True when some key under one of lockguard's prefixes (today's and the old format's) could
    match: the pattern's literal start (up to its first glob character) is consistent with it."""
    literal = bytearray()
    i = 0
    while i < len(pattern):
        c = pattern[i : i + 1]
        if c == b"\\" and i + 1 < len(pattern):
            literal += pattern[i + 1 : i + 2]
            i += 2
            continue
        if c in (b"*", b"?", b"["):
            break
        literal += c
        i += 1
    else:
        return bytes(literal).startswith(OWN_PREFIXES)  # no glob: one exact key
    lit = bytes(literal)
    return any(own.startswith(lit) or lit.startswith(own) for own in OWN_PREFIXES)


def load_settings(env: Mapping[str, str] | None = None, env_file: str | None = ".env") -> Settings:
    """Settings from the environment (or `env`, for tests), or one ConfigError naming each bad
    variable."""
    try:
        if env is not None:
            return Settings.model_validate(dict(env))
        return Settings(_env_file=env_file)  # type: ignore[call-arg]
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc)) from None


def format_validation_error(exc: ValidationError) -> str:
    lines = ["invalid configuration:"]
    fields = Settings.model_fields
    for err in exc.errors():
        msg = err["msg"]
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, "):]
        if not err["loc"]:  # a check across variables: its lines name them (`_topology`)
            lines.extend(f"  {line}" for line in msg.splitlines())
            continue
        loc = str(err["loc"][0])
        info = fields.get(loc)
        env = (info.alias if info is not None and info.alias else loc).upper()
        shown = ""
        if env not in _SECRET_ENV and "input" in err and not isinstance(err["input"], dict) \
                and not (env.startswith("REDIS_") and "@" in str(err["input"])):
            shown = f" (got {str(err['input'])[:80]!r})"
        lines.append(f"  {env}: {msg}{shown}")
    return "\n".join(lines)
