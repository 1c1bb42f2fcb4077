"""One `lockguard serve` replica over a test fleet, as a process the tests can SIGKILL:
`python -m tests.fleet.fleet_replica` with the usual environment plus `FLEET_TARGETS`, a JSON
list of `{"name", "port", "channel"?, "labels"?}` (the targets file's loader is task E's; this
builds the same `Target` values from it)."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from bot import serve
from bot.config import load_settings
from bot.fleet import Target


def targets_from(text: str, env: dict[str, str]) -> list[Target]:
    settings = load_settings(env=env)
    out = []
    for entry in json.loads(text):
        update: dict[str, Any] = {"redis_host": "127.0.0.1", "redis_port": int(entry["port"])}
        if entry.get("channel"):
            update["slack_channel"] = entry["channel"]
        out.append(
            Target(
                name=entry["name"],
                settings=settings.model_copy(update=update),
                labels=entry.get("labels", {}),
            )
        )
    return out


def main() -> int:
    env = dict(os.environ)
    fleet = targets_from(env.pop("FLEET_TARGETS"), env)
    return serve.run(load_settings(env=env), targets=fleet)


if __name__ == "__main__":
    sys.exit(main())
