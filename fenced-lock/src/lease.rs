//! Leases and owner ids.

use std::fmt;
use std::time::Duration;

use tokio::time::Instant;

use crate::{FencingToken, LockError};

/// Longest accepted key, in bytes (kept well under every backend's limit).
pub const MAX_KEY_LEN: usize = 1024;
/// Shortest accepted lease TTL.
pub const MIN_TTL: Duration = Duration::from_millis(1);
/// Longest accepted lease TTL. Longer holds should renew (see [`Keeper`](crate::Keeper))
/// so that a crashed holder does not block everyone for days.
pub const MAX_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// A random 128-bit identity of one acquisition, so that renew and release can
/// prove ownership (a token alone could be guessed; a key alone is shared).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct OwnerId(u128);

impl OwnerId {
    /// A fresh id from the thread-local CSPRNG.
    pub fn random() -> Self {
        Self(rand::random::<u128>())
    }

    /// The raw value.
    pub const fn get(self) -> u128 {
        self.0
    }

    /// Big-endian bytes (the form stored by the PostgreSQL backend).
    pub const fn to_bytes(self) -> [u8; 16] {
        self.0.to_be_bytes()
    }
}

impl fmt::Display for OwnerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

impl fmt::Debug for OwnerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "OwnerId({self})")
    }
}

/// Proof of one acquisition of a lock key.
///
/// `valid_until` is on the monotonic clock and deliberately conservative: it
/// is computed from an instant taken *before* the acquire (or renew) request was
/// sent, plus the TTL, so the backend's own expiry is never earlier (assuming
/// clocks advance at the same rate). A `Lease` is not `Clone`: release consumes it.
#[derive(Debug)]
pub struct Lease {
    key: String,
    token: FencingToken,
    owner: OwnerId,
    ttl: Duration,
    valid_until: Instant,
    /// Backend-specific handle (the etcd lease id); 0 when unused.
    #[cfg_attr(not(feature = "etcd"), allow(dead_code))]
    pub(crate) handle: i64,
}

impl Lease {
    /// Builds a lease. For implementors of [`LockBackend`](crate::LockBackend);
    /// users get leases from `acquire`/`try_acquire`.
    pub fn new(
        key: impl Into<String>,
        token: FencingToken,
        owner: OwnerId,
        ttl: Duration,
        valid_until: Instant,
    ) -> Self {
        Self {
            key: key.into(),
            token,
            owner,
            ttl,
            valid_until,
            handle: 0,
        }
    }

    #[cfg_attr(not(feature = "etcd"), allow(dead_code))]
    pub(crate) fn with_handle(mut self, handle: i64) -> Self {
        self.handle = handle;
        self
    }

    /// The lock key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The fencing token of this hold; pass it with every write to a fenced resource.
    pub fn token(&self) -> FencingToken {
        self.token
    }

    /// The random owner id of this acquisition.
    pub fn owner(&self) -> OwnerId {
        self.owner
    }

    /// The TTL requested at acquisition (renewals extend by the same amount).
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// Monotonic instant after which the lease must be considered lost.
    pub fn valid_until(&self) -> Instant {
        self.valid_until
    }

    /// Time left before `valid_until` (zero once expired).
    pub fn remaining(&self) -> Duration {
        self.valid_until.saturating_duration_since(Instant::now())
    }

    /// Whether `valid_until` has passed.
    pub fn is_expired(&self) -> bool {
        Instant::now() >= self.valid_until
    }

    /// Sets a new expiry after a successful renewal that was sent at `sent_at`.
    /// For implementors of [`LockBackend`](crate::LockBackend).
    pub fn renewed(&mut self, sent_at: Instant, ttl: Duration) {
        self.valid_until = sent_at + ttl;
    }

    #[cfg_attr(
        not(any(
            feature = "memory",
            feature = "postgres",
            feature = "redis",
            feature = "etcd"
        )),
        allow(dead_code)
    )]
    pub(crate) fn lost(&self) -> LockError {
        LockError::LockLost {
            key: self.key.clone(),
            token: self.token,
        }
    }

    /// The outcome of an owner-checked renewal sent at `sent_at`: a new expiry when the backend
    /// confirmed the lease is still ours, `LockLost` otherwise.
    #[cfg_attr(not(any(feature = "postgres", feature = "redis")), allow(dead_code))]
    pub(crate) fn confirm_renewal(
        &mut self,
        sent_at: Instant,
        still_ours: bool,
    ) -> Result<(), LockError> {
        if !still_ours {
            return Err(self.lost());
        }
        let ttl = self.ttl;
        self.renewed(sent_at, ttl);
        Ok(())
    }
}

/// Checks a key and TTL the same way for every backend.
pub fn validate(key: &str, ttl: Duration) -> Result<(), LockError> {
    if key.is_empty() {
        return Err(LockError::EmptyKey);
    }
    if key.len() > MAX_KEY_LEN {
        return Err(LockError::KeyTooLong {
            len: key.len(),
            max: MAX_KEY_LEN,
        });
    }
    if !(MIN_TTL..=MAX_TTL).contains(&ttl) {
        return Err(LockError::InvalidTtl {
            ttl,
            min: MIN_TTL,
            max: MAX_TTL,
        });
    }
    Ok(())
}

/// A TTL in whole milliseconds, rounded up so the backend never holds for less.
#[cfg_attr(not(any(feature = "postgres", feature = "redis")), allow(dead_code))]
pub(crate) fn ttl_millis(ttl: Duration) -> i64 {
    let ms = ttl.as_millis() + u128::from(!ttl.subsec_nanos().is_multiple_of(1_000_000));
    i64::try_from(ms).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation() {
        assert!(matches!(
            validate("", Duration::from_secs(1)),
            Err(LockError::EmptyKey)
        ));
        assert!(matches!(
            validate("k", Duration::ZERO),
            Err(LockError::InvalidTtl { .. })
        ));
        assert!(matches!(
            validate("k", Duration::from_secs(365 * 86400)),
            Err(LockError::InvalidTtl { .. })
        ));
        assert!(matches!(
            validate(&"x".repeat(MAX_KEY_LEN + 1), Duration::from_secs(1)),
            Err(LockError::KeyTooLong { .. })
        ));
        assert!(validate("k", Duration::from_secs(1)).is_ok());
    }

    #[test]
    fn millis_round_up() {
        assert_eq!(ttl_millis(Duration::from_micros(1500)), 2);
        assert_eq!(ttl_millis(Duration::from_millis(300)), 300);
    }

    #[test]
    fn owner_ids_differ_and_print_as_hex() {
        let a = OwnerId::random();
        assert_ne!(a, OwnerId::random());
        assert_eq!(a.to_string().len(), 32);
    }
}
