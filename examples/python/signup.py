"""alkstore from Python: a signup and its welcome-mail job in one transaction.

    python signup.py sqlite path/to/libalkstore_sqlite.so app.db
    python signup.py postgres "host=/var/run/postgresql dbname=app"

A worker starts first and waits for work. The program then rolls back one
signup (its job must never run) and commits another (its job must run
exactly once), and the worker sends the committed mail and acks it.

Waiting: on PostgreSQL the worker LISTENs (alk_listen_queue) and sleeps in
the driver until a notification arrives — no polling. On SQLite there is no
server to push a notification, so this example sleeps 50 ms between claims;
the Rust facade instead watches PRAGMA data_version.
"""
import json
import sqlite3
import sys
import threading
import time

QUEUE = "welcome-mails"


class SqliteEngine:
    def __init__(self, lib, path):
        self.lib, self.path = lib, path

    def connect(self):
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=30)
        db.enable_load_extension(True)
        db.load_extension(self.lib)
        db.enable_load_extension(False)
        db.execute("PRAGMA journal_mode = WAL")
        return db

    def begin(self, db):
        db.execute("BEGIN IMMEDIATE")

    def run(self, db, sql, *args):
        return db.execute(sql.replace("%s", "?"), args)

    def one(self, db, sql, *args):
        return self.run(db, sql, *args).fetchone()[0]

    def claim(self, db, worker):
        return json.loads(self.one(db, "SELECT alk_claim(%s, %s, 10)", QUEUE, worker))

    def wait_for_work(self, db, timeout):
        time.sleep(0.05)  # SQLite: a short sleep between claims (see above)

    def listen(self, db):
        pass


class PostgresEngine:
    def __init__(self, conninfo):
        import psycopg  # only needed for PostgreSQL

        self.psycopg, self.conninfo = psycopg, conninfo

    def connect(self):
        return self.psycopg.connect(self.conninfo, autocommit=True)

    def begin(self, db):
        db.execute("BEGIN")

    def run(self, db, sql, *args):
        return db.execute(sql, args)

    def one(self, db, sql, *args):
        return self.run(db, sql, *args).fetchone()[0]

    def claim(self, db, worker):
        rows = db.execute("SELECT id, payload, attempts FROM alk_claim(%s, %s, 10)", (QUEUE, worker)).fetchall()
        return [{"id": r[0], "payload": r[1], "attempts": r[2]} for r in rows]

    def listen(self, db):
        # LISTENs on alkstore_jobs and registers this session as waiting.
        self.one(db, "SELECT alk_listen_queue(%s)", QUEUE)

    def wait_for_work(self, db, timeout):
        for note in db.notifies(timeout=timeout, stop_after=1):
            pass  # any wake-up: claim again


def worker(engine, ready, done):
    db = engine.connect()
    engine.listen(db)  # register, then claim, then wait: nothing slips through
    ready.set()
    sent = 0
    while sent < 1:
        jobs = engine.claim(db, "mailer")
        if not jobs:
            engine.wait_for_work(db, timeout=5)
            continue
        for job in jobs:
            payload = job["payload"] if isinstance(job["payload"], dict) else json.loads(job["payload"])
            print(f"worker: sent welcome mail to {payload['email']} (attempt {job['attempts']})", flush=True)
            assert engine.one(db, "SELECT alk_ack(%s, %s)", job["id"], "mailer")
            sent += 1
    done.append(sent)


def signup(engine, db, email, commit):
    engine.begin(db)
    engine.run(db, "INSERT INTO signups (email) VALUES (%s)", email)
    engine.one(db, "SELECT alk_enqueue(%s, NULL, %s)", QUEUE, json.dumps({"email": email}))
    if commit:
        print(f"app: signup {email} committed with its welcome job", flush=True)
        db.execute("COMMIT")
    else:
        print(f"app: signup {email} rolled back with its welcome job", flush=True)
        db.execute("ROLLBACK")


def main():
    kind = sys.argv[1]
    engine = SqliteEngine(sys.argv[2], sys.argv[3]) if kind == "sqlite" else PostgresEngine(sys.argv[2])
    app = engine.connect()
    app.execute("CREATE TABLE IF NOT EXISTS signups (email text NOT NULL)")

    ready, done = threading.Event(), []
    t = threading.Thread(target=worker, args=(engine, ready, done))
    t.start()
    ready.wait()
    signup(engine, app, "ghost@example.com", commit=False)
    signup(engine, app, "ada@example.com", commit=True)
    t.join(timeout=30)
    assert done == [1], "the worker did not finish"

    stats = engine.one(app, "SELECT alk_queue_stats(%s)", QUEUE)
    stats = stats if isinstance(stats, dict) else json.loads(stats)
    print(f"app: queue {QUEUE}: pending {stats['pending']}, running {stats['running']}, dead {stats['dead']}")
    print(f"app: signups in the table: {engine.one(app, 'SELECT count(*) FROM signups')}")


if __name__ == "__main__":
    main()
