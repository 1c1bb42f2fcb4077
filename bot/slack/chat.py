"""lockguard's side of Slack's Web API: one `WebClient`, and posting that never raises a surprise.

`web_client(settings)` is the client the Bolt app and every listener use: `SLACK_API_URL` as
its base, the bot token, and retries of dropped connections and of 429s (honouring
`Retry-After`). It logs through lockguard's logger, whose handler scrubs every secret (slack_sdk
logs request headers at debug level).

`Chat` wraps the calls lockguard makes. Every failure (Slack's `ok: false`, an HTTP error, no
answer at all) becomes a `SendError` with Slack's code word (`channel_not_found`,
`not_in_channel`, ...) or, for `update` and `ephemeral`, a logged `False`: a listener decides
what to tell the person, and nothing from Slack's reply is echoed beyond the code word.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.http_retry import ConnectionErrorRetryHandler, RateLimitErrorRetryHandler

from bot import logs
from bot.settings import Settings
from bot.slack.message_store import MessageRef

_log = logs.logger("slack.chat")


def web_client(settings: Settings, *, timeout: int = 15) -> WebClient:
    token = settings.slack_bot_token.get_secret_value() if settings.slack_bot_token else None
    return WebClient(token=token, base_url=settings.slack_api_url, timeout=timeout,
                     logger=logs.logger("slack.web"),
                     retry_handlers=[ConnectionErrorRetryHandler(max_retry_count=2),
                                     RateLimitErrorRetryHandler(max_retry_count=3)])


def slack_errors() -> tuple[type[Exception], ...]:
    """What a Web API call raises when it fails: Slack's refusal, or no answer (URLError...)."""
    return (SlackClientError, OSError)


def error_code(exc: BaseException) -> str:
    """Slack's code word for a failed call (`channel_not_found`), or the kind of failure."""
    if isinstance(exc, SlackApiError):
        error = exc.response.get("error") if exc.response is not None else None
        if isinstance(error, str) and error:
            return error[:80]
        status = getattr(exc.response, "status_code", None)
        return f"http_{status}" if status else "slack_error"
    if isinstance(exc, OSError):
        return "no_answer_from_slack"
    return type(exc).__name__


class SendError(Exception):
    """A message Slack did not take; `code` is its code word."""

    def __init__(self, method: str, code: str) -> None:
        super().__init__(f"Slack refused {method}: {code}")
        self.method = method
        self.code = code


class Chat:
    def __init__(self, client: WebClient) -> None:
        self.client = client

    def post(self, channel: str, message: Mapping[str, Any], *,
             thread_ts: str | None = None) -> MessageRef:
        """Post `message` ({"text", "blocks"}) in `channel` (or in a thread); SendError if not."""
        try:
            reply = self.client.chat_postMessage(channel=channel, text=message["text"],
                                                 blocks=message.get("blocks"),
                                                 thread_ts=thread_ts, unfurl_links=False,
                                                 unfurl_media=False)
        except slack_errors() as exc:
            code = error_code(exc)
            logs.event(_log, "slack_post_failed", logging.WARNING, channel=channel, error=code)
            raise SendError("chat.postMessage", code) from None
        return MessageRef(str(reply.get("channel") or channel), str(reply.get("ts") or ""))

    def update(self, ref: MessageRef, message: Mapping[str, Any]) -> bool:
        try:
            self.client.chat_update(channel=ref.channel, ts=ref.ts, text=message["text"],
                                    blocks=message.get("blocks"))
        except slack_errors() as exc:
            logs.event(_log, "slack_update_failed", logging.WARNING, channel=ref.channel,
                       ts=ref.ts, error=error_code(exc))
            return False
        return True

    def ephemeral(self, channel: str, user: str, text: str) -> bool:
        """`text` (mrkdwn) shown only to `user`, in `channel`."""
        try:
            self.client.chat_postEphemeral(channel=channel, user=user, text=text)
        except slack_errors() as exc:
            logs.event(_log, "slack_ephemeral_failed", logging.WARNING, channel=channel,
                       user=user, error=error_code(exc))
            return False
        return True
