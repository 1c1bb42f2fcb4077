"""Keep the worst N of a stream of millions: a bounded min-heap whose top is the least bad kept.

A rank is a tuple, larger is worse; a tie replaces the kept item (the freshest view wins). The hot
loop asks `admits(rank)` before building its item, so most locks cost one comparison.
"""

from __future__ import annotations

import heapq
import itertools
from typing import Generic, TypeVar

T = TypeVar("T")
Rank = tuple[float, ...]


class Worst(Generic[T]):
    def __init__(self, keep: int) -> None:
        if keep < 0:
            raise ValueError(f"keep must be 0 or more, got {keep}")
        self.keep = keep
        self._heap: list[tuple[Rank, int, T]] = []
        self._seq = itertools.count()

    def __len__(self) -> int:
        return len(self._heap)

    def admits(self, rank: Rank) -> bool:
        heap = self._heap
        return len(heap) < self.keep or (self.keep > 0 and rank >= heap[0][0])

    def floor(self) -> Rank | None:
        """The rank an item needs to be kept now (ties admitted); None while not full."""
        if len(self._heap) < self.keep or self.keep == 0:
            return None if self.keep else (float("inf"),)
        return self._heap[0][0]

    def add(self, rank: Rank, item: T) -> None:
        if not self.admits(rank):
            return
        entry = (rank, next(self._seq), item)
        if len(self._heap) < self.keep:
            heapq.heappush(self._heap, entry)
        else:
            heapq.heappushpop(self._heap, entry)

    def items(self) -> list[T]:
        """The kept items, worst first; among equal ranks the earlier added first."""
        return [item for *_, item in sorted(self._heap, key=_worst_first, reverse=True)]


def _worst_first(entry: tuple[Rank, int, object]) -> tuple[Rank, int]:
    return entry[0], -entry[1]
