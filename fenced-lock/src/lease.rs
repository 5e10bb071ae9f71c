//! Leases and owner ids.

use std::fmt;
use std::time::Duration;

use tokio::time::Instant;

use crate::{FencingToken, HolderId, LockError, Ticket};

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

/// Redacted: the owner id authorises renew and release, so it never reaches logs.
impl fmt::Debug for OwnerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OwnerId(<redacted>)")
    }
}

/// Safety margin taken off every lease's client-side validity, for the backend's clock
/// running fast or stepping forward (PostgreSQL `now()`, Redis `PX` and etcd lease expiry are
/// the *server's* clock): `ttl * factor + fixed`. The default, 1 % + 2 ms, is rslock's.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClockDrift {
    /// Fraction of the TTL (clamped to 0..=0.5).
    pub factor: f64,
    /// Fixed part.
    pub fixed: Duration,
}

impl Default for ClockDrift {
    fn default() -> Self {
        Self {
            factor: 0.01,
            fixed: Duration::from_millis(2),
        }
    }
}

impl ClockDrift {
    /// No margin: trust that the server's clock runs exactly at the client's rate.
    pub const NONE: Self = Self {
        factor: 0.0,
        fixed: Duration::ZERO,
    };

    /// The margin for `ttl`, never more than half of it.
    pub fn margin(&self, ttl: Duration) -> Duration {
        let factor = if self.factor.is_finite() {
            self.factor.clamp(0.0, 0.5)
        } else {
            0.0
        };
        ttl.mul_f64(factor).saturating_add(self.fixed).min(ttl / 2)
    }

    /// The conservative validity of a lease of `ttl` whose request was sent at `sent`.
    pub fn valid_until(&self, sent: Instant, ttl: Duration) -> Instant {
        sent + (ttl - self.margin(ttl))
    }
}

/// Proof of one acquisition of a lock key.
///
/// `valid_until` is on the monotonic clock and deliberately conservative: it
/// is computed from an instant taken *before* the acquire (or renew) request was
/// sent, plus the TTL, so the backend's own expiry is never earlier (assuming
/// clocks advance at the same rate). A `Lease` is not `Clone`: release consumes it.
pub struct Lease {
    key: String,
    token: FencingToken,
    holder: HolderId,
    owner: OwnerId,
    ttl: Duration,
    valid_until: Instant,
    drift: ClockDrift,
    /// The server instance that granted the lease (the Redis `run_id`); empty when unused.
    server: String,
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
            holder: HolderId::random(),
            owner,
            ttl,
            valid_until,
            drift: ClockDrift::NONE,
            server: String::new(),
            handle: 0,
        }
    }

    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    pub(crate) fn with_server(mut self, server: String) -> Self {
        self.server = server;
        self
    }

    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    pub(crate) fn server(&self) -> &str {
        &self.server
    }

    /// Takes `drift`'s margin off this lease's validity now and after every renewal, for a
    /// backend whose expiry runs on another clock.
    #[cfg_attr(
        not(any(feature = "postgres", feature = "redis", feature = "etcd")),
        allow(dead_code)
    )]
    pub(crate) fn with_drift(mut self, drift: ClockDrift) -> Self {
        self.valid_until -= drift.margin(self.ttl);
        self.drift = drift;
        self
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

    /// What to present to a fence: the token plus this lease's [`HolderId`]. A fence
    /// admits the same ticket any number of times, and refuses an equal token from
    /// another lease.
    pub fn ticket(&self) -> Ticket {
        Ticket::new(self.token, self.holder)
    }

    /// The random owner id of this acquisition. It authorises renew and release: keep
    /// it out of logs and away from the protected resource (give that the
    /// [`ticket`](Self::ticket)).
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
        self.valid_until = self.drift.valid_until(sent_at, ttl);
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

impl fmt::Debug for Lease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lease")
            .field("key", &self.key)
            .field("token", &self.token)
            .field("ttl", &self.ttl)
            .field("valid_until", &self.valid_until)
            .finish_non_exhaustive()
    }
}

/// Checks a key and TTL the same way for every backend.
pub fn validate(key: &str, ttl: Duration) -> Result<(), LockError> {
    if key.is_empty() {
        return Err(LockError::EmptyKey);
    }
    // PostgreSQL `text` cannot hold NUL while Redis and etcd can: refuse it everywhere
    // so that one key means the same lock on every backend.
    if key.contains('\0') {
        return Err(LockError::KeyContainsNul);
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
        assert!(matches!(
            validate("a\0b", Duration::from_secs(1)),
            Err(LockError::KeyContainsNul)
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

    #[test]
    fn debug_never_prints_the_owner_id() {
        let owner = OwnerId::random();
        let lease = Lease::new(
            "k",
            FencingToken::new(3).unwrap(),
            owner,
            Duration::from_secs(1),
            Instant::now(),
        );
        let printed = format!("{lease:?} {owner:?}");
        assert!(!printed.contains(&owner.to_string()), "{printed}");
        assert!(printed.contains("token: FencingToken(3)"), "{printed}");
    }

    #[test]
    fn drift_margin_is_bounded() {
        let d = ClockDrift::default();
        assert_eq!(
            d.margin(Duration::from_secs(10)),
            Duration::from_millis(102)
        );
        assert_eq!(d.margin(Duration::from_millis(2)), Duration::from_millis(1));
        let wild = ClockDrift {
            factor: f64::NAN,
            fixed: Duration::MAX,
        };
        assert_eq!(
            wild.margin(Duration::from_secs(1)),
            Duration::from_millis(500)
        );
    }
}
