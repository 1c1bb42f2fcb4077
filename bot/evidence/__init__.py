"""Evidence for the decision, read after a scan for the findings it keeps: who waits behind each
lock, what work is queued behind it, whether its owner is still connected (`bot.core.impact`).

Read-only and bounded: one pipeline for at most `EVIDENCE_LIMIT` findings, never one read per
scanned lock; lockguard's own reads do not reset idle times where the server can promise it
(`CLIENT NO-TOUCH`, Redis 7.2+). A refused read leaves that piece unknown and the scan goes on.
"""

from bot.evidence.ranking import EVIDENCE_LIMIT, rank, record_ranked

__all__ = ["EVIDENCE_LIMIT", "rank", "record_ranked"]
