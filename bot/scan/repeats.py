"""Which keys a Lua batch read must skip as repeats because the tenure table could not tell it.

SCAN may return a key twice, and a key may match two patterns: the batch read skips keys
already in this scan's tenure table, but a batch's records reach the table only when the caller
writes them (every few batches), and reads are sent ahead of that (`bot.scan.scanner`). So a read
cannot know the keys of the batches that were not written when it was sent: the scanner skips
those itself, from the keys it yielded since (`since`), and forgets a batch's keys once no read
in flight can need them and they are written (`forget`)."""

from __future__ import annotations


class Repeats:
    """The keys of the batches yielded since the oldest one still needed (`keys`), and which
    batch each came in (numbered in order)."""

    def __init__(self) -> None:
        self.keys: set[bytes] = set()  # every key of `batches`
        self.batches: list[set[bytes]] = []
        self.first = 0  # the number of batches[0]
        self.unwritten = 0  # the first batch whose records may not be written yet

    def mark(self) -> int:
        """For a read being sent: every batch from this number on may be missing from the
        table when it runs."""
        return self.unwritten

    def add(self, keys: set[bytes]) -> None:
        self.batches.append(keys)
        self.keys |= keys

    def written(self) -> None:
        """The records of every batch added so far are written (sent before any later read)."""
        self.unwritten = self.first + len(self.batches)

    def since(self, mark: int) -> set[bytes]:
        """The keys a read marked `mark` must skip: those of every batch added from `mark` on,
        and perhaps of a few before (a key is yielded once in a scan: skipping one of an
        earlier batch again is as right, and costs no copy)."""
        assert mark >= self.first, "a batch a read in flight needs was forgotten"
        return self.keys

    def forget(self, oldest: int) -> None:
        """No read in flight needs a batch before number `oldest` (nor one already written)."""
        drop = min(oldest, self.unwritten) - self.first
        if drop > 0:
            for keys in self.batches[:drop]:
                self.keys -= keys
            del self.batches[:drop]
            self.first += drop
