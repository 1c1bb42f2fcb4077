"""Wait-for cycles (pure): which locks wait on each other for ever.

Lock A waits for lock B when a holder of A (Redisson: `<uuid>:<threadId>`) stands in B's fair-lock
queue; a cycle of that is a deadlock no TTL ends. A holder queued for a lock it already holds is no
edge (Redisson re-enters it: the entry is stale). At most one cycle per strongly connected group
is reported (the shortest through its first lock), in O(locks + edges): releasing one of its locks
breaks it, and a group's other cycles show on a later scan.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from bot.core.display import escape

#: The longest cycle reported; a longer one is only counted (no person can check it in a message).
MAX_CYCLE_LOCKS = 32
#: Cycles reported per scan, at most.
MAX_CYCLES = 20


@dataclass(frozen=True, slots=True)
class Link:
    """One step of a cycle: `holder` holds `lock` and waits for the next link's lock."""

    lock: bytes
    holder: bytes


@dataclass(frozen=True, slots=True)
class Cycles:
    found: tuple[tuple[Link, ...], ...] = ()
    too_long: int = 0  # groups whose shortest cycle is longer than MAX_CYCLE_LOCKS
    beyond: int = 0  # groups past `limit`


def find_cycles(
    held_by: Mapping[bytes, Iterable[bytes]],
    waits_for: Mapping[bytes, Iterable[bytes]],
    *,
    limit: int = MAX_CYCLES,
) -> Cycles:
    """The deadlocks among these locks (`waits_for`: holder -> the locks whose queue it is in),
    in order of their first lock."""
    edges = _edges(held_by, waits_for)
    found: list[tuple[Link, ...]] = []
    too_long = beyond = 0
    for group in _groups(edges):
        start = min(group)
        cycle = _shortest_cycle(start, group, edges)
        if cycle is None:  # a group of one lock without a self edge: no cycle
            continue
        if len(cycle) > MAX_CYCLE_LOCKS:
            too_long += 1
        elif len(found) >= limit:
            beyond += 1
        else:
            found.append(cycle)
    found.sort(key=lambda c: c[0].lock)
    return Cycles(tuple(found), too_long, beyond)


def _edges(
    held_by: Mapping[bytes, Iterable[bytes]], waits_for: Mapping[bytes, Iterable[bytes]]
) -> dict[bytes, dict[bytes, bytes]]:
    """lock A -> {lock B: the holder of A (the least by bytes) that waits in B's queue}."""
    holders = {lock: frozenset(hs) for lock, hs in held_by.items()}
    edges: dict[bytes, dict[bytes, bytes]] = {lock: {} for lock in holders}
    for lock in sorted(holders):
        out = edges[lock]
        for holder in sorted(holders[lock]):
            for target in waits_for.get(holder, ()):
                if target == lock or target not in holders or holder in holders[target]:
                    continue
                out.setdefault(target, holder)
    return edges


def _groups(edges: Mapping[bytes, Mapping[bytes, bytes]]) -> list[frozenset[bytes]]:
    """Strongly connected groups of two or more locks (Tarjan's algorithm, iterative)."""
    index: dict[bytes, int] = {}
    low: dict[bytes, int] = {}
    on_stack: set[bytes] = set()
    stack: list[bytes] = []
    groups: list[frozenset[bytes]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                members = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    members.append(top)
                    if top == node:
                        break
                if len(members) > 1:
                    groups.append(frozenset(members))
    return groups


def _shortest_cycle(
    start: bytes, group: frozenset[bytes], edges: Mapping[bytes, Mapping[bytes, bytes]]
) -> tuple[Link, ...] | None:
    """The shortest cycle from `start` back to it inside `group` (breadth first), as links."""
    came_from: dict[bytes, bytes] = {}
    queue = deque([start])
    seen = {start}
    while queue:
        node = queue.popleft()
        for nxt in sorted(edges[node]):
            if nxt not in group:
                continue
            if nxt == start:
                path = [node]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                path.reverse()  # start, ..., node; node waits for start
                nexts = [*path[1:], start]
                return tuple(Link(a, edges[a][b]) for a, b in zip(path, nexts, strict=True))
            if nxt not in seen:
                seen.add(nxt)
                came_from[nxt] = node
                queue.append(nxt)
    return None


def cycle_text(cycle: tuple[tuple[bytes, bytes], ...], *, key_limit: int = 60) -> str:
    """ "lock:a (held by <holder>) waits for lock:b (held by <holder>) waits for lock:a", at most
    8 locks named."""
    if not cycle:
        return ""
    shown = [
        f"{escape(key, key_limit)} (held by {escape(holder, 60)})" for key, holder in cycle[:8]
    ]
    more = f" … {len(cycle) - 8} more" if len(cycle) > 8 else ""
    return " waits for ".join(shown) + more + f" waits for {escape(cycle[0][0], key_limit)}"
