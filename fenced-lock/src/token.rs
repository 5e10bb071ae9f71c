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

/// The identity of one lease as a fence sees it: a random number drawn when the lease was
/// granted, so two leases that were handed the same token (after a backend lost its counter)
/// are still told apart. It is not the [`OwnerId`](crate::OwnerId): holding a `HolderId`
/// authorises nothing on the lock backend, so it can travel with every write.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
#[serde(transparent)]
pub struct HolderId(u64);

impl HolderId {
    /// A fresh random id.
    pub fn random() -> Self {
        Self(rand::random::<u64>())
    }

    /// Wraps a raw value (e.g. one received with a write request).
    pub const fn from_raw(raw: u64) -> Self {
        Self(raw)
    }

    /// The raw value.
    pub const fn get(self) -> u64 {
        self.0
    }

    /// The same 64 bits as a signed integer, the form a `bigint` column stores.
    pub const fn to_i64_bits(self) -> i64 {
        i64::from_ne_bytes(self.0.to_ne_bytes())
    }
}

/// What a write presents to a fence: the lease's [`FencingToken`] and its [`HolderId`].
///
/// A fence admits a ticket when its token is larger than any it has admitted, or equal to the
/// last admitted token *and* from the same holder (one holder writing twice). An equal token
/// from another holder is refused: tokens should never repeat, but if a backend ever hands
/// one out twice, the second holder is fenced off instead of writing alongside the first.
///
/// Get it from [`Lease::ticket`](crate::Lease::ticket) or
/// [`Keeper::ticket`](crate::Keeper::ticket); serde encodes it as
/// `{"token": 7, "holder": 123}` so it can travel with a request to a remote resource.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub struct Ticket {
    /// The lease's fencing token.
    pub token: FencingToken,
    /// The lease's identity.
    pub holder: HolderId,
}

impl Ticket {
    /// A ticket from its parts (e.g. received with a write request).
    pub const fn new(token: FencingToken, holder: HolderId) -> Self {
        Self { token, holder }
    }
}

impl fmt::Display for Ticket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "token {} (holder {:016x})", self.token, self.holder.0)
    }
}

/// Binds as a `bigint` (`INT8`), so a token goes straight into a conditional write:
/// `UPDATE t SET …, fence_token = $1 WHERE id = $2 AND fence_token < $1`. Tokens above
/// `i64::MAX` (never produced by the bundled backends) fail to bind instead of wrapping.
#[cfg(feature = "postgres")]
impl tokio_postgres::types::ToSql for FencingToken {
    fn to_sql(
        &self,
        ty: &tokio_postgres::types::Type,
        out: &mut bytes::BytesMut,
    ) -> Result<tokio_postgres::types::IsNull, Box<dyn std::error::Error + Sync + Send>> {
        let v = self
            .to_i64()
            .ok_or_else(|| format!("fencing token {self} does not fit a bigint"))?;
        v.to_sql(ty, out)
    }

    fn accepts(ty: &tokio_postgres::types::Type) -> bool {
        <i64 as tokio_postgres::types::ToSql>::accepts(ty)
    }

    tokio_postgres::types::to_sql_checked!();
}

/// Reads a `bigint` column; 0 and negative values are refused (never valid tokens).
#[cfg(feature = "postgres")]
impl<'a> tokio_postgres::types::FromSql<'a> for FencingToken {
    fn from_sql(
        ty: &tokio_postgres::types::Type,
        raw: &'a [u8],
    ) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        let v = <i64 as tokio_postgres::types::FromSql>::from_sql(ty, raw)?;
        u64::try_from(v)
            .ok()
            .and_then(FencingToken::new)
            .ok_or_else(|| format!("{v} is not a fencing token").into())
    }

    fn accepts(ty: &tokio_postgres::types::Type) -> bool {
        <i64 as tokio_postgres::types::FromSql>::accepts(ty)
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
