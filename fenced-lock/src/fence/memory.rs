//! In-process fences.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::fence::{admits, check_resource};
use crate::{Fence, FenceError, FencingToken, StaleToken, Ticket};

/// A value that can only be changed through a fence: [`apply`](Self::apply) checks the
/// ticket and runs the change under one lock, so a stale holder can never write between
/// a newer holder's check and write. Clones share the value.
///
/// ```
/// use std::time::Duration;
/// use fenced_lock::{Fenced, LockBackend, MemoryBackend};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let locks = MemoryBackend::new();
/// let balance = Fenced::new(100_i64);
///
/// let lease = locks.acquire("acct-7", Duration::from_secs(10), Duration::from_secs(1)).await?;
/// balance.apply(lease.ticket(), |b| *b -= 30)?;
/// locks.release(lease).await?;
///
/// let next = locks.acquire("acct-7", Duration::from_secs(10), Duration::from_secs(1)).await?;
/// balance.apply(next.ticket(), |b| *b -= 20)?;
/// assert_eq!(balance.get(|b| *b), 50);
/// # Ok(()) }
/// ```
#[derive(Debug, Default)]
pub struct Fenced<T> {
    inner: Arc<Mutex<(Option<Ticket>, T)>>,
}

impl<T> Clone for Fenced<T> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

impl<T> Fenced<T> {
    /// Wraps `value`; no ticket admitted yet.
    pub fn new(value: T) -> Self {
        Self {
            inner: Arc::new(Mutex::new((None, value))),
        }
    }

    /// Runs `f` on the value if `ticket` is admitted (newer than the last admitted one, or
    /// the same holder), recording it; otherwise returns [`FenceError::Stale`] and leaves
    /// the value untouched. Check, record and change happen under one lock.
    pub fn apply<R>(&self, ticket: Ticket, f: impl FnOnce(&mut T) -> R) -> Result<R, FenceError> {
        let mut guard = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let (current, value) = &mut *guard;
        if !admits(*current, ticket) {
            return Err(StaleToken {
                resource: String::new(),
                presented: ticket.token,
                current: current.map(|c| c.token),
            }
            .into());
        }
        *current = Some(ticket);
        Ok(f(value))
    }

    /// Reads the value (no ticket needed to read).
    pub fn get<R>(&self, f: impl FnOnce(&T) -> R) -> R {
        let guard = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        f(&guard.1)
    }

    /// The last admitted token.
    pub fn current(&self) -> Option<FencingToken> {
        let guard = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        guard.0.map(|t| t.token)
    }
}

/// A fence kept in this process's memory, one high-water mark per resource name
/// (e.g. guarding files or caches written only by this process). Clones share state.
///
/// ```
/// use fenced_lock::{FencingToken, HolderId, MemoryFence, Ticket};
///
/// let fence = MemoryFence::new();
/// let (a, b) = (HolderId::random(), HolderId::random());
/// let t = |n, h| Ticket::new(FencingToken::new(n).unwrap(), h);
/// let mut log = Vec::new();
/// fence.apply("ledger", t(5, a), || log.push("a1")).unwrap();
/// fence.apply("ledger", t(5, a), || log.push("a2")).unwrap(); // same holder, second write
/// assert!(fence.apply("ledger", t(5, b), || log.push("b")).is_err()); // equal token, other lease
/// assert!(fence.apply("ledger", t(4, b), || log.push("stale")).is_err());
/// assert_eq!(log, ["a1", "a2"]);
/// ```
#[derive(Clone, Default, Debug)]
pub struct MemoryFence {
    high: Arc<Mutex<HashMap<String, Ticket>>>,
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
            .map(|t| t.token)
    }

    /// Admits `ticket` for `resource` and, only then, runs `write` while the fence is still
    /// locked, so no other ticket can be admitted between the check and the write. Keep
    /// `write` short: it blocks every other admission on this fence.
    pub fn apply<R>(
        &self,
        resource: &str,
        ticket: Ticket,
        write: impl FnOnce() -> R,
    ) -> Result<R, FenceError> {
        check_resource(resource)?;
        let mut high = self.high.lock().unwrap_or_else(|e| e.into_inner());
        let current = high.get(resource).copied();
        if !admits(current, ticket) {
            return Err(StaleToken {
                resource: resource.to_owned(),
                presented: ticket.token,
                current: current.map(|c| c.token),
            }
            .into());
        }
        high.insert(resource.to_owned(), ticket);
        Ok(write())
    }

    /// Synchronous form of [`Fence::check_only`] (check only: see its caveat).
    pub fn check_only_now(&self, resource: &str, ticket: Ticket) -> Result<(), FenceError> {
        self.apply(resource, ticket, || ())
    }
}

impl Fence for MemoryFence {
    async fn check_only(&self, resource: &str, ticket: Ticket) -> Result<(), FenceError> {
        self.check_only_now(resource, ticket)
    }
}
