//! Conformance suite on a real etcd started by the test (see `support/etcd_server.rs`).
#![cfg(feature = "etcd")]

#[path = "conformance/mod.rs"]
mod conformance;
#[path = "support/etcd_server.rs"]
mod etcd_server;

use std::sync::Arc;
use std::time::Duration;

use conformance::{FenceHarness, Harness};
use etcd_server::EtcdServer;
use fenced_lock::{
    EtcdBackend, EtcdFence, EtcdOptions, Fence, FencingToken, HolderId, LockBackend, LockError,
    Ticket,
};

/// One etcd per test (tests run in parallel); a random prefix on top.
struct Etcd {
    server: Arc<EtcdServer>,
    prefix: String,
}

impl Harness for Etcd {
    type B = EtcdBackend;
    async fn client(&self) -> EtcdBackend {
        EtcdBackend::connect_with(
            &[self.server.endpoint()],
            EtcdOptions::default().prefix(&self.prefix),
        )
        .await
        .expect("connect to test etcd")
    }
    fn ttl(&self) -> Duration {
        // etcd lease TTLs are whole seconds.
        Duration::from_secs(1)
    }
    async fn break_lock(&self, key: &str) {
        let b = self.client().await;
        let mut c = b.client().clone();
        let r = c.delete(b.etcd_key(key), None).await.unwrap();
        assert_eq!(r.deleted(), 1);
    }
}

async fn harness() -> Etcd {
    Etcd {
        server: Arc::new(EtcdServer::start().await),
        prefix: format!("fl-test-{:016x}/", rand::random::<u64>()),
    }
}

lock_suite!(harness());
fence_suite!(harness());

impl FenceHarness for Etcd {
    type F = EtcdFence;
    async fn fence(&self) -> EtcdFence {
        let b = self.client().await;
        EtcdFence::new(b.client().clone(), &format!("{}fence/", self.prefix))
    }
}

/// The etcd fence: check and writes in one transaction; a stale ticket writes nothing;
/// concurrent admissions retry and never let an older token in after a newer one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_fenced_txn_writes_only_with_an_admitted_ticket() {
    let h = harness().await;
    let f = h.fence().await;
    let t = |n| Ticket::new(FencingToken::new(n).unwrap(), HolderId::from_raw(n));
    let data = format!("{}data/doc", h.prefix);
    let mut joins = Vec::new();
    for n in [3u64, 9, 1, 7, 5, 2, 8, 4, 6] {
        let f = f.clone();
        let data = data.clone();
        joins.push(tokio::spawn(async move {
            let _ = f.put("doc", t(n), &data, n.to_string().as_bytes()).await;
        }));
    }
    for j in joins {
        j.await.unwrap();
    }
    let mut c = h.client().await.client().clone();
    let got = c.get(data.as_str(), None).await.unwrap();
    assert_eq!(got.kvs()[0].value(), b"9");
    let err = f.put("doc", t(8), &data, b"late").await.unwrap_err();
    assert_eq!(
        err.as_stale().and_then(|s| s.current),
        Some(FencingToken::new(9).unwrap())
    );
    let got = c.get(data.as_str(), None).await.unwrap();
    assert_eq!(got.kvs()[0].value(), b"9");
    f.check_only("doc", t(9)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_server_is_a_typed_error() {
    let err = EtcdBackend::connect_with(
        &["http://127.0.0.1:1"],
        EtcdOptions::default().op_timeout(Duration::from_secs(2)),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, LockError::Unavailable { .. }), "{err}");
}

/// Tokens are etcd revisions: persisted, so they keep increasing after the
/// server restarts, and a renew after the restart still works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_increase_across_server_restart() {
    let mut server = EtcdServer::start().await;
    let key = conformance::unique("restart");
    let before = {
        let b = EtcdBackend::connect(&[server.endpoint()]).await.unwrap();
        let l = b
            .try_acquire(&key, Duration::from_secs(2))
            .await
            .unwrap()
            .unwrap();
        let t = l.token();
        assert!(b.release(l).await.unwrap());
        t
    };
    server.restart().await;
    let b = EtcdBackend::connect(&[server.endpoint()]).await.unwrap();
    let l = b
        .try_acquire(&key, Duration::from_secs(2))
        .await
        .unwrap()
        .unwrap();
    assert!(l.token() > before, "{} !> {before}", l.token());
    assert!(b.release(l).await.unwrap());
}

/// The token is the key's create revision, never the lease id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_is_create_revision() {
    let h = harness().await;
    let b = h.client().await;
    let key = conformance::unique("rev");
    let l = b.try_acquire(&key, h.ttl()).await.unwrap().unwrap();
    let mut c = b.client().clone();
    let r = c.get(b.etcd_key(&key), None).await.unwrap();
    let kv = &r.kvs()[0];
    assert_eq!(kv.create_revision() as u64, l.token().get());
    assert_ne!(kv.lease() as u64, l.token().get());
    assert!(b.release(l).await.unwrap());
}
