"""alkstore for Python: the SQLite extension inside the package, and a thin
helper layer over the ``alk_*`` SQL functions on SQLite (``sqlite3`` or
``apsw``) and PostgreSQL (``psycopg``). The logic stays in the functions:
every helper is one SQL call on *your* connection, inside *your*
transaction.

    import sqlite3, alkstore
    db = sqlite3.connect("app.db", isolation_level=None)
    alkstore.load(db)                      # the extension, from this package
    job_id = alkstore.enqueue(db, "emails", {"to": "ada@example.com"})
    [job] = alkstore.claim(db, "emails", "worker-1")
    alkstore.ack(db, job["id"], "worker-1")
"""
import datetime
import json
import math
import os
import re
import sys
import threading
import warnings
import time
from typing import Any, Callable, Dict, List, Optional

Job = Dict[str, Any]
"""A claimed job: ``id, queue, payload, attempts, max_attempts, claim_expires_at``."""

__version__ = "0.4.0"

__all__ = [
    "AlkstoreError", "Job", "load", "loadable_path", "version",
    "enqueue", "claim", "ack", "ack_batch", "retry", "fail", "heartbeat", "release", "release_batch",
    "Snooze",
    "work",
]


class AlkstoreError(Exception):
    """Loading or version errors of this package (the functions' own errors
    come from the driver, with the contract's code: ``ALK01``…``ALK05``)."""


def loadable_path() -> str:
    """The path of the SQLite extension in this package (``load_extension``
    with it from any SQLite client)."""
    name = {"darwin": "libalkstore_sqlite.dylib", "win32": "alkstore_sqlite.dll"}.get(
        sys.platform, "libalkstore_sqlite.so")
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), name)
    if not os.path.exists(path):
        raise AlkstoreError(f"the SQLite extension is missing from the package: {path}")
    return path


def _is_apsw(conn):
    return type(conn).__module__.split(".")[0] == "apsw"


def _is_postgres(conn):
    return type(conn).__module__.split(".")[0] == "psycopg"


def load(conn: Any) -> Any:
    """Loads the extension into a ``sqlite3`` or ``apsw`` connection and
    checks that its version is this package's. Returns the connection."""
    path = loadable_path()
    if _is_apsw(conn):
        conn.enable_load_extension(True)
        conn.load_extension(path)
    else:
        if not hasattr(conn, "enable_load_extension"):
            raise AlkstoreError(
                "this Python's sqlite3 module cannot load extensions (it was built without "
                "them, as pyenv and macOS framework Pythons are): `pip install apsw` and pass "
                "an apsw.Connection to alkstore.load, which loads extensions in any Python")
        conn.enable_load_extension(True)
        try:
            conn.load_extension(path)
        finally:
            conn.enable_load_extension(False)
    library = _one(conn, "SELECT alk_version()")
    _check(json.loads(library)["version"])
    return conn


def _check(library_version: str) -> None:
    if library_version != __version__:
        raise AlkstoreError(
            f"the alkstore library is {library_version}, this package is {__version__}: "
            "install matching versions")


def version(conn: Any = None) -> Dict[str, Any]:
    """``{"package": …, "library": …}``: this package's version and that of
    the alkstore the connection has (PostgreSQL: the installed extension or
    plain install), or, with no connection, of the bundled SQLite library.
    Refuses (``AlkstoreError``) a library of another version."""
    if conn is None:
        try:
            import sqlite3
            probe = sqlite3.connect(":memory:")
            if not hasattr(probe, "enable_load_extension"):
                raise ImportError
        except ImportError:
            import apsw
            probe = apsw.Connection(":memory:")
        load(probe)
        conn = probe
    library = json.loads(_one(conn, "SELECT alk_version()" + ("::text" if _is_postgres(conn) else "")))
    _check(library["version"])
    return {"package": __version__, "library": library["version"], "schema": library["schema"]}


# ---- one SQL call each, on the caller's connection ----

def _execute(conn, sql, args=()):
    if _is_postgres(conn):
        return conn.execute(sql.replace("?", "%s"), args)
    if _is_apsw(conn):
        return conn.cursor().execute(sql, args)
    return conn.execute(sql, args)


def _one(conn, sql, args=()):
    row = _execute(conn, sql, args).fetchone()
    return None if row is None else row[0]


def _json(value):
    return json.dumps(value, separators=(",", ":"))


def enqueue(conn: Any, queue: str, payload: Any, **opts: Any) -> int:
    """Enqueues a job in the connection's current transaction; returns its
    id. ``opts``: the enqueue options (``delay_s``, ``priority``,
    ``idempotency_key``, ``group_key``, ``limit_key``, ``depends_on``, …)."""
    cast = "::jsonb" if _is_postgres(conn) else ""
    return _one(conn, f"SELECT alk_enqueue(?, ?{cast}, ?{cast})",
                (queue, _json(opts) if opts else None, _json(payload)))


def claim(conn: Any, queue: str, worker: str, max_jobs: int = 1) -> List[Job]:
    """Claims up to ``max_jobs`` jobs: dicts with ``id, queue, payload,
    attempts, max_attempts, claim_expires_at``."""
    if _is_postgres(conn):
        cur = _execute(conn, "SELECT id, queue, payload, attempts, max_attempts, claim_expires_at::text "
                             "FROM alk_claim(?, ?, ?)", (queue, worker, max_jobs))
        return [dict(zip(("id", "queue", "payload", "attempts", "max_attempts", "claim_expires_at"), r))
                for r in cur.fetchall()]
    return json.loads(_one(conn, "SELECT alk_claim(?, ?, ?)", (queue, worker, max_jobs)))


def ack(conn: Any, job_id: int, worker: str, result: Any = None) -> bool:
    """Acks a held job (with a result, kept while the queue retains
    completed jobs); True if this worker held it."""
    cast = "::jsonb" if _is_postgres(conn) else ""
    return bool(_one(conn, f"SELECT alk_ack(?, ?, ?{cast})",
                     (job_id, worker, None if result is None else _json(result))))


def ack_batch(conn: Any, job_ids: List[int], worker: str) -> int:
    """Acks many held jobs in one call (``alk_ack_batch``, no results);
    returns how many this worker held."""
    if _is_postgres(conn):
        return _one(conn, "SELECT alk_ack_batch(?::bigint[], ?)", (list(job_ids), worker))
    return _one(conn, "SELECT alk_ack_batch(?, ?)", (_json(list(job_ids)), worker))


def retry(conn: Any, job_id: int, worker: str, error: str, delay_s: Optional[float] = None) -> Optional[str]:
    """Gives a held job back: ``'pending'``, ``'dead'`` (attempts used up) or None (not held)."""
    return _one(conn, "SELECT alk_retry(?, ?, ?, ?)", (job_id, worker, error, delay_s))


def fail(conn: Any, job_id: int, worker: str, error: str) -> bool:
    """Dead-letters a held job; True if this worker held it."""
    return bool(_one(conn, "SELECT alk_fail(?, ?, ?)", (job_id, worker, error)))


def heartbeat(conn: Any, job_id: int, worker: str, extend_s: Optional[float] = None) -> bool:
    """Extends a held job's claim (by the queue's visibility timeout, or
    ``extend_s``); True if this worker still held it."""
    return bool(_one(conn, "SELECT alk_heartbeat(?, ?, ?)", (job_id, worker, extend_s)))


def release(conn: Any, job_id: int, worker: str, delay_s: Optional[float] = None) -> bool:
    """Gives a held job back without spending an attempt (``alk_release``):
    pending again after ``delay_s`` (None: at once). True if this worker
    held an unexpired claim on it."""
    return bool(_one(conn, "SELECT alk_release(?, ?, ?)", (job_id, worker, delay_s)))


def release_batch(conn: Any, job_ids: List[int], worker: str, delay_s: Optional[float] = None) -> int:
    """``release`` for many jobs; returns how many this worker held."""
    if _is_postgres(conn):
        return _one(conn, "SELECT alk_release_batch(?::bigint[], ?, ?)", (list(job_ids), worker, delay_s))
    return _one(conn, "SELECT alk_release_batch(?, ?, ?)", (_json(list(job_ids)), worker, delay_s))


class Snooze:
    """What a ``work`` handler returns to run its job again after
    ``seconds``, without spending an attempt or recording an error
    (``alk_release``): ``return alkstore.Snooze(30)``."""

    def __init__(self, seconds: float) -> None:
        seconds = float(seconds)
        if not math.isfinite(seconds) or seconds < 0:
            raise ValueError(f"a snooze lasts a finite number of seconds, at least 0, got {seconds}")
        self.seconds = seconds

    def __repr__(self) -> str:
        return f"Snooze({self.seconds})"


def _result_or_none(result: Any, job_id: int) -> Any:
    """A handler's result as it can be kept: a value JSON cannot hold (a
    datetime, a set) is dropped with a warning — the job succeeded, and is
    acked rather than run again for it."""
    try:
        _json(result)
        return result
    except (TypeError, ValueError) as e:
        warnings.warn(f"alkstore: job {job_id}: its handler's result is not JSON ({e}); "
                      "acked without it", RuntimeWarning, stacklevel=3)
        return None


_TIMESTAMP = re.compile(
    r"(\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d):(\d\d)(?:\.(\d+))?(Z|[+-]\d\d(?::?\d\d)?)?$")


def _utc_now() -> datetime.datetime:
    """This host's clock (a function of its own, for checks that set it wrong)."""
    return datetime.datetime.now(datetime.timezone.utc)


def _seconds_left(expires_at: Any) -> float:
    """Seconds until a claim expires by this host's clock
    (``claim_expires_at``: RFC 3339 from SQLite, which keeps time by this
    host's clock too); 60 if it cannot be read."""
    m = _TIMESTAMP.match(str(expires_at or ""))
    if not m:
        return 60.0
    y, mo, d, h, mi, sec, frac, zone = m.groups()
    micro = int((frac or "0")[:6].ljust(6, "0"))
    offset = 0
    if zone and zone != "Z":
        sign = -1 if zone[0] == "-" else 1
        digits = zone[1:].replace(":", "")
        offset = sign * (int(digits[:2]) * 3600 + int(digits[2:4] or 0) * 60)
    at = datetime.datetime(int(y), int(mo), int(d), int(h), int(mi), int(sec), micro,
                           tzinfo=datetime.timezone(datetime.timedelta(seconds=offset)))
    return (at - _utc_now()).total_seconds()


def _claim_held(conn: Any, queue: str, worker: str, max_jobs: int) -> List[tuple]:
    """``claim`` for work(): each job with the seconds its claim has left. On
    PostgreSQL the server says how long (its clock, not this host's: a host
    whose clock runs behind would beat too seldom, and the job would run
    twice)."""
    if not _is_postgres(conn):
        return [(job, _seconds_left(job["claim_expires_at"])) for job in claim(conn, queue, worker, max_jobs)]
    cur = _execute(conn, "SELECT id, queue, payload, attempts, max_attempts, claim_expires_at::text, "
                         "extract(epoch FROM claim_expires_at - clock_timestamp())::float8 "
                         "FROM alk_claim(?, ?, ?)", (queue, worker, max_jobs))
    return [(dict(zip(("id", "queue", "payload", "attempts", "max_attempts", "claim_expires_at"), r[:6])), r[6])
            for r in cur.fetchall()]


def _connector(conn: Any) -> Optional[Callable[[], Any]]:
    """How to open another connection to the connection's database (read
    now, while it is up): psycopg's DSN and password, or the same SQLite
    file with the extension loaded. None for an SQLite database in memory,
    which no other connection can reach."""
    if _is_postgres(conn):
        # The DSN leaves the password out; it is passed on by itself.
        dsn, password, kind = conn.info.dsn, conn.info.password, type(conn)
        return lambda: kind.connect(dsn, password=password, autocommit=True)
    files = [row for row in _execute(conn, "PRAGMA database_list").fetchall() if row[1] == "main"]
    path = files[0][2] if files else ""
    if not path:
        return None
    apsw_conn = _is_apsw(conn)

    def open_sqlite():
        if apsw_conn:
            import apsw
            side = apsw.Connection(path)
        else:
            import sqlite3
            side = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        _execute(side, "PRAGMA busy_timeout = 30000")
        return load(side)
    return open_sqlite


def _broken(conn: Any) -> bool:
    """Whether a psycopg connection was lost (a server restart, a killed
    backend): work() then connects again."""
    return _is_postgres(conn) and bool(getattr(conn, "broken", False) or conn.closed)


class _Keeper:
    """What a worker holds besides the job its handler runs, kept by a
    thread with a connection of its own (contract v1.3 §P), as the Rust
    worker's keeper and completer do: every held job — prefetched and not
    started, running, or with its ack waiting — is extended every third of
    the time its claim had left when claimed (at least 50 ms); the acks
    waiting are sent together (``alk_ack_batch``) once ``flush_max`` wait or
    the first has waited ``flush_window``, even while a handler runs; a
    prefetched job not started within its time to live is given back
    (``alk_release_batch``) as soon as that passes. Without the beats a
    handler that ran past the visibility timeout ran again, at the same
    time, on another worker (issue 64 item 2). A beat that finds a claim
    gone marks the job lost, unless it was held again since (given back,
    claimed again). With no connection of its own (an SQLite database in
    memory; one that cannot be opened from the DSN alone; a thread that
    failed) it beats nothing, and the worker's loop acks and gives back
    between jobs on its own connection."""

    def __init__(self, connect: Optional[Callable[[], Any]], worker: str, flush_window: float,
                 flush_max: int, stats: Dict[str, int]) -> None:
        self.connect, self.worker = connect, worker
        self.flush_window, self.flush_max, self.stats = flush_window, flush_max, stats
        self.cond = threading.Condition()
        # id → [seconds between beats, next beat, lease, held until] (monotonic): a new list for each hold
        self.held: Dict[int, List[float]] = {}
        self.lost: set = set()
        self.prefetched: List[tuple] = []  # claimed, not started: (job, hold, give back at)
        self.acks: List[tuple] = []        # handled, their acks waiting: (id, hold)
        self.first_ack_at = 0.0
        self.flush_asap = False
        self.retry_at = 0.0
        self.closing = False
        self.thread: Optional[threading.Thread] = None
        # The worker's loop does the acks and give-backs (no thread, or it ended).
        self.inline = connect is None
        self.last_done = False

    def lost_claims(self, what: str, how: str, n: int) -> None:
        with self.cond:
            self.stats["lost_claims"] += n
        warnings.warn(f"alkstore: {what} lost before the {how} (it ran past its visibility timeout "
                      "without a heartbeat reaching the database, or was cancelled); it may run "
                      "again or have run elsewhere", RuntimeWarning, stacklevel=3)

    # ---- the worker's side ----

    def add(self, claimed: List[tuple], ttl: Optional[float]) -> None:
        """Holds claimed (job, seconds left) pairs, queued to start, but a
        job already held here: claimed again by this worker while its ack
        waits, or while a handler still runs it after its claim lapsed (a
        handler thread, concurrency above 1), that ack is this claim's too,
        and the claim is no longer lost."""
        if not claimed:
            return
        if self.thread is None and not self.inline:
            self.thread = threading.Thread(target=self._run, name="alkstore-keeper", daemon=True)
            self.thread.start()
        now = time.monotonic()
        with self.cond:
            for job, left in claimed:
                hold = self.held.get(job["id"])
                if hold is not None:
                    self.lost.discard(job["id"])
                    hold[3] = max(hold[3], now + left)
                    continue
                every = max(left / 3, 0.05)
                hold = [every, now + every, left, now + left]
                self.held[job["id"]] = hold
                self.lost.discard(job["id"])
                self.prefetched.append((job, hold, now + (ttl if ttl is not None else max(left / 2, 0.05))))
            self.cond.notify_all()

    def has_prefetched(self) -> bool:
        with self.cond:
            return bool(self.prefetched)

    def prefetched_count(self) -> int:
        with self.cond:
            return len(self.prefetched)

    def next(self) -> Optional[tuple]:
        """The next prefetched (job, hold) to start, or None. A job whose
        claim went (a beat found it gone, or no beat got through while it
        could lapse) is not started: another worker may run it."""
        while True:
            with self.cond:
                if not self.prefetched:
                    return None
                job, hold, _ = self.prefetched.pop(0)
                if job["id"] not in self.lost and time.monotonic() < hold[3]:
                    return job, hold
                self.held.pop(job["id"], None)
                self.lost.discard(job["id"])
            self.lost_claims(f"job {job['id']}: its claim was", "start", 1)

    def release(self, job_id: int) -> bool:
        """Stops holding a job settled alone; whether its claim was found gone."""
        with self.cond:
            self.held.pop(job_id, None)
            if job_id in self.lost:
                self.lost.discard(job_id)
                return True
            return False

    def ack(self, job_id: int, hold: List[float]) -> None:
        with self.cond:
            if not self.acks:
                self.first_ack_at = time.monotonic()
            self.acks.append((job_id, hold))
            # The keeper wakes for the window's first ack (its flush is then
            # due) and for a full batch, not for every ack between.
            if len(self.acks) == 1 or len(self.acks) == self.flush_max:
                self.cond.notify_all()

    def flush_soon(self) -> None:
        """The acks waiting go now (the worker is about to wait for work)."""
        with self.cond:
            if self.acks:
                self.flush_asap = True
                self.cond.notify_all()

    def between_jobs(self, conn: Any, idle: bool) -> None:
        """Without a thread (see the class): what is due, on the worker's
        connection."""
        if self.inline:
            self._give_back(conn, stale_only=True)
            with self.cond:
                due = idle or len(self.acks) >= self.flush_max or (
                    self.acks and time.monotonic() - self.first_ack_at >= self.flush_window)
            while due and self.acks:
                self._flush(conn)
                due = idle or len(self.acks) >= self.flush_max

    def close(self, conn: Any) -> None:
        """At the worker's end: acks what it finished and gives back what it
        did not start, each tried on its own (on the keeper's connection,
        else on ``conn`` when it is not None)."""
        if self.thread is not None:
            with self.cond:
                self.closing = True
                self.cond.notify_all()
            self.thread.join()
        if not self.last_done and conn is not None:
            self._last(conn)

    # ---- the keeper's side ----

    def _next_at(self) -> float:
        at = min((hold[1] for hold in self.held.values()), default=math.inf)
        if self.acks:
            full = self.flush_asap or len(self.acks) >= self.flush_max
            at = min(at, 0.0 if full else self.first_ack_at + self.flush_window)
        at = min([at] + [until for _, _, until in self.prefetched])
        return max(at, self.retry_at)

    def _run(self) -> None:
        try:
            self._keep()
        finally:
            # However it ended (its connection could not be opened, a warning
            # raised as an error): the worker's loop takes over.
            with self.cond:
                self.inline = True

    def _keep(self) -> None:
        try:
            side = self.connect()
        except Exception as e:  # noqa: BLE001 — the worker's connection does it
            warnings.warn(f"alkstore: work() could not open a connection of its own for its heartbeats "
                          f"and acks ({e}); acks and give-backs go through yours, between jobs",
                          RuntimeWarning, stacklevel=2)
            return
        with self.cond:
            while not self.closing:
                now = time.monotonic()
                at = self._next_at()
                if at > now:
                    self.cond.wait(None if at == math.inf else at - now)
                    continue
                self.cond.release()
                try:
                    if side is None:
                        side = self.connect()
                    self._give_back(side, stale_only=True)
                    with self.cond:
                        due = self.flush_asap or len(self.acks) >= self.flush_max or (
                            self.acks and time.monotonic() - self.first_ack_at >= self.flush_window)
                    if due:
                        self._flush(side)
                    self._beat(side)
                except Exception as e:  # noqa: BLE001 — tried again in a second
                    warnings.warn(f"alkstore: the worker's keeper failed ({e}); it tries again in 1 s",
                                  RuntimeWarning, stacklevel=2)
                    self.retry_at = time.monotonic() + 1.0
                    if side is not None and _broken(side):
                        side = None  # connect again at the next try
                finally:
                    self.cond.acquire()
        # Closing: what was handled is acked, what was not started given back
        # (here, or by the worker on its connection if this one is gone).
        if side is None:
            try:
                side = self.connect()
            except Exception:  # noqa: BLE001
                return
        self._last(side)
        self.last_done = True
        side.close()

    def _last(self, conn: Any) -> None:
        def flush_all():
            while self.acks:
                self._flush(conn)
        for what, step in (("ack", flush_all),
                           ("give back", lambda: self._give_back(conn, stale_only=False))):
            try:
                step()
            except Exception as e:  # noqa: BLE001 — each on its own
                warnings.warn(f"alkstore: work() could not {what} what it held at its end ({e}); "
                              "those jobs run again once their claims expire", RuntimeWarning, stacklevel=2)

    def _beat(self, side: Any) -> None:
        now = time.monotonic()
        with self.cond:
            due = [(job_id, hold) for job_id, hold in self.held.items() if hold[1] <= now]
            for _, hold in due:
                hold[1] = now + hold[0]
        for job_id, hold in due:
            held = _one(side, "SELECT alk_heartbeat(?, ?, NULL)", (job_id, self.worker))
            with self.cond:
                if self.held.get(job_id) is hold:  # not a hold made since
                    if held:
                        hold[3] = now + hold[2]
                    else:
                        self.lost.add(job_id)

    def _flush(self, conn: Any) -> None:
        with self.cond:
            # At most flush_max at once; the rest start a window of their own.
            batch, self.acks = self.acks[:self.flush_max], self.acks[self.flush_max:]
            self.flush_asap = self.flush_asap and bool(self.acks)
            if self.acks:
                self.first_ack_at = time.monotonic()
            # The beats stop first: one that met the committed ack would take the job for lost.
            for job_id, _ in batch:
                self.held.pop(job_id, None)
        if not batch:
            return
        ids = [job_id for job_id, _ in batch]
        try:
            held = ack_batch(conn, ids, self.worker)
        except Exception:
            # Kept, and held meanwhile: sent again.
            with self.cond:
                for job_id, hold in batch:
                    hold[1] = 0.0
                    self.held[job_id] = hold
                self.acks = batch + self.acks
            raise
        with self.cond:
            self.stats["ack_flushes"] += 1
            self.lost.difference_update(ids)
        if held < len(ids):
            self.lost_claims(f"{len(ids) - held} of jobs {ids}: their claims were", "ack", len(ids) - held)

    def _give_back(self, conn: Any, stale_only: bool) -> None:
        now = time.monotonic()
        with self.cond:
            back = [p for p in self.prefetched if not stale_only or p[2] <= now]
            if not back:
                return
            self.prefetched = [p for p in self.prefetched if stale_only and p[2] > now]
            for job, _, _ in back:
                self.held.pop(job["id"], None)
        ids = [job["id"] for job, _, _ in back]
        try:
            release_batch(conn, ids, self.worker)
        except Exception:
            # Still held: back in line (given back at the next try, or started).
            with self.cond:
                for job, hold, _ in back:
                    self.held[job["id"]] = hold
                self.prefetched = back + self.prefetched
            raise
        with self.cond:
            self.lost.difference_update(ids)


class _Chores:
    """What a worker does besides its jobs, each when its interval is up (the
    Rust worker's chores, with its defaults): ticking schedules, sweeping
    its queue (expired claims dead-lettered, due scheduled jobs made
    pending) and pruning what outlived its retention. A chore that fails is
    reported as a warning and tried again when next due: the jobs go on."""

    def __init__(self, conn, queue, tick_every, sweep_every, prune_every):
        self.conn, self.queue = conn, queue
        sweep = None if queue.startswith("__alkstore_outbox:") else sweep_every
        self.every = {"tick": tick_every, "sweep": sweep, "prune": prune_every}
        self.last = {}

    def run_due(self, stop):
        now = time.monotonic()
        for name, every in self.every.items():
            if every is None or now - self.last.get(name, -1e18) < max(every, 0.1):
                continue
            self.last[name] = now
            try:
                if name == "tick":
                    _one(self.conn, "SELECT alk_schedule_tick()")
                elif name == "sweep":
                    _one(self.conn, "SELECT alk_sweep(?)", (self.queue,))
                else:
                    # Offsets first (PostgreSQL): stream retention counts from them.
                    if _is_postgres(self.conn):
                        _execute(self.conn, "CALL alk_sequence(NULL)")
                    while not stop.is_set() and _one(self.conn, "SELECT alk_prune(1000)") == 1000:
                        pass
            except Exception as e:  # noqa: BLE001 — a chore's failure is not the jobs'
                warnings.warn(f"alkstore: the worker's {name} failed ({e}); "
                              "it runs again when next due", RuntimeWarning, stacklevel=2)


class _Handlers:
    """Handlers on threads of their own, up to work()'s ``concurrency`` at
    once (above 1). Each thread takes the next prefetched job from the
    keeper as soon as it is free, so they go on while the worker's loop
    claims; a job that returned None goes to the keeper's batch of acks from
    there, and the rest (a retry, a snooze, a result, a claim found lost)
    to the worker's loop, which settles it on its connection: no handler
    thread touches that connection (an SQLite connection cannot cross
    threads; on PostgreSQL its LISTEN wait holds it). The loop is woken
    only when it has something to do: few jobs left prefetched, a job to
    settle, the last handler done at stop."""

    def __init__(self, handler: Callable[[Job], Any], n: int, keeper: "_Keeper",
                 batched: bool, stats: Dict[str, int], stop: threading.Event) -> None:
        self.handler, self.keeper, self.batched, self.stats = handler, keeper, batched, stats
        self.stop, self.low = stop, n // 2
        self.lock = threading.Lock()
        self.for_jobs = threading.Condition(self.lock)  # free threads wait here
        self.for_loop = threading.Condition(self.lock)  # the worker's loop waits here
        self.added = 0                # bumped by each kick: a free thread looks again
        self.turn = 0                 # bumped by what the loop must see
        self.done: List[tuple] = []   # (job, hold, result, error) for the loop to settle
        self.busy = 0                 # running a handler, or its job waiting in done
        self.handled = 0
        self.closing = False
        # What ended a thread outside its handler (a warning made an error):
        # work() raises it, as it would at concurrency 1.
        self.failure: Optional[BaseException] = None
        self.threads: List[threading.Thread] = []
        for i in range(n):
            t = threading.Thread(target=self._run, name=f"alkstore-handler-{i}", daemon=True)
            self.threads.append(t)  # joined at close even if a later start fails
            t.start()

    def kick(self, n: int) -> None:
        """``n`` jobs were added to the keeper: as many free threads look."""
        with self.lock:
            self.added += 1
            self.for_jobs.notify(n)

    def take_done(self) -> Optional[tuple]:
        """A finished job for the loop to settle, or None (it counts as
        busy until ``settled``)."""
        with self.lock:
            return self.done.pop(0) if self.done else None

    def settled(self) -> None:
        with self.lock:
            self.busy -= 1

    def wait(self, turn: int, timeout: float) -> None:
        """Until something for the loop happened since ``turn`` (at most
        ``timeout`` seconds)."""
        with self.lock:
            if self.turn == turn and not self.done:
                self.for_loop.wait(timeout)

    def has_done(self) -> bool:
        with self.lock:
            return bool(self.done)

    def close(self) -> None:
        """No job starts any more; the handlers running finish."""
        with self.lock:
            self.closing = True
            self.for_jobs.notify_all()
        for t in self.threads:
            t.join()

    def _wake_loop(self) -> None:
        # Under the lock.
        self.turn += 1
        self.for_loop.notify()

    def _run(self) -> None:
        try:
            self._take_and_run()
        except BaseException as e:  # noqa: BLE001 — raised by the worker's loop
            with self.lock:
                self.failure = self.failure or e
                self._wake_loop()

    def _take_and_run(self) -> None:
        while True:
            with self.lock:
                if self.closing:
                    return
                added = self.added
                # Busy while it looks: the loop does not take the handlers
                # for idle between this thread's take and its start.
                self.busy += 1
            # Stopping: nothing new starts (the loop gives back the rest).
            held = None if self.stop.is_set() else self.keeper.next()
            if held is None:
                with self.lock:
                    self.busy -= 1
                    if self.stop.is_set() and not self.busy:
                        self._wake_loop()
                    # Wait for the next claim (a kick since the look above is
                    # not missed).
                    if self.added == added and not self.closing:
                        self.for_jobs.wait(0.1 if self.stop.is_set() else None)
                continue
            job, hold = held
            with self.lock:
                if len(self.keeper.prefetched) <= self.low:
                    self._wake_loop()  # time for the next claim
            try:
                result, error = self.handler(job), None
            except BaseException as e:  # noqa: BLE001 — settled (or raised) by the worker's loop
                result, error = None, e
            plain = (error is None and result is None and self.batched
                     and job["id"] not in self.keeper.lost)
            if plain:
                self.keeper.ack(job["id"], hold)
            with self.lock:
                if plain:
                    self.busy -= 1
                    self.handled += 1
                    self.stats["handled"] += 1
                    if self.stop.is_set() and not self.busy:
                        self._wake_loop()
                else:
                    self.done.append((job, hold, result, error))
                    self._wake_loop()


def work(conn: Any, queue: str, worker: str, handler: Callable[[Job], Any],
         stop: Optional[threading.Event] = None, idle_timeout: float = 5.0,
         tick_every: Optional[float] = 5.0, sweep_every: Optional[float] = 1.0,
         prune_every: Optional[float] = 60.0, stats: Optional[Dict[str, int]] = None,
         prefetch: int = 1, flush_window: float = 0.01, flush_max: int = 100,
         prefetch_ttl: Optional[float] = None, concurrency: int = 1) -> int:
    """Runs ``handler(job)`` for each job of ``queue`` until ``stop`` (a
    ``threading.Event``) is set: acks on return (the return value, if not
    None, is kept as the result), retries with the queue's backoff on an
    exception; a returned ``Snooze(seconds)`` gives the job back to run
    again after that long without spending an attempt.

    Up to ``concurrency`` handlers (1 to 1,000; default 1) run at once, each
    on a thread of its own above 1, fed by this one loop: it claims (again
    once half the handlers' worth is left waiting, so they never wait on a
    claim) and settles retries, snoozes and results on ``conn``, from the
    calling thread only; the batched acks, heartbeats and give-backs go
    through the keeper's connection as at 1. So a handler must not use
    ``conn`` when concurrency is above 1 (it takes a connection of its own).
    At stop, or when work() fails, the handlers in flight finish and are
    settled before work() returns or raises (a stuck handler holds it).

    Batching (contract v1.3 §P): each claim takes up to ``prefetch`` jobs
    (1 to 1,000; default 1), or as many as handlers are free if more, less
    those already waiting; a job no handler started within ``prefetch_ttl`` seconds of its
    claim (default: half the time its claim had then, the visibility
    timeout) is given back as soon as that passes, without spending an
    attempt, for another worker to run. Jobs whose handler returned None are acked
    together (``alk_ack_batch``) once ``flush_max`` (1 to 1,000; default
    100) wait or the first has waited ``flush_window`` seconds (default
    0.01; even while a handler runs), and before work() waits for work or
    returns; ``flush_window=0`` acks each job as its handler returns. A
    stopping work() acks what it finished and gives back what it
    prefetched and did not start. A process killed with acks waiting loses
    only those acks: the jobs run again once their claims expire.

    While a job is held — prefetched, running, or waiting for its ack — a
    keeper thread with a connection of its own keeps it claimed (every
    third of its visibility timeout, by the time PostgreSQL says a claim
    has left, not this host's clock), so a handler may run longer than the
    timeout without the job running again elsewhere; the same thread sends
    the acks waiting and gives back what waited too long (an SQLite
    database in memory, which no other connection reaches, gets neither
    beats nor a thread: acks and give-backs go between jobs). A claim found lost
    (the heartbeat could not reach the database in time, or the job was
    given back meanwhile) is a ``RuntimeWarning`` and counts in
    ``stats["lost_claims"]`` (``stats``: a dict you pass; also
    ``stats["handled"]`` and ``stats["ack_flushes"]``, the batched acks
    sent). On PostgreSQL a lost connection (a server restart, a killed
    backend) is ridden out: work() connects again from the same DSN (the
    connection you passed stays closed; handlers that use it must do the
    same) with a pause that doubles up to 5 s, and counts it in
    ``stats["reconnects"]``; the jobs held stay held by the keeper (an ack
    with a result, a retry or a snooze lost with the connection is not:
    that job runs again). Waits
    for work without busy polling: on PostgreSQL by LISTEN
    (``alk_listen_queue``; the connection must be in autocommit mode), on
    SQLite by watching ``PRAGMA data_version`` (any commit by another
    connection changes it). Between jobs it ticks schedules every
    ``tick_every`` seconds, sweeps its queue every ``sweep_every`` and prunes
    every ``prune_every`` (the Rust worker's defaults; None: never).
    Returns the number of jobs handled."""
    if isinstance(prefetch, bool) or not isinstance(prefetch, int) or not 1 <= prefetch <= 1000:
        raise ValueError(f"prefetch must be a whole number from 1 to 1000, got {prefetch!r}")
    if isinstance(flush_max, bool) or not isinstance(flush_max, int) or not 1 <= flush_max <= 1000:
        raise ValueError(f"flush_max must be a whole number from 1 to 1000, got {flush_max!r}")
    if not isinstance(flush_window, (int, float)) or not math.isfinite(flush_window) or flush_window < 0:
        raise ValueError(f"flush_window must be a finite number of seconds, at least 0, got {flush_window!r}")
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or not 1 <= concurrency <= 1000:
        raise ValueError(f"concurrency must be a whole number from 1 to 1000, got {concurrency!r}")
    if prefetch_ttl is not None and (not isinstance(prefetch_ttl, (int, float))
                                     or not math.isfinite(prefetch_ttl) or prefetch_ttl <= 0):
        raise ValueError(f"prefetch_ttl must be a finite number of seconds above 0, or None, "
                         f"got {prefetch_ttl!r}")
    stop = stop or threading.Event()
    stats = {} if stats is None else stats
    stats.setdefault("handled", 0)
    stats.setdefault("lost_claims", 0)
    stats.setdefault("ack_flushes", 0)
    postgres = _is_postgres(conn)
    if postgres and not conn.autocommit:
        # Outside autocommit every claim and ack would wait in a transaction
        # nobody commits: nothing durable, and the claims expire.
        raise AlkstoreError(
            "alkstore.work needs a psycopg connection in autocommit mode: "
            "psycopg.connect(..., autocommit=True), or conn.autocommit = True")
    handled = 0
    connect = _connector(conn)
    if postgres:
        _one(conn, "SELECT alk_listen_queue(?, 300)", (queue,))
    # When the registration was last made or renewed: it lapses after 300 s,
    # and a worker busy that long registers anew before it waits.
    listened_at = time.monotonic()
    seen = None if postgres else _one(conn, "PRAGMA data_version")
    chores = _Chores(conn, queue, tick_every, sweep_every, prune_every)
    keeper = _Keeper(connect, worker, flush_window, flush_max, stats)
    pause = 0.0

    def settle(job_id: int, how: str, call: Callable[[], bool]) -> None:
        # Its beats stop first: one that met the committed call would take
        # the job for lost.
        lost = keeper.release(job_id)
        if not call() or lost:
            keeper.lost_claims(f"job {job_id}: its claim was", how, 1)

    def finish(job: Job, hold: List[float], result: Any, error: Optional[BaseException]) -> None:
        """Settles a job its handler ran, on ``conn``: an exception is a
        retry, a Snooze a give-back, a result an ack of its own, None an
        ack waiting for the next batch."""
        nonlocal handled
        if error is not None and not isinstance(error, Exception):
            raise error  # KeyboardInterrupt, SystemExit: the job is not settled
        job_id = job["id"]
        handled += 1
        if pool is None:
            stats["handled"] += 1
        else:
            with pool.lock:  # the handler threads count there too
                stats["handled"] += 1
        if error is not None:
            message = f"{type(error).__name__}: {error}"
            settle(job_id, "retry", lambda: retry(conn, job_id, worker, message) is not None)
        elif isinstance(result, Snooze):
            settle(job_id, "snooze", lambda: release(conn, job_id, worker, result.seconds))
        elif result is not None or flush_window == 0:
            # A result goes with its own ack (alk_ack_batch keeps none).
            settle(job_id, "ack", lambda: ack(conn, job_id, worker, _result_or_none(result, job_id)))
        elif job_id in keeper.lost:
            settle(job_id, "ack", lambda: False)
        else:
            keeper.ack(job_id, hold)

    def settle_finished(at_end: bool = False) -> None:
        # One at a time: a call that fails leaves the rest for the next try
        # (at the end, for the next job: each is tried on its own).
        while pool is not None:
            done = pool.take_done()
            if done is None:
                return
            try:
                finish(*done)
            except BaseException as e:  # noqa: BLE001 — at the end, reported
                if not at_end:
                    raise
                if e is done[3]:  # a handler's KeyboardInterrupt, SystemExit: raised after the clean-up
                    fatal.append(e)
                    continue
                warnings.warn(f"alkstore: work() could not settle job {done[0]['id']} at its end ({e}); "
                              "it runs again once its claim expires", RuntimeWarning, stacklevel=2)
            finally:
                pool.settled()

    def running() -> int:
        return 0 if pool is None else pool.busy

    def claim(max_jobs: int) -> List[tuple]:
        # Notifications kept since the last wait are spent: this claim sees
        # every job committed before it (psycopg keeps them all, and each
        # would cost an empty claim later).
        if postgres:
            for _ in conn.notifies(timeout=0):
                pass
        return _claim_held(conn, queue, worker, max_jobs)

    # Above 1: the last claim came back short, so the next waits until the
    # handlers took what it brought.
    drained = False
    fatal: List[BaseException] = []
    pool: Optional[_Handlers] = None

    given = conn  # a connection made here is work()'s to close
    try:
        if concurrency > 1:
            pool = _Handlers(handler, concurrency, keeper, flush_window > 0, stats, stop)
        while not stop.is_set():
            try:
                if pause:
                    # The connection was lost (a restart, a killed backend):
                    # a new one from the same DSN, LISTENing again. The
                    # keeper, on its own connection, goes on holding, acking
                    # and giving back.
                    if conn is not given:
                        conn.close()
                    conn = connect()
                    _one(conn, "SELECT alk_listen_queue(?, 300)", (queue,))
                    listened_at = time.monotonic()
                    chores.conn = conn
                    stats["reconnects"] = stats.get("reconnects", 0) + 1
                    pause = 0.0
                settle_finished()
                chores.run_due(stop)
                if pool is not None:
                    turn = pool.turn
                    keeper.between_jobs(conn, idle=False)
                    if stop.is_set():
                        continue
                    if pool.failure is not None:
                        raise pool.failure
                    # Claim again once half the handlers' worth is left
                    # prefetched, so the handlers never wait on a claim: as
                    # many as handlers are free, or up to `prefetch` if more,
                    # less what is left. After a short claim, the next waits
                    # until nothing is left.
                    left = keeper.prefetched_count()
                    want = min(max(prefetch, concurrency - pool.busy) - left, 1000)
                    if left > concurrency // 2 or want <= 0 or (drained and left):
                        pool.wait(turn, 0.1)  # a job taken or finished, or a look at stop and the chores
                        continue
                    claimed = claim(want)
                    keeper.add(claimed, prefetch_ttl)
                    pool.kick(len(claimed))
                    drained = len(claimed) < want
                    if claimed:
                        continue
                else:
                    if not keeper.has_prefetched() and not stop.is_set():
                        keeper.add(claim(prefetch), prefetch_ttl)
                    held = None if stop.is_set() else keeper.next()
                    if held is not None:
                        job, hold = held
                        try:
                            result = handler(job)
                        except Exception as e:  # noqa: BLE001 — any failure is a retry
                            finish(job, hold, None, e)
                        else:
                            finish(job, hold, result, None)
                        keeper.between_jobs(conn, idle=False)
                        continue
                if keeper.has_prefetched() or stop.is_set():
                    continue
                if not running():
                    keeper.flush_soon()
                    keeper.between_jobs(conn, idle=True)
                # Idle until a wake-up, the idle timeout, the next chore or
                # (handlers running) the first to return.
                waits = [idle_timeout] + [e for e in (tick_every, sweep_every) if e is not None]
                deadline = time.monotonic() + max(min(waits), 0.1)
                if postgres:
                    # Renew the registration, then sleep in the driver until a wake-up.
                    _one(conn, "SELECT alk_listen_queue(?, 300)", (queue,))
                    lapsed = time.monotonic() - listened_at > 250
                    listened_at = time.monotonic()
                    if lapsed:
                        # Registered anew after a busy stretch: a job that
                        # committed since the last claim was announced to
                        # nobody. One more claim first.
                        continue
                    end = min(deadline, time.monotonic() + 1.0)
                    while not stop.is_set():
                        left = end - time.monotonic()
                        if left <= 0:
                            break
                        woken = False
                        for _ in conn.notifies(timeout=min(left, 0.02) if running() else left, stop_after=1):
                            woken = True
                            break
                        if woken or (pool is not None and (pool.has_done() or pool.failure)):
                            break
                        if pool is not None:
                            keeper.between_jobs(conn, idle=False)  # (a keeper without a thread)
                else:
                    while not stop.is_set() and time.monotonic() < deadline:
                        now = _one(conn, "PRAGMA data_version")
                        if now != seen:
                            seen = now
                            break
                        if pool is not None and (pool.has_done() or pool.failure):
                            break
                        if pool is not None:
                            keeper.between_jobs(conn, idle=False)  # (a keeper without a thread)
                        time.sleep(0.02)
            except Exception as e:  # noqa: BLE001 — only a lost connection is ridden out
                if not (postgres and (_broken(conn) or pause)):
                    raise
                # Wait and try again, a pause that doubles up to 5 s.
                pause = min(max(pause * 2, 0.1), 5.0)
                warnings.warn(f"alkstore: work() lost its connection ({e}); connecting again "
                              f"in {pause:.1f} s", RuntimeWarning, stacklevel=2)
                stop.wait(pause)
        # Stopping: the handlers in flight finish and are settled. With the
        # connection lost meanwhile, the finally below settles what it can,
        # as a stop during a reconnect does at concurrency 1.
        try:
            while running() and not pause:
                pool.wait(pool.turn, 0.1)
                settle_finished()
        except Exception:
            if not (postgres and _broken(conn)):
                raise
            pause = 0.1
    finally:
        # Stopping (or failing): the handlers in flight finish; what was
        # handled is acked, what was not started given back, each tried on
        # its own.
        if pool is not None:
            pool.close()
            settle_finished(at_end=True)
        keeper.close(None if pause else conn)
        if conn is not given:
            conn.close()
    if pool is not None and (fatal or pool.failure):
        raise fatal[0] if fatal else pool.failure
    return handled + (pool.handled if pool is not None else 0)
