//! Leases with monotonic fencing tokens, and the resource-side fences that use them.
//!
//! A distributed lock alone cannot guarantee mutual exclusion: a holder can be
//! paused past its lease and keep writing after someone else took over. This
//! crate pairs every lease with a [`FencingToken`] that strictly increases per
//! lock key, and provides fences through which protected resources are written,
//! refusing writes from a superseded lease.
//!
//! **The check and the write must be one atomic step**, so the fences are write
//! APIs, not checks:
//!
//! * PostgreSQL: `PostgresFence::transaction` (the fence row locked and checked
//!   inside your transaction), or a conditional `UPDATE … WHERE fence_token < $1`
//!   binding [`FencingToken`] directly (`ToSql`);
//! * Redis: `RedisFence::set`, `hset`, `incr`, `del` and `eval`, each one Lua
//!   script with the check in front;
//! * memory: [`Fenced::apply`] and [`MemoryFence::apply`], under the fence's lock.
//!
//! Each write presents the lease's [`Ticket`] (token + random [`HolderId`]), so an
//! equal token from another lease is refused. [`Fence::check_only`] is the bare
//! check for resources none of these reach; it does not protect a later write.
//!
//! * [`LockBackend`]: `try_acquire`, bounded `acquire`, `renew`, `release`;
//!   each is one atomic step on the backend and proves ownership with a random
//!   128-bit [`OwnerId`] plus the token.
//! * [`Lease`]: its `valid_until` is on the client's monotonic clock, measured
//!   from before the request was sent, minus a [`ClockDrift`] margin (the expiry
//!   itself runs on the server's clock).
//! * [`Keeper`]: renews in the background and reports loss; [`Keeper::run`]
//!   cancels the work when the lock is lost.
//!
//! Backends (cargo features): `memory` (default), `postgres`, `redis`
//! (efficiency-grade: Redis has no consensus), `etcd`.
//!
//! # Example: acquire, fenced write, release
//!
//! ```
//! use std::time::Duration;
//! use fenced_lock::{Fenced, LockBackend, MemoryBackend};
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let locks = MemoryBackend::new();
//! let ledger = Fenced::new(Vec::new()); // lives with the resource, not the client
//!
//! let lease = locks
//!     .acquire("invoice-42", Duration::from_secs(10), Duration::from_secs(2))
//!     .await?;
//! // The write goes through the fence: checked and applied under one lock.
//! ledger.apply(lease.ticket(), |l| l.push("first"))?;
//! let stale = lease.ticket();
//! assert!(locks.release(lease).await?);
//!
//! // A later holder gets a larger token and fences the old one off.
//! let next = locks.try_acquire("invoice-42", Duration::from_secs(10)).await?.unwrap();
//! ledger.apply(next.ticket(), |l| l.push("second"))?;
//! assert!(ledger.apply(stale, |l| l.push("stale")).is_err());
//! assert_eq!(ledger.get(|l| l.len()), 2);
//! # Ok(()) }
//! ```
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod backend;
mod error;
pub mod fence;
mod keeper;
mod leader;
mod lease;
mod token;

pub use backend::{LockAdmin, LockBackend, LockInfo};
pub use error::{BoxError, FenceError, LockError, StaleToken};
pub use fence::Fence;
pub use keeper::{DEFAULT_RENEW_FRACTION, Keeper, LockGuard, LossReason, LossWatch};
pub use leader::Leadership;
pub use lease::{ClockDrift, Lease, MAX_KEY_LEN, MAX_TTL, MIN_TTL, OwnerId, validate};
pub use token::{FencingToken, HolderId, Ticket};

#[cfg(feature = "etcd")]
pub use backend::etcd::{EtcdBackend, EtcdOptions};
#[cfg(feature = "memory")]
pub use backend::memory::MemoryBackend;
#[cfg(feature = "postgres")]
pub use backend::postgres::{PostgresBackend, PostgresOptions};
#[cfg(feature = "redis")]
pub use backend::redis::{RedisBackend, RedisOptions};
#[cfg(feature = "etcd")]
pub use fence::etcd::EtcdFence;
#[cfg(feature = "memory")]
pub use fence::memory::{Fenced, MemoryFence};
#[cfg(feature = "postgres")]
pub use fence::postgres::PostgresFence;
#[cfg(feature = "redis")]
pub use fence::redis::RedisFence;
