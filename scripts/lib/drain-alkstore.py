"""One cell of scripts/bench-workers.sh: alkstore's Python worker
(packages/python: alkstore.work(), a no-op handler) drains the jobs the
script added to QUEUE, and prints the jobs/s from the workers' start to the
last handler's return. Concurrency C is one work() with concurrency=C (C
handler threads fed by its one claim loop) on one psycopg connection
(autocommit=True, opened before the clock starts, as an application hands
it over), worker name "drain".
Settings: prefetch=32 (each claim takes up to 32 jobs; the default is 1),
acks of handlers that return None sent together every 10 ms or 100 jobs
(flush_window=0.01, flush_max=100: the defaults, spelled out); chores
(tick, sweep, prune) at their defaults.
  <peers>/py-alkstore/bin/python drain-alkstore.py URL JOBS CONCURRENCY [QUEUE]
(QUEUE: default "work"; the wheel from target/packages/alkstore-*.whl.)
With ALK_LATENCY=1 (the latency mode): each job's pickup latency, the `t`
in its payload (epoch µs, the enqueuer's clock on this host) to its
handler's start; prints the p50 and p99 in ms once JOBS jobs started.
"""
import math
import os
import sys
import threading
import time

import alkstore
import psycopg


def percentiles(us: list) -> str:
    """The p50 and p99 of latencies in µs, in ms."""
    us.sort()
    at = lambda p: us[min(max(math.ceil(len(us) * p), 1), len(us)) - 1] / 1000  # noqa: E731
    return f"{at(0.5):.2f} {at(0.99):.2f}"


def main() -> None:
    url, jobs, concurrency = sys.argv[1:4]
    queue = sys.argv[4] if len(sys.argv) > 4 else "work"
    n, c = int(jobs), int(concurrency)
    if n < 1 or c < 1:
        raise SystemExit("JOBS and CONCURRENCY: whole numbers above 0")
    conn = psycopg.connect(url, autocommit=True)
    stop = threading.Event()
    lock = threading.Lock()
    state = {"done": 0, "end": None}
    errors = []

    latency = os.environ.get("ALK_LATENCY") == "1"
    seen = []

    def handler(job):
        if latency:
            seen.append(time.time_ns() / 1000 - job["payload"]["t"])
        with lock:
            state["done"] += 1
            if state["done"] == n:
                state["end"] = time.perf_counter()
                stop.set()

    start = time.perf_counter()
    try:
        alkstore.work(conn, queue, "drain", handler, stop=stop, concurrency=c,
                      prefetch=32, flush_window=0.01, flush_max=100)
    except BaseException as e:  # noqa: BLE001 — reported below
        errors.append(e)
    conn.close()
    if errors:
        raise errors[0]
    if state["end"] is None:
        raise SystemExit(f"the worker stopped after {state['done']} of {n} jobs")
    print(percentiles(seen) if latency else round(n / (state["end"] - start)))


if __name__ == "__main__":
    main()
