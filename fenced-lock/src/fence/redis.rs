//! Redis fence: fenced commands, each one Lua script that checks the ticket and runs the
//! command in the same atomic step.
//!
//! ```no_run
//! # async fn demo(lease: &fenced_lock::Lease) -> Result<(), Box<dyn std::error::Error>> {
//! let fence = fenced_lock::RedisFence::connect("redis://127.0.0.1/", "app:fence:").await?;
//! let key = fence.data_key("invoice-42", "body"); // same Cluster slot as the fence key
//! fence.set("invoice-42", lease.ticket(), &key, b"paid").await?; // Err(Stale) => stop
//! let n = fence.incr("invoice-42", lease.ticket(), &fence.data_key("invoice-42", "n"), 1).await?;
//! # let _ = n; Ok(()) }
//! ```
//!
//! Every data key a fenced command touches must hash to the fence key's Cluster slot;
//! [`RedisFence::data_key`] builds such keys, and other keys are refused with
//! [`FenceError::CrossSlot`] (on a single server too, so code that works there also
//! works on a Cluster).
//!
//! Tokens are compared as decimal strings (length first), so values above 2^53 stay
//! exact despite Lua's floating-point numbers. The caveat of the Redis backend applies
//! to the fence too: a failover or a restart without persistence can lose the stored
//! high-water mark, and then a stale holder is admitted again. Keep the fence with the
//! data it protects (then both are lost together) or in a durable store.

use std::sync::Arc;
use std::time::Duration;

use redis::Script;
use redis::aio::ConnectionManager;

use crate::backend::bounded;
use crate::backend::redis::{cluster_slot, connect_manager, hash_tag, redis_error};
use crate::fence::check_resource;
use crate::{Fence, FenceError, FencingToken, LockError, StaleToken, Ticket};

const NAME: &str = "redis";

/// Checks `ARGV[1]` (token) and `ARGV[2]` (holder) against `KEYS[1]` ("token:holder"),
/// records them, then runs the command. Replies `{'ok', result}` or `{'stale', current}`.
/// A value without a holder (older versions) never admits an equal token: fail closed.
const PRELUDE: &str = r"
local cur = redis.call('GET', KEYS[1])
if cur then
  local ct, ch = string.match(cur, '^(%d+):?(%d*)$')
  local tok = ARGV[1]
  local ok
  if not ct then ok = false
  elseif #tok ~= #ct then ok = #tok > #ct
  elseif tok ~= ct then ok = tok > ct
  else ok = (ch == ARGV[2]) end
  if not ok then return {'stale', ct or ''} end
end
redis.call('SET', KEYS[1], ARGV[1] .. ':' .. ARGV[2])
";

const CHECK: &str = "return {'ok', 0}";
const SET: &str = "return {'ok', redis.call('SET', KEYS[2], ARGV[3])}";
const HSET: &str = "return {'ok', redis.call('HSET', KEYS[2], ARGV[3], ARGV[4])}";
const INCRBY: &str = "return {'ok', redis.call('INCRBY', KEYS[2], ARGV[3])}";
const DEL: &str = "return {'ok', redis.call('DEL', unpack(KEYS, 2))}";

struct Scripts {
    check: Script,
    set: Script,
    hset: Script,
    incr: Script,
    del: Script,
}

/// High-water marks in Redis keys `<prefix>{resource}`, and the fenced commands.
#[derive(Clone)]
pub struct RedisFence {
    conn: ConnectionManager,
    prefix: Arc<str>,
    scripts: Arc<Scripts>,
    op_timeout: Duration,
}

impl std::fmt::Debug for RedisFence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisFence")
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

fn to_fence_error(e: LockError) -> FenceError {
    super::backend_error(NAME, e)
}

/// Script reply: `{'ok', result}` = admitted, `{'stale', current}` = refused.
fn verdict(
    resource: &str,
    token: FencingToken,
    reply: redis::Value,
) -> Result<redis::Value, FenceError> {
    let unexpected = |v: &redis::Value| FenceError::Backend {
        backend: NAME,
        message: format!("unexpected script reply {v:?}"),
    };
    let redis::Value::Array(items) = &reply else {
        return Err(unexpected(&reply));
    };
    let mut items = items.iter().cloned();
    let status = items.next();
    let value = items.next().unwrap_or(redis::Value::Nil);
    match status {
        Some(redis::Value::BulkString(s)) if s == b"ok" => Ok(value),
        Some(redis::Value::BulkString(s)) if s == b"stale" => Err(StaleToken {
            resource: resource.to_owned(),
            presented: token,
            current: redis::from_redis_value::<String>(value)
                .ok()
                .and_then(|s| s.parse::<u64>().ok())
                .and_then(FencingToken::new),
        }
        .into()),
        _ => Err(unexpected(&reply)),
    }
}

impl RedisFence {
    /// Connects; fence keys are `prefix + "{" + resource + "}"` (braces and `%` in
    /// `resource` percent-encoded).
    pub async fn connect(url: &str, prefix: &str) -> Result<Self, FenceError> {
        let op_timeout = Duration::from_secs(5);
        let conn = connect_manager(url, op_timeout)
            .await
            .map_err(to_fence_error)?;
        let script = |body: &str| Script::new(&format!("{PRELUDE}{body}"));
        Ok(Self {
            conn,
            prefix: prefix.into(),
            scripts: Arc::new(Scripts {
                check: script(CHECK),
                set: script(SET),
                hset: script(HSET),
                incr: script(INCRBY),
                del: script(DEL),
            }),
            op_timeout,
        })
    }

    /// The key holding the high-water mark of `resource`.
    pub fn fence_key(&self, resource: &str) -> String {
        format!("{}{}", self.prefix, hash_tag(resource))
    }

    /// A data key `{resource}:name` in the same Cluster slot as `resource`'s fence key,
    /// for the fenced commands.
    pub fn data_key(&self, resource: &str, name: &str) -> String {
        format!("{}:{name}", hash_tag(resource))
    }

    /// Runs `script` with `KEYS[1]` = the fence key, then the data keys, and
    /// `ARGV[1..2]` = the ticket, then `args`.
    async fn run(
        &self,
        script: &Script,
        context: &'static str,
        resource: &str,
        ticket: Ticket,
        keys: &[&str],
        args: &[&[u8]],
    ) -> Result<redis::Value, FenceError> {
        check_resource(resource)?;
        let fence_key = self.fence_key(resource);
        let slot = cluster_slot(fence_key.as_bytes());
        if let Some(bad) = keys.iter().find(|k| cluster_slot(k.as_bytes()) != slot) {
            return Err(FenceError::CrossSlot {
                resource: resource.to_owned(),
                key: (*bad).to_owned(),
            });
        }
        let mut inv = script.key(fence_key);
        for k in keys {
            inv.key(*k);
        }
        inv.arg(ticket.token.get().to_string())
            .arg(ticket.holder.get().to_string());
        for a in args {
            inv.arg(*a);
        }
        let mut conn = self.conn.clone();
        let reply = bounded(NAME, context, self.op_timeout, async {
            inv.invoke_async(&mut conn)
                .await
                .map_err(|e| redis_error(context, e))
        })
        .await
        .map_err(to_fence_error)?;
        verdict(resource, ticket.token, reply)
    }

    /// Fenced `SET key value`: written only if `ticket` is admitted, in the same step.
    pub async fn set(
        &self,
        resource: &str,
        ticket: Ticket,
        key: &str,
        value: &[u8],
    ) -> Result<(), FenceError> {
        self.run(
            &self.scripts.set,
            "fenced set",
            resource,
            ticket,
            &[key],
            &[value],
        )
        .await
        .map(drop)
    }

    /// Fenced `HSET key field value`; returns the number of fields added.
    pub async fn hset(
        &self,
        resource: &str,
        ticket: Ticket,
        key: &str,
        field: &[u8],
        value: &[u8],
    ) -> Result<i64, FenceError> {
        let v = self
            .run(
                &self.scripts.hset,
                "fenced hset",
                resource,
                ticket,
                &[key],
                &[field, value],
            )
            .await?;
        int_reply(v)
    }

    /// Fenced `INCRBY key by`; returns the new value.
    pub async fn incr(
        &self,
        resource: &str,
        ticket: Ticket,
        key: &str,
        by: i64,
    ) -> Result<i64, FenceError> {
        let by = by.to_string();
        let v = self
            .run(
                &self.scripts.incr,
                "fenced incr",
                resource,
                ticket,
                &[key],
                &[by.as_bytes()],
            )
            .await?;
        int_reply(v)
    }

    /// Fenced `DEL keys…`; returns how many existed.
    pub async fn del(
        &self,
        resource: &str,
        ticket: Ticket,
        keys: &[&str],
    ) -> Result<i64, FenceError> {
        if keys.is_empty() {
            return Err(FenceError::Backend {
                backend: NAME,
                message: "fenced del needs at least one key".to_owned(),
            });
        }
        let v = self
            .run(&self.scripts.del, "fenced del", resource, ticket, keys, &[])
            .await?;
        int_reply(v)
    }

    /// Runs your Lua `body` with the ticket check in front, all in one script. Inside
    /// `body`, `KEYS` and `ARGV` are yours (`KEYS[1]` is `keys[0]`); its return value is
    /// returned. It runs only if the ticket is admitted. The body is compiled on first
    /// use and cached by Redis (by SHA1), like any script.
    pub async fn eval(
        &self,
        resource: &str,
        ticket: Ticket,
        body: &str,
        keys: &[&str],
        args: &[&[u8]],
    ) -> Result<redis::Value, FenceError> {
        let wrapped = format!(
            "{PRELUDE}
local function user(KEYS, ARGV)
{body}
end
local k, a = {{}}, {{}}
for i = 2, #KEYS do k[i - 1] = KEYS[i] end
for i = 3, #ARGV do a[i - 2] = ARGV[i] end
return {{'ok', user(k, a)}}"
        );
        let script = Script::new(&wrapped);
        self.run(&script, "fenced eval", resource, ticket, keys, args)
            .await
    }
}

fn int_reply(v: redis::Value) -> Result<i64, FenceError> {
    redis::from_redis_value::<i64>(v).map_err(|e| FenceError::Backend {
        backend: NAME,
        message: format!("unexpected reply: {e}"),
    })
}

impl Fence for RedisFence {
    async fn check_only(&self, resource: &str, ticket: Ticket) -> Result<(), FenceError> {
        self.run(
            &self.scripts.check,
            "fence check",
            resource,
            ticket,
            &[],
            &[],
        )
        .await
        .map(drop)
    }
}
