//! Fencing tokens.

use std::fmt;
use std::num::NonZeroU64;

use serde::{Deserialize, Serialize};

/// A fencing token: a non-zero number that strictly increases every time a lock
/// key changes hands.
///
/// A backend hands out a new, larger token on every successful acquisition of a
/// key (after a release, an expiry or a takeover, from any client), and keeps the
/// same token for the whole hold: renewals never change it. The protected
/// resource remembers the largest token it has seen and refuses writes that carry
/// a smaller one (see [`Fence`](crate::Fence)). That check, not the lock, is what
/// stops a paused or partitioned former holder from corrupting data.
///
/// Tokens compare numerically; serde encodes them as a plain integer and refuses 0.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
#[serde(transparent)]
pub struct FencingToken(NonZeroU64);

impl FencingToken {
    /// Wraps a raw value; `None` for 0, which is never a valid token.
    pub const fn new(value: u64) -> Option<Self> {
        match NonZeroU64::new(value) {
            Some(v) => Some(Self(v)),
            None => None,
        }
    }

    /// The raw value, e.g. to store next to the data it protects.
    pub const fn get(self) -> u64 {
        self.0.get()
    }

    /// The value as a signed 64-bit integer for SQL `bigint` columns; `None`
    /// above `i64::MAX` (never reached by the bundled backends).
    pub fn to_i64(self) -> Option<i64> {
        i64::try_from(self.get()).ok()
    }
}

impl From<NonZeroU64> for FencingToken {
    fn from(v: NonZeroU64) -> Self {
        Self(v)
    }
}

impl From<FencingToken> for u64 {
    fn from(t: FencingToken) -> Self {
        t.get()
    }
}

impl fmt::Display for FencingToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_is_not_a_token() {
        assert!(FencingToken::new(0).is_none());
        assert_eq!(FencingToken::new(7).map(FencingToken::get), Some(7));
    }

    #[test]
    fn orders_numerically() {
        let a = FencingToken::new(9).unwrap();
        let b = FencingToken::new(10).unwrap();
        assert!(a < b);
        assert_eq!(b.to_string(), "10");
    }

    #[test]
    fn serde_is_a_plain_integer_and_rejects_zero() {
        let t = FencingToken::new(42).unwrap();
        assert_eq!(serde_json::to_string(&t).unwrap(), "42");
        assert_eq!(serde_json::from_str::<FencingToken>("42").unwrap(), t);
        assert!(serde_json::from_str::<FencingToken>("0").is_err());
    }
}
