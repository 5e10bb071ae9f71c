//! Resource-side fences: the check that actually enforces exclusion.
//!
//! A lock only tells a client it *should* be alone. A client that pauses (GC,
//! swap, a stalled network) can wake up after its lease expired and another
//! client took over, and still believe it holds the lock. The fence makes
//! that harmless: the resource remembers the largest [`FencingToken`](crate::FencingToken)
//! it has admitted, and which lease presented it, and refuses older tokens and an
//! equal token from another lease (see [`Ticket`]).
//!
//! **The check and the write must be one atomic step.** Use the atomic forms:
//!
//! * PostgreSQL: [`PostgresFence::transaction`](postgres::PostgresFence::transaction)
//!   (the fence row stays locked until your transaction commits), or a conditional
//!   `UPDATE … WHERE fence_token < $1` binding the token directly;
//! * Redis: [`RedisFence::set`](redis::RedisFence::set), `hset`, `incr`, `del` and
//!   [`eval`](redis::RedisFence::eval): the check and the command in one script;
//! * etcd: `EtcdFence::txn` / `put`: the check and your operations in one etcd
//!   transaction;
//! * memory: [`Fenced::apply`](memory::Fenced::apply) and
//!   [`MemoryFence::apply`](memory::MemoryFence::apply): the closure runs under the
//!   fence's lock.
//!
//! [`Fence::check_only`] exists for resources none of these reach, and is not
//! enough on its own: see its documentation.

use std::future::Future;

use crate::{FenceError, Ticket};

#[cfg(feature = "etcd")]
pub mod etcd;
#[cfg(feature = "memory")]
pub mod memory;
#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(feature = "redis")]
pub mod redis;

/// A store of "largest admitted ticket" per resource.
pub trait Fence: Send + Sync {
    /// Records `ticket` for `resource` if it is newer than (or the same holder as) the last
    /// admitted one, otherwise fails with [`FenceError::Stale`]. Concurrent calls never let
    /// an older token pass after a newer one was recorded.
    ///
    /// **Check only: this does not protect a write you make afterwards.** Between this
    /// call returning `Ok` and your write landing, a newer holder can be admitted and write,
    /// and your (now stale) write then overwrites it. Use it only where the write itself
    /// cannot carry the check, and prefer the atomic forms listed in the
    /// [module docs](self).
    fn check_only(
        &self,
        resource: &str,
        ticket: Ticket,
    ) -> impl Future<Output = Result<(), FenceError>> + Send;
}

#[cfg_attr(not(any(feature = "memory", feature = "etcd")), allow(dead_code))]
/// Whether a fence that last admitted `current` admits `presented`: a newer token, or
/// the same token from the same holder.
pub(crate) fn admits(current: Option<Ticket>, presented: Ticket) -> bool {
    match current {
        None => true,
        Some(c) => {
            presented.token > c.token
                || (presented.token == c.token && presented.holder == c.holder)
        }
    }
}

#[cfg_attr(
    not(any(feature = "memory", feature = "postgres", feature = "redis")),
    allow(dead_code)
)]
pub(crate) fn check_resource(resource: &str) -> Result<(), FenceError> {
    if resource.is_empty() {
        Err(FenceError::EmptyResource)
    } else {
        Ok(())
    }
}

/// A store error met by a fence: `Unavailable` when the store could not be reached, so that an
/// outage is never mistaken for an admit or a rejection.
#[cfg(any(feature = "postgres", feature = "redis", feature = "etcd"))]
pub(crate) fn backend_error(backend: &'static str, e: crate::LockError) -> FenceError {
    match e {
        crate::LockError::Unavailable { source, .. } => FenceError::Unavailable { backend, source },
        other => FenceError::Backend {
            backend,
            message: other.to_string(),
        },
    }
}
