//! Resource-side fences: the check that actually enforces exclusion.
//!
//! A lock only tells a client it *should* be alone. A client that pauses (GC,
//! swap, a stalled network) can wake up after its lease expired and another
//! client took over, and still believe it holds the lock. The fence makes
//! that harmless: the resource remembers the largest [`FencingToken`] it has
//! admitted and refuses anything smaller. Equal tokens are admitted, so one
//! holder can write many times.

use std::future::Future;

use crate::{FenceError, FencingToken};

#[cfg(feature = "memory")]
pub mod memory;
#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(feature = "redis")]
pub mod redis;

/// A store of "largest admitted token" per resource.
pub trait Fence: Send + Sync {
    /// Admits `token` for `resource` if it is at least the largest token
    /// admitted so far (recording it), otherwise fails with
    /// [`FenceError::Stale`]. Atomic: concurrent admits never let a lower token
    /// pass after a higher one was recorded.
    fn admit(
        &self,
        resource: &str,
        token: FencingToken,
    ) -> impl Future<Output = Result<(), FenceError>> + Send;
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
#[cfg(any(feature = "postgres", feature = "redis"))]
pub(crate) fn backend_error(backend: &'static str, e: crate::LockError) -> FenceError {
    match e {
        crate::LockError::Unavailable { source, .. } => FenceError::Unavailable { backend, source },
        other => FenceError::Backend {
            backend,
            message: other.to_string(),
        },
    }
}
