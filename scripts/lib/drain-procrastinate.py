"""One cell of scripts/bench-workers.sh: procrastinate's own worker
(App.run_worker_async(), a no-op async task "work") drains the jobs the
script added, and prints the jobs/s from the worker's start (the app and
its pool already open, as an application opens them) to the last task's
return. Settings: concurrency=C (C jobs run at once on the event loop;
procrastinate fetches one job per query, it has no batch option),
wait=False (the worker ends once the queue is empty),
install_signal_handlers=False; its pool (PsycopgConnector, psycopg_pool)
with max_size max(10, C + 2) (its default is 4); the rest of its defaults
(listen_notify on, jobs kept once done: delete_jobs "never").
  <peers>/py-procrastinate-<version>/bin/python drain-procrastinate.py URL JOBS CONCURRENCY
Also, not timed: `... URL 0 0 install` installs its schema
(schema_manager.apply_schema_async(), its own tool); `... URL JOBS 0 fill`
adds JOBS jobs with its bulk batch_defer_async() (one call of its
procrastinate_defer_jobs_v1, one INSERT … SELECT).
"""
import asyncio
import logging
import sys
import time

import procrastinate

# Its warning that the app is made in __main__ (a worker started by its CLI
# could not import the tasks from there) does not apply: this process runs
# the worker itself.
logging.getLogger("procrastinate.blueprints").setLevel(logging.ERROR)


async def main() -> None:
    url, jobs, concurrency = sys.argv[1:4]
    mode = sys.argv[4] if len(sys.argv) > 4 else "drain"
    n, c = int(jobs), int(concurrency)
    app = procrastinate.App(
        connector=procrastinate.PsycopgConnector(conninfo=url, max_size=max(10, c + 2)))
    state = {"done": 0, "end": None}

    @app.task(name="work")
    async def work(**_payload) -> None:
        state["done"] += 1
        if state["done"] == n:
            state["end"] = time.perf_counter()

    async with app.open_async():
        if mode == "install":
            await app.schema_manager.apply_schema_async()
            return
        if mode == "fill":
            await work.batch_defer_async(*({"n": i} for i in range(1, n + 1)))
            return
        if n < 1 or c < 1:
            raise SystemExit("JOBS and CONCURRENCY: whole numbers above 0")
        start = time.perf_counter()
        await app.run_worker_async(concurrency=c, wait=False, install_signal_handlers=False)
    if state["end"] is None:
        raise SystemExit(f"the worker stopped after {state['done']} of {n} jobs")
    print(round(n / (state["end"] - start)))


if __name__ == "__main__":
    asyncio.run(main())
