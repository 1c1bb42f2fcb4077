"""Presentation for terminals and scripts (pure): `scan` (findings, the table, the JSON, why no
case yet, `check`) and `cases` (cases, approvals, the audit log, the commands to run next)."""

from bot.report.case_text import (
    approval_text,
    approve_hint,
    audit_text,
    case_json,
    case_text,
    for_real,
)
from bot.report.scan import (
    Offers,
    RankedFindings,
    check_text,
    finding_json,
    scan_json,
    scan_json_head,
    table,
)

__all__ = [
    "Offers",
    "RankedFindings",
    "approval_text",
    "approve_hint",
    "audit_text",
    "case_json",
    "case_text",
    "check_text",
    "finding_json",
    "for_real",
    "scan_json",
    "scan_json_head",
    "table",
]
