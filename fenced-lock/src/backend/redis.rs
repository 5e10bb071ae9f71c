//! Redis backend. **Efficiency-grade, not correctness-grade.**
//!
//! Redis has no consensus. The fencing counter (`<prefix>fence:{key}`) never
//! expires and is never deleted, so tokens increase as long as that counter
//! survives; but an asynchronous replica promoted after a failover, or a
//! restart without AOF `appendfsync always`, can lose recent increments and
//! hand out a token again, and can lose the lock key so two clients hold it.
//! [`RedisOptions::wait_for_replicas`] sends `WAIT` after each acquisition to
//! narrow (not close) that window. Use it where an occasional double holder
//! only costs duplicate work, and put a [`Fence`](crate::Fence) in front of
//! anything that must not be corrupted; use PostgreSQL or etcd otherwise.
//!
//! Each operation is one Lua script, so check-and-set is atomic:
//! acquire = `if not EXISTS lock then INCR fence; SET lock owner:token PX ttl`;
//! renew and release compare the stored `owner:token` before `PEXPIRE`/`DEL`.

use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{RedisError, Script};
use tokio::time::Instant;

use crate::backend::bounded;
use crate::lease::{ttl_millis, validate};
use crate::{FencingToken, Lease, LockBackend, LockError, OwnerId};

const NAME: &str = "redis";

const ACQUIRE: &str = r"
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local t = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], ARGV[1] .. ':' .. t, 'PX', ARGV[2])
return t
";

const RENEW: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
";

const RELEASE: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
";

/// Options of [`RedisBackend`].
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct RedisOptions {
    /// Prefix of every key this crate writes. Default `fenced-lock:`.
    pub prefix: String,
    /// After acquiring, `WAIT` for this many replicas (for at most the given
    /// time); if fewer acknowledge, the lock is released and acquisition fails.
    /// Default `None`.
    pub wait_for_replicas: Option<(usize, Duration)>,
    /// Deadline of each operation and of connecting. Default 5 s.
    pub op_timeout: Duration,
}

impl Default for RedisOptions {
    fn default() -> Self {
        Self {
            prefix: "fenced-lock:".into(),
            wait_for_replicas: None,
            op_timeout: Duration::from_secs(5),
        }
    }
}

impl RedisOptions {
    /// Sets the key prefix.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Requires `replicas` acknowledgements within `timeout` after acquiring
    /// (keep `timeout` below `op_timeout`, which bounds every call).
    pub fn wait_for_replicas(mut self, replicas: usize, timeout: Duration) -> Self {
        self.wait_for_replicas = Some((replicas, timeout));
        self
    }

    /// Sets the per-operation deadline.
    pub fn op_timeout(mut self, d: Duration) -> Self {
        self.op_timeout = d;
        self
    }
}

/// Leases in Redis (see the [module docs](self) for the guarantees). Clones
/// share one auto-reconnecting multiplexed connection, whose response
/// timeout (`op_timeout`) bounds every call.
#[derive(Clone)]
pub struct RedisBackend {
    conn: ConnectionManager,
    scripts: Arc<Scripts>,
    options: Arc<RedisOptions>,
}

struct Scripts {
    acquire: Script,
    renew: Script,
    release: Script,
}

impl std::fmt::Debug for RedisBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisBackend")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

pub(crate) fn redis_error(context: &'static str, e: RedisError) -> LockError {
    if e.is_io_error() || e.is_timeout() || e.is_connection_refusal() || e.is_connection_dropped() {
        LockError::unavailable(NAME, context, e)
    } else {
        LockError::Backend {
            backend: NAME,
            context,
            message: e.to_string(),
        }
    }
}

/// Opens an auto-reconnecting connection, bounded by `limit`.
pub(crate) async fn connect_manager(
    url: &str,
    limit: Duration,
) -> Result<ConnectionManager, LockError> {
    let client = redis::Client::open(url).map_err(|e| LockError::Config(e.to_string()))?;
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(limit))
        .set_response_timeout(Some(limit))
        .set_number_of_retries(1);
    bounded(NAME, "connect", limit, async {
        ConnectionManager::new_with_config(client, config)
            .await
            .map_err(|e| redis_error("connect", e))
    })
    .await
}

impl RedisBackend {
    /// Connects to a `redis://` URL with default options.
    pub async fn connect(url: &str) -> Result<Self, LockError> {
        Self::connect_with(url, RedisOptions::default()).await
    }

    /// Connects with options.
    pub async fn connect_with(url: &str, options: RedisOptions) -> Result<Self, LockError> {
        let conn = connect_manager(url, options.op_timeout).await?;
        Ok(Self {
            conn,
            scripts: Arc::new(Scripts {
                acquire: Script::new(ACQUIRE),
                renew: Script::new(RENEW),
                release: Script::new(RELEASE),
            }),
            options: Arc::new(options),
        })
    }

    /// The Redis key holding the lock for `key` (hash-tagged with the fence
    /// counter so both live in one cluster slot).
    pub fn lock_key(&self, key: &str) -> String {
        format!("{}lock:{{{key}}}", self.options.prefix)
    }

    /// The never-expiring fencing counter for `key`.
    pub fn counter_key(&self, key: &str) -> String {
        format!("{}fence:{{{key}}}", self.options.prefix)
    }

    fn value(lease: &Lease) -> String {
        format!("{}:{}", lease.owner(), lease.token())
    }

    async fn wait_replicas(&self, replicas: usize, timeout: Duration) -> Result<bool, LockError> {
        let mut conn = self.conn.clone();
        let acked: i64 = redis::cmd("WAIT")
            .arg(replicas)
            .arg(ttl_millis(timeout))
            .query_async(&mut conn)
            .await
            .map_err(|e| redis_error("wait", e))?;
        Ok(usize::try_from(acked).is_ok_and(|n| n >= replicas))
    }
}

impl LockBackend for RedisBackend {
    async fn try_acquire(&self, key: &str, ttl: Duration) -> Result<Option<Lease>, LockError> {
        validate(key, ttl)?;
        let owner = OwnerId::random();
        let mut conn = self.conn.clone();
        let sent = Instant::now();
        let raw: i64 = self
            .scripts
            .acquire
            .key(self.lock_key(key))
            .key(self.counter_key(key))
            .arg(owner.to_string())
            .arg(ttl_millis(ttl))
            .invoke_async(&mut conn)
            .await
            .map_err(|e| redis_error("acquire", e))?;
        if raw == 0 {
            return Ok(None);
        }
        let token = u64::try_from(raw)
            .ok()
            .and_then(FencingToken::new)
            .ok_or_else(|| LockError::Backend {
                backend: NAME,
                context: "acquire",
                message: format!("invalid token {raw} from fence counter"),
            })?;
        let lease = Lease::new(key, token, owner, ttl, sent + ttl);
        if let Some((replicas, timeout)) = self.options.wait_for_replicas {
            match self.wait_replicas(replicas, timeout).await {
                Ok(true) => {}
                Ok(false) => {
                    let _ = self.release(lease).await;
                    return Err(LockError::Backend {
                        backend: NAME,
                        context: "acquire",
                        message: format!(
                            "fewer than {replicas} replicas acknowledged within {timeout:?}; lock released"
                        ),
                    });
                }
                Err(e) => {
                    let _ = self.release(lease).await;
                    return Err(e);
                }
            }
        }
        Ok(Some(lease))
    }

    async fn renew(&self, lease: &mut Lease) -> Result<(), LockError> {
        let mut conn = self.conn.clone();
        let sent = Instant::now();
        let n: i64 = self
            .scripts
            .renew
            .key(self.lock_key(lease.key()))
            .arg(Self::value(lease))
            .arg(ttl_millis(lease.ttl()))
            .invoke_async(&mut conn)
            .await
            .map_err(|e| redis_error("renew", e))?;
        lease.confirm_renewal(sent, n == 1)
    }

    async fn release(&self, lease: Lease) -> Result<bool, LockError> {
        let mut conn = self.conn.clone();
        let n: i64 = self
            .scripts
            .release
            .key(self.lock_key(lease.key()))
            .arg(Self::value(&lease))
            .invoke_async(&mut conn)
            .await
            .map_err(|e| redis_error("release", e))?;
        Ok(n == 1)
    }
}
