"""The alert rules (deploy/prometheus) and the dashboard (deploy/grafana) ask only for what a
running `serve` exports: each metric name, each label a query selects or groups by, and each
label value it matches exactly (`outcome="error"`, `state="pending"`), checked against a real
scrape of `GET /metrics` after a real scan, approval and release. A renamed metric or label, or
a typo in a query, fails here rather than leaving an alert that can never fire."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from bot.slack.blocks import ids
from tests.ops.test_ops_serve import FAST, get
from tests.slack_app_harness import Factory, buttons
from tests.slack_app_harness import slack_app as slack_app

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "lockguard-rules.yml"
DASHBOARD = ROOT / "deploy" / "grafana" / "lockguard.json"
#: A metric name with its selector, if any: `lockguard_x{a="b", c!~"d"}`.
SELECTOR = re.compile(r"\b(lockguard_[a-z_]+)(?:\{([^}]*)\})?")
MATCHER = re.compile(r'([a-z_]+)\s*(=~|!~|!=|=)\s*"([^"]*)"')
GROUPING = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)")
#: Labels Prometheus itself adds to every scraped series.
SCRAPE_LABELS = {"instance", "job", "pod", "namespace"}


def rule_queries() -> list[str]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule["expr"] for group in groups for rule in group["rules"]]


def dashboard_queries() -> list[str]:
    def walk(panels: list[dict[str, object]]) -> Iterator[str]:
        for panel in panels:
            for target in panel.get("targets", []):  # type: ignore[attr-defined]
                yield target["expr"]
            yield from walk(panel.get("panels", []))  # type: ignore[arg-type]

    board = json.loads(DASHBOARD.read_text())
    queries = list(walk(board["panels"]))
    variables = board["templating"]["list"]
    queries += [v["definition"] for v in variables if v["type"] == "query"]
    return queries


Exported = dict[str, dict[str, set[str]]]  # sample name -> label -> values seen


@pytest.fixture(scope="module")
def exported() -> Exported:
    return {}


def scrape(url: str) -> Exported:
    reply = get(url + "/metrics")
    assert reply.status == 200
    out: Exported = {}
    for family in text_string_to_metric_families(reply.text):
        for sample in family.samples:
            labels = out.setdefault(sample.name, {})
            for name, value in sample.labels.items():
                labels.setdefault(name, set()).add(value)
    return out


@pytest.fixture
def served_metrics(slack_app: Factory) -> Exported:
    """A real serve after a scheduled scan found a stuck lock, its case approved and the lock
    released: every family has samples, and the counters have moved."""
    app = slack_app(tuning=FAST, LOCKGUARD_SCAN_SCHEDULE="every 1s", LOCKGUARD_DRY_RUN="false")
    app.plant(b"lock:stuck")
    [posted] = app.fake.wait_for("chat.postMessage", timeout=5)
    case_id = buttons(posted)[ids.APPROVE]
    assert app.click(ids.APPROVE, case_id, message_ts=app.posted_ts(posted)).status == 200
    deadline = time.monotonic() + 5
    while True:
        got = scrape(app.served.url)
        released = "lockguard_releases_total" in got
        if released and "released" in got["lockguard_releases_total"].get("outcome", set()):
            return got
        assert time.monotonic() < deadline, "no release counted"
        time.sleep(0.05)


def problems(query: str, exported: Exported) -> list[str]:
    """What `query` asks for that the scrape does not have."""
    found: list[str] = []
    names = SELECTOR.findall(query)
    assert names, f"no lockguard metric in {query!r}"
    known_labels = set().union(*(exported.get(n, {}).keys() for n, _ in names)) | {"le"}
    for name, matchers in names:
        if name not in exported:
            found.append(f"{name}: not exported")
            continue
        for label, op, value in MATCHER.findall(matchers or ""):
            seen = exported[name].get(label)
            if seen is None:
                found.append(f"{name}: no label {label}")
            elif op == "=" and value not in seen and not value.startswith("$"):
                found.append(f"{name}: {label}={value!r} never exported (only {sorted(seen)})")
    for grouping in GROUPING.findall(query):
        for label in filter(None, (w.strip() for w in grouping.split(","))):
            if label not in known_labels | SCRAPE_LABELS:
                found.append(f"grouped by {label}, which none of {names} carries")
    return found


def test_every_alert_rule_asks_for_what_serve_exports(served_metrics: Exported) -> None:
    queries = rule_queries()
    assert len(queries) >= 7
    assert [p for q in queries for p in problems(q, served_metrics)] == []


def test_every_dashboard_query_asks_for_what_serve_exports(served_metrics: Exported) -> None:
    queries = dashboard_queries()
    assert len(queries) >= 10
    assert [p for q in queries for p in problems(q, served_metrics)] == []


def test_a_renamed_metric_or_a_wrong_label_value_is_caught(served_metrics: Exported) -> None:
    """The check itself: what it must refuse, it refuses."""
    assert problems("lockguard_release_total", served_metrics) == [
        "lockguard_release_total: not exported"
    ]
    [wrong] = problems('lockguard_releases_total{outcome="failed"}', served_metrics)
    assert "outcome='failed' never exported" in wrong
    [ungrouped] = problems("sum by (verdict) (lockguard_cases)", served_metrics)
    assert "grouped by verdict" in ungrouped
