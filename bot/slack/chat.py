"""lockguard's side of Slack's Web API: one `WebClient`, and posting that never raises a surprise.

`web_client(settings)` is the client the Bolt app and every listener use: `SLACK_API_URL` as
its base, the bot token, and `retry_handlers()`: dropped connections (URLError, connection
reset), 429s (sleeping `Retry-After` plus up to 1 s, when Slack asks for at most
`MAX_RETRY_AFTER` seconds) and Slack's 500/502/503/504 (backoff 0.5 s, 1 s, … plus jitter).
slack_sdk counts the attempts of one call across all handlers: at most `MAX_RETRIES` retries a
call. They sleep in the thread that made the call, which is lockguard's worker pool (never a
thread that still has to ack). A call still failing after them is a `SendError`: the case
waits in Redis and `bot.slack.reposter` posts its message later. It logs through lockguard's
logger, whose handler scrubs every secret (slack_sdk logs request headers at debug level).

`quick_client(client)` is the same client with one connection retry and a 2 s timeout, for
`views.open`: it runs on Bolt's listener thread (the click's `trigger_id` lasts 3 s), where a
long rate-limit sleep would hold a thread that other requests need for their acks.

`Chat` wraps the calls lockguard makes. Every failure (Slack's `ok: false`, an HTTP error, no
answer at all) becomes a `SendError` with Slack's code word (`channel_not_found`,
`not_in_channel`, ...) or, for `update` and `ephemeral`, a logged `False`: a listener decides
what to tell the person, and nothing from Slack's reply is echoed beyond the code word.
`Chat.on_success`, when set, is called after every call Slack took: Slack answers again, so
the reposter can post what waits.
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
#: The HTTP statuses of a Slack that is briefly unwell.
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
    """slack_sdk's 429 handler (sleeps `Retry-After` + random(0..1) s), for waits up to
    `longest` seconds; a longer one fails the call at once."""

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
    """`client` for calls made on Bolt's listener thread: 2 s, one retry of a dropped
    connection, no rate-limit sleep."""
    return WebClient(
        token=client.token,
        base_url=client.base_url,
        timeout=2,
        logger=client.logger,
        headers=dict(client.headers),
        retry_handlers=[ConnectionErrorRetryHandler(max_retry_count=1)],
    )


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
    """A message Slack did not take; `code` is its code word. `queued`: the message is in the
    unposted queue, to be posted when Slack takes it (set by `CasePosts.post_scan`)."""

    def __init__(self, method: str, code: str) -> None:
        super().__init__(f"Slack refused {method}: {code}")
        self.method = method
        self.code = code
        self.queued = False


class Chat:
    def __init__(self, client: WebClient) -> None:
        self.client = client
        self.on_success: Callable[[], None] | None = None

    def _answered(self) -> None:
        hook = self.on_success
        if hook is not None:
            hook()

    def post(
        self, channel: str, message: Mapping[str, Any], *, thread_ts: str | None = None
    ) -> MessageRef:
        """Post `message` ({"text", "blocks"}) in `channel` (or in a thread); SendError if not."""
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
        """`content` as the file `filename` in the thread of `ref` (`files_upload_v2`: Slack's
        upload URL, then `files.completeUploadExternal`), with `comment` (mrkdwn) beside it.
        The file's id; SendError (`files_upload_v2`) if Slack did not take it."""
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

    def update(self, ref: MessageRef, message: Mapping[str, Any]) -> bool:
        try:
            self.client.chat_update(
                channel=ref.channel, ts=ref.ts, text=message["text"], blocks=message.get("blocks")
            )
        except slack_errors() as exc:
            logs.event(
                _log,
                "slack_update_failed",
                logging.WARNING,
                channel=ref.channel,
                ts=ref.ts,
                error=error_code(exc),
            )
            return False
        self._answered()
        return True

    def ephemeral(self, channel: str, user: str, text: str) -> bool:
        """`text` (mrkdwn) shown only to `user`, in `channel`."""
        try:
            self.client.chat_postEphemeral(channel=channel, user=user, text=text)
        except slack_errors() as exc:
            logs.event(
                _log,
                "slack_ephemeral_failed",
                logging.WARNING,
                channel=channel,
                user=user,
                error=error_code(exc),
            )
            return False
        self._answered()
        return True

    def publish_home(self, user: str, view: Mapping[str, Any]) -> bool:
        """`views.publish`: `view` (a Home tab) for `user`. False (logged) when Slack refused."""
        try:
            self.client.views_publish(user_id=user, view=dict(view))
        except slack_errors() as exc:
            logs.event(
                _log, "slack_home_not_published", logging.WARNING, user=user, error=error_code(exc)
            )
            return False
        self._answered()
        return True
