//! Leader election with fencing: a lock held continuously.

use std::time::Duration;

use crate::{FencingToken, Keeper, LockBackend, LockError, LossReason, LossWatch, Ticket};

/// Leadership of one name: campaigns until elected, keeps the lease alive with a
/// [`Keeper`], exposes the term as a fencing token (a later leader always has a larger
/// one, so a deposed leader's writes are fenced off), and signals loss.
///
/// ```
/// use std::time::Duration;
/// use fenced_lock::{Leadership, MemoryBackend};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), fenced_lock::LockError> {
/// let backend = MemoryBackend::new();
/// let leader = Leadership::campaign(backend.clone(), "scheduler", Duration::from_secs(5)).await?;
/// let term = leader.term();
/// leader.resign().await?;
/// let next = Leadership::campaign(backend, "scheduler", Duration::from_secs(5)).await?;
/// assert!(next.term() > term);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Leadership {
    keeper: Keeper,
}

impl Leadership {
    /// Waits (without a deadline) until this process is elected for `name`, then keeps
    /// the leadership alive. Cancel the future to stop campaigning; transient backend
    /// errors are retried.
    pub async fn campaign<B>(backend: B, name: &str, ttl: Duration) -> Result<Self, LockError>
    where
        B: LockBackend + Clone + 'static,
    {
        let lease = backend.acquire(name, ttl, Duration::MAX).await?;
        Ok(Self {
            keeper: Keeper::new(backend, lease),
        })
    }

    /// As [`campaign`](Self::campaign), giving up after `wait`.
    pub async fn campaign_for<B>(
        backend: B,
        name: &str,
        ttl: Duration,
        wait: Duration,
    ) -> Result<Self, LockError>
    where
        B: LockBackend + Clone + 'static,
    {
        let lease = backend.acquire(name, ttl, wait).await?;
        Ok(Self {
            keeper: Keeper::new(backend, lease),
        })
    }

    /// The term: the lease's fencing token, larger for every later leader.
    pub fn term(&self) -> FencingToken {
        self.keeper.token()
    }

    /// The ticket to present to fences with every write made as leader.
    pub fn ticket(&self) -> Ticket {
        self.keeper.ticket()
    }

    /// Whether leadership is lost.
    pub fn is_lost(&self) -> bool {
        self.keeper.is_lost()
    }

    /// Completes when leadership is lost.
    pub async fn lost(&self) -> LossReason {
        self.keeper.lost().await
    }

    /// A cloneable handle to wait for loss from other tasks.
    pub fn watch(&self) -> LossWatch {
        self.keeper.watch()
    }

    /// Runs `work` as leader; cancelled the moment leadership is lost.
    pub async fn run<F: std::future::Future>(&self, work: F) -> Result<F::Output, LockError> {
        self.keeper.run(work).await
    }

    /// Steps down (releases the lease); whether it was still held.
    pub async fn resign(self) -> Result<bool, LockError> {
        self.keeper.release().await
    }
}
