"""A job's round trip from Python's sqlite3 module, as docs/install.md shows it.

Usage: python3 roundtrip.py path/to/libalkstore_sqlite.so app.db
"""
import json
import sqlite3
import sys

lib, path = sys.argv[1], sys.argv[2]
db = sqlite3.connect(path, isolation_level=None)  # we issue BEGIN/COMMIT ourselves
db.enable_load_extension(True)
db.load_extension(lib)
db.enable_load_extension(False)
db.execute("PRAGMA journal_mode = WAL")
db.execute("CREATE TABLE IF NOT EXISTS signups (email TEXT)")

# The business row and the job commit together...
db.execute("BEGIN IMMEDIATE")
db.execute("INSERT INTO signups VALUES (?)", ("ada@example.com",))
(job_id,) = db.execute(
    "SELECT alk_enqueue('welcome', NULL, ?)", (json.dumps({"to": "ada@example.com"}),)
).fetchone()
db.execute("COMMIT")

# ...or roll back together.
db.execute("BEGIN IMMEDIATE")
db.execute("INSERT INTO signups VALUES ('ghost@example.com')")
db.execute("SELECT alk_enqueue('welcome', NULL, '{\"to\": \"ghost@example.com\"}')")
db.execute("ROLLBACK")

(claimed,) = db.execute("SELECT alk_claim('welcome', 'py-worker', 10)").fetchone()
for job in json.loads(claimed):
    print("sending welcome mail to", job["payload"]["to"], "attempt", job["attempts"])
    (acked,) = db.execute("SELECT alk_ack(?, 'py-worker')", (job["id"],)).fetchone()
    print("acked:", bool(acked))

try:
    db.execute("SELECT alk_enqueue('__alkstore_x', NULL, '1')")
except sqlite3.OperationalError as e:
    print("error:", e)
print("signups:", db.execute("SELECT count(*) FROM signups").fetchone()[0])
