"""The keys a Lua batch read must skip as repeats that the tenure table cannot tell it of.

The read skips keys already in this scan's tenure table, but records reach the table every few
batches and reads are sent ahead: the scanner skips the keys of batches not yet written when a
read was sent (`since`), and forgets them once written and no read in flight needs them."""

from __future__ import annotations


class Repeats:
    """The keys of the batches yielded since the oldest one still needed, batch by batch."""

    def __init__(self) -> None:
        self.keys: set[bytes] = set()  # every key of `batches`
        self.batches: list[set[bytes]] = []
        self.first = 0  # the number of batches[0]
        self.unwritten = 0  # the first batch whose records may not be written yet

    def mark(self) -> int:
        """For a read being sent: batches from this number on may be missing from the table."""
        return self.unwritten

    def add(self, keys: set[bytes]) -> None:
        self.batches.append(keys)
        self.keys |= keys

    def written(self) -> None:
        """The records of every batch added so far are written (sent before any later read)."""
        self.unwritten = self.first + len(self.batches)

    def since(self, mark: int) -> set[bytes]:
        """The keys a read marked `mark` must skip: every batch's from `mark` on, and perhaps a
        few earlier ones (a key is yielded once per scan: skipping it again is as right)."""
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
