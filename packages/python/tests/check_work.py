"""Checks of alkstore.work on a real database (examples/run.sh runs them on
SQLite through sqlite3 and on PostgreSQL through psycopg):

    python check_work.py sqlite PATH
    python check_work.py postgres "host=… dbname=…"

Prints one line per check; examples/run.sh compares them with what it
expects.
"""
import datetime
import sys
import threading
import time
import warnings

import alkstore


def connect(kind, target, autocommit=True):
    if kind == "sqlite":
        import sqlite3

        db = sqlite3.connect(target, isolation_level=None, check_same_thread=False, timeout=30)
        alkstore.load(db)
        db.execute("PRAGMA journal_mode = WAL")
        return db
    import psycopg

    return psycopg.connect(target, autocommit=autocommit)


def pending(db, queue):
    import json

    sql = "SELECT alk_queue_stats(?)" if not alkstore._is_postgres(db) else "SELECT alk_queue_stats(%s)"
    stats = db.execute(sql, (queue,)).fetchone()[0]
    stats = stats if isinstance(stats, dict) else json.loads(stats)
    return stats["pending"], stats["running"]


def main():
    kind, target = sys.argv[1], sys.argv[2]
    db = connect(kind, target)

    # A result JSON cannot hold: acked without it, with a warning, run once.
    job_id = alkstore.enqueue(db, "checks-result", {"n": 1})
    stop, runs = threading.Event(), []

    def dated(job):
        runs.append(job["id"])
        stop.set()
        return {"at": datetime.datetime(2026, 12, 6)}

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        handled = alkstore.work(db, "checks-result", "w", dated, stop=stop, idle_timeout=0.1)
    warned = any("not JSON" in str(w.message) for w in caught)
    gone = db.execute(("SELECT alk_get_job(?)" if kind == "sqlite" else "SELECT alk_get_job(%s)"),
                      (job_id,)).fetchone()[0] is None
    print(f"non-JSON result: handled {handled}, runs {len(runs)}, acked {gone}, warned {warned}")

    # Chores: a schedule due every second fires while work() runs, with
    # nobody else ticking (issue 64 item 5).
    q = "sql" if kind == "sqlite" else "pg"
    sched = ("SELECT alk_schedule(?, ?, ?, ?)" if kind == "sqlite"
             else "SELECT alk_schedule(%s, %s, %s::jsonb, %s::jsonb)")
    db.execute(sched, (f"checks-tick-{q}", "checks-ticked", '{"every_s": 1}', '{"from": "schedule"}'))
    stop, got = threading.Event(), []
    # Up to 30 s: work() ticks every 5 s, later on a loaded machine.
    deadline = threading.Timer(30.0, stop.set)
    deadline.start()

    def scheduled(job):
        got.append(job["payload"])
        stop.set()

    alkstore.work(db, "checks-ticked", "w", scheduled, stop=stop, idle_timeout=0.2)
    deadline.cancel()
    print(f"schedule: fired while work() ran: {got[:1] == [{'from': 'schedule'}]}")

    # A handler three times longer than the visibility timeout, with a
    # second worker waiting for the same queue: the heartbeat keeps the job
    # claimed, so it runs once (issue 64 item 2: it ran 5 times).
    conf = ("SELECT alk_queue_configure(?, ?)" if kind == "sqlite"
            else "SELECT alk_queue_configure(%s, %s::jsonb)")
    db.execute(conf, ("checks-long", '{"visibility_timeout_s": 1, "max_attempts": 5}'))
    alkstore.enqueue(db, "checks-long", {"n": 1})
    stop, runs, lock = threading.Event(), [], threading.Lock()
    stats = [{}, {}]

    def long(job):
        with lock:
            runs.append(job["attempts"])
        time.sleep(3)
        threading.Timer(2.5, stop.set).start()

    workers = [threading.Thread(target=alkstore.work,
                                args=(connect(kind, target), "checks-long", f"w{i}", long),
                                kwargs={"stop": stop, "idle_timeout": 0.1, "stats": stats[i]})
               for i in range(2)]
    limit = threading.Timer(30.0, stop.set)  # (cancelled: a pending timer holds the process at exit)
    limit.start()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    limit.cancel()
    lost = sum(st["lost_claims"] for st in stats)
    print(f"long handler: runs {len(runs)}, attempts {runs}, lost claims {lost}, "
          f"pending, running: {pending(db, 'checks-long')}")

    # Batching (contract v1.3 §P): 300 jobs, 16 claimed at a time, acks
    # sent together (within 0.2 s); each runs once, and far fewer ack calls
    # than jobs, but at least 3 (100 at most in one).
    for n in range(300):
        alkstore.enqueue(db, "checks-batch", {"n": n})
    stop, seen, st = threading.Event(), [], {}

    def counted(job):
        seen.append(job["payload"]["n"])
        if len(seen) == 300:
            stop.set()

    limit = threading.Timer(60.0, stop.set)
    limit.start()
    alkstore.work(db, "checks-batch", "w", counted, stop=stop, idle_timeout=0.1, prefetch=16,
                  flush_window=0.2, stats=st)
    limit.cancel()
    print(f"batches: each of 300 once: {sorted(seen) == list(range(300))}, "
          f"fewer ack calls than jobs: {3 <= st['ack_flushes'] < 100}, "
          f"pending, running: {pending(db, 'checks-batch')}")

    # Prefetched jobs wait behind slow handlers past the visibility timeout
    # (2 s; the last waits 3 s): the heartbeat keeps them claimed, so none
    # runs twice or spends a second attempt, though a second worker waits
    # for the same queue.
    db.execute(conf, ("checks-held", '{"visibility_timeout_s": 2, "max_attempts": 5}'))
    for n in range(4):
        alkstore.enqueue(db, "checks-held", {"n": n})
    stop, runs, stats = threading.Event(), [], [{}, {}]

    def slow(job):
        with lock:
            runs.append((job["payload"]["n"], job["attempts"]))
            if len(runs) == 4:
                threading.Timer(1.0, stop.set).start()
        time.sleep(1.0)

    workers = [threading.Thread(target=alkstore.work,
                                args=(connect(kind, target), "checks-held", f"w{i}", slow),
                                kwargs={"stop": stop, "idle_timeout": 0.1, "stats": stats[i],
                                        "prefetch": 4, "prefetch_ttl": 30.0})
               for i in range(2)]
    limit = threading.Timer(30.0, stop.set)
    limit.start()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    limit.cancel()
    print(f"prefetched past the visibility timeout: runs {sorted(runs)}, "
          f"lost claims {sum(st['lost_claims'] for st in stats)}, "
          f"pending, running: {pending(db, 'checks-held')}")

    # A stopping worker gives back what it prefetched and did not start, at
    # once and without spending an attempt: another worker claims them now.
    for n in range(10):
        alkstore.enqueue(db, "checks-giveback", {"n": n})
    stop = threading.Event()
    alkstore.work(db, "checks-giveback", "w", lambda job: stop.set(), stop=stop,
                  idle_timeout=0.1, prefetch=10)
    left = alkstore.claim(db, "checks-giveback", "other", 20)
    print(f"stopped: given back {len(left)}, attempts {sorted({j['attempts'] for j in left})}, "
          f"pending, running: {pending(db, 'checks-giveback')}")

    # The ack of a job done waits no longer than the flush window, even
    # while the next job's handler runs (it waited for that handler to return).
    first = alkstore.enqueue(db, "checks-ack-latency", {"n": 0})
    alkstore.enqueue(db, "checks-ack-latency", {"n": 1})
    stop, sent = threading.Event(), []
    get_job = "SELECT alk_get_job(?)" if kind == "sqlite" else "SELECT alk_get_job(%s)"

    def slow_second(job):
        if job["payload"]["n"] == 1:
            time.sleep(1.5)
            sent.append(db.execute(get_job, (first,)).fetchone()[0] is None)
            stop.set()

    alkstore.work(db, "checks-ack-latency", "w", slow_second, stop=stop, idle_timeout=0.1)
    print(f"ack behind a long handler: sent while it ran: {sent == [True]}")

    # A handler stuck on its job does not hold the jobs prefetched behind
    # it: each is given back once its time to live (0.5 s) passes, and a
    # second worker runs them (they waited for the stuck handler before).
    for n in range(4):
        alkstore.enqueue(db, "checks-stuck", {"n": n})
    stop, elsewhere, started, within = threading.Event(), [], [], []

    def stuck(job):
        started.append(time.monotonic())
        time.sleep(6.0)

    def other(job):
        with lock:
            elsewhere.append((job["payload"]["n"], job["attempts"]))
            if len(elsewhere) == 3:
                within.append(time.monotonic() - started[0] < 3.0)
                stop.set()

    limit = threading.Timer(30.0, stop.set)
    limit.start()
    first_worker = threading.Thread(target=alkstore.work, args=(connect(kind, target), "checks-stuck", "w0", stuck),
                                    kwargs={"stop": stop, "idle_timeout": 0.1, "prefetch": 4, "prefetch_ttl": 0.5})
    first_worker.start()
    until = time.monotonic() + 20
    while not started and time.monotonic() < until:
        time.sleep(0.02)
    second_worker = threading.Thread(target=alkstore.work, args=(connect(kind, target), "checks-stuck", "w1", other),
                                     kwargs={"stop": stop, "idle_timeout": 0.1})
    second_worker.start()
    first_worker.join()
    second_worker.join()
    limit.cancel()
    print(f"a stuck handler: the others ran elsewhere {sorted(elsewhere)}, within 3 s: {within == [True]}")

    # concurrency 4: four handlers at once, each of 8 jobs once (one fails
    # once, one snoozes once, one returns a result: settled by the worker's
    # loop, and the first two run again); the last to start stops the
    # worker, and the handlers in flight then finish (and are settled)
    # before work() returns.
    db.execute(conf, ("checks-concurrency", '{"backoff_base_s": 0}'))
    for n in range(8):
        alkstore.enqueue(db, "checks-concurrency", {"n": n})
    stop, seen, counts = threading.Event(), [], {"now": 0, "most": 0, "started": 0, "snoozed": 0}

    def four(job):
        with lock:
            counts["now"] += 1
            counts["most"] = max(counts["most"], counts["now"])
            counts["started"] += 1
            if counts["started"] == 10:
                stop.set()
        time.sleep(0.2)
        with lock:
            counts["now"] -= 1
            n = job["payload"]["n"]
            if n == 5 and job["attempts"] == 1:
                raise RuntimeError("once")
            if n == 6 and not counts["snoozed"]:
                counts["snoozed"] += 1
                return alkstore.Snooze(0)
            seen.append(n)
            return {"n": n} if n == 7 else None

    limit = threading.Timer(30.0, stop.set)
    limit.start()
    handled = alkstore.work(db, "checks-concurrency", "w", four, stop=stop, idle_timeout=0.1, concurrency=4)
    limit.cancel()
    print(f"concurrency 4: most at once {counts['most']}, each of 8 once: {sorted(seen) == list(range(8))}, "
          f"handled {handled}, pending, running: {pending(db, 'checks-concurrency')}")

    if kind == "postgres":
        # Its connection killed under it (issue 64 item 11: work() ended):
        # it connects again and handles what comes next.
        wconn = connect(kind, target)
        pid = wconn.info.backend_pid
        # (work() says so with a warning; expected here.)
        warnings.filterwarnings("ignore", message="alkstore: work\\(\\) lost its connection")
        stop, got, st = threading.Event(), [], {}
        t = threading.Thread(target=alkstore.work, args=(wconn, "checks-reconnect", "w",
                                                         lambda job: got.append(job["payload"]["n"])),
                             kwargs={"stop": stop, "idle_timeout": 0.2, "stats": st})
        t.start()
        alkstore.enqueue(db, "checks-reconnect", {"n": 1})
        until = time.monotonic() + 20
        while got != [1] and time.monotonic() < until:
            time.sleep(0.05)
        db.execute("SELECT pg_terminate_backend(%s)", (pid,))
        alkstore.enqueue(db, "checks-reconnect", {"n": 2})
        until = time.monotonic() + 30
        while got != [1, 2] and time.monotonic() < until:
            time.sleep(0.05)
        stop.set()
        t.join()
        print(f"reconnect: handled after its connection was killed: {got == [1, 2]}, "
              f"reconnects {st.get('reconnects', 0)}")

        # Notifications that piled up while a handler was busy (another
        # queue's enqueues, on the same channel) are spent by the next
        # claim: a handful of claims after it, not one per notification
        # (301 claims for 300 before).
        lconn = connect(kind, target)
        _ = alkstore._one(lconn, "SELECT alk_listen_queue(?, 300)", ("checks-busy-other",))
        calls, claim_held = [0], alkstore._claim_held

        def counted(*args):
            calls[0] += 1
            return claim_held(*args)

        alkstore._claim_held = counted
        stop, busy_done = threading.Event(), threading.Event()

        def busy(job):
            for i in range(300):
                alkstore.enqueue(db, "checks-busy-other", {"i": i})
            busy_done.set()

        t = threading.Thread(target=alkstore.work, args=(connect(kind, target), "checks-busy", "w", busy),
                             kwargs={"stop": stop, "idle_timeout": 5, "tick_every": None, "sweep_every": None,
                                     "prune_every": None})
        t.start()
        alkstore.enqueue(db, "checks-busy", {"n": 1})
        busy_done.wait(30)
        before = calls[0]
        time.sleep(1.5)
        stop.set()
        t.join()
        alkstore._claim_held = claim_held
        lconn.close()
        print(f"notifications piled up while busy: claims after it at most 3: {calls[0] - before <= 3}")

        # concurrency 2, its connection killed while it stops with a
        # handler in flight whose retry needs that connection: work()
        # returns, as at concurrency 1 (it raised the lost connection), and
        # the job runs again once its claim expires.
        db.execute("SELECT alk_queue_configure(%s, %s::jsonb)",
                   ("checks-stop-killed", '{"visibility_timeout_s": 1, "backoff_base_s": 0}'))
        alkstore.enqueue(db, "checks-stop-killed", {"n": 1})
        wconn = connect(kind, target)
        pid = wconn.info.backend_pid
        stop, outcome = threading.Event(), []

        def killed(job):
            stop.set()
            time.sleep(0.2)  # the loop is stopping, waiting for this handler
            db.execute("SELECT pg_terminate_backend(%s)", (pid,))
            raise RuntimeError("retry me")

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                alkstore.work(wconn, "checks-stop-killed", "w", killed, stop=stop, idle_timeout=0.2, concurrency=2)
                outcome.append("returned")
            except Exception as e:  # noqa: BLE001 — what this check looks for
                outcome.append(f"raised {type(e).__name__}")
        again, until = [], time.monotonic() + 20
        while not again and time.monotonic() < until:
            again = alkstore.claim(db, "checks-stop-killed", "w2")
            time.sleep(0.1)
        print(f"killed at stop, concurrency 2: {outcome}, runs again: {[j['attempts'] for j in again]}")

        # An ack waiting in the flush window when the connection is killed
        # is sent on the new connection: the job runs once (it ran again, at
        # attempt 2, once its claim expired, when the waiting acks were
        # dropped at the reconnect).
        db.execute("SELECT alk_queue_configure(%s, %s::jsonb)",
                   ("checks-ack-reconnect", '{"visibility_timeout_s": 1, "max_attempts": 5}'))
        wconn = connect(kind, target)
        pid = wconn.info.backend_pid
        waiting_id = alkstore.enqueue(db, "checks-ack-reconnect", {"n": 1})
        stop, runs, st = threading.Event(), [], {}

        def kill_own_connection(job):
            runs.append(job["attempts"])
            db.execute("SELECT pg_terminate_backend(%s)", (pid,))

        t = threading.Thread(target=alkstore.work, args=(wconn, "checks-ack-reconnect", "w", kill_own_connection),
                             kwargs={"stop": stop, "idle_timeout": 0.1, "stats": st,
                                     "flush_window": 60.0, "flush_max": 1000})
        t.start()
        job_gone = "SELECT alk_get_job(%s) IS NULL"
        until = time.monotonic() + 20
        while time.monotonic() < until and not (st.get("reconnects", 0) >= 1
                                                and db.execute(job_gone, (waiting_id,)).fetchone()[0]):
            time.sleep(0.05)
        time.sleep(3.0)  # a dropped ack's claim would have expired and the job run again
        stop.set()
        t.join()
        print(f"ack waiting at a reconnect: runs {runs}, acked {db.execute(job_gone, (waiting_id,)).fetchone()[0]}, "
              f"reconnects {st.get('reconnects', 0)}")

        # A host whose clock runs 2 minutes behind the server's: the beats
        # follow the time the server says a claim has left, so a handler
        # three times longer than the visibility timeout still runs once.
        db.execute("SELECT alk_queue_configure(%s, %s::jsonb)",
                   ("checks-skew", '{"visibility_timeout_s": 1, "max_attempts": 5}'))
        alkstore.enqueue(db, "checks-skew", {"n": 1})
        real_now = alkstore._utc_now
        alkstore._utc_now = lambda: real_now() - datetime.timedelta(minutes=2)
        stop, runs, stats = threading.Event(), [], [{}, {}]

        def long_job(job):
            runs.append(job["attempts"])
            time.sleep(3.0)
            threading.Timer(2.5, stop.set).start()

        workers = [threading.Thread(target=alkstore.work, args=(connect(kind, target), "checks-skew", f"w{i}", long_job),
                                    kwargs={"stop": stop, "idle_timeout": 0.1, "stats": stats[i]})
                   for i in range(2)]
        limit = threading.Timer(30.0, stop.set)
        limit.start()
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        limit.cancel()
        alkstore._utc_now = real_now
        print(f"host clock behind: runs {runs}, lost claims {sum(st['lost_claims'] for st in stats)}")

        # Not in autocommit: refused at once, nothing claimed.
        other = connect(kind, target, autocommit=False)
        alkstore.enqueue(db, "checks-autocommit", {"n": 1})
        stop = threading.Event()
        threading.Timer(2.0, stop.set).start()  # (before the check, work() ran on)
        try:
            alkstore.work(other, "checks-autocommit", "w", lambda job: None, stop=stop, idle_timeout=0.1)
            other.rollback()
            print(f"not autocommit: ran; pending, running: {pending(db, 'checks-autocommit')}")
        except alkstore.AlkstoreError as e:
            other.rollback()
            print(f"not autocommit: refused ({'autocommit mode' in str(e)}); "
                  f"pending, running: {pending(db, 'checks-autocommit')}")


if __name__ == "__main__":
    main()
