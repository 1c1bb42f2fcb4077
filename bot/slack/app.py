"""The Bolt app: `build_slack_app(engine, settings)` wires the listeners to the engine.

Every listener acks first; the work after the ack runs on lockguard's own pool, not Bolt's
listener threads, so a slow Redis cannot starve the acks. A redelivery from Slack
(`X-Slack-Retry-Num`) is answered `X-Slack-No-Retry: 1` and nothing runs: the first delivery
already started the scan or the release. An invalid bot token fails Bolt's `auth.test` here:
`SlackStartError` names the setting and Slack's code word, never the token.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass

from slack_bolt import App, BoltRequest, BoltResponse
from slack_bolt.error import BoltError
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.core import logs
from bot.core.errors import ConfigError
from bot.engine import Engine
from bot.slack.alerts import Notifier
from bot.slack.approve_action import Approval
from bot.slack.approvers import Approvers, scanners_of, viewers_of
from bot.slack.blocks.guard import Guard
from bot.slack.case_posts import CasePosts
from bot.slack.chat import Chat, error_code, slack_errors, web_client
from bot.slack.commands import Commands
from bot.slack.decider import Decider, Router
from bot.slack.home_tab import HomeTab
from bot.slack.reject_action import Rejection
from bot.slack.replays import Replays
from bot.slack.reposter import EVERY, Reposter
from bot.slack.slack_settings import SlackSettings
from bot.slack.work import Work
from bot.store.message_refs import MessageStore

RETRY_HEADER = "x-slack-retry-num"
_log = logs.logger("slack.app")


class SlackStartError(ConfigError):
    """Slack refused the bot token (or did not answer) at start: exit 2, nothing served."""


@dataclass(frozen=True, slots=True)
class SlackApp:
    app: App
    work: Work
    notifier: Notifier
    posts: CasePosts
    approvers: Approvers
    reposter: Reposter
    chat: Chat
    replays: Replays
    router: Router
    commands: Commands

    @property
    def client(self) -> WebClient:
        return self.app.client

    def close(self, *, wait: bool = True) -> None:
        """Stop taking work; jobs already running (a release) finish first when `wait`."""
        self.reposter.close()
        self.replays.close()
        self.work.shutdown(wait=wait)


def build_slack_app(
    engine: Engine,
    settings: SlackSettings,
    *,
    client: WebClient | None = None,
    executor: Executor | None = None,
    repost_every: float = EVERY,
    guard: Guard | None = None,
) -> SlackApp:
    """The app, with the reposter's timer started (its first round runs now)."""
    client = client if client is not None else web_client(settings)
    app = _bolt_app(client, settings)
    chat = Chat(client)
    work = Work(executor)
    approvers = Approvers(
        client,
        settings.approver_ids,
        settings.approver_group,
        required=engine.config.required_approvals,
    )
    notifier = Notifier(engine, chat, settings.slack_channel or "")
    replays = Replays(engine, notifier, work)
    app.middleware(ignore_slack_retries)  # first: Slack's redeliveries are answered as ever
    app.middleware(replays.middleware)
    typed_above = settings.confirm_typed_above
    posts = CasePosts(
        engine,
        chat,
        MessageStore(engine.door, engine.config.retention_ms),
        approvers_note=approvers.note(),
        typed_above=typed_above,
    )
    reposter = Reposter(posts, work, every=repost_every)
    chat.on_success = reposter.poke
    scanners = scanners_of(client, settings.scanner_ids, settings.scanner_group, approvers)
    channel = settings.slack_channel or ""
    viewers = viewers_of(
        client, settings.viewer_ids, settings.viewer_group, approvers, scanners, channel
    )
    commands = Commands(
        engine,
        posts,
        notifier,
        work,
        guard,
        channel=channel,
        scanners=scanners,
        viewers=viewers,
    )
    commands.register(app)
    router = Router(Decider(engine, posts, approvers, notifier, chat))
    Approval(router, chat, work, guard, typed_above=typed_above).register(app)
    Rejection(router, chat, work).register(app)
    HomeTab(engine, guard, chat, notifier, work, commands.targets, viewers).register(app)
    reposter.start()
    return SlackApp(
        app, work, notifier, posts, approvers, reposter, chat, replays, router, commands
    )


def ignore_slack_retries(req: BoltRequest, next: Callable[[], None]) -> BoltResponse | None:
    """After Bolt's signature check: a redelivery is acked and dropped. Socket Mode's first
    delivery is mirrored as `X-Slack-Retry-Num: 0`: not a redelivery."""
    values = req.headers.get(RETRY_HEADER) or []
    if not values or str(values[0]).strip() in ("", "0"):
        next()
        return None
    reason = (req.headers.get("x-slack-retry-reason") or [""])[0]
    logs.event(_log, "slack_retry_ignored", retry=str(values[0])[:10], reason=reason[:40])
    return BoltResponse(status=200, body="", headers={"x-slack-no-retry": "1"})


class _GivenClientFilter(logging.Filter):
    """Bolt warns the environment's token "will be unused" beside our client (same token)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "`token` will be unused" not in record.getMessage()


def _bolt_logger() -> logging.Logger:
    log = logs.logger("slack.bolt")
    if not any(isinstance(f, _GivenClientFilter) for f in log.filters):
        log.addFilter(_GivenClientFilter())
    return log


def _bolt_app(client: WebClient, settings: SlackSettings) -> App:
    secret = (
        settings.slack_signing_secret.get_secret_value() if settings.slack_signing_secret else None
    )
    try:
        return App(
            client=client,
            signing_secret=secret,
            process_before_response=False,
            logger=_bolt_logger(),
            token_verification_enabled=True,
        )
    except BoltError as exc:
        cause = exc.__context__
        if isinstance(cause, SlackApiError):
            raise SlackStartError(
                f"SLACK_BOT_TOKEN: Slack refused the bot token (auth.test: {error_code(cause)})"
            ) from None
        raise SlackStartError(
            f"SLACK_BOT_TOKEN: the Slack app could not start ({type(exc).__name__})"
        ) from None
    except slack_errors() as exc:
        # SLACK_API_URL is named only when it points somewhere else than Slack's own URL
        given = settings.slack_api_url != SlackSettings.model_fields["slack_api_url"].default
        raise SlackStartError(
            f"{'SLACK_API_URL' if given else 'Slack'}: Slack did not answer auth.test at "
            f"{settings.slack_api_url} ({error_code(exc)})"
            + ("" if given else "; check that this machine reaches it (a proxy: HTTPS_PROXY)")
        ) from None
