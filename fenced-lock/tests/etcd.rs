//! Conformance suite on a real etcd started by the test (see `support/etcd_server.rs`).
#![cfg(feature = "etcd")]

#[path = "conformance/mod.rs"]
mod conformance;
#[path = "support/etcd_server.rs"]
mod etcd_server;

use std::sync::Arc;
use std::time::Duration;

use conformance::Harness;
use etcd_server::EtcdServer;
use fenced_lock::{EtcdBackend, EtcdOptions, LockBackend, LockError};

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
