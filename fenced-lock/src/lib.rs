//! Leases with monotonic fencing tokens, and the resource-side fences that use them.
//!
//! A distributed lock alone cannot guarantee mutual exclusion: a holder can be
//! paused past its lease and keep writing after someone else took over. This
//! crate pairs every lease with a [`FencingToken`] that strictly increases per
//! lock key, and provides the [`Fence`] that protected resources use to refuse
//! writes carrying an older token.
//!
//! * [`LockBackend`]: `try_acquire`, bounded `acquire`, `renew`, `release`;
//!   each is one atomic step on the backend and proves ownership with a random
//!   128-bit [`OwnerId`] plus the token.
//! * [`Lease`]: its `valid_until` is on the monotonic clock, measured from
//!   before the request was sent; nothing compares wall clocks.
//! * [`Keeper`]: renews in the background and reports loss; [`Keeper::run`]
//!   cancels the work when the lock is lost.
//! * [`Fence`]: [`MemoryFence`], and with features `PostgresFence` (conditional
//!   upsert) and `RedisFence` (Lua script).
//!
//! Backends (cargo features): `memory` (default), `postgres`, `redis`
//! (efficiency-grade: Redis has no consensus), `etcd`.
//!
//! # Example: acquire, fenced write, release
//!
//! ```
//! use std::time::Duration;
//! use fenced_lock::{Fence, LockBackend, MemoryBackend, MemoryFence};
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let locks = MemoryBackend::new();
//! let fence = MemoryFence::new(); // lives with the resource, not the client
//!
//! let lease = locks
//!     .acquire("invoice-42", Duration::from_secs(10), Duration::from_secs(2))
//!     .await?;
//! // Every write carries the token; the resource refuses older ones.
//! fence.admit("invoice-42", lease.token()).await?;
//! /* ... write ... */
//! assert!(locks.release(lease).await?);
//!
//! // A later holder gets a larger token and fences the old one off.
//! let next = locks.try_acquire("invoice-42", Duration::from_secs(10)).await?.unwrap();
//! fence.admit("invoice-42", next.token()).await?;
//! let stale = fence.admit("invoice-42", fenced_lock::FencingToken::new(1).unwrap()).await;
//! assert!(stale.is_err());
//! # Ok(()) }
//! ```
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod backend;
mod error;
pub mod fence;
mod keeper;
mod lease;
mod token;

pub use backend::LockBackend;
pub use error::{BoxError, FenceError, LockError, StaleToken};
pub use fence::Fence;
pub use keeper::{DEFAULT_RENEW_FRACTION, Keeper, LossReason, LossWatch};
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
#[cfg(feature = "memory")]
pub use fence::memory::{Fenced, MemoryFence};
#[cfg(feature = "postgres")]
pub use fence::postgres::PostgresFence;
#[cfg(feature = "redis")]
pub use fence::redis::RedisFence;
