//! Typed errors.

use std::time::Duration;

use crate::FencingToken;

/// A boxed error from a backend driver, kept as the `source` of an error.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Errors of lock operations.
///
/// No variant means "acquired": on any error the caller does not hold the lock
/// and must not act as if it did.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LockError {
    /// The lock key was empty.
    #[error("lock key must not be empty")]
    EmptyKey,
    /// The lock key was longer than the backends accept.
    #[error("lock key is {len} bytes long; the maximum is {max}")]
    KeyTooLong {
        /// Length of the rejected key in bytes.
        len: usize,
        /// Maximum accepted length in bytes.
        max: usize,
    },
    /// The lock key contained a NUL byte (refused by every backend alike).
    #[error("lock key must not contain NUL bytes")]
    KeyContainsNul,
    /// The TTL was zero, below the minimum, or absurdly long.
    #[error("invalid lease TTL {ttl:?}: it must be between {min:?} and {max:?}")]
    InvalidTtl {
        /// The rejected TTL.
        ttl: Duration,
        /// Smallest accepted TTL.
        min: Duration,
        /// Largest accepted TTL.
        max: Duration,
    },
    /// The backend could not be reached or did not answer in time. The
    /// operation did not take effect as far as the caller can know: the lock is
    /// NOT held (or, for renew, must be treated as not renewed).
    #[error("{backend} backend unreachable ({context}): {source}; the lock is not held")]
    Unavailable {
        /// Which backend.
        backend: &'static str,
        /// What was being done.
        context: &'static str,
        /// Driver error.
        #[source]
        source: BoxError,
    },
    /// The backend answered with an error or an unexpected reply.
    #[error("{backend} backend error ({context}): {message}")]
    Backend {
        /// Which backend.
        backend: &'static str,
        /// What was being done.
        context: &'static str,
        /// What went wrong.
        message: String,
    },
    /// The lease is no longer ours: it expired, was released, or was taken over.
    /// Stop the protected work; writes with this token will be fenced off.
    #[error("lock {key:?} lost: the lease with fencing token {token} is no longer held")]
    LockLost {
        /// The lock key.
        key: String,
        /// The token of the lost lease.
        token: FencingToken,
    },
    /// `acquire` gave up after waiting its whole budget.
    #[error("timed out after {waited:?} waiting for lock {key:?}")]
    Timeout {
        /// The lock key.
        key: String,
        /// How long was waited.
        waited: Duration,
    },
    /// Invalid backend configuration (e.g. a table name that is not an identifier).
    #[error("invalid configuration: {0}")]
    Config(String),
}

#[cfg_attr(
    not(any(feature = "postgres", feature = "redis", feature = "etcd")),
    allow(dead_code)
)]
impl LockError {
    pub(crate) fn unavailable(
        backend: &'static str,
        context: &'static str,
        source: impl Into<BoxError>,
    ) -> Self {
        Self::Unavailable {
            backend,
            context,
            source: source.into(),
        }
    }

    pub(crate) fn op_timeout(
        backend: &'static str,
        context: &'static str,
        after: Duration,
    ) -> Self {
        Self::unavailable(backend, context, format!("no answer within {after:?}"))
    }

    /// Whether the error says the lock is definitely not ours any more (as
    /// opposed to "could not find out").
    pub fn is_lock_lost(&self) -> bool {
        matches!(self, Self::LockLost { .. })
    }
}

/// A write was refused because its fencing token is older than one the
/// resource has already admitted: a newer holder exists, this one must stop.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "stale fencing token {presented} for resource {resource:?}{}",
    match current { Some(c) => format!(" (resource already admitted token {c})"), None => String::new() }
)]
pub struct StaleToken {
    /// The fenced resource.
    pub resource: String,
    /// The token that was refused.
    pub presented: FencingToken,
    /// The largest token the resource has admitted, when the fence could tell.
    pub current: Option<FencingToken>,
}

/// Errors of the fences: a refused ticket, or a store that could not decide.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FenceError {
    /// The token is older than one already admitted: refuse the write.
    #[error(transparent)]
    Stale(#[from] StaleToken),
    /// The resource name was empty.
    #[error("fenced resource name must not be empty")]
    EmptyResource,
    /// The fence store could not be reached; the write must not happen.
    #[error("{backend} fence unreachable: {source}; the write was not admitted")]
    Unavailable {
        /// Which backend.
        backend: &'static str,
        /// Driver error.
        #[source]
        source: BoxError,
    },
    /// A fenced command named a data key outside the fence key's Redis Cluster slot, so
    /// it could not run in the same script on a Cluster. Build keys with
    /// `RedisFence::data_key`.
    #[error(
        "key {key:?} is not in the hash slot of fenced resource {resource:?}; use RedisFence::data_key"
    )]
    CrossSlot {
        /// The fenced resource.
        resource: String,
        /// The refused key.
        key: String,
    },
    /// The fence store answered with an error; the write must not happen.
    #[error("{backend} fence error: {message}")]
    Backend {
        /// Which backend.
        backend: &'static str,
        /// What went wrong.
        message: String,
    },
}

impl FenceError {
    /// The [`StaleToken`] if this is a rejection by the fence.
    pub fn as_stale(&self) -> Option<&StaleToken> {
        match self {
            Self::Stale(s) => Some(s),
            _ => None,
        }
    }
}
