"""The probe: an application client doing one `GET` every 0.5 ms on its own connection while a
bench phase runs, timing each round trip (`bench/probe_bench.py`, `bench/cluster_bounds.py`).

    .venv/bin/python bench/probe_client.py PORT   # until SIGTERM; prints p50 / p99 / max (ms)

Not part of the tests.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

PROBE_EVERY_S = 0.0005


def child_probe(port: int) -> dict[str, object]:
    """GET every 0.5 ms until SIGTERM; the round trips' p50 / p99 / max in ms."""
    import redis

    stop = False

    def on_term(_sig: int, _frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    client = redis.Redis(
        host="127.0.0.1", port=port, single_connection_client=True, client_name="probe"
    )
    client.ping()
    print("ready", flush=True)
    times: list[float] = []
    clock = time.perf_counter
    next_at = clock()
    while not stop:
        t0 = clock()
        client.get(b"probe:key")
        times.append(clock() - t0)
        next_at += PROBE_EVERY_S
        pause = next_at - clock()
        if pause > 0:
            time.sleep(pause)
        else:
            next_at = clock()
    times.sort()
    n = len(times)

    def pct(p: float) -> float:
        return times[min(n - 1, int(p * n))] * 1000 if n else float("nan")

    return {"n": n, "p50": pct(0.50), "p99": pct(0.99), "max": times[-1] * 1000 if n else 0.0}


class Probe:
    """The probe in a child process, from start to `stop` (its round trips' statistics)."""

    def __init__(self, port: int) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), str(port)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        if self.proc.stdout.readline().strip() != "ready":
            sys.exit("the probe did not start")
        time.sleep(0.2)

    def stop(self) -> dict[str, float]:
        self.proc.send_signal(signal.SIGTERM)
        out, _ = self.proc.communicate()
        return dict(json.loads(out.strip().splitlines()[-1]))


if __name__ == "__main__":
    print(json.dumps(child_probe(int(sys.argv[1]))))
