"""Evidence read after a scan for the findings it keeps: who waits behind each lock, what work
is queued behind it, whether its owner is connected. Read-only and bounded (at most
`EVIDENCE_LIMIT` findings, never a read per scanned lock), under `CLIENT NO-TOUCH` (Redis 7.2+)
so idle times are not reset; a refused read leaves that piece unknown and the scan goes on.
"""

from bot.evidence.ranking import EVIDENCE_LIMIT, rank, record_ranked

__all__ = ["EVIDENCE_LIMIT", "rank", "record_ranked"]
