//! Acquire+release round trips per second, per backend, next to the raw primitive.
//!
//! `cargo run -p fenced-lock --release --example bench --all-features`
//!
//! Needs PostgreSQL on 127.0.0.1:5432 (`FENCED_LOCK_PG`), Redis on 127.0.0.1:6379
//! (`FENCED_LOCK_REDIS`) and the `etcd` binary (it starts its own etcd on loopback).
//! `BENCH_SECS` sets the length of each measurement (default 1).
//!
//! Raw primitives (what a hand-rolled lock would send):
//! * memory: insert/remove in a `Mutex<HashMap>`;
//! * postgres: `INSERT … ON CONFLICT DO NOTHING` + `DELETE … WHERE owner = $2`;
//! * redis: `SET k v NX PX ttl` + a compare-and-delete script;
//! * etcd: a create-if-absent put txn + a delete txn (no lease), and, separately,
//!   the same with lease grant/revoke (what any TTL-bounded etcd lock must send).

#[path = "../tests/support/etcd_server.rs"]
mod etcd_server;

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use etcd_client::{Compare, CompareOp, PutOptions, Txn, TxnOp};
use fenced_lock::{
    EtcdBackend, EtcdOptions, LockBackend, MemoryBackend, PostgresBackend, PostgresOptions,
    RedisBackend, RedisOptions,
};
use tokio::time::Instant;

const TTL: Duration = Duration::from_secs(10);

fn secs() -> Duration {
    let s = std::env::var("BENCH_SECS")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .unwrap_or(1.0);
    Duration::from_secs_f64(s)
}

/// Runs `op(worker)` in `workers` tasks for `dur`; returns operations per second.
async fn rate<F, Fut>(dur: Duration, workers: usize, op: F) -> f64
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send,
{
    let op = Arc::new(op);
    let count = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let deadline = start + dur;
    let mut joins = Vec::new();
    for w in 0..workers {
        let op = op.clone();
        let count = count.clone();
        joins.push(tokio::spawn(async move {
            while Instant::now() < deadline {
                op(w).await;
                count.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    for j in joins {
        j.await.expect("bench worker");
    }
    count.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64()
}

/// Alternates raw and crate measurements three times and keeps the medians,
/// so drift on a shared machine hits both sides alike.
async fn compare<R, RF, C, CF>(name: &str, workers: usize, raw: R, ours: C) -> (f64, f64)
where
    R: Fn(usize) -> RF + Send + Sync + Clone + 'static,
    RF: Future<Output = ()> + Send,
    C: Fn(usize) -> CF + Send + Sync + Clone + 'static,
    CF: Future<Output = ()> + Send,
{
    // Warm-up: connections, prepared statements, script caches.
    rate(Duration::from_millis(200), workers, raw.clone()).await;
    rate(Duration::from_millis(200), workers, ours.clone()).await;
    let (mut r, mut o) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        r.push(rate(secs(), workers, raw.clone()).await);
        o.push(rate(secs(), workers, ours.clone()).await);
    }
    r.sort_by(f64::total_cmp);
    o.sort_by(f64::total_cmp);
    let (raw, ours) = (r[1], o[1]);
    println!(
        "{name:<28} {workers:>2} task(s)  raw {raw:>9.0}/s  fenced-lock {ours:>9.0}/s  raw/ours {:.2}x",
        raw / ours
    );
    (raw, ours)
}

fn pg_config() -> String {
    std::env::var("FENCED_LOCK_PG")
        .unwrap_or_else(|_| "host=127.0.0.1 port=5432 user=postgres dbname=test".into())
}

fn redis_url() -> String {
    std::env::var("FENCED_LOCK_REDIS").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into())
}

fn run_id() -> String {
    format!("{:08x}", rand::random::<u32>())
}

async fn bench_memory(workers: usize) {
    let raw: Arc<Mutex<HashMap<String, u128>>> = Arc::default();
    let b = MemoryBackend::new();
    compare(
        "memory",
        workers,
        move |w| {
            let raw = raw.clone();
            async move {
                let key = format!("k{w}");
                let mut m = raw.lock().unwrap();
                assert!(m.insert(key.clone(), 1).is_none());
                m.remove(&key);
            }
        },
        move |w| {
            let b = b.clone();
            async move {
                let l = b.try_acquire(&format!("k{w}"), TTL).await.unwrap().unwrap();
                assert!(b.release(l).await.unwrap());
            }
        },
    )
    .await;
}

async fn bench_postgres(workers: usize) {
    let id = run_id();
    let table = format!("fl_bench_{id}");
    let raw_table = format!("fl_bench_raw_{id}");
    let b = PostgresBackend::connect_with(&pg_config(), PostgresOptions::default().table(&table))
        .await
        .expect("PostgreSQL");
    let (client, conn) = tokio_postgres::connect(&pg_config(), tokio_postgres::NoTls)
        .await
        .expect("PostgreSQL");
    tokio::spawn(conn);
    client
        .batch_execute(&format!(
            "CREATE TABLE {raw_table} (k text PRIMARY KEY, owner bytea NOT NULL)"
        ))
        .await
        .unwrap();
    let ins = client
        .prepare(&format!(
            "INSERT INTO {raw_table} (k, owner) VALUES ($1, $2) ON CONFLICT DO NOTHING"
        ))
        .await
        .unwrap();
    let del = client
        .prepare(&format!(
            "DELETE FROM {raw_table} WHERE k = $1 AND owner = $2"
        ))
        .await
        .unwrap();
    let client = Arc::new(client);
    let c2 = client.clone();
    for workers in [1, workers] {
        let (client, ins, del, b) = (client.clone(), ins.clone(), del.clone(), b.clone());
        compare(
            "postgres",
            workers,
            move |w| {
                let (client, ins, del) = (client.clone(), ins.clone(), del.clone());
                async move {
                    let key = format!("k{w}");
                    let owner = rand::random::<u128>().to_be_bytes();
                    let n = client.execute(&ins, &[&key, &&owner[..]]).await.unwrap();
                    assert_eq!(n, 1);
                    client.execute(&del, &[&key, &&owner[..]]).await.unwrap();
                }
            },
            move |w| {
                let b = b.clone();
                async move {
                    let l = b.try_acquire(&format!("k{w}"), TTL).await.unwrap().unwrap();
                    assert!(b.release(l).await.unwrap());
                }
            },
        )
        .await;
    }
    c2.batch_execute(&format!("DROP TABLE {table}; DROP TABLE {raw_table}"))
        .await
        .unwrap();
}

async fn bench_redis(workers: usize) {
    let prefix = format!("fl-bench-{}:", run_id());
    let b = RedisBackend::connect_with(&redis_url(), RedisOptions::default().prefix(&prefix))
        .await
        .expect("Redis");
    let client = redis::Client::open(redis_url()).unwrap();
    let conn = client
        .get_multiplexed_async_connection()
        .await
        .expect("Redis");
    let cad = Arc::new(redis::Script::new(
        "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0",
    ));
    for workers in [1, workers] {
        let (conn, cad, b, prefix) = (conn.clone(), cad.clone(), b.clone(), prefix.clone());
        compare(
            "redis",
            workers,
            move |w| {
                let (mut conn, cad) = (conn.clone(), cad.clone());
                let key = format!("{prefix}raw:{w}");
                async move {
                    let owner = format!("{:032x}", rand::random::<u128>());
                    let ok: Option<String> = redis::cmd("SET")
                        .arg(&key)
                        .arg(&owner)
                        .arg("NX")
                        .arg("PX")
                        .arg(10_000)
                        .query_async(&mut conn)
                        .await
                        .unwrap();
                    assert!(ok.is_some());
                    let n: i64 = cad
                        .key(&key)
                        .arg(&owner)
                        .invoke_async(&mut conn)
                        .await
                        .unwrap();
                    assert_eq!(n, 1);
                }
            },
            move |w| {
                let b = b.clone();
                async move {
                    let l = b.try_acquire(&format!("k{w}"), TTL).await.unwrap().unwrap();
                    assert!(b.release(l).await.unwrap());
                }
            },
        )
        .await;
    }
    // Same Lua scripts sent by hand: separates script cost from crate cost.
    let acq = Arc::new(redis::Script::new(
        "if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
         local t = redis.call('INCR', KEYS[2])
         redis.call('SET', KEYS[1], ARGV[1] .. ':' .. t, 'PX', ARGV[2]) return t",
    ));
    for workers in [1, workers] {
        let (conn, cad, acq, b, prefix) = (
            conn.clone(),
            cad.clone(),
            acq.clone(),
            b.clone(),
            prefix.clone(),
        );
        compare(
            "redis (raw: same Lua)",
            workers,
            move |w| {
                let (mut conn, cad, acq) = (conn.clone(), cad.clone(), acq.clone());
                let key = format!("{prefix}lua:{{{w}}}");
                let ctr = format!("{prefix}luactr:{{{w}}}");
                async move {
                    let owner = format!("{:032x}", rand::random::<u128>());
                    let t: i64 = acq
                        .key(&key)
                        .key(&ctr)
                        .arg(&owner)
                        .arg(10_000)
                        .invoke_async(&mut conn)
                        .await
                        .unwrap();
                    assert!(t > 0);
                    let v = format!("{owner}:{t}");
                    let n: i64 = cad.key(&key).arg(&v).invoke_async(&mut conn).await.unwrap();
                    assert_eq!(n, 1);
                }
            },
            move |w| {
                let b = b.clone();
                async move {
                    let l = b.try_acquire(&format!("k{w}"), TTL).await.unwrap().unwrap();
                    assert!(b.release(l).await.unwrap());
                }
            },
        )
        .await;
    }
    // Fence counters never expire by design: remove this run's keys.
    let mut c = conn.clone();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}*"))
        .query_async(&mut c)
        .await
        .unwrap_or_default();
    if !keys.is_empty() {
        let _ = redis::cmd("DEL").arg(keys).exec_async(&mut c).await;
    }
}

async fn bench_etcd(workers: usize) {
    let server = etcd_server::EtcdServer::start().await;
    let ep = server.endpoint();
    let b = EtcdBackend::connect_with(&[ep.as_str()], EtcdOptions::default())
        .await
        .expect("etcd");
    let client = b.client().clone();
    let put_del = |lease: bool, client: etcd_client::Client| {
        move |w: usize| {
            let mut c = client.clone();
            async move {
                let key = format!("raw/{w}");
                let id = if lease {
                    c.lease_grant(10, None).await.unwrap().id()
                } else {
                    0
                };
                let txn = Txn::new()
                    .when([Compare::create_revision(key.as_str(), CompareOp::Equal, 0)])
                    .and_then([TxnOp::put(
                        key.as_str(),
                        "owner",
                        Some(PutOptions::new().with_lease(id)),
                    )]);
                assert!(c.txn(txn).await.unwrap().succeeded());
                let txn = Txn::new()
                    .when([Compare::value(key.as_str(), CompareOp::Equal, "owner")])
                    .and_then([TxnOp::delete(key.as_str(), None)]);
                assert!(c.txn(txn).await.unwrap().succeeded());
                if lease {
                    c.lease_revoke(id).await.unwrap();
                }
            }
        }
    };
    for workers in [1, workers] {
        let ours = {
            let b = b.clone();
            move |w: usize| {
                let b = b.clone();
                async move {
                    let l = b.try_acquire(&format!("k{w}"), TTL).await.unwrap().unwrap();
                    assert!(b.release(l).await.unwrap());
                }
            }
        };
        compare(
            "etcd (raw: txns only)",
            workers,
            put_del(false, client.clone()),
            ours.clone(),
        )
        .await;
        compare(
            "etcd (raw: lease + txns)",
            workers,
            put_del(true, client.clone()),
            ours,
        )
        .await;
    }
    drop(server);
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let workers = 8;
    println!(
        "fenced-lock bench: acquire+release round trips/s (median of 3 x {:?}); raw/ours > 1 means fenced-lock is slower",
        secs()
    );
    let only = std::env::var("BENCH_ONLY").unwrap_or_default();
    let on = |name: &str| only.is_empty() || only.split(',').any(|o| o == name);
    if on("memory") {
        bench_memory(1).await;
    }
    if on("postgres") {
        bench_postgres(workers).await;
    }
    if on("redis") {
        bench_redis(workers).await;
    }
    if on("etcd") {
        bench_etcd(workers).await;
    }
}
