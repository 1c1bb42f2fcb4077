"""lockguard's side of Slack's Web API: one `WebClient`, and posting that never raises a surprise.

Retries (dropped connections, bounded 429 waits, 5xx) sleep in the calling thread, which is the
worker pool, never a thread that still has to ack; `quick_client` is for Bolt's listener thread
(`views.open`: the `trigger_id` lasts 3 s). The client logs through lockguard's logger, which
scrubs secrets (slack_sdk logs request headers at debug level). Every failure becomes a
`SendError` with Slack's code word, or a logged False; nothing else from Slack's reply is echoed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.http_retry import (
    ConnectionErrorRetryHandler,
    HttpRequest,
    HttpResponse,
    RateLimitErrorRetryHandler,
    RetryHandler,
    RetryState,
)

from bot.core import logs
from bot.slack.slack_settings import SlackSettings
from bot.store.message_refs import MessageRef

_log = logs.logger("slack.chat")

#: Retries of one Web API call at most, whatever went wrong (slack_sdk counts them together).
MAX_RETRIES = 3
#: A 429 asking to wait longer than this is not waited for in a worker: the call fails.
MAX_RETRY_AFTER = 30
SERVER_ERRORS = frozenset({500, 502, 503, 504})


class ServerErrorRetry(RetryHandler):
    """Retries Slack's 5xx answers (slack_sdk's own `ServerErrorRetryHandler` takes 500 and 503
    only, and is not exported from `slack_sdk.http_retry`)."""

    def _can_retry(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> bool:
        return response is not None and response.status_code in SERVER_ERRORS


class BoundedRateLimitRetry(RateLimitErrorRetryHandler):
    """slack_sdk's 429 handler for waits up to `longest` seconds; a longer one fails at once."""

    def __init__(self, max_retry_count: int, longest: int = MAX_RETRY_AFTER) -> None:
        super().__init__(max_retry_count=max_retry_count)
        self.longest = longest

    def _can_retry(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> bool:
        if response is None or response.status_code != 429:
            return False
        return retry_after(response) <= self.longest


def retry_after(response: HttpResponse) -> int:
    """The `Retry-After` seconds of a 429 (1 when it is missing or not a number)."""
    for name, values in response.headers.items():
        if name.lower() == "retry-after":
            value = values[0] if isinstance(values, list) and values else values
            try:
                return max(0, int(str(value)))
            except ValueError:
                return 1
    return 1


def retry_handlers() -> list[RetryHandler]:
    return [
        ConnectionErrorRetryHandler(max_retry_count=2),
        BoundedRateLimitRetry(max_retry_count=MAX_RETRIES),
        ServerErrorRetry(max_retry_count=2),
    ]


def web_client(settings: SlackSettings, *, timeout: int = 15) -> WebClient:
    token = settings.slack_bot_token.get_secret_value() if settings.slack_bot_token else None
    return WebClient(
        token=token,
        base_url=settings.slack_api_url,
        timeout=timeout,
        logger=logs.logger("slack.web"),
        retry_handlers=retry_handlers(),
    )


def quick_client(client: WebClient) -> WebClient:
    """2 s, one retry of a dropped connection, no rate-limit sleep."""
    return WebClient(
        token=client.token,
        base_url=client.base_url,
        timeout=2,
        logger=client.logger,
        headers=dict(client.headers),
        retry_handlers=[ConnectionErrorRetryHandler(max_retry_count=1)],
    )


def slack_errors() -> tuple[type[Exception], ...]:
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
    """A message Slack did not take; `queued`: it waits in the unposted queue."""

    def __init__(self, method: str, code: str) -> None:
        super().__init__(f"Slack refused {method}: {code}")
        self.method = method
        self.code = code
        self.queued = False


class Chat:
    def __init__(self, client: WebClient) -> None:
        self.client = client
        #: Called after every call Slack took: the reposter can post what waits.
        self.on_success: Callable[[], None] | None = None

    def _answered(self) -> None:
        hook = self.on_success
        if hook is not None:
            hook()

    def post(
        self, channel: str, message: Mapping[str, Any], *, thread_ts: str | None = None
    ) -> MessageRef:
        try:
            reply = self.client.chat_postMessage(
                channel=channel,
                text=message["text"],
                blocks=message.get("blocks"),
                thread_ts=thread_ts,
                unfurl_links=False,
                unfurl_media=False,
            )
        except slack_errors() as exc:
            code = error_code(exc)
            logs.event(_log, "slack_post_failed", logging.WARNING, channel=channel, error=code)
            raise SendError("chat.postMessage", code) from None
        self._answered()
        return MessageRef(str(reply.get("channel") or channel), str(reply.get("ts") or ""))

    def upload(self, ref: MessageRef, filename: str, content: bytes, comment: str) -> str:
        """`content` as a file in the thread of `ref`; the file's id."""
        try:
            reply = self.client.files_upload_v2(
                channel=ref.channel,
                thread_ts=ref.ts,
                filename=filename,
                title=filename,
                content=content,
                initial_comment=comment,
                request_file_info=False,  # files.info: another call and the files:read scope
            )
        except slack_errors() as exc:
            code = error_code(exc)
            logs.event(
                _log, "slack_upload_failed", logging.WARNING, channel=ref.channel, error=code
            )
            raise SendError("files_upload_v2", code) from None
        self._answered()
        files = reply.get("files") or []
        return str(files[0].get("id") or "") if files and isinstance(files[0], dict) else ""

    def _tried(self, call: Callable[[], object], failed: str, **fields: str) -> bool:
        """`call`; False (logged as `failed`, with `fields`) when Slack did not take it."""
        try:
            call()
        except slack_errors() as exc:
            logs.event(_log, failed, logging.WARNING, **fields, error=error_code(exc))
            return False
        self._answered()
        return True

    def update(self, ref: MessageRef, message: Mapping[str, Any]) -> bool:
        return self._tried(
            lambda: self.client.chat_update(
                channel=ref.channel, ts=ref.ts, text=message["text"], blocks=message.get("blocks")
            ),
            "slack_update_failed",
            channel=ref.channel,
            ts=ref.ts,
        )

    def ephemeral(self, channel: str, user: str, text: str) -> bool:
        return self._tried(
            lambda: self.client.chat_postEphemeral(channel=channel, user=user, text=text),
            "slack_ephemeral_failed",
            channel=channel,
            user=user,
        )

    def publish_home(self, user: str, view: Mapping[str, Any]) -> bool:
        return self._tried(
            lambda: self.client.views_publish(user_id=user, view=dict(view)),
            "slack_home_not_published",
            user=user,
        )
