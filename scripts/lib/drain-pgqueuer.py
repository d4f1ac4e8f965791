"""One cell of scripts/bench-workers.sh: pgqueuer's own worker
(PgQueuer.run(), a no-op async entrypoint "work") drains the jobs the
script added, and prints the jobs/s from the worker's start (its asyncpg
connection already open, as an application opens it) to the last
entrypoint's return. Settings: the entrypoint's concurrency_limit=C (its
documented concurrency control: at most C of its jobs picked at once, a
count its dequeue query keeps), batch_size=C (jobs per dequeue query and
completions per write of its status log; its default is 10). That batch
size is its best at that limit: a dequeue takes no more than the limit
leaves, and a larger batch holds the completions, and with them the
limit's slots, until the log's 100 ms timeout (at C=8 a batch of 100 ran
about 20 times slower than one of 8). A 4th argument sets another batch size.
mode=drain (the worker ends once the queue is empty); AsyncpgDriver on one
connection, as its documentation has it for a worker, on uvloop as its CLI
(`pgq run`) runs; the rest of its defaults (durable tables, heartbeats,
logs).
  <peers>/py-pgqueuer-<version>/bin/python drain-pgqueuer.py URL JOBS CONCURRENCY [BATCH]
Also, not timed: `... URL 0 0 install` installs its schema (Queries.install(),
what `pgq install` runs); `... URL JOBS 0 fill` adds JOBS jobs with its bulk
Queries.enqueue() of lists (one INSERT … SELECT over unnest).
"""
import json
import sys
import time
from urllib.parse import parse_qs, urlsplit

import asyncpg
import uvloop
from pgqueuer import PgQueuer
from pgqueuer.db import AsyncpgDriver
from pgqueuer.models import Job
from pgqueuer.queries import Queries
from pgqueuer.types import QueueExecutionMode


async def main() -> None:
    url, jobs, concurrency = sys.argv[1:4]
    mode = sys.argv[4] if len(sys.argv) > 4 else concurrency
    n, c = int(jobs), int(concurrency)
    # asyncpg takes a host in the URL's query (a socket directory) only after
    # the one before the path (here "localhost": sqlx refuses none): given alone.
    host = parse_qs(urlsplit(url).query).get("host")
    conn = await asyncpg.connect(url, **({"host": host[0]} if host else {}))
    try:
        if mode == "install":
            await Queries(AsyncpgDriver(conn)).install()
            return
        if mode == "fill":
            await Queries(AsyncpgDriver(conn)).enqueue(
                ["work"] * n, [json.dumps({"n": i}).encode() for i in range(1, n + 1)], [0] * n)
            return
        batch = int(mode)
        if n < 1 or c < 1 or batch < 1:
            raise SystemExit("JOBS, CONCURRENCY and BATCH: whole numbers above 0")
        pgq = PgQueuer(AsyncpgDriver(conn))
        state = {"done": 0, "end": None}

        @pgq.entrypoint("work", concurrency_limit=c)
        async def work(_job: Job) -> None:
            state["done"] += 1
            if state["done"] == n:
                state["end"] = time.perf_counter()

        start = time.perf_counter()
        await pgq.run(batch_size=batch, mode=QueueExecutionMode.drain)
    finally:
        await conn.close()
    if state["end"] is None:
        raise SystemExit(f"the worker stopped after {state['done']} of {n} jobs")
    print(round(n / (state["end"] - start)))


if __name__ == "__main__":
    uvloop.run(main())
