//! Issue 13 on PostgreSQL (127.0.0.1:5432, own tables/schemas with random names):
//! no phantom holder after a client timeout, waits that bound acquire, reserved-word
//! table names, NUL keys, and the fenced transaction against a paused holder.
#![cfg(feature = "postgres")]

use std::time::{Duration, Instant};

use fenced_lock::{LockBackend, PostgresBackend, PostgresFence, PostgresOptions};

fn config() -> String {
    std::env::var("FENCED_LOCK_PG").unwrap_or_else(|_| {
        "host=127.0.0.1 port=5432 user=postgres dbname=test \
         options='-c synchronous_commit=off'"
            .into()
    })
}

async fn admin() -> tokio_postgres::Client {
    let (c, conn) = tokio_postgres::connect(&config(), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    c
}

fn unique(name: &str) -> String {
    format!("fl13_{name}_{:016x}", rand::random::<u64>())
}

/// Drops what a test created, even when it fails.
struct Cleanup(String);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let sql = self.0.clone();
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

/// Defects 4 and 5 (P3): an acquire blocked on the row lock gave up on the client
/// (after op_timeout, not after `wait`) while the statement went on and took the lock
/// for nobody. Now it returns within the wait and leaves no holder behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_timeout_leaves_no_phantom_holder() {
    let table = unique("locks");
    let _drop = Cleanup(format!("DROP TABLE IF EXISTS {table}"));
    let opts = PostgresOptions::default()
        .table(&table)
        .op_timeout(Duration::from_secs(2));
    let a = PostgresBackend::connect_with(&config(), opts.clone())
        .await
        .unwrap();
    let b = PostgresBackend::connect_with(&config(), opts.clone())
        .await
        .unwrap();
    let l = a
        .try_acquire("job", Duration::from_secs(1))
        .await
        .unwrap()
        .unwrap();
    assert!(a.release(l).await.unwrap());

    let mut blocker = admin().await;
    let tx = blocker.transaction().await.unwrap();
    tx.execute(
        &format!("SELECT 1 FROM {table} WHERE lock_key = 'job' FOR UPDATE"),
        &[],
    )
    .await
    .unwrap();
    let t = Instant::now();
    let r = b
        .acquire("job", Duration::from_secs(30), Duration::from_millis(300))
        .await;
    let took = t.elapsed();
    assert!(r.is_err(), "acquired through a row lock");
    assert!(
        took < Duration::from_millis(1500),
        "wait=300ms took {took:?}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    tx.commit().await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;

    let row = blocker
        .query_one(
            &format!("SELECT owner IS NOT NULL AND expires_at > now() FROM {table} WHERE lock_key = 'job'"),
            &[],
        )
        .await
        .unwrap();
    assert!(!row.get::<_, bool>(0), "a phantom holder owns the key");
    let c = PostgresBackend::connect_with(&config(), opts)
        .await
        .unwrap();
    let free = c.try_acquire("job", Duration::from_secs(1)).await.unwrap();
    assert!(free.is_some(), "the key is blocked for nobody");
}

/// Defect 7 (P6): `user` passed validation, then failed as a SQL syntax error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reserved_word_table_names_work() {
    let schema = unique("schema");
    let _drop = Cleanup(format!("DROP SCHEMA IF EXISTS {schema} CASCADE"));
    admin()
        .await
        .batch_execute(&format!("CREATE SCHEMA {schema}"))
        .await
        .unwrap();
    // Unqualified reserved words, resolved into this test's own schema.
    let cfg = format!(
        "host=127.0.0.1 port=5432 user=postgres dbname=test options='-c search_path={schema}'"
    );
    let b = PostgresBackend::connect_with(&cfg, PostgresOptions::default().table("user"))
        .await
        .unwrap();
    let l = b
        .try_acquire("k", Duration::from_secs(5))
        .await
        .unwrap()
        .unwrap();
    assert!(b.release(l).await.unwrap());
    PostgresFence::connect(&cfg, "order").await.unwrap();
}

/// Defect 7 (P10): a key with NUL was a driver error on PostgreSQL and a valid key on
/// the other backends. Now every backend refuses it the same way, before any I/O.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nul_keys_are_refused_alike() {
    let table = unique("nul");
    let _drop = Cleanup(format!("DROP TABLE IF EXISTS {table}"));
    let pg = PostgresBackend::connect_with(&config(), PostgresOptions::default().table(&table))
        .await
        .unwrap();
    let mem = fenced_lock::MemoryBackend::new();
    let a = pg.try_acquire("a\0b", Duration::from_secs(1)).await;
    let b = mem.try_acquire("a\0b", Duration::from_secs(1)).await;
    let (a, b) = (a.unwrap_err(), b.unwrap_err());
    assert_eq!(a.to_string(), b.to_string());
    assert!(a.to_string().contains("NUL"), "{a}");
}

/// Defect 1: `admit` then a separate write let a paused holder overwrite the newer
/// holder's write. The fenced transaction closes both orders of the race.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fenced_transaction_stops_a_paused_holder() {
    let locks = unique("locks");
    let fences = unique("fence");
    let data = unique("data");
    let _drop = Cleanup(format!(
        "DROP TABLE IF EXISTS {locks}; DROP TABLE IF EXISTS {fences}; DROP TABLE IF EXISTS {data}"
    ));
    let mut ca = admin().await;
    let mut cb = admin().await;
    ca.batch_execute(&format!(
        "CREATE TABLE {data} (id int PRIMARY KEY, v int); INSERT INTO {data} VALUES (1, 0)"
    ))
    .await
    .unwrap();
    let backend =
        PostgresBackend::connect_with(&config(), PostgresOptions::default().table(&locks))
            .await
            .unwrap();
    let fence = PostgresFence::connect(&config(), &fences).await.unwrap();
    let ttl = Duration::from_millis(300);
    let write = format!("UPDATE {data} SET v = $1 WHERE id = 1");
    let reader = admin().await;
    let q = format!("SELECT v FROM {data} WHERE id = 1");
    let read = || async { reader.query_one(&q, &[]).await.unwrap().get::<_, i32>(0) };

    // Order 1: A pauses before its write; B takes over and writes; A wakes up.
    let a = backend.try_acquire("res", ttl).await.unwrap().unwrap();
    tokio::time::sleep_until(a.valid_until()).await;
    let b = backend
        .acquire("res", ttl, Duration::from_secs(5))
        .await
        .unwrap();
    let tx = fence.transaction(&mut cb, "res", b.ticket()).await.unwrap();
    tx.execute(&write, &[&999i32]).await.unwrap();
    tx.commit().await.unwrap();
    let stale = fence.transaction(&mut ca, "res", a.ticket()).await.is_err();
    assert!(stale, "the paused holder was admitted after the newer one");
    assert_eq!(read().await, 999);
    backend.release(b).await.unwrap();

    // Order 2: A is admitted, then pauses inside its transaction; B takes over. B's
    // admission waits for A's commit and then supersedes it: B's write is last.
    let a = backend.try_acquire("res", ttl).await.unwrap().unwrap();
    let tx_a = fence.transaction(&mut ca, "res", a.ticket()).await.unwrap();
    tokio::time::sleep_until(a.valid_until()).await;
    let b = backend
        .acquire("res", ttl, Duration::from_secs(5))
        .await
        .unwrap();
    let fence_b = fence.clone();
    let write_b = write.clone();
    let b_ticket = b.ticket();
    let writer_b = tokio::spawn(async move {
        let tx = fence_b.transaction(&mut cb, "res", b_ticket).await.unwrap();
        let admitted_at = Instant::now();
        tx.execute(&write_b, &[&2000i32]).await.unwrap();
        tx.commit().await.unwrap();
        admitted_at
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    tx_a.execute(&write, &[&1i32]).await.unwrap();
    let a_committed = Instant::now();
    tx_a.commit().await.unwrap();
    let b_admitted = writer_b.await.unwrap();
    assert!(
        b_admitted >= a_committed,
        "B was admitted while A's transaction was open"
    );
    assert_eq!(read().await, 2000, "the stale holder's write came last");
}

/// P9: lock rows could never be deleted without resetting tokens. Tokens now come from a
/// sequence, `cleanup_idle` deletes idle rows, and a deleted key's next token is larger.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cleanup_deletes_idle_rows_and_tokens_stay_monotonic() {
    let table = unique("locks");
    let _drop = Cleanup(format!("DROP TABLE IF EXISTS {table}"));
    let b = PostgresBackend::connect_with(&config(), PostgresOptions::default().table(&table))
        .await
        .unwrap();
    let mut last = std::collections::HashMap::new();
    for i in 0..50 {
        let key = format!("order-{i}");
        let l = b
            .try_acquire(&key, Duration::from_secs(5))
            .await
            .unwrap()
            .unwrap();
        last.insert(key, l.token());
        assert!(b.release(l).await.unwrap());
    }
    let mut held = b
        .try_acquire("busy", Duration::from_secs(30))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(b.cleanup_idle(Duration::ZERO).await.unwrap(), 50);
    assert_eq!(b.cleanup_idle(Duration::MAX).await.unwrap(), 0);
    // The sequence belongs to the table (dropped with it, so tests leave nothing behind).
    let owned: i64 = admin()
        .await
        .query_one(
            "SELECT count(*) FROM pg_depend d JOIN pg_class s ON s.oid = d.objid
              WHERE s.relname = $1 AND d.deptype = 'a'",
            &[&format!("{table}_token_seq")],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(owned, 1);
    let rows: i64 = admin()
        .await
        .query_one(&format!("SELECT count(*) FROM {table}"), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows, 1, "only the held key's row is left");
    for (key, before) in &last {
        let l = b
            .try_acquire(key, Duration::from_secs(5))
            .await
            .unwrap()
            .unwrap();
        assert!(
            l.token() > *before,
            "{key}: {} after cleanup, {before} before",
            l.token()
        );
        b.release(l).await.unwrap();
    }
    b.renew(&mut held)
        .await
        .expect("cleanup touched a held lock");
}

/// History checker for defect 1: workers take turns on one lock with a short TTL and
/// pause at random *between the fence check and the write* (often past their lease).
/// Every accepted write appends its token to a log in the row; a write from a superseded
/// holder landing after a newer one shows up as a decrease. The control run uses the
/// bare check followed by a separate write and must show violations (so the checker can
/// fail); the fenced transaction must show none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_checker_paused_between_check_and_write() {
    use fenced_lock::Fence;
    async fn run(atomic: bool) -> (usize, usize, usize) {
        let locks = unique("hlocks");
        let fences = unique("hfence");
        let data = unique("hdata");
        let _drop = Cleanup(format!(
            "DROP TABLE IF EXISTS {locks}; DROP TABLE IF EXISTS {fences}; DROP TABLE IF EXISTS {data}"
        ));
        admin()
            .await
            .batch_execute(&format!(
                "CREATE TABLE {data} (id int PRIMARY KEY, log bigint[] NOT NULL DEFAULT '{{}}');
                 INSERT INTO {data} VALUES (1, DEFAULT)"
            ))
            .await
            .unwrap();
        let backend =
            PostgresBackend::connect_with(&config(), PostgresOptions::default().table(&locks))
                .await
                .unwrap();
        let fence = PostgresFence::connect(&config(), &fences).await.unwrap();
        let rejected = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let mut workers = Vec::new();
        for w in 0..3u64 {
            let (backend, fence, data, rejected) = (
                backend.clone(),
                fence.clone(),
                data.clone(),
                rejected.clone(),
            );
            workers.push(tokio::spawn(async move {
                let mut client = admin().await;
                let write = format!("UPDATE {data} SET log = log || $1::bigint WHERE id = 1");
                for round in 0..8u64 {
                    let Ok(lease) = backend
                        .acquire("res", Duration::from_millis(80), Duration::from_secs(3))
                        .await
                    else {
                        continue;
                    };
                    // Deterministic spread of pauses: some well past the 80 ms lease.
                    let pause = Duration::from_millis((w * 37 + round * 53) % 200);
                    let tok = lease.token().get() as i64;
                    if atomic {
                        match fence.transaction(&mut client, "res", lease.ticket()).await {
                            Ok(tx) => {
                                tokio::time::sleep(pause).await;
                                tx.execute(&write, &[&tok]).await.unwrap();
                                tx.commit().await.unwrap();
                            }
                            Err(_) => {
                                rejected.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            }
                        }
                    } else if fence.check_only("res", lease.ticket()).await.is_ok() {
                        tokio::time::sleep(pause).await;
                        client.execute(&write, &[&tok]).await.unwrap();
                    } else {
                        rejected.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    let _ = backend.release(lease).await;
                }
            }));
        }
        for w in workers {
            w.await.unwrap();
        }
        let log: Vec<i64> = admin()
            .await
            .query_one(&format!("SELECT log FROM {data} WHERE id = 1"), &[])
            .await
            .unwrap()
            .get(0);
        let violations = log.windows(2).filter(|p| p[1] < p[0]).count();
        (
            log.len(),
            rejected.load(std::sync::atomic::Ordering::Relaxed),
            violations,
        )
    }
    let (writes, rejected, violations) = run(true).await;
    let (c_writes, c_rejected, c_violations) = run(false).await;
    eprintln!(
        "history-checker postgres: fenced transaction writes={writes} rejected={rejected} violations={violations}; \
         check-then-write control writes={c_writes} rejected={c_rejected} violations={c_violations}"
    );
    assert_eq!(violations, 0, "a superseded holder wrote after a newer one");
    assert!(writes > 0);
    assert!(
        c_violations > 0,
        "the checker found nothing in the unsafe control run"
    );
}

/// Leadership on PostgreSQL: one leader at a time, terms grow, a deposed leader learns it
/// and its term is fenced off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leadership_terms_grow_and_loss_is_signalled() {
    use fenced_lock::{Fence, Leadership, LockAdmin};
    let table = unique("leader");
    let fences = unique("lfence");
    let _drop = Cleanup(format!(
        "DROP TABLE IF EXISTS {table}; DROP TABLE IF EXISTS {fences}"
    ));
    let opts = PostgresOptions::default().table(&table);
    let a = PostgresBackend::connect_with(&config(), opts.clone())
        .await
        .unwrap();
    let b = PostgresBackend::connect_with(&config(), opts)
        .await
        .unwrap();
    let fence = PostgresFence::connect(&config(), &fences).await.unwrap();
    let ttl = Duration::from_millis(400);
    let first = Leadership::campaign(a.clone(), "scheduler", ttl)
        .await
        .unwrap();
    fence.check_only("jobs", first.ticket()).await.unwrap();
    // The second candidate waits while the first keeps leadership beyond its TTL.
    let waiting = tokio::spawn({
        let b = b.clone();
        async move { Leadership::campaign(b, "scheduler", ttl).await }
    });
    tokio::time::sleep(ttl * 3).await;
    assert!(!waiting.is_finished(), "two leaders at once");
    assert!(!first.is_lost());
    // An operator deposes the first leader: it is told, the second is elected.
    assert!(a.force_release("scheduler").await.unwrap());
    let second = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("second candidate elected")
        .unwrap()
        .unwrap();
    assert!(second.term() > first.term());
    tokio::time::timeout(Duration::from_secs(2), first.lost())
        .await
        .expect("deposed leader told");
    fence.check_only("jobs", second.ticket()).await.unwrap();
    assert!(fence.check_only("jobs", first.ticket()).await.is_err());
    assert!(second.resign().await.unwrap());
}
