"""alkstore from Python: a signup and its welcome-mail job in one transaction.

    python signup.py sqlite app.db
    python signup.py postgres "host=/var/run/postgresql dbname=app"

Uses the `alkstore` package (pip install alkstore: the SQLite extension is
inside it). A worker starts first and waits for work. The program then
rolls back one signup (its job must never run) and commits another (its job
must run exactly once), and the worker sends the committed mail and acks it.
alkstore.work waits without polling: LISTEN on PostgreSQL, a watch on
PRAGMA data_version on SQLite.
"""
import json
import sys
import threading

import alkstore

QUEUE = "welcome-mails"


def connect(kind, target):
    if kind == "sqlite":
        import sqlite3

        db = sqlite3.connect(target, isolation_level=None, check_same_thread=False, timeout=30)
        alkstore.load(db)  # the extension bundled in the package
        db.execute("PRAGMA journal_mode = WAL")
        return db
    import psycopg

    return psycopg.connect(target, autocommit=True)


def worker(kind, target, ready, sent):
    db = connect(kind, target)
    stop = threading.Event()

    def send(job):
        print(f"worker: sent welcome mail to {job['payload']['email']} (attempt {job['attempts']})", flush=True)
        sent.append(job["id"])
        stop.set()  # one mail is all this example sends

    ready.set()
    alkstore.work(db, QUEUE, "mailer", send, stop=stop)


def signup(kind, db, email, commit):
    db.execute("BEGIN IMMEDIATE" if kind == "sqlite" else "BEGIN")
    db.execute("INSERT INTO signups (email) VALUES (%s)".replace("%s", "?" if kind == "sqlite" else "%s"), (email,))
    alkstore.enqueue(db, QUEUE, {"email": email})
    print(f"app: signup {email} {'committed' if commit else 'rolled back'} with its welcome job", flush=True)
    db.execute("COMMIT" if commit else "ROLLBACK")


def main():
    kind, target = sys.argv[1], sys.argv[2]
    app = connect(kind, target)
    app.execute("CREATE TABLE IF NOT EXISTS signups (email text NOT NULL)")
    ready, sent = threading.Event(), []
    t = threading.Thread(target=worker, args=(kind, target, ready, sent))
    t.start()
    ready.wait()
    signup(kind, app, "ghost@example.com", commit=False)
    signup(kind, app, "ada@example.com", commit=True)
    t.join(timeout=30)
    assert len(sent) == 1, "the worker did not send exactly one mail"

    stats = app.execute("SELECT alk_queue_stats(%s)".replace("%s", "?" if kind == "sqlite" else "%s"), (QUEUE,)).fetchone()[0]
    stats = stats if isinstance(stats, dict) else json.loads(stats)
    print(f"app: queue {QUEUE}: pending {stats['pending']}, running {stats['running']}, dead {stats['dead']}")
    print(f"app: signups in the table: {app.execute('SELECT count(*) FROM signups').fetchone()[0]}")


if __name__ == "__main__":
    main()
