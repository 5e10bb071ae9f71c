//! In-process backend, for tests and single-process programs.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;

use crate::lease::validate;
use crate::{FencingToken, Lease, LockBackend, LockError, OwnerId};

#[derive(Default)]
struct Slot {
    /// Last token handed out for this key; kept after release so tokens never reset.
    last_token: u64,
    holder: Option<Holder>,
}

struct Holder {
    owner: OwnerId,
    token: FencingToken,
    expires: Instant,
}

/// Leases kept in this process's memory. Clones share state.
///
/// Tokens are per key and survive releases and expiries, but not the process:
/// a new `MemoryBackend` starts again at 1. Use it for tests and for
/// coordination between tasks of one process.
///
/// ```
/// use std::time::Duration;
/// use fenced_lock::{LockBackend, MemoryBackend};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), fenced_lock::LockError> {
/// let locks = MemoryBackend::new();
/// let a = locks.try_acquire("job", Duration::from_secs(5)).await?.expect("free");
/// assert!(locks.try_acquire("job", Duration::from_secs(5)).await?.is_none());
/// assert!(locks.release(a).await?);
/// let b = locks.try_acquire("job", Duration::from_secs(5)).await?.expect("free again");
/// assert!(b.token().get() == 2);
/// # Ok(()) }
/// ```
#[derive(Clone, Default)]
pub struct MemoryBackend {
    slots: Arc<Mutex<HashMap<String, Slot>>>,
    /// The largest token of any slot removed by `cleanup_idle` (read and written under
    /// the `slots` lock): a key's new slot starts above it, so tokens never repeat.
    floor: Arc<std::sync::atomic::AtomicU64>,
}

impl std::fmt::Debug for MemoryBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryBackend").finish_non_exhaustive()
    }
}

impl MemoryBackend {
    /// An empty lock table.
    pub fn new() -> Self {
        Self::default()
    }

    fn slots(&self) -> MutexGuard<'_, HashMap<String, Slot>> {
        // No code path panics while holding the lock, but never propagate poison.
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Removes the slots of keys not held, so one-off lock names do not pile up; tokens
    /// still never repeat (a new slot starts above every removed one). Returns how many
    /// slots were removed.
    pub fn cleanup_idle(&self) -> usize {
        let now = Instant::now();
        let mut slots = self.slots();
        let before = slots.len();
        let mut floor = self.floor.load(std::sync::atomic::Ordering::Relaxed);
        slots.retain(|_, s| {
            let held = s.holder.as_ref().is_some_and(|h| h.expires > now);
            if !held {
                floor = floor.max(s.last_token);
            }
            held
        });
        self.floor
            .store(floor, std::sync::atomic::Ordering::Relaxed);
        before - slots.len()
    }

    /// Operator override: drops the current holder of `key` (if any) without
    /// its cooperation, as an admin would delete a stuck lock. The holder's
    /// renew fails with `LockLost`; the next acquirer still gets a larger token.
    pub fn break_lock(&self, key: &str) -> bool {
        self.slots()
            .get_mut(key)
            .and_then(|s| s.holder.take())
            .is_some()
    }
}

impl LockBackend for MemoryBackend {
    async fn try_acquire(&self, key: &str, ttl: Duration) -> Result<Option<Lease>, LockError> {
        validate(key, ttl)?;
        let owner = OwnerId::random();
        let now = Instant::now();
        let mut slots = self.slots();
        let token = match slots.get_mut(key) {
            Some(slot) => take(slot, key, owner, now, ttl)?,
            None => {
                // First use of the key (or first since cleanup): allocate its slot now.
                let mut slot = Slot {
                    last_token: self.floor.load(std::sync::atomic::Ordering::Relaxed),
                    holder: None,
                };
                let token = take(&mut slot, key, owner, now, ttl)?;
                slots.insert(key.to_owned(), slot);
                token
            }
        };
        Ok(token.map(|t| Lease::new(key, t, owner, ttl, now + ttl)))
    }

    async fn renew(&self, lease: &mut Lease) -> Result<(), LockError> {
        let now = Instant::now();
        let mut slots = self.slots();
        let holder = slots.get_mut(lease.key()).and_then(|s| s.holder.as_mut());
        match holder {
            Some(h) if h.owner == lease.owner() && h.token == lease.token() && h.expires > now => {
                h.expires = now + lease.ttl();
                let ttl = lease.ttl();
                lease.renewed(now, ttl);
                Ok(())
            }
            _ => Err(lease.lost()),
        }
    }

    async fn release(&self, lease: Lease) -> Result<bool, LockError> {
        let now = Instant::now();
        let mut slots = self.slots();
        let Some(slot) = slots.get_mut(lease.key()) else {
            return Ok(false);
        };
        match &slot.holder {
            Some(h) if h.owner == lease.owner() && h.token == lease.token() => {
                let was_held = h.expires > now;
                slot.holder = None;
                Ok(was_held)
            }
            _ => Ok(false),
        }
    }
}

impl crate::LockAdmin for MemoryBackend {
    async fn inspect(&self, key: &str) -> Result<Option<crate::LockInfo>, LockError> {
        let now = Instant::now();
        Ok(self
            .slots()
            .get(key)
            .and_then(|s| s.holder.as_ref())
            .and_then(|h| {
                (h.expires > now).then(|| crate::LockInfo {
                    token: h.token,
                    remaining: h.expires - now,
                })
            }))
    }

    async fn force_release(&self, key: &str) -> Result<bool, LockError> {
        let now = Instant::now();
        let mut slots = self.slots();
        let Some(slot) = slots.get_mut(key) else {
            return Ok(false);
        };
        let held = slot.holder.as_ref().is_some_and(|h| h.expires > now);
        slot.holder = None;
        Ok(held)
    }
}

/// Grants `slot` to `owner` unless it is held and unexpired; returns the new token.
fn take(
    slot: &mut Slot,
    key: &str,
    owner: OwnerId,
    now: Instant,
    ttl: Duration,
) -> Result<Option<FencingToken>, LockError> {
    if slot.holder.as_ref().is_some_and(|h| h.expires > now) {
        return Ok(None);
    }
    let next = slot
        .last_token
        .checked_add(1)
        .and_then(FencingToken::new)
        .ok_or_else(|| LockError::Backend {
            backend: "memory",
            context: "acquire",
            message: format!("fencing token space exhausted for key {key:?}"),
        })?;
    slot.last_token = next.get();
    slot.holder = Some(Holder {
        owner,
        token: next,
        expires: now + ttl,
    });
    Ok(Some(next))
}
