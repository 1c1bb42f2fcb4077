"""manifest.yml is the Slack app the code serves: the slash command, interactivity and the scopes
every Web API call the app makes needs, and the Home tab's event."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from bot.slack.blocks import ids
from bot.slack.home_tab import EVENT as HOME_EVENT

MANIFEST = Path(__file__).resolve().parents[2] / "manifest.yml"


def manifest() -> dict[str, Any]:
    doc = yaml.safe_load(MANIFEST.read_text())
    assert isinstance(doc, dict)
    return doc


def test_the_slash_command_and_clicks_reach_slack_events() -> None:
    doc = manifest()
    (command,) = doc["features"]["slash_commands"]
    assert command["command"] == ids.COMMAND == "/lockguard"
    assert command["url"].endswith("/slack/events")
    assert doc["settings"]["interactivity"]["is_enabled"] is True
    assert doc["settings"]["interactivity"]["request_url"].endswith("/slack/events")
    assert doc["settings"]["socket_mode_enabled"] is False


def test_the_home_tab_is_on_and_its_event_reaches_slack_events() -> None:
    doc = manifest()
    assert doc["features"]["app_home"]["home_tab_enabled"] is True
    events = doc["settings"]["event_subscriptions"]
    assert events["request_url"].endswith("/slack/events")
    assert events["bot_events"] == [HOME_EVENT] == ["app_home_opened"]


def test_the_bot_has_the_scopes_its_calls_need_and_no_more() -> None:
    scopes = set(manifest()["oauth_config"]["scopes"]["bot"])
    assert scopes == {
        "commands",
        "chat:write",
        "chat:write.public",
        "usergroups:read",
        "files:write",  # files_upload_v2: a big case's whole list
    }


def test_names_fit_slacks_limits() -> None:
    info = manifest()["display_information"]
    assert 1 <= len(info["name"]) <= 35
    assert 1 <= len(info["description"]) <= 140
    assert 1 <= len(manifest()["features"]["bot_user"]["display_name"]) <= 80


SOCKET_MODE = MANIFEST.with_name("manifest.socket-mode.yml")


def without_urls(node: Any) -> Any:
    """`node` without its request URLs and the Socket Mode switch."""
    if isinstance(node, dict):
        return {
            k: without_urls(v)
            for k, v in node.items()
            if k not in ("url", "request_url", "socket_mode_enabled")
        }
    if isinstance(node, list):
        return [without_urls(v) for v in node]
    return node


def test_the_socket_mode_manifest_is_the_same_app_without_urls() -> None:
    doc = yaml.safe_load(SOCKET_MODE.read_text())
    assert doc["settings"]["socket_mode_enabled"] is True
    assert "https://" not in SOCKET_MODE.read_text().split("_metadata:", 1)[1]
    assert without_urls(doc) == without_urls(manifest())
    assert doc["settings"]["interactivity"]["is_enabled"] is True
    assert doc["settings"]["event_subscriptions"]["bot_events"] == ["app_home_opened"]
