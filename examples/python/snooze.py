"""A handler that asks to run again later ("snooze"), without spending an
attempt or recording an error (alk_release, contract v1.3 §Q).

    python snooze.py sqlite app.db
    python snooze.py postgres "host=/var/run/postgresql dbname=app"

The queue allows a single attempt. The handler snoozes its job three times
(a tenth of a second each), and is done with it the fourth time: the job
runs four times, each time as its first attempt, and is acked.
"""
import sys
import threading

import alkstore

QUEUE = "reports"


def connect(kind, target):
    if kind == "sqlite":
        import sqlite3

        db = sqlite3.connect(target, isolation_level=None, check_same_thread=False, timeout=30)
        alkstore.load(db)
        db.execute("PRAGMA journal_mode = WAL")
        return db
    import psycopg

    return psycopg.connect(target, autocommit=True)


def main():
    kind, target = sys.argv[1], sys.argv[2]
    db = connect(kind, target)
    configure = "SELECT alk_queue_configure(?, ?)" if kind == "sqlite" else "SELECT alk_queue_configure(%s, %s::jsonb)"
    db.execute(configure, (QUEUE, '{"max_attempts": 1}'))
    job_id = alkstore.enqueue(db, QUEUE, {"report": "q3"})
    stop, attempts = threading.Event(), []

    def build(job):
        attempts.append(job["attempts"])
        if len(attempts) < 4:
            print(f"run {len(attempts)}: not ready, snoozing (attempt {job['attempts']})", flush=True)
            return alkstore.Snooze(0.1)
        print(f"run {len(attempts)}: built {job['payload']['report']} (attempt {job['attempts']})", flush=True)
        stop.set()
        return None

    handled = alkstore.work(db, QUEUE, "builder", build, stop=stop, idle_timeout=0.1)
    job = db.execute("SELECT alk_get_job(%s)".replace("%s", "?" if kind == "sqlite" else "%s"), (job_id,)).fetchone()[0]
    print(f"handled {handled}; job acked: {job is None}")


if __name__ == "__main__":
    main()
