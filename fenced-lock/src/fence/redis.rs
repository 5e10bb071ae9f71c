//! Redis fence and fenced-write scripts.
//!
//! Tokens are compared as decimal strings (length first), so values above
//! 2^53 stay exact despite Lua's floating-point numbers. The same caveat as
//! the Redis backend applies: a failover can lose the stored high-water mark.

use std::sync::Arc;
use std::time::Duration;

use redis::Script;
use redis::aio::ConnectionManager;

use crate::backend::bounded;
use crate::backend::redis::connect_manager;
use crate::fence::check_resource;
use crate::{Fence, FenceError, FencingToken, LockError, StaleToken};

const NAME: &str = "redis";

/// Returns 0 when admitted, else the current (larger) token.
const ADMIT: &str = r"
local function ge(a, b)
  if #a ~= #b then return #a > #b end
  return a >= b
end
local cur = redis.call('GET', KEYS[1])
if cur and not ge(ARGV[1], cur) then return cur end
redis.call('SET', KEYS[1], ARGV[1])
return 0
";

/// Admit as above, then `SET KEYS[2] ARGV[2]` in the same atomic step.
const FENCED_SET: &str = r"
local function ge(a, b)
  if #a ~= #b then return #a > #b end
  return a >= b
end
local cur = redis.call('GET', KEYS[1])
if cur and not ge(ARGV[1], cur) then return cur end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('SET', KEYS[2], ARGV[2])
return 0
";

/// High-water marks in Redis keys `<prefix>{resource}`.
#[derive(Clone)]
pub struct RedisFence {
    conn: ConnectionManager,
    prefix: Arc<str>,
    admit: Arc<Script>,
    fenced_set: Arc<Script>,
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

/// Script reply: integer 0 = admitted, bulk string = current token.
fn verdict(resource: &str, token: FencingToken, reply: redis::Value) -> Result<(), FenceError> {
    match reply {
        redis::Value::Int(0) => Ok(()),
        redis::Value::BulkString(cur) => Err(StaleToken {
            resource: resource.to_owned(),
            presented: token,
            current: std::str::from_utf8(&cur)
                .ok()
                .and_then(|s| s.parse::<u64>().ok())
                .and_then(FencingToken::new),
        }
        .into()),
        other => Err(FenceError::Backend {
            backend: NAME,
            message: format!("unexpected script reply {other:?}"),
        }),
    }
}

impl RedisFence {
    /// Connects; fence keys are `prefix + "{" + resource + "}"`.
    pub async fn connect(url: &str, prefix: &str) -> Result<Self, FenceError> {
        let op_timeout = Duration::from_secs(5);
        let conn = connect_manager(url, op_timeout)
            .await
            .map_err(to_fence_error)?;
        Ok(Self {
            conn,
            prefix: prefix.into(),
            admit: Arc::new(Script::new(ADMIT)),
            fenced_set: Arc::new(Script::new(FENCED_SET)),
            op_timeout,
        })
    }

    /// The key holding the high-water mark of `resource`.
    pub fn fence_key(&self, resource: &str) -> String {
        format!("{}{{{resource}}}", self.prefix)
    }

    /// Atomically admits `token` for `resource` and, only if admitted, sets
    /// `data_key` to `value`. Put `data_key` in the same hash slot (`{resource}`)
    /// when using Redis Cluster.
    pub async fn fenced_set(
        &self,
        resource: &str,
        token: FencingToken,
        data_key: &str,
        value: &[u8],
    ) -> Result<(), FenceError> {
        check_resource(resource)?;
        let mut conn = self.conn.clone();
        let reply = bounded(NAME, "fenced set", self.op_timeout, async {
            self.fenced_set
                .key(self.fence_key(resource))
                .key(data_key)
                .arg(token.get().to_string())
                .arg(value)
                .invoke_async(&mut conn)
                .await
                .map_err(|e| crate::backend::redis::redis_error("fenced set", e))
        })
        .await
        .map_err(to_fence_error)?;
        verdict(resource, token, reply)
    }
}

impl Fence for RedisFence {
    async fn admit(&self, resource: &str, token: FencingToken) -> Result<(), FenceError> {
        check_resource(resource)?;
        let mut conn = self.conn.clone();
        let reply = bounded(NAME, "fence admit", self.op_timeout, async {
            self.admit
                .key(self.fence_key(resource))
                .arg(token.get().to_string())
                .invoke_async(&mut conn)
                .await
                .map_err(|e| crate::backend::redis::redis_error("fence admit", e))
        })
        .await
        .map_err(to_fence_error)?;
        verdict(resource, token, reply)
    }
}
