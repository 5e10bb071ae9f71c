//! Conformance suite on the in-memory backend and fence.
#![cfg(feature = "memory")]

#[path = "conformance/mod.rs"]
mod conformance;

use std::time::Duration;

use conformance::{FenceHarness, Harness};
use fenced_lock::{MemoryBackend, MemoryFence};

/// Clients share one store, as clients of one server would.
#[derive(Clone, Default)]
struct Mem(MemoryBackend, MemoryFence);

impl Harness for Mem {
    type B = MemoryBackend;
    async fn client(&self) -> MemoryBackend {
        self.0.clone()
    }
    fn ttl(&self) -> Duration {
        Duration::from_millis(200)
    }
    async fn break_lock(&self, key: &str) {
        assert!(self.0.break_lock(key));
    }
}

impl FenceHarness for Mem {
    type F = MemoryFence;
    async fn fence(&self) -> MemoryFence {
        self.1.clone()
    }
}

async fn harness() -> Mem {
    Mem::default()
}

lock_suite!(harness());
fence_suite!(harness());

#[tokio::test]
async fn fence_stops_paused_holder() {
    conformance::fence_stops_paused_holder(harness().await, harness().await).await;
}
