"""The always-on side's settings: where `serve` listens, the schedules, the leader lease, the
webhook key, the metrics token and the silence watches. `bot.config.Settings` adds them to the
rest."""

from __future__ import annotations

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from bot.ops.schedules import Schedule, parse_schedule


class OpsSettings(BaseSettings):
    model_config = SettingsConfigDict(
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",
        populate_by_name=True,
        case_sensitive=False,
    )

    port: int = Field(default=3000, alias="PORT", gt=0, lt=65536)
    #: Loopback unless told otherwise: the container sets 0.0.0.0 (Dockerfile, compose.yaml).
    http_host: str = Field(default="127.0.0.1", alias="LOCKGUARD_HTTP_HOST", min_length=1)
    # When the scheduled jobs run (`bot.ops.schedules`): cron, `every 30s`-style, or `off`.
    scan_schedule: str = Field(default="*/15 * * * *", alias="LOCKGUARD_SCAN_SCHEDULE")
    digest_schedule: str = Field(default="0 9 * * *", alias="LOCKGUARD_DIGEST_SCHEDULE")
    #: The one-active-replica lease (`bot.ops.leader`): another replica takes over within this.
    leader_lease_seconds: int = Field(
        default=30, alias="LOCKGUARD_LEADER_LEASE_SECONDS", ge=5, le=3600
    )

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
