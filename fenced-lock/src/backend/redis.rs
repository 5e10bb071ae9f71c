//! Redis backend. **Efficiency-grade, not correctness-grade.**
//!
//! Redis has no consensus: an asynchronous replica promoted after a failover, or a
//! restart without AOF `appendfsync always`, can lose the lock key, so two clients can
//! hold one lock. Put a fence in front of anything that must not be corrupted (the
//! fence is what keeps the second holder out), or use PostgreSQL or etcd.
//!
//! What this backend does about the rest:
//!
//! * **Tokens never go backwards, even when the counter is lost** (evicted, restarted
//!   without persistence, failed over): the acquire script hands out
//!   `max(counter + 1, server TIME in µs)`, so a lost counter resumes above every
//!   token handed out before, as long as the server clock has not stepped backwards by
//!   more than the time since. Tokens are therefore large (about 1.7·10¹⁵), still
//!   exact in Lua, in `bigint` and in JSON.
//! * **A restart under a held lease fails closed**: each lease records the server's
//!   `run_id` (as the backend last saw it: at connect, or at a renewal that met a new
//!   one); a renewal that meets another `run_id` reports [`LockError::LockLost`] (and
//!   deletes the key if it is still ours), so a keeper cancels the work. A lease
//!   granted just after a restart the backend had not yet seen fails its first
//!   renewal the same way: a spurious loss, never a missed one.
//! * **The server is checked at connect** ([`RedisOptions::strict_server`]): an eviction
//!   policy other than `noeviction` (which can evict the counter, `allkeys-*`, or a held
//!   lock key, `volatile-*`) and a replica are refused; no AOF is warned about.
//! * [`RedisOptions::wait_for_replicas`] sends `WAIT` after each acquisition and
//!   renewal, which narrows (does not close) the failover window.
//!
//! What remains unsafe: a failover or restart that loses the lock key lets a second
//! client acquire while the first lease is valid on its client (the tokens differ and a
//! fence refuses the older one); a server clock stepped backwards *and* a lost counter
//! can repeat a token (a fence refuses the second holder of an equal token); a fence
//! kept in the same Redis loses its high-water marks the same way.
//!
//! Each operation is one Lua script, so check-and-set is atomic: acquire =
//! `if not EXISTS lock then token = max(counter + 1, TIME); SET counter token; SET lock
//! owner:token PX ttl`; renew and release compare the stored `owner:token` before
//! `PEXPIRE`/`DEL`.

use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{RedisError, Script};
use tokio::time::Instant;

use crate::backend::bounded;
use crate::lease::{ttl_millis, validate};
use crate::{ClockDrift, FencingToken, Lease, LockBackend, LockError, OwnerId};

const NAME: &str = "redis";

/// Shared by the scripts: the server's run id (changes on every restart).
const RUN_ID: &str = "local function run_id()
  return string.match(redis.call('INFO', 'server'), 'run_id:(%x+)') or ''
end
";

/// Kept in its own file so that the benchmark sends the very same text by hand.
const ACQUIRE: &str = include_str!("redis_acquire.lua");

const RENEW: &str = r"
if run_id() ~= ARGV[3] then
  if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
  return -1
end
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

/// The hash tag for a user key: `{` `}` and `%` percent-encoded, so the tag is never
/// empty or cut short and every key of one lock lands in one Cluster slot.
pub(crate) fn hash_tag(key: &str) -> String {
    let mut out = String::with_capacity(key.len() + 2);
    out.push('{');
    for c in key.chars() {
        match c {
            '%' => out.push_str("%25"),
            '{' => out.push_str("%7B"),
            '}' => out.push_str("%7D"),
            c => out.push(c),
        }
    }
    out.push('}');
    out
}

/// The Redis Cluster slot of `key` (CRC16/XMODEM of its hash tag, mod 16384).
pub(crate) fn cluster_slot(key: &[u8]) -> u16 {
    let tagged = key
        .iter()
        .position(|&c| c == b'{')
        .and_then(|s| {
            let rest = &key[s + 1..];
            rest.iter()
                .position(|&c| c == b'}')
                .filter(|&e| e > 0)
                .map(|e| &rest[..e])
        })
        .unwrap_or(key);
    let mut crc: u16 = 0;
    for &b in tagged {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc % 16384
}

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
    /// At connect, refuse a server whose eviction policy is not `noeviction` (it can evict
    /// the token counter or a held lock) or that is a replica. `false` connects anyway
    /// and logs the problem. Missing persistence is always logged, never refused.
    /// Default `true`.
    pub strict_server: bool,
    /// Margin taken off each lease's validity for the server clock (`PX` expiry) running
    /// fast or stepping. Default 1 % of the TTL + 2 ms.
    pub clock_drift: ClockDrift,
}

impl Default for RedisOptions {
    fn default() -> Self {
        Self {
            prefix: "fenced-lock:".into(),
            wait_for_replicas: None,
            op_timeout: Duration::from_secs(5),
            strict_server: true,
            clock_drift: ClockDrift::default(),
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

    /// Whether to refuse unsafe servers at connect (see the field).
    pub fn strict_server(mut self, yes: bool) -> Self {
        self.strict_server = yes;
        self
    }

    /// Sets the clock-drift margin.
    pub fn clock_drift(mut self, drift: ClockDrift) -> Self {
        self.clock_drift = drift;
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
    warnings: Arc<[String]>,
    /// The server's `run_id` as last seen (at connect, or by a renewal that met a new
    /// one). Leases record it; `INFO` is not paid on every acquire. A restart between
    /// that sighting and an acquire makes the lease's first renewal fail closed: a
    /// spurious loss, never a missed one.
    run_id: Arc<std::sync::RwLock<String>>,
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

    /// Connects with options, then checks the server (see
    /// [`RedisOptions::strict_server`]).
    pub async fn connect_with(url: &str, options: RedisOptions) -> Result<Self, LockError> {
        let mut conn = connect_manager(url, options.op_timeout).await?;
        let (warnings, run_id) = bounded(
            NAME,
            "server check",
            options.op_timeout,
            check_server(&mut conn, options.strict_server),
        )
        .await?;
        Ok(Self {
            conn,
            scripts: Arc::new(Scripts {
                acquire: Script::new(ACQUIRE),
                renew: Script::new(&format!("{RUN_ID}{RENEW}")),
                release: Script::new(RELEASE),
            }),
            options: Arc::new(options),
            warnings: warnings.into(),
            run_id: Arc::new(std::sync::RwLock::new(run_id)),
        })
    }

    /// What the connect-time check found unsafe but did not refuse (also logged).
    pub fn server_warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The Redis key holding the lock for `key` (hash-tagged with the fence
    /// counter so both live in one cluster slot, whatever braces `key` contains).
    pub fn lock_key(&self, key: &str) -> String {
        format!("{}lock:{}", self.options.prefix, hash_tag(key))
    }

    /// The never-expiring fencing counter for `key`.
    pub fn counter_key(&self, key: &str) -> String {
        format!("{}fence:{}", self.options.prefix, hash_tag(key))
    }

    /// Operator cleanup: deletes the token counters of keys that are not held, so
    /// counters of one-off lock names do not pile up. Safe because tokens never go below
    /// the server's `TIME`: a key acquired again after its counter was deleted still gets
    /// a larger token (unless the server clock stepped backwards meanwhile). Each
    /// deletion is one script (`if not EXISTS lock then DEL counter`); returns how many
    /// counters were deleted. Walks the keyspace with `SCAN`, so it is bounded per call
    /// by `op_timeout` per batch, not by the total.
    pub async fn cleanup_idle(&self) -> Result<u64, LockError> {
        const DROP_IDLE: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then return redis.call('DEL', KEYS[2]) end
return 0
";
        let script = Script::new(DROP_IDLE);
        let glob: String = self
            .options
            .prefix
            .chars()
            .flat_map(|c| match c {
                '*' | '?' | '[' | ']' | '\\' => vec!['\\', c],
                c => vec![c],
            })
            .collect();
        let pattern = format!("{glob}fence:*");
        let counter_prefix = format!("{}fence:", self.options.prefix);
        let mut conn = self.conn.clone();
        let mut cursor: u64 = 0;
        let mut deleted = 0;
        loop {
            let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(500)
                .query_async(&mut conn)
                .await
                .map_err(|e| redis_error("cleanup", e))?;
            for counter in keys {
                let Some(tag) = counter.strip_prefix(&counter_prefix) else {
                    continue;
                };
                let lock = format!("{}lock:{tag}", self.options.prefix);
                let n: i64 = script
                    .key(lock)
                    .key(&counter)
                    .invoke_async(&mut conn)
                    .await
                    .map_err(|e| redis_error("cleanup", e))?;
                deleted += u64::try_from(n).unwrap_or(0);
            }
            if next == 0 {
                return Ok(deleted);
            }
            cursor = next;
        }
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

/// One `INFO`: refuses (strict) or lists what makes this server unsafe for locks.
async fn check_server(
    conn: &mut ConnectionManager,
    strict: bool,
) -> Result<(Vec<String>, String), LockError> {
    let info: String = redis::cmd("INFO")
        .query_async(conn)
        .await
        .map_err(|e| redis_error("server check", e))?;
    let field = |name: &str| {
        info.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .map(str::trim)
    };
    let mut fatal = Vec::new();
    let mut warn = Vec::new();
    match field("maxmemory_policy") {
        Some("noeviction") => {}
        Some(p) => fatal.push(format!(
            "maxmemory-policy is {p}: eviction can remove the token counter or a held lock \
             (set it to noeviction)"
        )),
        None => fatal.push("INFO does not report maxmemory_policy".to_owned()),
    }
    if let Some(role) = field("role").filter(|r| *r != "master") {
        fatal.push(format!("the server is a {role}, not a primary"));
    }
    if field("run_id").is_none() {
        fatal.push("INFO does not report run_id (restarts cannot be detected)".to_owned());
    }
    if field("aof_enabled") != Some("1") {
        warn.push(
            "AOF is off: a restart loses held locks (tokens stay monotonic via the TIME floor)"
                .to_owned(),
        );
    }
    if field("connected_slaves").is_some_and(|n| n != "0") {
        warn.push("replication is asynchronous: a failover can lose held locks".to_owned());
    }
    if strict && !fatal.is_empty() {
        return Err(LockError::Config(format!(
            "unsafe Redis server for locks: {} (RedisOptions::strict_server(false) to connect anyway)",
            fatal.join("; ")
        )));
    }
    fatal.extend(warn);
    for w in &fatal {
        tracing::warn!(target: "fenced_lock", backend = NAME, "{w}");
    }
    let run_id = field("run_id").unwrap_or_default().to_owned();
    Ok((fatal, run_id))
}

impl RedisBackend {
    /// Best effort: a failure leaves the old value, whose leases then fail closed too.
    async fn refresh_run_id(&self) {
        let mut conn = self.conn.clone();
        let info: Result<String, _> = redis::cmd("INFO")
            .arg("server")
            .query_async(&mut conn)
            .await;
        if let Some(id) = info.ok().as_deref().and_then(|i| {
            i.lines()
                .find_map(|l| l.strip_prefix("run_id:"))
                .map(|v| v.trim().to_owned())
        }) {
            *self.run_id.write().unwrap_or_else(|e| e.into_inner()) = id;
        }
    }

    /// After a grant or renewal, the `WAIT` of [`RedisOptions::wait_for_replicas`].
    async fn replicated(&self, context: &'static str) -> Result<(), LockError> {
        let Some((replicas, timeout)) = self.options.wait_for_replicas else {
            return Ok(());
        };
        if self.wait_replicas(replicas, timeout).await? {
            Ok(())
        } else {
            Err(LockError::Backend {
                backend: NAME,
                context,
                message: format!("fewer than {replicas} replicas acknowledged within {timeout:?}"),
            })
        }
    }
}

impl LockBackend for RedisBackend {
    /// The attempt runs in its own task; when the caller stops waiting, the task is left
    /// to finish and a grant that lands anyway is released at once.
    async fn try_acquire_within(
        &self,
        key: &str,
        ttl: Duration,
        limit: Duration,
    ) -> Result<Option<Lease>, LockError> {
        let limit = limit.min(self.options.op_timeout);
        crate::backend::attempt_in_task(self, NAME, key, ttl, limit).await
    }

    async fn try_acquire(&self, key: &str, ttl: Duration) -> Result<Option<Lease>, LockError> {
        validate(key, ttl)?;
        let owner = OwnerId::random();
        let mut conn = self.conn.clone();
        let sent = Instant::now();
        let reply: redis::Value = self
            .scripts
            .acquire
            .key(self.lock_key(key))
            .key(self.counter_key(key))
            .arg(owner.to_string())
            .arg(ttl_millis(ttl))
            .invoke_async(&mut conn)
            .await
            .map_err(|e| redis_error("acquire", e))?;
        if reply == redis::Value::Int(0) {
            return Ok(None);
        }
        let parsed: Option<String> = redis::from_redis_value(reply).ok();
        let token = parsed
            .and_then(|t| t.parse::<u64>().ok().and_then(FencingToken::new))
            .ok_or_else(|| LockError::Backend {
                backend: NAME,
                context: "acquire",
                message: "unexpected reply from the acquire script".to_owned(),
            })?;
        let lease = Lease::new(key, token, owner, ttl, sent + ttl)
            .with_drift(self.options.clock_drift)
            .with_server(
                self.run_id
                    .read()
                    .unwrap_or_else(|e| e.into_inner())
                    .clone(),
            );
        if let Err(e) = self.replicated("acquire").await {
            let _ = self.release(lease).await;
            return Err(e);
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
            .arg(lease.server())
            .invoke_async(&mut conn)
            .await
            .map_err(|e| redis_error("renew", e))?;
        if n == -1 {
            // The server restarted since the lease was granted: fail closed, and learn
            // the new run_id for the leases granted from now on.
            self.refresh_run_id().await;
        }
        if n == 1 {
            // Not confirmed until replicated: a failed WAIT is retried by the keeper.
            self.replicated("renew").await?;
        }
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

impl crate::LockAdmin for RedisBackend {
    async fn inspect(&self, key: &str) -> Result<Option<crate::LockInfo>, LockError> {
        let mut conn = self.conn.clone();
        let (value, pttl): (Option<String>, i64) = redis::pipe()
            .get(self.lock_key(key))
            .pttl(self.lock_key(key))
            .query_async(&mut conn)
            .await
            .map_err(|e| redis_error("inspect", e))?;
        // The value is `owner:token`: only the token leaves this function.
        let token = value
            .as_deref()
            .and_then(|v| v.rsplit_once(':'))
            .and_then(|(_, t)| t.parse::<u64>().ok())
            .and_then(FencingToken::new);
        Ok(token.filter(|_| pttl > 0).map(|token| crate::LockInfo {
            token,
            remaining: Duration::from_millis(u64::try_from(pttl).unwrap_or(0)),
        }))
    }

    async fn force_release(&self, key: &str) -> Result<bool, LockError> {
        let mut conn = self.conn.clone();
        let n: i64 = redis::cmd("DEL")
            .arg(self.lock_key(key))
            .query_async(&mut conn)
            .await
            .map_err(|e| redis_error("force release", e))?;
        Ok(n == 1)
    }
}
