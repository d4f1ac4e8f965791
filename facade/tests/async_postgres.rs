//! `AsyncTxHandle` on the caller's own async PostgreSQL transactions: sqlx,
//! tokio-postgres and tokio-postgres pooled by deadpool-postgres, each test
//! body run on each, on a real server
//! (`ALKSTORE_PG_URL`), directly and through PgBouncer in transaction mode
//! (`ALKSTORE_PG_BOUNCER_URL`). What the async side wrote is checked through
//! the blocking store, as another process would see it — outside the async
//! runtime (the sync `postgres` client refuses to block inside one), so each
//! async step is driven with `aw!`.

mod common;

use alkstore::sql::Arg;
use alkstore::{AsyncTxHandle, EnqueueOpts, Error, PgStore, Retried};
use common::fresh;
use serde_json::{json, Value};
use sqlx::Connection as _;

thread_local! {
    static RT: tokio::runtime::Runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
}

/// Runs one async step to completion on this thread's runtime.
macro_rules! aw {
    ($e:expr) => {
        RT.with(|rt| rt.block_on($e))
    };
}

/// One of the drivers, connected.
enum Conn {
    Sqlx(sqlx::PgConnection),
    Tokio(tokio_postgres::Client),
    /// tokio-postgres pooled by deadpool-postgres (its `Object` derefs to
    /// the client).
    Deadpool(deadpool_postgres::Object),
}

/// A transaction the test opened on its driver, as an application would.
enum Tx<'a> {
    Sqlx(sqlx::Transaction<'a, sqlx::Postgres>),
    Tokio(tokio_postgres::Transaction<'a>),
    Deadpool(deadpool_postgres::Transaction<'a>),
}

impl Conn {
    fn name(&self) -> &'static str {
        match self {
            Conn::Sqlx(_) => "sqlx",
            Conn::Tokio(_) => "tokio-postgres",
            Conn::Deadpool(_) => "deadpool-postgres",
        }
    }

    async fn begin(&mut self) -> Tx<'_> {
        match self {
            Conn::Sqlx(c) => Tx::Sqlx(c.begin().await.unwrap()),
            Conn::Tokio(c) => Tx::Tokio(c.transaction().await.unwrap()),
            Conn::Deadpool(c) => Tx::Deadpool(c.transaction().await.unwrap()),
        }
    }
}

impl Tx<'_> {
    async fn execute(&mut self, sql: &str) {
        match self {
            Tx::Sqlx(t) => {
                sqlx::raw_sql(sql).execute(&mut **t).await.unwrap();
            }
            Tx::Tokio(t) => t.batch_execute(sql).await.unwrap(),
            Tx::Deadpool(t) => t.batch_execute(sql).await.unwrap(),
        }
    }

    async fn commit(self) {
        match self {
            Tx::Sqlx(t) => t.commit().await.unwrap(),
            Tx::Tokio(t) => t.commit().await.unwrap(),
            Tx::Deadpool(t) => t.commit().await.unwrap(),
        }
    }

    async fn rollback(self) {
        match self {
            Tx::Sqlx(t) => t.rollback().await.unwrap(),
            Tx::Tokio(t) => t.rollback().await.unwrap(),
            Tx::Deadpool(t) => t.rollback().await.unwrap(),
        }
    }
}

/// Each driver's own handle, reached through the test's wrapper: the typed
/// methods are the trait's, the calls the driver's.
impl AsyncTxHandle for Tx<'_> {
    async fn call(&mut self, function: &str, args: &[Arg]) -> alkstore::Result<Value> {
        match self {
            Tx::Sqlx(t) => (**t).call(function, args).await,
            Tx::Tokio(t) => t.call(function, args).await,
            Tx::Deadpool(t) => (**t).call(function, args).await,
        }
    }
}

struct Server {
    url: String,
    store: PgStore,
}

fn servers() -> Vec<Server> {
    let Ok(direct) = std::env::var("ALKSTORE_PG_URL") else {
        assert!(
            std::env::var_os("ALKSTORE_REQUIRE_PG").is_none(),
            "ALKSTORE_PG_URL is not set"
        );
        eprintln!("note: ALKSTORE_PG_URL not set: PostgreSQL not tested");
        return vec![];
    };
    let mut urls = vec![direct.clone()];
    urls.extend(std::env::var("ALKSTORE_PG_BOUNCER_URL"));
    let servers = urls
        .into_iter()
        .map(|url| Server {
            store: PgStore::connect_with_listener(&url, &direct).unwrap(),
            url,
        })
        .collect();
    // The application's own table, for the business rows (once: concurrent
    // CREATE TABLE IF NOT EXISTS can still collide in PostgreSQL's catalog).
    static TABLE: std::sync::Once = std::sync::Once::new();
    TABLE.call_once(|| {
        let mut client = postgres::Client::connect(&direct, postgres::NoTls).unwrap();
        client
            .batch_execute("CREATE TABLE IF NOT EXISTS async_orders (item text)")
            .unwrap();
    });
    servers
}

fn drivers(url: &str) -> Vec<Conn> {
    // sqlx wants a host in the URL even when `?host=` names a socket directory.
    let sqlx = aw!(sqlx::PgConnection::connect(
        &url.replace("@/", "@localhost/")
    ))
    .unwrap();
    let (client, connection) = aw!(tokio_postgres::connect(url, tokio_postgres::NoTls)).unwrap();
    RT.with(|rt| rt.spawn(connection));
    let mut config = deadpool_postgres::Config::new();
    config.url = Some(url.to_string());
    let pool = config
        .create_pool(
            Some(deadpool_postgres::Runtime::Tokio1),
            tokio_postgres::NoTls,
        )
        .unwrap();
    let pooled = aw!(pool.get()).unwrap();
    vec![
        Conn::Sqlx(sqlx),
        Conn::Tokio(client),
        Conn::Deadpool(pooled),
    ]
}

fn each(mut body: impl FnMut(&Server, &mut Conn)) {
    for server in servers() {
        for mut conn in drivers(&server.url) {
            eprintln!("{} via {}", conn.name(), server.url);
            body(&server, &mut conn);
        }
    }
}

/// Rows of the application's own table, seen from outside the transaction.
fn orders(item: &str) -> i64 {
    let url = std::env::var("ALKSTORE_PG_URL").unwrap();
    let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    client
        .query_one(
            "SELECT count(*) FROM async_orders WHERE item = $1",
            &[&item],
        )
        .unwrap()
        .get(0)
}

#[test]
fn what_the_caller_commits_is_there_and_what_it_rolls_back_is_not() {
    each(|server, conn| {
        let (queue, outbox, stream, item) = (fresh("aq"), fresh("ao"), fresh("as"), fresh("item"));
        let mut tx = aw!(conn.begin());
        aw!(tx.execute(&format!("INSERT INTO async_orders VALUES ('{item}')")));
        let job = aw!(tx.enqueue_tx(&queue, &EnqueueOpts::new(), &json!({"n": 1}))).unwrap();
        let message =
            aw!(tx.outbox_enqueue_tx(&outbox, &EnqueueOpts::new(), &json!({"m": 2}))).unwrap();
        let event = aw!(tx.publish_tx(&stream, &json!({"e": 3}))).unwrap();
        assert!(aw!(tx.save_offset_tx(&stream, "c", 7)).unwrap(), "advanced");
        let channel = fresh("ach");
        let mut sub = server.store.listen(&channel).unwrap();
        aw!(tx.notify_tx(&channel, &json!({"x": 1}))).unwrap();
        assert!(
            sub.recv_timeout(common::ms(200)).unwrap().is_none(),
            "not before commit"
        );
        // Nothing is visible before the caller commits.
        assert!(server
            .store
            .queue(&queue)
            .unwrap()
            .claim("w", 10)
            .unwrap()
            .is_empty());
        assert_eq!(orders(&item), 0);
        aw!(tx.commit());

        let jobs = server.store.queue(&queue).unwrap().claim("w", 10).unwrap();
        assert_eq!(
            (jobs.len(), jobs[0].id, &jobs[0].payload),
            (1, job, &json!({"n": 1}))
        );
        let messages = server
            .store
            .outbox(&outbox)
            .unwrap()
            .claim("w", 10)
            .unwrap();
        assert_eq!((messages.len(), messages[0].id), (1, message));
        let events = server.store.stream(&stream).unwrap().read(0, 10).unwrap();
        assert_eq!(
            (events.len(), events[0].id, &events[0].payload),
            (1, event, &json!({"e": 3}))
        );
        assert_eq!(orders(&item), 1);
        let s = server.store.stream(&stream).unwrap();
        assert_eq!(s.get_offset("c").unwrap(), 7);
        let note = sub
            .recv_timeout(common::ms(5000))
            .unwrap()
            .expect("notified on commit");
        assert_eq!(note.payload, json!({"x": 1}));

        // Rolled back: neither the row nor anything alkstore wrote.
        let item2 = fresh("item");
        let mut tx = aw!(conn.begin());
        aw!(tx.execute(&format!("INSERT INTO async_orders VALUES ('{item2}')")));
        aw!(tx.enqueue_tx(&queue, &EnqueueOpts::new(), &json!({"n": 2}))).unwrap();
        aw!(tx.publish_tx(&stream, &json!({"e": 4}))).unwrap();
        assert!(aw!(tx.save_offset_tx(&stream, "c", 9)).unwrap());
        aw!(tx.notify_tx(&channel, &json!({"x": 2}))).unwrap();
        aw!(tx.rollback());
        assert_eq!(s.get_offset("c").unwrap(), 7);
        assert!(
            sub.recv_timeout(common::ms(300)).unwrap().is_none(),
            "rolled back"
        );
        assert!(server
            .store
            .queue(&queue)
            .unwrap()
            .claim("w", 10)
            .unwrap()
            .is_empty());
        assert_eq!(
            server
                .store
                .stream(&stream)
                .unwrap()
                .read(0, 10)
                .unwrap()
                .len(),
            1
        );
        assert_eq!(orders(&item2), 0);
    });
}

#[test]
fn bad_input_is_the_contract_error_and_a_bad_name_leaves_the_transaction_usable() {
    each(|server, conn| {
        let queue = fresh("aq");
        let mut tx = aw!(conn.begin());
        // Checked before anything is sent: the transaction goes on.
        let e = aw!(tx.enqueue_tx("", &EnqueueOpts::new(), &json!({}))).unwrap_err();
        assert_eq!(e.code(), Some("ALK01"), "{e}");
        let e = aw!(tx.publish_tx("__alkstore_x", &json!({}))).unwrap_err();
        assert_eq!(e.code(), Some("ALK02"), "{e}");
        let id = aw!(tx.enqueue_tx(&queue, &EnqueueOpts::new(), &json!({"ok": true}))).unwrap();
        aw!(tx.commit());
        assert_eq!(
            server.store.queue(&queue).unwrap().claim("w", 1).unwrap()[0].id,
            id
        );

        // Raised by the server, mapped by SQLSTATE.
        let mut tx = aw!(conn.begin());
        let bogus = [
            queue.as_str().into(),
            Arg::Json(r#"{"bogus": 1}"#.into()),
            Arg::Json("{}".into()),
        ];
        let e = aw!(tx.call("alk_enqueue", &bogus)).unwrap_err();
        assert!(
            matches!(e, Error::InvalidOptions(ref d) if d.contains("bogus")),
            "{e:?}"
        );
        aw!(tx.rollback());
        let mut tx = aw!(conn.begin());
        let not_json = [
            queue.as_str().into(),
            Arg::Null,
            Arg::Json("{not json".into()),
        ];
        let e = aw!(tx.call("alk_enqueue", &not_json)).unwrap_err();
        assert_eq!(e.code(), Some("ALK04"), "{e:?}");
        aw!(tx.rollback());
        assert!(server
            .store
            .queue(&queue)
            .unwrap()
            .claim("w", 1)
            .unwrap()
            .is_empty());
    });
}

#[test]
fn a_handlers_writes_and_its_ack_commit_together_or_not_at_all() {
    each(|server, conn| {
        let queue = server.store.queue(&fresh("aq")).unwrap();
        for n in 0..3 {
            queue
                .enqueue(&EnqueueOpts::new(), &json!({"n": n}))
                .unwrap();
        }
        let jobs = queue.claim("w", 3).unwrap();
        let item = fresh("done");

        // The handler's transaction fails after its ack: the job is still held.
        let mut tx = aw!(conn.begin());
        aw!(tx.execute(&format!("INSERT INTO async_orders VALUES ('{item}')")));
        assert!(aw!(tx.ack_tx(jobs[0].id, "w")).unwrap());
        aw!(tx.rollback());
        assert_eq!(
            queue.get_job(jobs[0].id).unwrap().unwrap()["state"],
            "running"
        );
        assert_eq!(orders(&item), 0);

        // Committed: the row and the ack.
        let mut tx = aw!(conn.begin());
        aw!(tx.execute(&format!("INSERT INTO async_orders VALUES ('{item}')")));
        assert!(aw!(tx.ack_tx(jobs[0].id, "w")).unwrap());
        assert!(!aw!(tx.ack_tx(jobs[0].id, "w")).unwrap(), "acked once");
        assert!(
            !aw!(tx.ack_tx(jobs[1].id, "someone-else")).unwrap(),
            "not theirs"
        );
        aw!(tx.commit());
        assert_eq!(queue.get_job(jobs[0].id).unwrap(), None);
        assert_eq!(orders(&item), 1);

        let mut tx = aw!(conn.begin());
        let retried = aw!(tx.retry_tx(
            jobs[1].id,
            "w",
            "boom",
            Some(std::time::Duration::from_secs(60))
        ))
        .unwrap();
        assert_eq!(retried, Retried::Pending);
        assert!(aw!(tx.fail_tx(jobs[2].id, "w", "bad input")).unwrap());
        aw!(tx.commit());
        let retried = queue.get_job(jobs[1].id).unwrap().unwrap();
        assert_eq!(
            (retried["state"].as_str(), retried["last_error"].as_str()),
            (Some("pending"), Some("boom"))
        );
        assert_eq!(queue.get_job(jobs[2].id).unwrap().unwrap()["state"], "dead");
    });
}

#[test]
fn a_claim_in_the_callers_transaction_holds_only_once_committed() {
    each(|server, conn| {
        let name = fresh("aq");
        let queue = server.store.queue(&name).unwrap();
        let id = queue
            .enqueue(&EnqueueOpts::new(), &json!({"n": 1}))
            .unwrap();

        let mut tx = aw!(conn.begin());
        let jobs = aw!(tx.claim_tx(&name, "w", 10)).unwrap();
        assert_eq!(
            (jobs.len(), jobs[0].id, &jobs[0].payload),
            (1, id, &json!({"n": 1}))
        );
        assert_eq!(jobs[0].attempts, 1);
        aw!(tx.rollback());
        // Rolled back: the job is pending again, its attempt not counted.
        let job = queue.get_job(id).unwrap().unwrap();
        assert_eq!(
            (job["state"].as_str(), job["attempts"].as_i64()),
            (Some("pending"), Some(0))
        );

        let mut tx = aw!(conn.begin());
        let jobs = aw!(tx.claim_tx(&name, "w", 10)).unwrap();
        assert_eq!((jobs.len(), jobs[0].attempts), (1, 1));
        let e = aw!(tx.claim_tx(&name, "", 10)).unwrap_err();
        assert_eq!(e.code(), Some("ALK01"), "{e}");
        aw!(tx.commit());
        let job = queue.get_job(id).unwrap().unwrap();
        assert_eq!(
            (job["state"].as_str(), job["claimed_by"].as_str()),
            (Some("running"), Some("w"))
        );
        assert!(queue.ack(id, "w").unwrap());
    });
}
