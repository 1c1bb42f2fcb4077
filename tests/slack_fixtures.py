"""Slack fixtures: a started `FakeSlack` per test (re-exported by conftest.py so every test module
sees it). See tests/slack_mock.py for the mock and tests/slack_requests.py for signed requests.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.block_kit import check_message
from tests.slack_mock import FakeSlack

# slack_sdk's WebClient and WebhookClient (Bolt's respond()) read these and send even loopback
# requests through the proxy (they ignore NO_PROXY), so a proxied CI would never reach the fake.
_PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy")


def drop_proxy_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def fake_slack(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeSlack]:
    """A FakeSlack Web API on 127.0.0.1:<free port>, stopped after the test."""
    drop_proxy_settings(monkeypatch)
    with FakeSlack() as fake:
        yield fake


@pytest.fixture
def slack_fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeSlack]:
    """The FakeSlack of `slack_app` (tests/slack_app_harness.py), which a test may also give a
    `serve` running in a child process: every message it takes is checked against Slack's
    limits (`check_message`), and the test fails if one broke them."""
    drop_proxy_settings(monkeypatch)
    fake = FakeSlack(on_message=check_message).start()
    try:
        yield fake
    finally:
        fake.stop()
    assert fake.hook_errors == []
