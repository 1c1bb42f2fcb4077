"""The wait-for cycle finder (`bot.core.waitfor`), on plain values: which locks wait on each
other for ever, named in order, one cycle per group, bounded however big the graph."""

from __future__ import annotations

import pytest

from bot.core.waitfor import MAX_CYCLE_LOCKS, Link, cycle_text, find_cycles


def locks(*pairs: tuple[str, str]) -> dict[bytes, list[bytes]]:
    """lock -> [holder], from ("lock", "holder") pairs."""
    return {k.encode(): [h.encode()] for k, h in pairs}


def waits(*pairs: tuple[str, str]) -> dict[bytes, list[bytes]]:
    """holder -> [locks it is queued for], from ("holder", "lock") pairs."""
    out: dict[bytes, list[bytes]] = {}
    for h, k in pairs:
        out.setdefault(h.encode(), []).append(k.encode())
    return out


def named(cycle: tuple[Link, ...]) -> list[tuple[str, str]]:
    return [(link.lock.decode(), link.holder.decode()) for link in cycle]


def test_two_locks_waiting_on_each_other_are_one_cycle_in_wait_order() -> None:
    found = find_cycles(locks(("a", "T1"), ("b", "T2")), waits(("T1", "b"), ("T2", "a")))
    assert [named(c) for c in found.found] == [[("a", "T1"), ("b", "T2")]]


def test_a_three_cycle_is_named_in_order_from_its_first_lock() -> None:
    found = find_cycles(
        locks(("c", "T3"), ("a", "T1"), ("b", "T2")),
        waits(("T1", "b"), ("T2", "c"), ("T3", "a")),
    )
    assert [named(c) for c in found.found] == [[("a", "T1"), ("b", "T2"), ("c", "T3")]]


@pytest.mark.parametrize(
    ("held", "queued"),
    [
        # a chain: a waits for b, b's holder waits for nothing
        (locks(("a", "T1"), ("b", "T2")), waits(("T1", "b"))),
        # a holder queued for its own lock (Redisson re-enters instead: a stale entry)
        (locks(("a", "T1")), waits(("T1", "a"))),
        # T1 holds both a and b and is queued for b: it holds b, so it does not wait for it
        ({b"a": [b"T1"], b"b": [b"T1", b"T2"]}, waits(("T1", "b"), ("T2", "a"))),
        # queued for a lock that is not among the scanned ones
        (locks(("a", "T1")), waits(("T1", "zzz"))),
        # nobody queued anywhere
        (locks(("a", "T1"), ("b", "T2")), {}),
    ],
    ids=["chain", "self-wait", "holder-of-both", "unknown-lock", "no-waits"],
)
def test_no_cycle_no_deadlock(
    held: dict[bytes, list[bytes]], queued: dict[bytes, list[bytes]]
) -> None:
    assert find_cycles(held, queued).found == ()


def test_separate_cycles_are_separate_findings_in_key_order() -> None:
    found = find_cycles(
        locks(("x", "X1"), ("y", "Y1"), ("a", "A1"), ("b", "B1"), ("c", "C1")),
        waits(("X1", "y"), ("Y1", "x"), ("A1", "b"), ("B1", "c"), ("C1", "a")),
    )
    assert [named(c) for c in found.found] == [
        [("a", "A1"), ("b", "B1"), ("c", "C1")],
        [("x", "X1"), ("y", "Y1")],
    ]


def test_one_group_of_interlocked_cycles_gives_its_shortest_cycle_through_its_first_lock() -> None:
    # a <-> b, and a -> c -> d -> a: one group, the shortest cycle through `a` is a, b
    held = {b"a": [b"A1", b"A2"], b"b": [b"B1"], b"c": [b"C1"], b"d": [b"D1"]}
    queued = waits(("A1", "c"), ("A2", "b"), ("B1", "a"), ("C1", "d"), ("D1", "a"))
    found = find_cycles(held, queued)
    assert [named(c) for c in found.found] == [[("a", "A2"), ("b", "B1")]]


def test_a_cycle_longer_than_the_cap_is_counted_not_reported() -> None:
    n = MAX_CYCLE_LOCKS + 1
    held = {b"l%03d" % i: [b"T%03d" % i] for i in range(n)}
    queued = {b"T%03d" % i: [b"l%03d" % ((i + 1) % n)] for i in range(n)}
    found = find_cycles(held, queued)
    assert (found.found, found.too_long) == ((), 1)
    at_cap = {k: v for k, v in held.items() if k != b"l%03d" % (n - 1)}
    queued[b"T%03d" % (n - 2)] = [b"l000"]
    assert [len(c) for c in find_cycles(at_cap, queued).found] == [MAX_CYCLE_LOCKS]


def test_a_huge_graph_is_bounded_in_cycles_reported() -> None:
    held: dict[bytes, list[bytes]] = {}
    queued: dict[bytes, list[bytes]] = {}
    for i in range(20_000):  # 10,000 two-lock cycles and 100,000 idle locks besides
        a, b = b"p%05d:a" % i, b"p%05d:b" % i
        held[a], held[b] = [b"A%d" % i], [b"B%d" % i]
        queued[b"A%d" % i], queued[b"B%d" % i] = [b], [a]
    for i in range(100_000):
        held[b"idle:%d" % i] = [b"I%d" % i]
    found = find_cycles(held, queued, limit=5)
    assert len(found.found) == 5
    assert found.beyond == 20_000 - 5
    assert named(found.found[0]) == [("p00000:a", "A0"), ("p00000:b", "B0")]


def test_a_long_waiting_chain_is_walked_without_recursion() -> None:
    n = 50_000  # a recursive search would overflow Python's stack
    held = {b"k%06d" % i: [b"T%06d" % i] for i in range(n)}
    queued = {b"T%06d" % i: [b"k%06d" % (i + 1)] for i in range(n - 1)}
    assert find_cycles(held, queued).found == ()


def test_cycle_text_names_each_lock_and_holder_escaped_and_cut() -> None:
    text = cycle_text(((b"lock:a", b"u1:1"), (b"lock:\x00b", b"u2:7")))
    assert text == ("lock:a (held by u1:1) waits for lock:\\x00b (held by u2:7) waits for lock:a")
    long = tuple((b"k%d" % i, b"h%d" % i) for i in range(12))
    assert cycle_text(long).endswith("k7 (held by h7) … 4 more waits for k0")
