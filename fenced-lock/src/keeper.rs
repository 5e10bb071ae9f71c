//! Background renewal with loss notification.

use std::future::Future;
use std::time::Duration;

use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::{FencingToken, Lease, LockBackend, LockError, Ticket};

/// Default renewal period as a fraction of the TTL: three attempts per TTL,
/// so one slow or failed renewal does not lose the lock.
pub const DEFAULT_RENEW_FRACTION: f64 = 1.0 / 3.0;

/// Why a [`Keeper`] stopped holding its lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LossReason {
    /// `valid_until` passed without a successful renewal (backend slow or unreachable).
    Expired,
    /// The backend said the lease is no longer ours (taken over or broken).
    Revoked,
    /// The keeper was released or dropped.
    Stopped,
    /// The keeper was created outside a Tokio runtime, so it could not renew; it fails
    /// closed (reports loss at once) instead of panicking.
    NoRuntime,
}

#[derive(Clone, Copy, Debug)]
struct State {
    valid_until: Instant,
    lost: Option<LossReason>,
}

enum Stop {
    /// Hand the lease back (for [`Keeper::release`]).
    Return,
}

/// Renews a lease in a background task and tells the work when it is lost.
///
/// Renewal runs every `ttl * 1/3` by default. The lock counts as lost as soon as
/// the backend refuses a renewal, or `valid_until` passes without a successful
/// one, whichever comes first; [`lost`](Self::lost) completes then, checked
/// against the monotonic clock even if the renewal task is stuck.
///
/// Dropping a `Keeper` never blocks: it stops renewing and releases the lease
/// in the background (on the runtime it was started on).
///
/// ```
/// use std::time::Duration;
/// use fenced_lock::{Keeper, LockBackend, MemoryBackend};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), fenced_lock::LockError> {
/// let locks = MemoryBackend::new();
/// let lease = locks.acquire("report", Duration::from_millis(300), Duration::from_secs(1)).await?;
/// let keeper = Keeper::new(locks.clone(), lease);
/// let token = keeper.token();
/// // The work is cancelled if the lock is lost; here it outlives the TTL safely.
/// let out = keeper
///     .run(async {
///         tokio::time::sleep(Duration::from_millis(500)).await;
///         token.get()
///     })
///     .await?;
/// assert_eq!(out, token.get());
/// assert!(keeper.release().await?);
/// # Ok(()) }
/// ```
pub struct Keeper {
    key: String,
    token: FencingToken,
    ticket: Ticket,
    state: watch::Receiver<State>,
    stop: Option<oneshot::Sender<Stop>>,
    task: Option<JoinHandle<Option<Lease>>>,
    release: Option<ReleaseFn>,
}

type ReleaseFn = Box<
    dyn FnOnce(Lease) -> std::pin::Pin<Box<dyn Future<Output = Result<bool, LockError>> + Send>>
        + Send
        + Sync,
>;

impl std::fmt::Debug for Keeper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keeper")
            .field("key", &self.key)
            .field("token", &self.token)
            .field("state", &*self.state.borrow())
            .finish_non_exhaustive()
    }
}

impl Keeper {
    /// Starts renewing `lease` every third of its TTL. Outside a Tokio runtime it cannot
    /// renew: it then reports the lease lost at once ([`LossReason::NoRuntime`]).
    pub fn new<B>(backend: B, lease: Lease) -> Self
    where
        B: LockBackend + Clone + 'static,
    {
        let period = lease.ttl().mul_f64(DEFAULT_RENEW_FRACTION);
        Self::with_renew_interval(backend, lease, period)
    }

    /// Starts renewing `lease` every `period` (clamped to at least 1 ms). A
    /// period at or above the TTL means the lease will lapse between renewals.
    pub fn with_renew_interval<B>(backend: B, lease: Lease, period: Duration) -> Self
    where
        B: LockBackend + Clone + 'static,
    {
        let period = period.max(Duration::from_millis(1));
        let key = lease.key().to_owned();
        let token = lease.token();
        let ticket = lease.ticket();
        let (tx, rx) = watch::channel(State {
            valid_until: lease.valid_until(),
            lost: None,
        });
        let (stop_tx, stop_rx) = oneshot::channel();
        let task = match tokio::runtime::Handle::try_current() {
            Ok(rt) => Some(rt.spawn(renew_loop(backend.clone(), lease, period, tx, stop_rx))),
            Err(_) => {
                tx.send_modify(|s| s.lost = Some(LossReason::NoRuntime));
                None
            }
        };
        let release: ReleaseFn =
            Box::new(move |lease| Box::pin(async move { backend.release(lease).await }));
        Self {
            key,
            token,
            ticket,
            state: rx,
            stop: Some(stop_tx),
            task,
            release: Some(release),
        }
    }

    /// The lock key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The fencing token of the hold; constant across renewals.
    pub fn token(&self) -> FencingToken {
        self.token
    }

    /// The lease's [`Ticket`] for fenced writes.
    pub fn ticket(&self) -> Ticket {
        self.ticket
    }

    /// The current conservative expiry (moves forward with each renewal).
    pub fn valid_until(&self) -> Instant {
        self.state.borrow().valid_until
    }

    /// Why the lease was lost, or `None` while it is held.
    pub fn lost_reason(&self) -> Option<LossReason> {
        let s = *self.state.borrow();
        s.lost
            .or((Instant::now() >= s.valid_until).then_some(LossReason::Expired))
    }

    /// Whether the lease is lost.
    pub fn is_lost(&self) -> bool {
        self.lost_reason().is_some()
    }

    /// A cloneable, `'static` handle to wait for loss from other tasks.
    pub fn watch(&self) -> LossWatch {
        LossWatch {
            state: self.state.clone(),
        }
    }

    /// Completes when the lease is lost (see [`LossReason`]).
    pub async fn lost(&self) -> LossReason {
        self.watch().lost().await
    }

    /// Runs `work` while the lease is held; drops (cancels) it at the moment
    /// the lease is lost and returns [`LockError::LockLost`].
    pub async fn run<F: Future>(&self, work: F) -> Result<F::Output, LockError> {
        tokio::select! {
            biased;
            _ = self.lost() => Err(LockError::LockLost { key: self.key.clone(), token: self.token }),
            out = work => Ok(out),
        }
    }

    /// Stops renewing and releases the lease. Returns whether it was still held
    /// (`false` if it had been lost).
    pub async fn release(mut self) -> Result<bool, LockError> {
        let (Some(stop), Some(task), Some(release)) =
            (self.stop.take(), self.task.take(), self.release.take())
        else {
            return Ok(false);
        };
        // If the task already ended (lease lost) the send fails; the join tells.
        let _ = stop.send(Stop::Return);
        match task.await {
            Ok(Some(lease)) => release(lease).await,
            Ok(None) => Ok(false),
            Err(e) => Err(LockError::Backend {
                backend: "keeper",
                context: "release",
                message: format!("renewal task failed: {e}"),
            }),
        }
    }
}

impl Drop for Keeper {
    fn drop(&mut self) {
        // Dropping `stop` tells the task to release on its own; nothing here waits.
        self.stop.take();
        if let (Some(task), Some(release)) = (self.task.take(), self.release.take()) {
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn(async move {
                    if let Ok(Some(lease)) = task.await {
                        let _ = release(lease).await;
                    }
                });
            } else {
                task.abort();
            }
        }
    }
}

/// Waits for loss of a [`Keeper`]'s lease; obtained from [`Keeper::watch`].
#[derive(Clone, Debug)]
pub struct LossWatch {
    state: watch::Receiver<State>,
}

impl LossWatch {
    /// Completes when the lease is lost, including when `valid_until` passes
    /// without a renewal even if the renewal task never reports.
    pub async fn lost(&mut self) -> LossReason {
        loop {
            let s = *self.state.borrow_and_update();
            if let Some(r) = s.lost {
                return r;
            }
            if Instant::now() >= s.valid_until {
                return LossReason::Expired;
            }
            tokio::select! {
                changed = self.state.changed() => {
                    if changed.is_err() {
                        // The task is gone: either it reported loss, or it stopped.
                        return self.state.borrow().lost.unwrap_or(LossReason::Stopped);
                    }
                }
                _ = tokio::time::sleep_until(s.valid_until) => return LossReason::Expired,
            }
        }
    }
}

/// Retry pause after a renewal failed for a reason other than "not yours".
fn retry_pause(period: Duration) -> Duration {
    (period / 4).max(Duration::from_millis(5))
}

async fn renew_loop<B: LockBackend>(
    backend: B,
    mut lease: Lease,
    period: Duration,
    tx: watch::Sender<State>,
    mut stop: oneshot::Receiver<Stop>,
) -> Option<Lease> {
    let mut next = Instant::now() + period;
    let reason = loop {
        let wake = next.min(lease.valid_until());
        tokio::select! {
            biased;
            // Release asked for the lease back, or the Keeper was dropped
            // (then Drop's background task releases it).
            _ = &mut stop => return Some(lease),
            _ = tokio::time::sleep_until(wake) => {}
        }
        if lease.is_expired() {
            break LossReason::Expired;
        }
        // Never wait for a renewal past the point where the lease is lost anyway.
        let deadline = lease.valid_until();
        let attempt = tokio::select! {
            biased;
            _ = &mut stop => None,
            r = tokio::time::timeout_at(deadline, backend.renew(&mut lease)) => Some(r),
        };
        let Some(attempt) = attempt else {
            return Some(lease);
        };
        match attempt {
            Ok(Ok(())) => {
                tracing::trace!(target: "fenced_lock", key = lease.key(), token = lease.token().get(), "renewed");
                tx.send_modify(|s| s.valid_until = lease.valid_until());
                next = Instant::now() + period;
            }
            Ok(Err(e)) if e.is_lock_lost() => break LossReason::Revoked,
            // Unreachable or erroring backend: retry soon until valid_until.
            Ok(Err(_)) => next = Instant::now() + retry_pause(period),
            Err(_) => break LossReason::Expired,
        }
    };
    // Key and token only: the owner id authorises renew and release and never reaches logs.
    tracing::warn!(
        target: "fenced_lock",
        key = lease.key(),
        token = lease.token().get(),
        ?reason,
        "lease lost"
    );
    tx.send_modify(|s| s.lost = Some(reason));
    None
}

/// What [`LockBackend::with_lock`] hands the work: the lock key, the lease's [`Ticket`]
/// for fenced writes, and a way to watch for loss. It carries no owner id, so the
/// work cannot renew or release behind the keeper's back.
#[derive(Clone, Debug)]
pub struct LockGuard {
    key: String,
    ticket: Ticket,
    watch: LossWatch,
}

impl LockGuard {
    pub(crate) fn new(keeper: &Keeper) -> Self {
        Self {
            key: keeper.key().to_owned(),
            ticket: keeper.ticket(),
            watch: keeper.watch(),
        }
    }

    /// The lock key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The lease's ticket: present it to a fence with every write.
    pub fn ticket(&self) -> Ticket {
        self.ticket
    }

    /// The fencing token alone (for a conditional write on a token column).
    pub fn token(&self) -> FencingToken {
        self.ticket.token
    }

    /// Completes when the lease is lost (the work is cancelled then anyway).
    pub async fn lost(&self) -> LossReason {
        self.watch.clone().lost().await
    }
}
