//! Conformance suite on a real Redis (127.0.0.1:6379).
//! Override with `FENCED_LOCK_REDIS` (a `redis://` URL).
#![cfg(feature = "redis")]

#[path = "conformance/mod.rs"]
mod conformance;

use std::time::Duration;

use conformance::{FenceHarness, Harness};
use fenced_lock::{
    Fence, FenceError, FencingToken, HolderId, LockBackend, LockError, RedisBackend, RedisFence,
    RedisOptions, Ticket,
};

fn url() -> String {
    std::env::var("FENCED_LOCK_REDIS").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into())
}

/// Each harness uses its own random key prefix.
struct Rd {
    prefix: String,
}

impl Rd {
    fn options(&self) -> RedisOptions {
        RedisOptions::default().prefix(&self.prefix)
    }
}

impl Harness for Rd {
    type B = RedisBackend;
    async fn client(&self) -> RedisBackend {
        RedisBackend::connect_with(&url(), self.options())
            .await
            .expect("Redis at 127.0.0.1:6379 (set FENCED_LOCK_REDIS to override)")
    }
    fn ttl(&self) -> Duration {
        Duration::from_millis(300)
    }
    async fn break_lock(&self, key: &str) {
        let b = self.client().await;
        let client = redis::Client::open(url()).unwrap();
        let mut c = client.get_multiplexed_async_connection().await.unwrap();
        let n: i64 = redis::cmd("DEL")
            .arg(b.lock_key(key))
            .query_async(&mut c)
            .await
            .unwrap();
        assert_eq!(n, 1);
    }
}

impl FenceHarness for Rd {
    type F = RedisFence;
    async fn fence(&self) -> RedisFence {
        RedisFence::connect(&url(), &format!("{}fence-res:", self.prefix))
            .await
            .expect("Redis fence")
    }
}

impl Drop for Rd {
    /// Deletes the test's keys (counters never expire by design).
    fn drop(&mut self) {
        let pattern = format!("{}*", self.prefix);
        let _ = (|| -> redis::RedisResult<()> {
            let mut c = redis::Client::open(url())?.get_connection()?;
            let keys: Vec<String> = redis::cmd("KEYS").arg(&pattern).query(&mut c)?;
            if !keys.is_empty() {
                redis::cmd("DEL").arg(keys).exec(&mut c)?;
            }
            Ok(())
        })();
    }
}

async fn harness() -> Rd {
    Rd {
        prefix: format!("fl-test-{:016x}:", rand::random::<u64>()),
    }
}

lock_suite!(harness());
fence_suite!(harness());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fence_stops_paused_holder() {
    let h = harness().await;
    let f = Rd {
        prefix: h.prefix.clone(),
    };
    conformance::fence_stops_paused_holder(h, f).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_server_is_a_typed_error() {
    let err = RedisBackend::connect_with(
        "redis://127.0.0.1:1/",
        RedisOptions::default().op_timeout(Duration::from_secs(3)),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, LockError::Unavailable { .. }), "{err}");
    let err = RedisFence::connect("redis://127.0.0.1:1/", "x:")
        .await
        .unwrap_err();
    assert!(matches!(err, FenceError::Unavailable { .. }), "{err}");
}

/// The fence counter never expires and survives release, so tokens never reset.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counter_is_persistent_and_never_expires() {
    let h = harness().await;
    let b = h.client().await;
    let key = conformance::unique("ctr");
    let l = b.try_acquire(&key, h.ttl()).await.unwrap().unwrap();
    let tok = l.token();
    assert!(b.release(l).await.unwrap());
    let client = redis::Client::open(url()).unwrap();
    let mut c = client.get_multiplexed_async_connection().await.unwrap();
    let (v, ttl): (u64, i64) = redis::pipe()
        .get(b.counter_key(&key))
        .pttl(b.counter_key(&key))
        .query_async(&mut c)
        .await
        .unwrap();
    assert_eq!(v, tok.get());
    assert_eq!(ttl, -1, "counter must not expire");
    let _: () = redis::cmd("DEL")
        .arg(b.counter_key(&key))
        .query_async(&mut c)
        .await
        .unwrap();
}

/// With no replicas, `WAIT 1` cannot be satisfied: acquisition fails and the
/// lock is released rather than held unreplicated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_for_replicas_fails_closed() {
    let h = harness().await;
    let b = RedisBackend::connect_with(
        &url(),
        h.options().wait_for_replicas(1, Duration::from_millis(50)),
    )
    .await
    .unwrap();
    let key = conformance::unique("wait");
    let err = b.try_acquire(&key, h.ttl()).await.unwrap_err();
    assert!(err.to_string().contains("replicas"), "{err}");
    let plain = h.client().await;
    let l = plain.try_acquire(&key, h.ttl()).await.unwrap();
    assert!(l.is_some(), "failed acquisition left the lock held");
}

/// The fenced-write script writes only when the token is admitted; the
/// surviving value is the one written by the highest token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fenced_set_writes_only_with_current_token() {
    let h = harness().await;
    let f = h.fence().await;
    let res = conformance::unique("doc");
    let data = format!("{}data:{{{res}}}", h.prefix);
    let t = |n| FencingToken::new(n).unwrap();
    let mut joins = Vec::new();
    for n in [3u64, 9, 1, 7, 5, 2, 8, 4, 6] {
        let f = f.clone();
        let res = res.clone();
        let data = data.clone();
        joins.push(tokio::spawn(async move {
            let ticket = Ticket::new(t(n), HolderId::from_raw(n));
            let _ = f.set(&res, ticket, &data, n.to_string().as_bytes()).await;
        }));
    }
    for j in joins {
        j.await.unwrap();
    }
    let client = redis::Client::open(url()).unwrap();
    let mut c = client.get_multiplexed_async_connection().await.unwrap();
    let v: String = redis::cmd("GET")
        .arg(&data)
        .query_async(&mut c)
        .await
        .unwrap();
    assert_eq!(v, "9");
    let late = Ticket::new(t(8), HolderId::from_raw(8));
    let err = f.set(&res, late, &data, b"late").await.unwrap_err();
    assert_eq!(err.as_stale().and_then(|s| s.current), Some(t(9)));
    f.check_only(&res, Ticket::new(t(9), HolderId::from_raw(9)))
        .await
        .unwrap();
}

/// Defect 1: every fenced command checks the ticket and runs in one script; a stale
/// ticket changes nothing; keys outside the fence's slot are refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fenced_commands_check_and_write_in_one_step() {
    let h = harness().await;
    let f = h.fence().await;
    let res = conformance::unique("cmds");
    let key = |name: &str| format!("{}{}", h.prefix, f.data_key(&res, name));
    let t = |n| FencingToken::new(n).unwrap();
    let (old, new) = (
        Ticket::new(t(4), HolderId::random()),
        Ticket::new(t(5), HolderId::random()),
    );
    f.set(&res, old, &key("s"), b"old").await.unwrap();
    assert_eq!(f.incr(&res, new, &key("n"), 3).await.unwrap(), 3);
    assert_eq!(f.incr(&res, new, &key("n"), 2).await.unwrap(), 5);
    assert_eq!(f.hset(&res, new, &key("h"), b"f", b"v").await.unwrap(), 1);
    let r = f
        .eval(
            &res,
            new,
            "redis.call('SET', KEYS[1], ARGV[1]); return redis.call('STRLEN', KEYS[1])",
            &[&key("e")],
            &[b"hello"],
        )
        .await
        .unwrap();
    assert_eq!(r, redis::Value::Int(5));
    // The stale holder: every form refused, nothing written.
    assert!(
        f.set(&res, old, &key("s"), b"stale")
            .await
            .unwrap_err()
            .as_stale()
            .is_some()
    );
    assert!(f.incr(&res, old, &key("n"), 100).await.is_err());
    assert!(f.hset(&res, old, &key("h"), b"f", b"stale").await.is_err());
    assert!(f.del(&res, old, &[&key("s"), &key("n")]).await.is_err());
    assert!(
        f.eval(
            &res,
            old,
            "return redis.call('DEL', KEYS[1])",
            &[&key("e")],
            &[]
        )
        .await
        .is_err()
    );
    let mut c = redis::Client::open(url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let (s, n, hv, e): (String, i64, String, String) = redis::pipe()
        .get(key("s"))
        .get(key("n"))
        .hget(key("h"), "f")
        .get(key("e"))
        .query_async(&mut c)
        .await
        .unwrap();
    assert_eq!(
        (s.as_str(), n, hv.as_str(), e.as_str()),
        ("old", 5, "v", "hello")
    );
    assert_eq!(f.del(&res, new, &[&key("s"), &key("n")]).await.unwrap(), 2);
    // A key in another slot could not be in the same script on a Cluster.
    let other = format!("{}elsewhere", h.prefix);
    let err = f.set(&res, new, &other, b"x").await.unwrap_err();
    assert!(matches!(err, FenceError::CrossSlot { .. }), "{err}");
}
