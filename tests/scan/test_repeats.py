"""Which keys a read sent ahead must skip (`bot.scan.repeats`): those of every batch not yet
written when it was sent, including the batches yielded while it was in flight."""

from __future__ import annotations

import pytest

from bot.scan.repeats import Repeats


def test_a_read_skips_the_batches_yielded_after_it_was_sent_even_once_written() -> None:
    repeats = Repeats()
    repeats.add({b"a"})
    repeats.written()
    mark = repeats.mark()  # a read sent now: batch 0 is in the table
    repeats.add({b"b"})  # yielded while the read was in flight...
    repeats.written()  # ...and written behind it
    repeats.forget(mark)
    assert b"b" in repeats.since(mark)
    repeats.forget(repeats.unwritten)  # no read in flight: all of it is in the table
    assert repeats.since(repeats.mark()) == set()


def test_unwritten_batches_are_kept_until_written() -> None:
    repeats = Repeats()
    for i in range(5):
        repeats.add({b"k%d" % i})
        repeats.forget(repeats.unwritten)  # deferred: nothing written yet
    assert repeats.since(repeats.mark()) == {b"k%d" % i for i in range(5)}
    repeats.written()
    repeats.forget(repeats.unwritten)
    assert repeats.since(repeats.mark()) == set()
    assert repeats.batches == []


def test_a_batch_a_read_in_flight_needs_is_never_forgotten() -> None:
    repeats = Repeats()
    repeats.add({b"a"})
    mark = repeats.mark()
    repeats.written()
    repeats.forget(mark)  # the read marked 0 is still in flight: batch 0 stays
    assert b"a" in repeats.since(mark)
    repeats.forget(repeats.unwritten)
    with pytest.raises(AssertionError, match="forgotten"):
        repeats.since(mark)
