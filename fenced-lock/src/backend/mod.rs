//! The backend trait and its implementations.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use crate::{Lease, LockError};

#[cfg(feature = "etcd")]
pub mod etcd;
#[cfg(feature = "memory")]
pub mod memory;
#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(feature = "redis")]
pub mod redis;

/// First pause between attempts of [`LockBackend::acquire`].
const BACKOFF_START: Duration = Duration::from_millis(2);
/// Longest pause between attempts, so a released lock is noticed quickly.
const BACKOFF_MAX: Duration = Duration::from_millis(100);

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

    /// Retries [`try_acquire`](Self::try_acquire) with jittered exponential
    /// backoff for at most `wait` (zero means exactly one attempt), then fails
    /// with [`LockError::Timeout`]. Errors other than "held" end the wait at once.
    fn acquire(
        &self,
        key: &str,
        ttl: Duration,
        wait: Duration,
    ) -> impl Future<Output = Result<Lease, LockError>> + Send {
        async move {
            let started = Instant::now();
            let deadline = started + wait;
            let mut backoff = BACKOFF_START;
            loop {
                if let Some(lease) = self.try_acquire(key, ttl).await? {
                    return Ok(lease);
                }
                let now = Instant::now();
                if now >= deadline {
                    return Err(LockError::Timeout {
                        key: key.to_owned(),
                        waited: now - started,
                    });
                }
                // Full jitter spreads contenders out so they do not retry in lockstep.
                let pause = backoff.mul_f64(rand::random_range(0.5..1.0));
                tokio::time::sleep_until(deadline.min(now + pause)).await;
                backoff = (backoff * 2).min(BACKOFF_MAX);
            }
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
