"""deploy/prometheus: the alerting rules are valid (`promtool check rules`), their unit tests pass
(`promtool test rules`), every alert has a firing and a not-firing test, and every alert carries
what an on-call needs: a severity, a summary, a description and a runbook that exists in
docs/operations.md.

promtool is Prometheus' own checker (Debian package `prometheus`): missing, these tests skip
locally and fail under CI=true, so CI can never pass without running the rules."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from tests.conftest import missing

ROOT = Path(__file__).resolve().parent.parent.parent
RULES = ROOT / "deploy" / "prometheus" / "lockguard-rules.yml"
RULE_TESTS = ROOT / "deploy" / "prometheus" / "lockguard-rules.test.yml"
OPERATIONS_DOC = ROOT / "docs" / "operations.md"
RUNBOOK_BASE = "https://lockguard.example/docs/operations/"
SEVERITIES = {"critical", "warning"}
ANNOTATIONS = ("summary", "description", "runbook_url")


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        missing("promtool is not installed (Debian package `prometheus`)")
    return found


def run_promtool(*args: str) -> None:
    done = subprocess.run(
        [promtool(), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, (
        f"promtool {' '.join(args)} exited {done.returncode}\n"
        f"--- stdout ---\n{done.stdout}\n--- stderr ---\n{done.stderr}"
    )


def alert_rules() -> list[dict[str, Any]]:
    doc = yaml.safe_load(RULES.read_text())
    groups = doc["groups"]
    assert [g["name"] for g in groups] == ["lockguard"]
    rules = groups[0]["rules"]
    assert all("alert" in r for r in rules), "only alerting rules here"
    return list(rules)


def alert_names() -> list[str]:
    return [r["alert"] for r in alert_rules()]


def test_promtool_check_rules() -> None:
    run_promtool("check", "rules", str(RULES.relative_to(ROOT)))


def test_promtool_test_rules() -> None:
    run_promtool("test", "rules", str(RULE_TESTS.relative_to(ROOT)))


def test_the_rules_are_the_ones_the_on_call_expects() -> None:
    names = alert_names()
    assert len(names) == len(set(names)), names
    for needed in (
        "LockguardNoSuccessfulScan",
        "LockguardScheduledScanOverdue",
        "LockguardNoLeader",
        "LockguardAbsent",
        "LockguardRedisUnreachable",
        "LockguardFleetTargetDown",
        "LockguardPendingCaseAging",
        "LockguardReleaseFailed",
    ):
        assert needed in names


def test_every_alert_has_a_severity_summary_description_and_runbook() -> None:
    for rule in alert_rules():
        name = rule["alert"]
        assert rule.get("labels", {}).get("severity") in SEVERITIES, name
        annotations = rule.get("annotations", {})
        for key in ANNOTATIONS:
            assert str(annotations.get(key, "")).strip(), f"{name}: no {key}"
        url = urlsplit(annotations["runbook_url"])
        assert annotations["runbook_url"].startswith(RUNBOOK_BASE + "#"), name
        assert url.fragment == name.lower(), f"{name}: runbook anchor {url.fragment!r}"


def test_every_runbook_anchor_is_a_heading_of_the_operations_doc() -> None:
    assert OPERATIONS_DOC.is_file(), f"{OPERATIONS_DOC.relative_to(ROOT)} does not exist"
    text = OPERATIONS_DOC.read_text()
    headings = {m.group(1) for m in re.finditer(r"^###[ \t]+(\S.*?)[ \t]*$", text, re.M)}
    anchors = {h.lower() for h in headings}
    missing = [n for n in alert_names() if n not in headings]
    assert not missing, f"no `### <alert>` heading in docs/operations.md for {missing}"
    for rule in alert_rules():
        fragment = urlsplit(rule["annotations"]["runbook_url"]).fragment
        assert fragment in anchors, f"{rule['alert']}: #{fragment} is no heading anchor"


def test_every_alert_has_a_firing_and_a_not_firing_unit_test() -> None:
    doc = yaml.safe_load(RULE_TESTS.read_text())
    assert doc["rule_files"] == [RULES.name]
    firing: set[str] = set()
    quiet: set[str] = set()
    for group in doc["tests"]:
        for case in group.get("alert_rule_test", []):
            (firing if case.get("exp_alerts") else quiet).add(case["alertname"])
    names = set(alert_names())
    assert names <= firing, f"no firing test for {sorted(names - firing)}"
    assert names <= quiet, f"no not-firing test for {sorted(names - quiet)}"
    assert firing | quiet <= names, f"tests of unknown alerts: {sorted((firing | quiet) - names)}"
