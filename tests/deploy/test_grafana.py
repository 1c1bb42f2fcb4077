"""deploy/grafana/lockguard.json: a dashboard Grafana imports (or provisions) as it is, whose
every query is PromQL that Prometheus's own parser accepts (promtool, given each query as a
recording rule) and covers what the issue names: scans, durations, locks by verdict, the oldest
lock, cases by state, releases by outcome, per target. Its metric names are checked against a
real scrape in tests/deploy/test_metric_names.py."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.deploy.test_metric_names import DASHBOARD, dashboard_queries
from tests.deploy.test_prometheus_rules import promtool


def board() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def panels(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for item in items:
        out.append(item)
        out.extend(panels(item.get("panels", [])))
    return out


def test_the_dashboard_imports_as_is() -> None:
    dash = board()
    assert dash["uid"] == "lockguard"
    assert isinstance(dash["schemaVersion"], int)
    assert "__inputs" not in dash  # provisioned as it is: the data source is a variable
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    assert variables["DS_PROMETHEUS"]["type"] == "datasource"
    assert variables["target"]["includeAll"] is True
    ids = [p["id"] for p in panels(dash["panels"])]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    for panel in panels(dash["panels"]):
        if panel["type"] == "row":
            continue
        assert panel["datasource"]["uid"] == "${DS_PROMETHEUS}", panel["title"]
        assert panel["targets"], panel["title"]
        assert panel.get("description"), f"{panel['title']}: say what it shows"
        ref_ids = [t["refId"] for t in panel["targets"]]
        assert len(ref_ids) == len(set(ref_ids)), panel["title"]
        for target in panel["targets"]:
            if panel["type"] != "table":
                assert 'target=~"$target"' in target["expr"], target["expr"]


def test_it_shows_what_an_on_call_asks_first() -> None:
    queries = " ".join(dashboard_queries())
    for metric in (
        "lockguard_scans_total",
        "lockguard_scan_duration_seconds_bucket",
        "lockguard_locks",
        "lockguard_oldest_lock_age_seconds",
        "lockguard_cases",
        "lockguard_releases_total",
        "lockguard_last_scan_success_timestamp_seconds",
        "lockguard_target_up",
        "lockguard_scheduler_leader",
        "lockguard_oldest_pending_case_age_seconds",
    ):
        assert metric in queries, metric
    assert any(p["type"] == "table" for p in panels(board()["panels"]))  # per target


def test_every_query_parses_as_promql(tmp_path: Path) -> None:
    """Each panel query, its Grafana variables given values, as a recording rule: `promtool
    check rules` parses every expression with Prometheus's own parser."""
    rules = [
        {"record": f"lockguard:dashboard_query_{i}", "expr": q.replace("$target", ".*")}
        for i, q in enumerate(dashboard_queries())
        if not q.startswith("label_values(")
    ]
    path = tmp_path / "dashboard-queries.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    done = subprocess.run(
        [promtool(), "check", "rules", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(rules)} rules found" in done.stdout
