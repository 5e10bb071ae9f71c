//! In-process fence.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::fence::check_resource;
use crate::{Fence, FenceError, FencingToken, StaleToken};

/// A fence kept in this process's memory (e.g. guarding an in-memory cache or
/// a file written only by this process). Clones share state.
///
/// ```
/// use fenced_lock::{Fence, FencingToken, MemoryFence};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let fence = MemoryFence::new();
/// let t = |n| FencingToken::new(n).unwrap();
/// fence.admit("ledger", t(5)).await.unwrap();
/// fence.admit("ledger", t(5)).await.unwrap(); // same holder, second write
/// assert!(fence.admit("ledger", t(4)).await.is_err()); // a stale holder
/// # }
/// ```
#[derive(Clone, Default, Debug)]
pub struct MemoryFence {
    high: Arc<Mutex<HashMap<String, FencingToken>>>,
}

impl MemoryFence {
    /// An empty fence.
    pub fn new() -> Self {
        Self::default()
    }

    /// The largest token admitted for `resource`, if any.
    pub fn current(&self, resource: &str) -> Option<FencingToken> {
        self.high
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(resource)
            .copied()
    }

    /// Synchronous form of [`Fence::admit`].
    pub fn admit_now(&self, resource: &str, token: FencingToken) -> Result<(), FenceError> {
        check_resource(resource)?;
        let mut high = self.high.lock().unwrap_or_else(|e| e.into_inner());
        match high.get_mut(resource) {
            Some(cur) if *cur > token => Err(StaleToken {
                resource: resource.to_owned(),
                presented: token,
                current: Some(*cur),
            }
            .into()),
            Some(cur) => {
                *cur = token;
                Ok(())
            }
            None => {
                high.insert(resource.to_owned(), token);
                Ok(())
            }
        }
    }
}

impl Fence for MemoryFence {
    async fn admit(&self, resource: &str, token: FencingToken) -> Result<(), FenceError> {
        self.admit_now(resource, token)
    }
}
