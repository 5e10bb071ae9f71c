//! Conformance suite on a real PostgreSQL (127.0.0.1:5432, trust auth).
//! Override the connection with `FENCED_LOCK_PG` (libpq key=value string).
#![cfg(feature = "postgres")]

#[path = "conformance/mod.rs"]
mod conformance;

use std::time::Duration;

use conformance::{FenceHarness, Harness};
use fenced_lock::{
    Fence, FenceError, FencingToken, HolderId, LockBackend, LockError, PostgresBackend,
    PostgresFence, PostgresOptions, Ticket,
};

fn config() -> String {
    std::env::var("FENCED_LOCK_PG")
        // Tests don't need each commit on disk; this keeps fsync stalls on a
        // busy machine from eating into the short TTLs.
        .unwrap_or_else(|_| {
            "host=127.0.0.1 port=5432 user=postgres dbname=test \
             options='-c synchronous_commit=off'"
                .into()
        })
}

/// Each harness owns a fresh lock table and fence table (random names).
struct Pg {
    table: String,
    fence_table: String,
}

impl Harness for Pg {
    type B = PostgresBackend;
    async fn client(&self) -> PostgresBackend {
        PostgresBackend::connect_with(&config(), PostgresOptions::default().table(&self.table))
            .await
            .expect("PostgreSQL at 127.0.0.1:5432 (set FENCED_LOCK_PG to override)")
    }
    fn ttl(&self) -> Duration {
        Duration::from_millis(400)
    }
    async fn break_lock(&self, key: &str) {
        let b = self.client().await;
        let n = b
            .client()
            .execute(
                &format!(
                    "UPDATE {} SET owner = NULL, expires_at = '-infinity' WHERE lock_key = $1",
                    self.table
                ),
                &[&key],
            )
            .await
            .unwrap();
        assert_eq!(n, 1);
    }
}

impl FenceHarness for Pg {
    type F = PostgresFence;
    async fn fence(&self) -> PostgresFence {
        PostgresFence::connect(&config(), &self.fence_table)
            .await
            .expect("PostgreSQL fence")
    }
}

impl Drop for Pg {
    /// Drops the test's tables (from a plain thread: Drop cannot await).
    fn drop(&mut self) {
        let sql = format!(
            "DROP TABLE IF EXISTS {}; DROP TABLE IF EXISTS {}",
            self.table, self.fence_table
        );
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            rt.block_on(async {
                let (client, conn) = tokio_postgres::connect(&config(), tokio_postgres::NoTls)
                    .await
                    .ok()?;
                tokio::spawn(conn);
                client.batch_execute(&sql).await.ok()
            })
        })
        .join();
    }
}

async fn harness() -> Pg {
    let id = rand::random::<u64>();
    let pg = Pg {
        table: format!("fl_test_{id:016x}"),
        fence_table: format!("fl_fence_{id:016x}"),
    };
    // Create the tables once up front, so concurrent clients don't race on DDL.
    drop(pg.client().await);
    drop(pg.fence().await);
    pg
}

lock_suite!(harness());
fence_suite!(harness());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fence_stops_paused_holder() {
    let h = harness().await;
    let f = Pg {
        table: h.table.clone(),
        fence_table: h.fence_table.clone(),
    };
    conformance::fence_stops_paused_holder(h, f).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_server_is_a_typed_error() {
    let err = PostgresBackend::connect_with(
        "host=127.0.0.1 port=1 user=postgres dbname=test connect_timeout=2",
        PostgresOptions::default().op_timeout(Duration::from_secs(3)),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, LockError::Unavailable { .. }), "{err}");
    assert!(err.to_string().contains("not held"), "{err}");
    let err = PostgresFence::connect("host=127.0.0.1 port=1 user=postgres", "t")
        .await
        .unwrap_err();
    assert!(matches!(err, FenceError::Unavailable { .. }), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_table_name_is_rejected() {
    let err = PostgresBackend::connect_with(&config(), PostgresOptions::default().table("x; drop"))
        .await
        .unwrap_err();
    assert!(matches!(err, LockError::Config(_)), "{err}");
}

/// Release never deletes the row, so tokens survive it; and the documented
/// pattern for users' own tables works inside a transaction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_keeps_row_and_fenced_transaction_pattern() {
    let h = harness().await;
    let b = h.client().await;
    let key = conformance::unique("row");
    let l = b.try_acquire(&key, h.ttl()).await.unwrap().unwrap();
    let tok = l.token();
    assert!(b.release(l).await.unwrap());
    let row = b
        .client()
        .query_one(
            &format!(
                "SELECT token, owner IS NULL FROM {} WHERE lock_key = $1",
                h.table
            ),
            &[&key],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, i64>(0) as u64, tok.get());
    assert!(row.get::<_, bool>(1));

    // Users' own table: the write is conditional on the token column.
    let (mut client, conn) = tokio_postgres::connect(&config(), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    let data = format!("fl_data_{:016x}", rand::random::<u64>());
    client
        .batch_execute(&format!(
            "CREATE TABLE {data} (id int PRIMARY KEY, v text, fence_token bigint NOT NULL DEFAULT 0);
             INSERT INTO {data} VALUES (1, 'init', 0)"
        ))
        .await
        .unwrap();
    // FencingToken binds as a bigint; `<` so an equal token never writes twice.
    let t = |n| FencingToken::new(n).unwrap();
    let write =
        format!("UPDATE {data} SET v = $1, fence_token = $2 WHERE id = 1 AND fence_token < $2");
    assert_eq!(client.execute(&write, &[&"new", &t(5)]).await.unwrap(), 1);
    assert_eq!(client.execute(&write, &[&"again", &t(5)]).await.unwrap(), 0);
    assert_eq!(client.execute(&write, &[&"stale", &t(4)]).await.unwrap(), 0);
    let row = client
        .query_one(&format!("SELECT fence_token FROM {data} WHERE id = 1"), &[])
        .await
        .unwrap();
    assert_eq!(row.get::<_, FencingToken>(0), t(5));

    // The fenced transaction: fence check and writes commit together.
    let fence = h.fence().await;
    let holder = HolderId::random();
    let tk = |n| Ticket::new(t(n), holder);
    let tx = fence.transaction(&mut client, "acct", tk(9)).await.unwrap();
    tx.execute(&format!("UPDATE {data} SET v = 'tx9' WHERE id = 1"), &[])
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let Err(err) = fence.transaction(&mut client, "acct", tk(8)).await else {
        panic!("stale ticket opened a fenced transaction");
    };
    assert_eq!(err.as_stale().and_then(|s| s.current), Some(t(9)));
    assert!(fence.check_only("acct", tk(8)).await.is_err());
    // admit_in inside a transaction the caller opened.
    let tx = client.transaction().await.unwrap();
    fence.admit_in(&tx, "acct", tk(9)).await.unwrap();
    tx.rollback().await.unwrap();
    client
        .batch_execute(&format!("DROP TABLE {data}"))
        .await
        .unwrap();
}

/// A dropped connection (here: terminated by the server, as in a restart)
/// fails at most the one operation that saw it, then the backend reconnects
/// and tokens continue from the table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnects_after_the_connection_is_killed() {
    let h = harness().await;
    let b = h.client().await;
    let key = conformance::unique("reconnect");
    let l = b.try_acquire(&key, h.ttl()).await.unwrap().unwrap();
    let before = l.token();
    assert!(b.release(l).await.unwrap());
    let pid: i32 = b
        .client()
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);
    let admin = h.client().await;
    admin
        .client()
        .execute("SELECT pg_terminate_backend($1)", &[&pid])
        .await
        .unwrap();
    let mut attempts = Vec::new();
    let lease = loop {
        match b.try_acquire(&key, h.ttl()).await {
            Ok(Some(l)) => break l,
            Ok(None) => panic!("lock unexpectedly held"),
            Err(e) => {
                assert!(matches!(e, LockError::Unavailable { .. }), "{e}");
                attempts.push(e.to_string());
                assert!(attempts.len() < 2, "did not reconnect: {attempts:?}");
            }
        }
    };
    assert!(lease.token() > before);
    assert!(b.release(lease).await.unwrap());
}
