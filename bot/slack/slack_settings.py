"""The Slack app's settings (`lockguard serve`): tokens, the channel, who may decide and
who may scan. `bot.config.Settings` adds them to the rest; the Slack layer reads only these."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

_SLACK_ID = re.compile(r"[A-Z][A-Z0-9]{2,20}")
#: `LOCKGUARD_APPROVERS=*`: any member of the channel may decide, said explicitly.
ANYONE = "*"


class SlackSettings(BaseSettings):
    """Nothing here is needed by the CLI's scan and case commands."""

    model_config = SettingsConfigDict(
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",
        populate_by_name=True,
        case_sensitive=False,
    )

    slack_channel: str | None = Field(default=None, alias="LOCKGUARD_SLACK_CHANNEL")
    slack_bot_token: SecretStr | None = Field(default=None, alias="SLACK_BOT_TOKEN")
    slack_signing_secret: SecretStr | None = Field(default=None, alias="SLACK_SIGNING_SECRET")
    slack_app_token: SecretStr | None = Field(default=None, alias="SLACK_APP_TOKEN")
    slack_api_url: str = Field(default="https://slack.com/api/", alias="SLACK_API_URL")
    approvers: str = Field(default="", alias="LOCKGUARD_APPROVERS")
    approver_group: str | None = Field(default=None, alias="LOCKGUARD_APPROVER_GROUP")
    required_approvals: int = Field(default=1, alias="LOCKGUARD_REQUIRED_APPROVALS", ge=1, le=2)
    #: Unset: the approvers.
    scanners: str = Field(default="", alias="LOCKGUARD_SCANNERS")
    #: Unset: the approvers and the scanners.
    viewers: str = Field(default="", alias="LOCKGUARD_VIEWERS")
    confirm_typed_above: int = Field(default=1000, alias="LOCKGUARD_CONFIRM_TYPED_ABOVE", ge=1)

    @field_validator("approvers")
    @classmethod
    def _user_ids(cls, v: str) -> str:
        items = [s.strip() for s in v.split(",") if s.strip()]
        if ANYONE in items and len(items) > 1:
            raise ValueError(
                "expected either * alone (any member of the channel may decide) or "
                "comma-separated Slack user ids, not both"
            )
        for item in (i for i in items if i != ANYONE):
            if not _SLACK_ID.fullmatch(item):
                raise ValueError(
                    f"expected comma-separated Slack user ids such as U012AB3CD, "
                    f"found {item[:40]!r}"
                )
        return v

    @field_validator("approver_group", "slack_channel")
    @classmethod
    def _slack_id(cls, v: str | None) -> str | None:
        if v is None or not v.strip():
            return None
        if not _SLACK_ID.fullmatch(v.strip()):
            raise ValueError(
                f"expected a Slack id such as C012AB3CD or S012AB3CD, found {v.strip()[:40]!r}"
            )
        return v.strip()

    @field_validator("viewers")
    @classmethod
    def _viewers(cls, v: str) -> str:
        items = [s.strip() for s in v.split(",") if s.strip()]
        if items == [ANYONE]:
            return v  # anyone of our workspace
        if ANYONE in items:
            raise ValueError(
                "expected either * alone (anyone of the workspace) or comma-separated Slack "
                "user ids and at most one user group id, not both"
            )
        return _ids_and_group(v)

    @field_validator("scanners")
    @classmethod
    def _scanners(cls, v: str) -> str:
        return _ids_and_group(v)

    @property
    def approver_ids(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(s.strip() for s in self.approvers.split(",") if s.strip()))

    @property
    def scanner_ids(self) -> tuple[str, ...]:
        return _user_ids(self.scanners)

    @property
    def scanner_group(self) -> str | None:
        return _group_id(self.scanners)

    @property
    def viewer_ids(self) -> tuple[str, ...]:
        return _user_ids(self.viewers)

    @property
    def viewer_group(self) -> str | None:
        return _group_id(self.viewers)

    def slack_problems(self) -> list[str]:
        """What `lockguard serve` is missing, one line a setting."""
        out = []
        token = self.slack_bot_token.get_secret_value() if self.slack_bot_token else ""
        if not token:
            out.append("SLACK_BOT_TOKEN: required by serve (the bot token, xoxb-...)")
        elif not token.startswith("xoxb-"):
            out.append("SLACK_BOT_TOKEN: expected a bot token starting with xoxb-")
        app = self.slack_app_token.get_secret_value() if self.slack_app_token else ""
        if app and not app.startswith("xapp-"):
            out.append("SLACK_APP_TOKEN: expected an app-level token starting with xapp-")
        if not app and not (
            self.slack_signing_secret and self.slack_signing_secret.get_secret_value()
        ):
            out.append("SLACK_SIGNING_SECRET: required in HTTP mode (without SLACK_APP_TOKEN)")
        if not self.slack_channel:
            out.append(
                "LOCKGUARD_SLACK_CHANNEL: required by serve (the channel id for "
                "findings, alerts and digests, e.g. C012AB3CD)"
            )
        url = urlsplit(self.slack_api_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            out.append("SLACK_API_URL: expected an http(s) URL such as https://slack.com/api/")
        return out

    def approver_problems(self) -> list[str]:
        """Nobody named to decide is refused: anyone in the channel could release production
        locks without anyone having said so (`LOCKGUARD_APPROVERS=*` says so)."""
        if ANYONE in self.approver_ids and self.approver_group:
            return [
                "LOCKGUARD_APPROVERS: * (any member of the channel may decide) cannot be "
                "combined with LOCKGUARD_APPROVER_GROUP; set one or the other"
            ]
        if not self.approver_ids and not self.approver_group:
            return [
                "LOCKGUARD_APPROVERS / LOCKGUARD_APPROVER_GROUP: serve needs to know who may "
                "approve releases: Slack user ids (LOCKGUARD_APPROVERS=U012AB3CD,U045EF6GH) or "
                "a user group (LOCKGUARD_APPROVER_GROUP=S012AB3CD); LOCKGUARD_APPROVERS=* lets "
                "any member of LOCKGUARD_SLACK_CHANNEL decide"
            ]
        return []


def _ids_and_group(v: str) -> str:
    items = [s.strip() for s in v.split(",") if s.strip()]
    for item in items:
        if not _SLACK_ID.fullmatch(item):
            raise ValueError(
                f"expected comma-separated Slack user ids (U012AB3CD) and at "
                f"most one user group id (S012AB3CD), found {item[:40]!r}"
            )
    if sum(item.startswith("S") for item in items) > 1:
        raise ValueError("expected at most one user group id (S...)")
    return v


def _user_ids(text: str) -> tuple[str, ...]:
    items = (s.strip() for s in text.split(","))
    return tuple(dict.fromkeys(s for s in items if s and not s.startswith("S")))


def _group_id(text: str) -> str | None:
    return next((s.strip() for s in text.split(",") if s.strip().startswith("S")), None)
