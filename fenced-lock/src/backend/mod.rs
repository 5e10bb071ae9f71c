//! The backend trait and its implementations.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use crate::{FencingToken, Lease, LockError};

#[cfg(feature = "etcd")]
pub mod etcd;
#[cfg(feature = "memory")]
pub mod memory;
#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(feature = "redis")]
pub mod redis;

/// First pause between attempts of [`LockBackend::acquire`].
pub(crate) const BACKOFF_START: Duration = Duration::from_millis(2);
/// Longest pause between attempts, so a released lock is noticed quickly.
pub(crate) const BACKOFF_MAX: Duration = Duration::from_millis(100);
/// Longest single attempt when the wait is unbounded (backends also apply their own
/// per-operation deadline).
const MAX_ATTEMPT: Duration = Duration::from_secs(3600);

/// The state of an `acquire` bounded by a wait: its deadline, the jittered exponential
/// backoff between attempts, and what the failed attempts said. Shared by the default
/// [`LockBackend::acquire`] and the backends that wait their own way (etcd's queue).
pub(crate) struct Retry<'k> {
    key: &'k str,
    started: Instant,
    /// `None`: beyond what the clock can represent, i.e. no deadline.
    pub(crate) deadline: Option<Instant>,
    backoff: Duration,
    /// Whether any attempt found the key held: then running out of wait is a `Timeout`;
    /// if every attempt failed to reach the backend, its error says so.
    pub(crate) seen_held: bool,
    last_error: Option<LockError>,
}

impl<'k> Retry<'k> {
    pub(crate) fn new(key: &'k str, wait: Duration) -> Retry<'k> {
        let started = Instant::now();
        Retry {
            key,
            started,
            deadline: started.checked_add(wait),
            backoff: BACKOFF_START,
            seen_held: false,
            last_error: None,
        }
    }

    /// The lease an attempt got, with its `acquired` event.
    pub(crate) fn acquired(&self, lease: Lease) -> Lease {
        tracing::debug!(
            target: "fenced_lock",
            key = self.key,
            token = lease.token().get(),
            waited_ms = self.started.elapsed().as_millis() as u64,
            "acquired"
        );
        lease
    }

    /// The wait ran out with the key held.
    pub(crate) fn timeout(&self, now: Instant) -> LockError {
        LockError::Timeout {
            key: self.key.to_owned(),
            waited: now - self.started,
        }
    }

    /// A failed attempt: a transient error is kept and retried, any other ends the call.
    pub(crate) fn failed(&mut self, e: LockError) -> Result<(), LockError> {
        match e {
            LockError::Unavailable { .. } => {
                self.last_error = Some(e);
                Ok(())
            }
            e => Err(e),
        }
    }

    /// Before the next attempt: the error to end with when the wait is spent (or `stop`),
    /// else a jittered pause, cut at the deadline.
    pub(crate) async fn pause(&mut self, stop: bool) -> Result<(), LockError> {
        let now = Instant::now();
        if stop || self.deadline.is_some_and(|d| now >= d) {
            return Err(match self.last_error.take() {
                Some(e) if !self.seen_held => e,
                _ => self.timeout(now),
            });
        }
        // Full jitter spreads contenders out so they do not retry in lockstep.
        let wake = now + self.backoff.mul_f64(rand::random_range(0.5..1.0));
        tokio::time::sleep_until(self.deadline.map_or(wake, |d| d.min(wake))).await;
        self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
        Ok(())
    }
}

/// A store that grants leases with fencing tokens.
///
/// Every change to a lock's state is a single atomic step on the backend (one
/// SQL statement, one Lua script, one etcd transaction), so there is no window
/// in which a check and the following write can interleave with another client.
pub trait LockBackend: Send + Sync {
    /// One attempt: `Ok(Some(lease))` if the key was free (never held, released
    /// or expired), `Ok(None)` if someone else holds it.
    fn try_acquire(
        &self,
        key: &str,
        ttl: Duration,
    ) -> impl Future<Output = Result<Option<Lease>, LockError>> + Send;

    /// One attempt that gives up after `limit`. On `Err` the lock is not held by this
    /// attempt: backends whose request can still land after the client stopped waiting
    /// cancel it or give the grant back. The default wraps [`try_acquire`](Self::try_acquire)
    /// in a timeout, right for backends that never block (memory).
    fn try_acquire_within(
        &self,
        key: &str,
        ttl: Duration,
        limit: Duration,
    ) -> impl Future<Output = Result<Option<Lease>, LockError>> + Send {
        async move {
            match tokio::time::timeout(limit, self.try_acquire(key, ttl)).await {
                Ok(r) => r,
                Err(_) => Err(LockError::op_timeout("lock", "acquire", limit)),
            }
        }
    }

    /// Retries [`try_acquire`](Self::try_acquire) with jittered exponential backoff
    /// for at most `wait`, then fails with [`LockError::Timeout`] (or, if the backend
    /// was unreachable until the end, with its last [`LockError::Unavailable`]).
    ///
    /// `wait` bounds the whole call: every attempt is limited to the wait that is left
    /// (and to the backend's own per-operation deadline). `Duration::ZERO` means one
    /// attempt bounded by the backend's deadline; `Duration::MAX` waits without end.
    /// Transient errors (unreachable, timed out) are retried inside the budget; other
    /// errors (bad input, configuration) end it at once.
    fn acquire(
        &self,
        key: &str,
        ttl: Duration,
        wait: Duration,
    ) -> impl Future<Output = Result<Lease, LockError>> + Send {
        async move {
            let mut retry = Retry::new(key, wait);
            loop {
                let left = match retry.deadline {
                    Some(d) => d.saturating_duration_since(Instant::now()),
                    None => MAX_ATTEMPT,
                };
                if wait.is_zero() || !left.is_zero() {
                    let attempt = if wait.is_zero() {
                        self.try_acquire(key, ttl).await
                    } else {
                        self.try_acquire_within(key, ttl, left.min(MAX_ATTEMPT))
                            .await
                    };
                    match attempt {
                        Ok(Some(lease)) => return Ok(retry.acquired(lease)),
                        Ok(None) => retry.seen_held = true,
                        Err(e) => retry.failed(e)?,
                    }
                }
                retry.pause(wait.is_zero()).await?;
            }
        }
    }

    /// The whole pattern in one call: acquires (bounded by `wait`), keeps the lease alive
    /// with a [`Keeper`](crate::Keeper), runs `work` with a [`LockGuard`](crate::LockGuard), cancels the work
    /// (drops its future) the moment the lease is lost, and releases. `Err(LockLost)`
    /// means the work was cut short. The guard hands the work the lease's
    /// [`Ticket`](crate::Ticket), for the fence forms, and never the owner id.
    ///
    /// ```
    /// use std::time::Duration;
    /// use fenced_lock::{Fenced, LockBackend, MemoryBackend};
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let locks = MemoryBackend::new();
    /// let ledger = Fenced::new(Vec::new());
    /// let ledger_ref = &ledger;
    /// let written = locks
    ///     .with_lock("ledger", Duration::from_secs(5), Duration::from_secs(1), |guard| async move {
    ///         ledger_ref.apply(guard.ticket(), |l| l.push("entry"))
    ///     })
    ///     .await??;
    /// assert_eq!(ledger.get(|l| l.len()), 1);
    /// # let _ = written; Ok(()) }
    /// ```
    fn with_lock<F, Fut>(
        &self,
        key: &str,
        ttl: Duration,
        wait: Duration,
        work: F,
    ) -> impl Future<Output = Result<Fut::Output, LockError>> + Send
    where
        Self: Clone + 'static,
        F: FnOnce(crate::LockGuard) -> Fut + Send,
        Fut: Future + Send,
        Fut::Output: Send,
    {
        async move {
            let lease = self.acquire(key, ttl, wait).await?;
            let keeper = crate::Keeper::new(self.clone(), lease);
            let guard = crate::LockGuard::new(&keeper);
            let out = keeper.run(work(guard)).await;
            // The work is over (or cut short); a failed release only means the lease
            // runs out on its own.
            if let Err(e) = keeper.release().await {
                tracing::warn!(target: "fenced_lock", key, error = %e, "release after with_lock failed");
            }
            out
        }
    }

    /// Extends the lease by its TTL, keeping the token. Fails with
    /// [`LockError::LockLost`] if the lease is no longer ours (expired, released,
    /// taken over), and never extends someone else's lease.
    fn renew(&self, lease: &mut Lease) -> impl Future<Output = Result<(), LockError>> + Send;

    /// Releases the lease if it is still ours; returns whether it was still held.
    /// Never releases a lock held by someone else.
    fn release(&self, lease: Lease) -> impl Future<Output = Result<bool, LockError>> + Send;
}

/// What an operator sees of a held lock: the hold's token and how long the backend will
/// keep it (on the backend's clock). Never the owner id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LockInfo {
    /// The token of the current hold.
    pub token: FencingToken,
    /// Time left before the backend expires the hold.
    pub remaining: Duration,
}

/// Operator access: who holds a key (by token) and until when, and breaking a stuck lock.
pub trait LockAdmin: LockBackend {
    /// The current hold of `key`, or `None` if it is free.
    fn inspect(
        &self,
        key: &str,
    ) -> impl Future<Output = Result<Option<LockInfo>, LockError>> + Send;

    /// Drops the current holder of `key` without its cooperation (its renewals then fail
    /// with `LockLost`); the next acquisition still gets a larger token. Returns whether
    /// the key was held.
    fn force_release(&self, key: &str) -> impl Future<Output = Result<bool, LockError>> + Send;
}

/// One attempt in its own task, bounded by `limit`: when the caller stops waiting (the
/// limit passed, or the caller's future was dropped) the task is left to finish, and a
/// grant that lands anyway is released at once, so an abandoned attempt never leaves
/// the lock held for nobody.
#[cfg(any(feature = "redis", feature = "etcd"))]
pub(crate) async fn attempt_in_task<B: LockBackend + Clone + 'static>(
    backend: &B,
    name: &'static str,
    key: &str,
    ttl: Duration,
    limit: Duration,
) -> Result<Option<Lease>, LockError> {
    crate::lease::validate(key, ttl)?;
    let this = backend.clone();
    let owned = key.to_owned();
    let mut attempt = Abandoned {
        task: Some(tokio::spawn(
            async move { this.try_acquire(&owned, ttl).await },
        )),
        backend: backend.clone(),
    };
    let task = attempt.task.as_mut().expect("just set");
    match tokio::time::timeout(limit, task).await {
        Ok(joined) => {
            attempt.task = None;
            match joined {
                Ok(r) => r,
                Err(e) => Err(LockError::Backend {
                    backend: name,
                    context: "acquire",
                    message: format!("acquire task failed: {e}"),
                }),
            }
        }
        // Dropping `attempt` hands the task to the cleanup.
        Err(_) => Err(LockError::op_timeout(name, "acquire", limit)),
    }
}

/// An acquire attempt nobody waits for any more; on drop, its grant (if any) is released.
#[cfg(any(feature = "redis", feature = "etcd"))]
struct Abandoned<B: LockBackend + Clone + 'static> {
    task: Option<tokio::task::JoinHandle<Result<Option<Lease>, LockError>>>,
    backend: B,
}

#[cfg(any(feature = "redis", feature = "etcd"))]
impl<B: LockBackend + Clone + 'static> Drop for Abandoned<B> {
    fn drop(&mut self) {
        let Some(task) = self.task.take() else { return };
        let backend = self.backend.clone();
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                if let Ok(Ok(Some(lease))) = task.await {
                    tracing::debug!(target: "fenced_lock", key = lease.key(), token = lease.token().get(), "releasing an abandoned grant");
                    let _ = backend.release(lease).await;
                }
            });
        }
    }
}

/// Runs a backend call with a deadline, mapping the timeout to `Unavailable`.
#[cfg(any(feature = "postgres", feature = "redis", feature = "etcd"))]
pub(crate) async fn bounded<T>(
    backend: &'static str,
    context: &'static str,
    limit: Duration,
    fut: impl Future<Output = Result<T, LockError>>,
) -> Result<T, LockError> {
    match tokio::time::timeout(limit, fut).await {
        Ok(r) => r,
        Err(_) => Err(LockError::op_timeout(backend, context, limit)),
    }
}
