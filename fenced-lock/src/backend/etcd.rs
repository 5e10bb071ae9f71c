//! etcd backend: a queue of keys under the lock's prefix, as etcd's own
//! `concurrency.Mutex` does.
//!
//! * Every acquirer takes a lease (`LeaseGrant(ceil(ttl) s)`) and writes its
//!   own entry `{prefix}{key}\0{lease id:016x}` attached to it, in one
//!   transaction with a read of the lowest create revision under
//!   `{prefix}{key}\0` (keys cannot contain NUL, so no lock's queue is inside
//!   another's). The entry with the lowest create revision holds the lock.
//!   The token is that entry's create revision: etcd's revision counter is
//!   cluster-wide, agreed through Raft and persisted, and the queue is served
//!   in create-revision order, so tokens increase across acquisitions,
//!   clients, leader changes and restarts. Lease ids are never tokens.
//! * try_acquire: not the lowest means held; the entry is withdrawn (lease
//!   revoked) and the answer is `None`.
//! * acquire with a wait: a waiter keeps its entry (and its lease alive) and
//!   watches the entry just ahead of it (the highest create revision below its
//!   own) for deletion, then looks again, so each release wakes one waiter and
//!   nobody polls. Each look is one transaction that also checks the waiter's
//!   own entry still exists (its lease could have died). Transient errors
//!   while queued keep the place (pause, look again). A waiter that gives
//!   up, fails or is cancelled revokes its lease, which deletes its entry.
//! * renew: one lease keep-alive; a TTL <= 0 in the answer means the lease is
//!   gone. A read then confirms the entry still carries our revision and lease
//!   (it could have been deleted by an operator while the lease lives).
//! * release: `if create_revision(entry) == token && value(entry) == owner then
//!   delete(entry)` in one transaction; the lease is then revoked in the
//!   background (the delete is the release; the lease would expire anyway).
//!
//! etcd lease TTLs are whole seconds with a server minimum (about 1–2 s with
//! default election settings): the server may hold a lease longer than asked,
//! never shorter, so the client-side `valid_until` (request time + ttl) stays
//! conservative.

use std::sync::Arc;
use std::time::Duration;

use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, EventType, GetOptions, LeaseKeepAliveStream,
    LeaseKeeper, PutOptions, SortOrder, SortTarget, Txn, TxnOp, TxnOpResponse, WatchOptions,
};
use tokio::time::Instant;

use crate::backend::{BACKOFF_MAX, BACKOFF_START, Retry, bounded};
use crate::lease::validate;
use crate::{ClockDrift, FencingToken, Lease, LockBackend, LockError, OwnerId};

const NAME: &str = "etcd";

/// How long a background revoke keeps retrying through transient errors.
const REVOKE_RETRY: Duration = Duration::from_secs(60);
/// Longest pause between revoke attempts.
const REVOKE_PAUSE_MAX: Duration = Duration::from_secs(1);

/// Options of [`EtcdBackend`].
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct EtcdOptions {
    /// Prefix of every key this crate writes. Default `fenced-lock/`.
    pub prefix: String,
    /// Deadline of each operation and of connecting. Default 5 s.
    pub op_timeout: Duration,
    /// Margin taken off each lease's validity for the server clock running fast.
    /// Default 1 % of the TTL + 2 ms.
    pub clock_drift: ClockDrift,
}

impl Default for EtcdOptions {
    fn default() -> Self {
        Self {
            prefix: "fenced-lock/".into(),
            op_timeout: Duration::from_secs(5),
            clock_drift: ClockDrift::default(),
        }
    }
}

impl EtcdOptions {
    /// Sets the key prefix.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Sets the per-operation deadline.
    pub fn op_timeout(mut self, d: Duration) -> Self {
        self.op_timeout = d;
        self
    }
}

/// Leases in etcd. Clones share the gRPC channel.
#[derive(Clone)]
pub struct EtcdBackend {
    client: Client,
    options: Arc<EtcdOptions>,
}

impl std::fmt::Debug for EtcdBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdBackend")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

pub(crate) fn etcd_error(context: &'static str, e: etcd_client::Error) -> LockError {
    use etcd_client::Error as E;
    match e {
        E::TransportError(_) | E::IoError(_) => LockError::unavailable(NAME, context, e),
        // gRPC codes CANCELLED (1), DEADLINE_EXCEEDED (4), UNAVAILABLE (14).
        E::GRpcStatus(ref s) if matches!(i32::from(s.code()), 1 | 4 | 14) => {
            LockError::unavailable(NAME, context, e)
        }
        // UNKNOWN (2) with a source is tonic wrapping a broken connection
        // (reset, h2 error) on the client side; a status from the server has none.
        E::GRpcStatus(ref s)
            if i32::from(s.code()) == 2 && std::error::Error::source(s).is_some() =>
        {
            LockError::unavailable(NAME, context, e)
        }
        other => LockError::Backend {
            backend: NAME,
            context,
            message: other.to_string(),
        },
    }
}

/// Whether a keep-alive error means the lease no longer exists.
fn lease_gone(e: &etcd_client::Error) -> bool {
    match e {
        etcd_client::Error::LeaseKeepAliveError(m) => m.contains("not found"),
        // gRPC NOT_FOUND (5)
        etcd_client::Error::GRpcStatus(s) => i32::from(s.code()) == 5,
        _ => false,
    }
}

/// Lease TTL in whole seconds, rounded up (etcd's unit).
fn ttl_secs(ttl: Duration) -> i64 {
    let s = ttl.as_secs() + u64::from(ttl.subsec_nanos() != 0);
    i64::try_from(s.max(1)).unwrap_or(i64::MAX)
}

impl EtcdBackend {
    /// Connects to `endpoints` (e.g. `["http://127.0.0.1:2379"]`) and checks
    /// that the cluster answers.
    pub async fn connect<E: AsRef<str>>(endpoints: &[E]) -> Result<Self, LockError> {
        Self::connect_with(endpoints, EtcdOptions::default()).await
    }

    /// Connects with options.
    pub async fn connect_with<E: AsRef<str>>(
        endpoints: &[E],
        options: EtcdOptions,
    ) -> Result<Self, LockError> {
        let limit = options.op_timeout;
        let opts = ConnectOptions::new()
            .with_connect_timeout(limit)
            .with_timeout(limit);
        let client = bounded(NAME, "connect", limit, async {
            let mut client = Client::connect(endpoints, Some(opts))
                .await
                .map_err(|e| etcd_error("connect", e))?;
            // Channels connect lazily: make one real request so an unreachable
            // cluster fails here rather than at the first lock.
            client
                .get(options.prefix.as_bytes(), None)
                .await
                .map_err(|e| etcd_error("connect", e))?;
            Ok(client)
        })
        .await?;
        Ok(Self {
            client,
            options: Arc::new(options),
        })
    }

    /// The etcd key prefix of a lock's queue: `{prefix}{key}\0`. Each acquirer's
    /// entry is this followed by its lease id in 16 hex digits; the entry with
    /// the lowest create revision holds the lock.
    pub fn etcd_key(&self, key: &str) -> String {
        format!("{}{key}\0", self.options.prefix)
    }

    /// The queue entry of the acquisition with lease `lease_id`.
    fn entry_key(&self, key: &str, lease_id: i64) -> String {
        format!("{}{lease_id:016x}", self.etcd_key(key))
    }

    /// The underlying client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Revokes a lease in the background. Nothing waits for it: the key is
    /// already deleted (or was never written), and an unrevoked lease just
    /// expires by itself after its TTL, so this only frees server memory early
    /// (and, for a queue entry, lets the next waiter go sooner). Transient
    /// failures are retried for up to [`REVOKE_RETRY`]: a queue entry left
    /// behind would hold up every waiter behind it until its lease expires.
    fn revoke(&self, lease_id: i64) {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let mut c = self.client.clone();
        let limit = self.options.op_timeout;
        rt.spawn(async move {
            let give_up = Instant::now() + REVOKE_RETRY;
            let mut pause = BACKOFF_START;
            loop {
                match tokio::time::timeout(limit, c.lease_revoke(lease_id)).await {
                    Ok(Ok(_)) => return,
                    Ok(Err(e)) if lease_gone(&e) => return,
                    _ if Instant::now() >= give_up => return,
                    _ => {}
                }
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(REVOKE_PAUSE_MAX);
            }
        });
    }

    async fn grant(&self, ttl: Duration) -> Result<i64, LockError> {
        let mut c = self.client.clone();
        bounded(NAME, "acquire", self.options.op_timeout, async {
            c.lease_grant(ttl_secs(ttl), None)
                .await
                .map(|r| r.id())
                .map_err(|e| etcd_error("acquire", e))
        })
        .await
    }

    /// Writes the entry and reads the head of the queue in one transaction:
    /// `(entry's create revision, lowest create revision in the queue)`.
    async fn enqueue(
        &self,
        key: &str,
        entry: &str,
        owner: &OwnerId,
        lease_id: i64,
    ) -> Result<(FencingToken, i64), LockError> {
        let mut c = self.client.clone();
        let head = GetOptions::new()
            .with_prefix()
            .with_sort(SortTarget::Create, SortOrder::Ascend)
            .with_limit(1)
            .with_keys_only();
        let txn = Txn::new().and_then([
            TxnOp::put(
                entry,
                owner.to_string(),
                Some(PutOptions::new().with_lease(lease_id)),
            ),
            TxnOp::get(self.etcd_key(key), Some(head)),
        ]);
        let resp = bounded(NAME, "acquire", self.options.op_timeout, async {
            c.txn(txn).await.map_err(|e| etcd_error("acquire", e))
        })
        .await?;
        // The put is the txn's only write, so the new store revision is the
        // entry's create revision.
        let rev = resp.header().map_or(0, |h| h.revision());
        let Some(token) = u64::try_from(rev).ok().and_then(FencingToken::new) else {
            return Err(LockError::Backend {
                backend: NAME,
                context: "acquire",
                message: format!("transaction reported revision {rev}"),
            });
        };
        let lowest = match resp.op_responses().get(1) {
            Some(TxnOpResponse::Get(g)) => g.kvs().first().map_or(rev, |kv| kv.create_revision()),
            _ => rev,
        };
        Ok((token, lowest))
    }

    /// One look at the queue for the waiter with `entry` (create revision `rev`):
    /// the entry just ahead of it and the store revision of the read.
    async fn ahead(&self, key: &str, entry: &str, rev: i64) -> Result<Ahead, LockError> {
        let mut c = self.client.clone();
        let last_below = GetOptions::new()
            .with_prefix()
            .with_sort(SortTarget::Create, SortOrder::Descend)
            .with_limit(1)
            .with_max_create_revision(rev - 1)
            .with_keys_only();
        let txn = Txn::new()
            .when([Compare::create_revision(entry, CompareOp::Equal, rev)])
            .and_then([TxnOp::get(self.etcd_key(key), Some(last_below))]);
        let resp = bounded(NAME, "acquire", self.options.op_timeout, async {
            c.txn(txn).await.map_err(|e| etcd_error("acquire", e))
        })
        .await?;
        if !resp.succeeded() {
            return Ok(Ahead::Gone);
        }
        let at = resp.header().map_or(0, |h| h.revision());
        Ok(match resp.op_responses().first() {
            Some(TxnOpResponse::Get(g)) => match g.kvs().first() {
                Some(kv) => Ahead::Entry(kv.key().to_vec(), at),
                None => Ahead::Nobody,
            },
            _ => Ahead::Nobody,
        })
    }

    /// Waits until `ahead` is deleted (after store revision `at`) while keeping
    /// the waiter's lease alive. `Ok(false)`: the waiter's lease is gone.
    async fn wait_deleted(
        &self,
        ahead: Vec<u8>,
        at: i64,
        ttl: Duration,
        alive: &mut Alive,
    ) -> Result<bool, LockError> {
        let mut c = self.client.clone();
        let opts = WatchOptions::new().with_start_revision(at + 1);
        let mut stream = bounded(NAME, "acquire", self.options.op_timeout, async {
            c.watch(ahead, Some(opts))
                .await
                .map_err(|e| etcd_error("acquire", e))
        })
        .await?;
        let every = keep_alive_every(ttl);
        loop {
            let next = alive.since + every;
            tokio::select! {
                msg = stream.message() => match msg {
                    // `canceled`: the start revision was compacted; look again.
                    Ok(Some(r)) if r.canceled() => return Ok(true),
                    Ok(Some(r)) => {
                        if r.events().iter().any(|e| e.event_type() == EventType::Delete) {
                            return Ok(true);
                        }
                    }
                    Ok(None) => {
                        return Err(LockError::unavailable(NAME, "acquire", "watch stream ended"));
                    }
                    // A broken stream (server gone: tonic reports it as status
                    // `Unknown`) is transient; the next look decides.
                    Err(e) => return Err(LockError::unavailable(NAME, "acquire", e)),
                },
                () = tokio::time::sleep_until(next) => {
                    if !self.keep_alive(alive).await? {
                        return Ok(false);
                    }
                }
            }
        }
    }

    /// One keep-alive of a waiter's lease; `Ok(false)` if the lease is gone.
    async fn keep_alive(&self, alive: &mut Alive) -> Result<bool, LockError> {
        let mut c = self.client.clone();
        let sent = Instant::now();
        let lease_id = alive.lease_id;
        let ttl = bounded(NAME, "acquire", self.options.op_timeout, async {
            if alive.stream.is_none() {
                match c.lease_keep_alive(lease_id).await {
                    Ok(pair) => alive.stream = Some(pair),
                    Err(e) if lease_gone(&e) => return Ok(0),
                    Err(e) => return Err(etcd_error("acquire", e)),
                }
            }
            let (keeper, stream) = alive.stream.as_mut().expect("just set");
            // Fails only when the stream is closed (connection lost): transient.
            keeper
                .keep_alive()
                .await
                .map_err(|e| LockError::unavailable(NAME, "acquire", e))?;
            match stream.message().await {
                Ok(Some(r)) => Ok(r.ttl()),
                Ok(None) => Err(LockError::unavailable(
                    NAME,
                    "acquire",
                    "keep-alive stream ended",
                )),
                Err(e) if lease_gone(&e) => Ok(0),
                Err(e) => Err(LockError::unavailable(NAME, "acquire", e)),
            }
        })
        .await
        // A broken keep-alive stream is not reused: the next call opens one.
        .inspect_err(|_| alive.stream = None)?;
        if ttl > 0 {
            alive.since = sent;
        }
        Ok(ttl > 0)
    }

    /// One queued acquisition: enqueue, then wait for each entry ahead to go.
    /// `Ok(None)`: the entry was lost while queued (its lease died); queue again.
    async fn queue(
        &self,
        key: &str,
        ttl: Duration,
        seen_held: &mut bool,
    ) -> Result<Option<Lease>, LockError> {
        let owner = OwnerId::random();
        let sent = Instant::now();
        let lease_id = self.grant(ttl).await?;
        // From here on, leaving early (error, budget spent, caller dropped us)
        // revokes the lease and so deletes the entry.
        let mut entry = Entry {
            backend: self,
            lease_id,
            armed: true,
        };
        let entry_key = self.entry_key(key, lease_id);
        let (token, lowest) = self.enqueue(key, &entry_key, &owner, lease_id).await?;
        let rev = i64::try_from(token.get()).unwrap_or(i64::MAX);
        let mut alive = Alive {
            lease_id,
            since: sent,
            stream: None,
        };
        let every = keep_alive_every(ttl);
        if lowest != rev {
            *seen_held = true;
            let mut pause = BACKOFF_START;
            loop {
                // A transient error keeps the place in the queue: pause and look
                // again (the look tells whether the entry survived the outage).
                let step = async {
                    if Instant::now() >= alive.since + every && !self.keep_alive(&mut alive).await?
                    {
                        return Ok(Step::Lost);
                    }
                    Ok(match self.ahead(key, &entry_key, rev).await? {
                        Ahead::Gone => Step::Lost,
                        Ahead::Nobody => Step::Head,
                        Ahead::Entry(ahead, at) => {
                            if self.wait_deleted(ahead, at, ttl, &mut alive).await? {
                                Step::Again
                            } else {
                                Step::Lost
                            }
                        }
                    })
                };
                match step.await {
                    Ok(Step::Head) => break,
                    Ok(Step::Lost) => return Ok(None),
                    Ok(Step::Again) => pause = BACKOFF_START,
                    Err(e @ LockError::Unavailable { .. }) => {
                        tracing::debug!(target: "fenced_lock", key, error = %e, "queued acquire: retrying");
                        tokio::time::sleep(pause.mul_f64(rand::random_range(0.5..1.0))).await;
                        pause = (pause * 2).min(BACKOFF_MAX);
                    }
                    Err(e) => return Err(e),
                }
            }
            // After an outage the last keep-alive may be old: refresh it so the
            // lease handed out has most of its TTL left.
            if Instant::now() >= alive.since + every && !self.keep_alive(&mut alive).await? {
                return Ok(None);
            }
        }
        entry.armed = false;
        Ok(Some(
            Lease::new(key, token, owner, ttl, alive.since + ttl)
                .with_handle(lease_id)
                .with_drift(self.options.clock_drift),
        ))
    }
}

/// Four keep-alives per TTL while queued: the lease is at least 3/4 of its TTL
/// from expiry when the waiter's turn comes.
fn keep_alive_every(ttl: Duration) -> Duration {
    (ttl / 4).max(Duration::from_millis(1))
}

/// The outcome of one wait step of a queued acquire.
enum Step {
    /// The waiter's entry is the head: it holds the lock.
    Head,
    /// The entry ahead went: look again.
    Again,
    /// The waiter's own entry or lease is gone: queue again.
    Lost,
}

/// What a waiter sees ahead of it in the queue.
enum Ahead {
    /// Its own entry is gone (lease expired or revoked, or deleted by an operator).
    Gone,
    /// Nothing: it holds the lock.
    Nobody,
    /// The entry just ahead, and the store revision of the read.
    Entry(Vec<u8>, i64),
}

/// A waiter's lease: when it was last known alive (send time of the grant or of
/// the last answered keep-alive) and the keep-alive stream, opened on first use.
struct Alive {
    lease_id: i64,
    since: Instant,
    stream: Option<(LeaseKeeper, LeaseKeepAliveStream)>,
}

/// A queue entry not (yet) handed out as a lease: dropped armed, it revokes its
/// lease, which deletes the entry, so a waiter that gives up never blocks the queue.
struct Entry<'a> {
    backend: &'a EtcdBackend,
    lease_id: i64,
    armed: bool,
}

impl Drop for Entry<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.backend.revoke(self.lease_id);
        }
    }
}

impl LockBackend for EtcdBackend {
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
        let sent = Instant::now();
        let lease_id = self.grant(ttl).await?;
        let entry = Entry {
            backend: self,
            lease_id,
            armed: true,
        };
        let entry_key = self.entry_key(key, lease_id);
        let (token, lowest) = self.enqueue(key, &entry_key, &owner, lease_id).await?;
        if u64::try_from(lowest).ok() != Some(token.get()) {
            // Someone is ahead: withdraw (the drop revokes the lease).
            return Ok(None);
        }
        let mut entry = entry;
        entry.armed = false;
        Ok(Some(
            Lease::new(key, token, owner, ttl, sent + ttl)
                .with_handle(lease_id)
                .with_drift(self.options.clock_drift),
        ))
    }

    /// Queues behind the current holder and earlier waiters (first come, first
    /// served) and waits with a watch on the entry ahead, never polling.
    ///
    /// `wait` bounds the whole call, every request included; `Duration::ZERO`
    /// is one [`try_acquire`](LockBackend::try_acquire), `Duration::MAX` waits
    /// without end. A transient error while queued keeps the waiter's place:
    /// it pauses (jittered, 2–100 ms) and looks again, inside the budget. A
    /// waiter whose own entry vanished (its lease expired or was revoked)
    /// queues again at the back, as does one whose grant or enqueue failed.
    /// Giving up, failing or being dropped revokes the waiter's lease (retried
    /// in the background through transient errors), deleting its entry.
    async fn acquire(&self, key: &str, ttl: Duration, wait: Duration) -> Result<Lease, LockError> {
        validate(key, ttl)?;
        let mut retry = Retry::new(key, wait);
        if wait.is_zero() {
            return match self.try_acquire(key, ttl).await? {
                Some(lease) => Ok(lease),
                None => Err(retry.timeout(Instant::now())),
            };
        }
        loop {
            let attempt = self.queue(key, ttl, &mut retry.seen_held);
            let outcome = match retry.deadline {
                Some(d) => tokio::time::timeout_at(d, attempt).await.ok(),
                None => Some(attempt.await),
            };
            match outcome {
                Some(Ok(Some(lease))) => return Ok(retry.acquired(lease)),
                // Our entry vanished while queued: queue again. `None`: the budget is spent.
                Some(Ok(None)) | None => {}
                Some(Err(e)) => retry.failed(e)?,
            }
            retry.pause(false).await?;
        }
    }

    async fn renew(&self, lease: &mut Lease) -> Result<(), LockError> {
        let mut c = self.client.clone();
        let limit = self.options.op_timeout;
        let lease_id = lease.handle;
        let sent = Instant::now();
        let granted = bounded(NAME, "renew", limit, async {
            let (mut keeper, mut stream) = match c.lease_keep_alive(lease_id).await {
                Ok(pair) => pair,
                Err(e) if lease_gone(&e) => return Ok(0),
                Err(e) => return Err(etcd_error("renew", e)),
            };
            keeper
                .keep_alive()
                .await
                .map_err(|e| etcd_error("renew", e))?;
            match stream.message().await {
                Ok(Some(r)) => Ok(r.ttl()),
                Ok(None) => Ok(0),
                Err(e) if lease_gone(&e) => Ok(0),
                Err(e) => Err(etcd_error("renew", e)),
            }
        })
        .await?;
        if granted <= 0 {
            return Err(lease.lost());
        }
        let k = self.entry_key(lease.key(), lease_id);
        let kv = bounded(NAME, "renew", limit, async {
            c.get(k.as_str(), None)
                .await
                .map_err(|e| etcd_error("renew", e))
        })
        .await?;
        let owner = lease.owner().to_string();
        let ours = kv.kvs().first().is_some_and(|kv| {
            u64::try_from(kv.create_revision()).ok() == Some(lease.token().get())
                && kv.lease() == lease_id
                && kv.value() == owner.as_bytes()
        });
        if !ours {
            return Err(lease.lost());
        }
        let ttl = lease.ttl();
        lease.renewed(sent, ttl);
        Ok(())
    }

    async fn release(&self, lease: Lease) -> Result<bool, LockError> {
        let mut c = self.client.clone();
        let k = self.entry_key(lease.key(), lease.handle);
        let Ok(rev) = i64::try_from(lease.token().get()) else {
            return Ok(false);
        };
        // Owner and create revision together: only this acquisition's entry.
        let txn = Txn::new()
            .when([
                Compare::create_revision(k.as_str(), CompareOp::Equal, rev),
                Compare::value(k.as_str(), CompareOp::Equal, lease.owner().to_string()),
            ])
            .and_then([TxnOp::delete(k.as_str(), None)]);
        let resp = bounded(NAME, "release", self.options.op_timeout, async {
            c.txn(txn).await.map_err(|e| etcd_error("release", e))
        })
        .await?;
        if resp.succeeded() && lease.handle != 0 {
            self.revoke(lease.handle);
        }
        Ok(resp.succeeded())
    }
}

impl EtcdBackend {
    /// The head of a lock's queue (the holder's entry), if any.
    async fn head(
        &self,
        key: &str,
        context: &'static str,
    ) -> Result<Option<etcd_client::KeyValue>, LockError> {
        let mut c = self.client.clone();
        let opts = GetOptions::new()
            .with_prefix()
            .with_sort(SortTarget::Create, SortOrder::Ascend)
            .with_limit(1);
        let mut got = bounded(NAME, context, self.options.op_timeout, async {
            c.get(self.etcd_key(key), Some(opts))
                .await
                .map_err(|e| etcd_error(context, e))
        })
        .await?;
        Ok(got.take_kvs().into_iter().next())
    }
}

impl crate::LockAdmin for EtcdBackend {
    async fn inspect(&self, key: &str) -> Result<Option<crate::LockInfo>, LockError> {
        let mut c = self.client.clone();
        let limit = self.options.op_timeout;
        let Some(kv) = self.head(key, "inspect").await? else {
            return Ok(None);
        };
        let Some(token) = u64::try_from(kv.create_revision())
            .ok()
            .and_then(FencingToken::new)
        else {
            return Ok(None);
        };
        let lease = kv.lease();
        let ttl = bounded(NAME, "inspect", limit, async {
            c.lease_time_to_live(lease, None)
                .await
                .map_err(|e| etcd_error("inspect", e))
        })
        .await?
        .ttl();
        Ok((ttl > 0).then(|| crate::LockInfo {
            token,
            remaining: Duration::from_secs(u64::try_from(ttl).unwrap_or(0)),
        }))
    }

    /// Deletes the head of the queue (only that entry: the next waiter then
    /// holds the lock with its own, larger, create revision).
    async fn force_release(&self, key: &str) -> Result<bool, LockError> {
        let mut c = self.client.clone();
        let Some(kv) = self.head(key, "force release").await? else {
            return Ok(false);
        };
        let txn = Txn::new()
            .when([Compare::create_revision(
                kv.key(),
                CompareOp::Equal,
                kv.create_revision(),
            )])
            .and_then([TxnOp::delete(kv.key(), None)]);
        let r = bounded(NAME, "force release", self.options.op_timeout, async {
            c.txn(txn).await.map_err(|e| etcd_error("force release", e))
        })
        .await?;
        Ok(r.succeeded())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttl_rounds_up_to_seconds() {
        assert_eq!(ttl_secs(Duration::from_millis(1)), 1);
        assert_eq!(ttl_secs(Duration::from_millis(1000)), 1);
        assert_eq!(ttl_secs(Duration::from_millis(1001)), 2);
    }
}
