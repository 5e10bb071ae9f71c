//! Rule packs: declarative descriptions of lock libraries (`rules/*.toml`).
//!
//! The analyzer knows nothing about any lock library except what a pack says. The packs that ship
//! with lockaudit are embedded at build time; users add their own from `lockaudit.toml`
//! (`packs = ["path.toml"]` or inline `[[lock]]` entries, which use the `[[call]]` schema).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use serde::Deserialize;

use crate::diag::{ToolError, toml_error_at};

/// The packs that ship with the binary, as (file name, text): every `rules/*.toml`, embedded by
/// `build.rs` so that adding a library is adding a file.
pub const BUILTIN: &[(&str, &str)] = include!(concat!(env!("OUT_DIR"), "/builtin_packs.rs"));

/// One lock library.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pack {
    pub pack: PackMeta,
    #[serde(default, rename = "type")]
    pub types: Vec<TypeDef>,
    #[serde(default, rename = "call")]
    pub calls: Vec<CallDef>,
    #[serde(default, rename = "command")]
    pub commands: Vec<CommandDef>,
    #[serde(default)]
    pub sql: Vec<SqlDef>,
    /// Locks kept as rows of an ordinary table, read from the SQL that claims them.
    #[serde(default, rename = "lease-table")]
    pub lease_table: Option<LeaseTable>,
}

/// The vocabulary of lease rows (`sites::lease_sql`): which columns hold the holder and the
/// expiry (a column name containing one of the words, lower case), which table names are lock
/// tables (for a `DELETE`), and the column names that make a file worth parsing.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct LeaseTable {
    pub holder_columns: Vec<String>,
    pub expiry_columns: Vec<String>,
    pub table_words: Vec<String>,
    /// Columns stamped with the holder's last renewal (`heartbeat`): the lease runs out a
    /// timeout after the stamp.
    #[serde(default)]
    pub stamp_columns: Vec<String>,
    #[serde(default)]
    pub triggers: Vec<String>,
    /// Functions starting a statement a query builder spells as method calls
    /// (`diesel::update`): its chain is read as the SQL it builds (`sites::dsl_sql`).
    #[serde(default)]
    pub statement_builders: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct PackMeta {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub backend: String,
    /// Does the store replicate through consensus? Redis does not; etcd does.
    pub consensus: bool,
    /// Every object the pack's calls act on is a lock by its type (a Kubernetes Lease), so a
    /// release needs no lock-like key to be a lock's release.
    #[serde(default)]
    pub lock_objects: bool,
    pub fencing: PackFencing,
    pub release: ReleaseStyle,
    /// Functions, methods and macros that execute SQL text passed as an argument.
    #[serde(default)]
    pub sql_calls: Vec<String>,
    /// Of those, the ones that run the text and drop its rows (`execute`, mysql's `query_drop`):
    /// a try-lock's answer run through one never reaches the caller.
    #[serde(default)]
    pub sql_discarding_calls: Vec<String>,
    /// Functions that wrap SQL text into a statement value (sea-orm's `Statement::from_string`):
    /// a sql-call given one runs the text inside it.
    #[serde(default)]
    pub sql_statements: Vec<String>,
    /// Methods called on the SQL text itself, given the connection (mysql_async's
    /// `"SELECT GET_LOCK(?, 5)".with((name,)).first(&mut conn)`); `.with(params)` is looked through.
    #[serde(default)]
    pub sql_receiver_calls: Vec<String>,
    /// Functions that start a raw command (`redis::cmd`), for `[[command]]` entries.
    #[serde(default)]
    pub command_builders: Vec<String>,
    /// Functions that start a pipeline (`redis::pipe`), whose `.cmd(NAME)` starts a command too.
    #[serde(default)]
    pub pipeline_builders: Vec<String>,
    /// Types that run each statement on whichever of their connections is free (`sqlx::PgPool`):
    /// a session lock taken through one stays with a connection its holder no longer has.
    #[serde(default)]
    pub pools: Vec<String>,
    /// Calls that lend one connection of a pool (`sqlx::Pool::acquire`,
    /// `deadpool_postgres::Pool::get`), as `Type::method`: the connection goes back to the pool
    /// when it drops, with any session lock it still holds.
    #[serde(default)]
    pub checkouts: Vec<String>,
    /// Other crates' paths to this library (`"deadpool_redis::redis" = "redis"`: deadpool-redis
    /// re-exports the redis crate). Paths through them are read as the library's own.
    #[serde(default)]
    pub crate_aliases: BTreeMap<String, String>,
    /// Functions that build a server-side Lua script from its text (`redis::Script::new`), run
    /// with `.key(..)`/`.arg(..)` and `invoke`: a script that deletes or re-expires a key is a
    /// release or a renewal, owner-checked when it compares the key's value with an argument.
    #[serde(default)]
    pub script_builders: Vec<String>,
    /// Raw commands that run server-side Lua, by name, with what their first argument is: the
    /// script's text (`EVAL = "text"`) or the name of a Redis Function that a Lua library of the
    /// crate registers (`FCALL = "function"`). Then come the number of keys, the keys and the
    /// script's arguments; the script's commands decide the event, as for `script-builders`.
    #[serde(default)]
    pub script_commands: BTreeMap<String, ScriptArg>,
}

/// What a `script-commands` entry's first argument is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ScriptArg {
    Text,
    Function,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PackFencing {
    None,
    Token,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReleaseStyle {
    Explicit,
    Guard,
    Session,
    /// Ends with the transaction that took it (`pg_advisory_xact_lock`): given back by its
    /// `COMMIT` or `ROLLBACK`, never by an unlock of its own.
    Transaction,
    /// Held until it expires or is handed over (leader-election leases): releasing is optional.
    Lease,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct TypeDef {
    pub path: String,
    #[serde(default)]
    pub aliases: Vec<String>,
    /// Associated functions that return `Self` (`new` is always implied).
    #[serde(default)]
    pub constructors: Vec<String>,
    /// Methods that return another type the analysis should follow (`lock_client = "etcd_client::LockClient"`).
    #[serde(default)]
    pub methods: BTreeMap<String, String>,
    /// Macros whose expansion is a value of this type (`sqlx::migrate` for `sqlx::migrate!()`).
    #[serde(default)]
    pub macros: Vec<String>,
    /// The store this type talks to, when the pack covers several (`fenced_lock::RedisBackend`:
    /// `redis`); otherwise the pack's `backend`.
    #[serde(default)]
    pub backend: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CallKind {
    Acquire,
    TryAcquire,
    Renew,
    Release,
    Token,
    LeaseGrant,
    KeepAlive,
    /// An auto-renewing keeper (counts as checked renewal).
    Keeper,
    /// A write through the lock's own client that the lock fences (ZooKeeper's lock node).
    FencedWrite,
}

impl CallKind {
    pub fn is_acquisition(self) -> bool {
        matches!(self, CallKind::Acquire | CallKind::TryAcquire)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum TtlUnit {
    #[default]
    Ms,
    S,
    Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum DeadlineRule {
    /// The caller must set a TTL at this call; none means `missing-deadline`.
    Required,
    /// This call cannot set a TTL at all (`SETNX`): always `missing-deadline`.
    Never,
    /// Bound to a session, transaction or library default.
    #[default]
    Implicit,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Returns {
    #[default]
    Result,
    Option,
    Bool,
    ResultBool,
    ResultOption,
    ResultEither,
    Value,
}

/// `held` in a pack: where a lock stays that the call does not hand back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HeldIn {
    /// With the receiver (a connection or client that keeps the lock as its state).
    Receiver,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TtlField {
    #[serde(rename = "struct")]
    pub struct_path: String,
    pub field: String,
    #[serde(default)]
    pub unit: TtlUnit,
    /// Without this field (or with `None`) the object sets no deadline at all (a Kubernetes
    /// Lease without `lease_duration_seconds`): `missing-deadline`. Otherwise the library's
    /// default holds.
    #[serde(default)]
    pub required: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    pub fn to_vec(&self) -> Vec<String> {
        match self {
            OneOrMany::One(s) => vec![s.clone()],
            OneOrMany::Many(v) => v.clone(),
        }
    }
}

/// Which of a dependency's features build it without the lock (see `CallDef::lockless_backend`).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LocklessBackend {
    /// The package, as a manifest names it (`sqlx`).
    pub dependency: String,
    /// Features whose backend takes no lock (`sqlite`).
    pub features: Vec<String>,
    /// Features whose backend takes one (`postgres`, `mysql`).
    pub locking: Vec<String>,
}

/// A switch on the receiver that turns the lock off (`set_locking(false)`).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct OffBy {
    pub method: String,
    pub value: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct CallDef {
    pub kind: CallKind,
    #[serde(default)]
    pub receiver: Option<OneOrMany>,
    #[serde(default)]
    pub in_scope: Vec<String>,
    #[serde(default)]
    pub function: Option<String>,
    #[serde(default)]
    pub method: Option<String>,
    #[serde(default)]
    pub key_arg: Option<usize>,
    #[serde(default)]
    pub ttl_arg: Option<usize>,
    #[serde(default)]
    pub ttl_unit: TtlUnit,
    #[serde(default)]
    pub ttl_field: Option<TtlField>,
    #[serde(default)]
    pub lease_arg: Option<usize>,
    /// With `lease-arg`: the lease, in seconds, the server attaches when the call passes none and
    /// that nobody renews (etcd's lock service: 60). Such a lock expires while held.
    #[serde(default)]
    pub server_lease_s: Option<u64>,
    /// The argument that is a lease id itself (etcd's `campaign(name, value, lease_id)`), followed
    /// back to the lease-grant call whose TTL is the deadline; a literal `0` is no lease.
    #[serde(default)]
    pub lease_id_arg: Option<usize>,
    /// The argument holding an options builder (`SetOptions::default().conditional_set(..)`), read by
    /// `when` and `ttl-flags`.
    #[serde(default)]
    pub options_arg: Option<usize>,
    /// The call is this kind only if the options argument names all of these (`NX`).
    #[serde(default)]
    pub when: Vec<String>,
    /// The call is this kind only if the options argument (followed through the locals it is
    /// built from) holds a call matching each of these patterns: a path matched by its last
    /// segments, then arguments compared as written, `_` matching any
    /// (`Compare::create_revision(_, CompareOp::Equal, 0)`).
    #[serde(default)]
    pub when_calls: Vec<String>,
    /// With `when-calls`: the call is no lock when the options also hold a call matching one of
    /// these and carry no lease. A create-if-absent that reads the value already there
    /// (`or_else(TxnOp::get(KEY, _))`) and never expires initialises a shared value once (a
    /// cluster id); a lock expires, or is deleted by its holder.
    #[serde(default)]
    pub init_calls: Vec<String>,
    /// The call is this kind only if its `key-arg` names a lock: the key's text (literals,
    /// `format!`, locals; what is not known, as written) has a word such as `lock`, `leader`,
    /// `lease` or `mutex` (`"lock.{job}"`, `lock_key`; not `block`). For a store's plain
    /// create-if-absent (NATS KV's `create`), which is as often a lock as a write-once value.
    /// The caller's key is judged at each call of the function, unless the function is named for
    /// a lock (`fn try_acquire(&self, key: &str)`): then the function is the lock.
    #[serde(default)]
    pub when_lock_key: bool,
    /// For a program's set-if-absent of its caller's key and value (see
    /// `WrapperCandidate::key_gate`): the value's argument. A call whose key names no lock is
    /// one still when this value is an owner's token, or its function is named for a lock.
    #[serde(skip)]
    pub value_arg: Option<usize>,
    /// The write is a lock only where something says so: a lock word in the builder chain's
    /// arguments (attribute names, the condition, the table: `"#lease = :prev"`,
    /// `attribute_not_exists(lock_name)`, `.item("owner", ..)`), or in the name of the function
    /// or type that writes it (`fn try_acquire_lock`). A create-if-absent that stores a value
    /// once (`put_object_impl` writing `pk`, `value`) says nothing of a lock.
    #[serde(default)]
    pub when_says_lock: bool,
    /// The lock's key is the argument of this method on the builder chain the call starts
    /// (`client.put_object().bucket(b).key(k)…send()`: `key`), where no `key-arg` names it.
    #[serde(default)]
    pub key_method: Option<String>,
    /// The call is this kind only if method calls match each of these: `name` (the method is
    /// called) or `name(TEXT)` (its first argument's text, read like a URL, contains TEXT;
    /// `condition_expression(attribute_not_exists)`). Looked for in the options argument when
    /// there is one (`Some(SetKeyRequest::builder().acquire(&s))`), else on the builder chain the
    /// call starts (`client.put_item().table_name(t).condition_expression(c).send()`).
    #[serde(default)]
    pub when_methods: Vec<String>,
    /// The builder chain the call starts ends with one of these methods (`send`), whose reply is
    /// the call's; without it a chain read by `when-methods` runs to its first `.await` or `?`.
    #[serde(default)]
    pub chain_until: Vec<String>,
    /// The call takes no lock once its receiver was told so earlier in the function: `{ method =
    /// "set_locking", value = false }` (sqlx's `m.set_locking(false); m.run(pool)`).
    #[serde(default)]
    pub off_by: Option<OffBy>,
    /// A wrapper's argument count (the receiver aside): a call with another count is another
    /// function of the same name. Not a pack key.
    #[serde(skip)]
    pub arity: Option<usize>,
    /// With `not-on-types`: the argument whose type is looked at.
    #[serde(default)]
    pub type_arg: Option<usize>,
    /// The call is no lock when `type-arg`'s type, as far as it is known, names one of these
    /// (its path or a type argument, by last segment): sqlx's `Migrator::run` on SQLite takes none.
    #[serde(default)]
    pub not_on_types: Vec<String>,
    /// The call is no lock in a crate whose manifest enables, on this dependency, some of
    /// `features` and none of `locking` (sqlx built for SQLite alone: its migrator locks nothing).
    /// A dependency whose features the manifests do not say keeps the call.
    #[serde(default)]
    pub lockless_backend: Option<LocklessBackend>,
    /// The argument holding the object written (a `json!` literal or a struct, followed through
    /// locals), read by `when-fields` and `fields-unknown`.
    #[serde(default)]
    pub fields_arg: Option<usize>,
    /// The call is this kind only if the object sets each of these fields (`holderIdentity`) to
    /// a value, or clears it (`holderIdentity=`: `""`, `null`, `None`). Names compare without
    /// case, `_` or `-`.
    #[serde(default)]
    pub when_fields: Vec<String>,
    /// The call is this kind only if the object could not be read (the fallback after the
    /// `when-fields` variants of the same method).
    #[serde(default)]
    pub fields_unknown: bool,
    /// The argument that is a URL (an HTTP request: `client.put(url)`), read as a template:
    /// literals, `format!`, `+` and locals, with what is not known written `{expr}`.
    #[serde(default)]
    pub url_arg: Option<usize>,
    /// The call is this kind only if the URL's text contains all of these (`/v1/kv/`, `acquire=`).
    #[serde(default)]
    pub url_contains: Vec<String>,
    /// The lock's key is the URL's text after this, up to its query (`/v1/kv/`).
    #[serde(default)]
    pub url_key_after: Option<String>,
    /// Expiry variants in the options argument (`SetExpiry::PX(ms)`) and their units.
    #[serde(default)]
    pub ttl_flags: BTreeMap<String, FlagUnit>,
    /// The call runs server-side Lua (fred's `eval(script, keys, args)`, `fcall(name, keys, args)`):
    /// its `script-arg` is the text or a Redis Function's name, `key-arg` the keys (one, or a
    /// `vec!`/array/tuple of them) and `args-arg` the script's arguments. The script decides
    /// the event, as for `script-builders`; `kind` is then only the pack's guess.
    #[serde(default)]
    pub script: Option<ScriptArg>,
    #[serde(default)]
    pub script_arg: usize,
    #[serde(default)]
    pub args_arg: Option<usize>,
    /// The argument `ttl-flags` are read in when the expiry is not in the `options-arg`
    /// (fred: `set(k, v, Some(Expiration::PX(ms)), Some(SetOptions::NX), false)`); `None` there
    /// is no expiry.
    #[serde(default)]
    pub ttl_options_arg: Option<usize>,
    #[serde(default)]
    pub deadline: DeadlineRule,
    #[serde(default)]
    pub returns: Returns,
    #[serde(default)]
    pub returns_type: Option<String>,
    /// The value (after `returns`' layers) is an enum that says whether the lock was taken, and
    /// this is its success variant (kube-leader-election's `LeaseLockResult::Acquired`): a value
    /// never matched against it is a failure ignored.
    #[serde(default)]
    pub success_variant: Option<String>,
    /// Does the call prove the caller still owns the lock (a compare script, an owner field)?
    /// `false` for raw EXPIRE/DEL, which act on whoever holds the key.
    #[serde(default = "yes")]
    pub owner_check: bool,
    /// The acquisition renews itself while held (rslock's `using`).
    #[serde(default)]
    pub auto_renew: bool,
    /// The call takes the lock and releases it before it returns (sqlx's `Migrator::run`):
    /// nothing is held after it, and a function doing nothing else is a wrapper of the same kind.
    #[serde(default)]
    pub scoped: bool,
    /// etcd keep-alive: returns a response stream whose `ttl()` must be checked.
    #[serde(default)]
    pub stream_ttl: bool,
    /// The lock lives under its key with a suffix the store adds (etcd's lock service keeps
    /// `name/<lease>`, its election `name/<lease>` too): another call on the key itself (a plain
    /// `delete(name)` of a value stored there) does not touch the lock.
    #[serde(default)]
    pub key_is_prefix: bool,
    /// The call only replies about a lock kept in the store (a conditional write's output, a
    /// `(bool, index)`), returning no lock value: the lock is known by its key, as a raw
    /// `SET NX`'s is, and a bound reply is not a handle to release.
    #[serde(default)]
    pub reply_only: bool,
    /// How this call's lock is released, where it differs from the pack's `release`.
    #[serde(default)]
    pub release: Option<ReleaseStyle>,
    /// The lock value the call returns gives the lock back when dropped (sqlx's
    /// `PgAdvisoryLockGuard`): discarded at once, it protects nothing (`dropped-guard`).
    /// Implied by `release = "guard"` with a `returns-type`.
    #[serde(default)]
    pub drop_releases: bool,
    /// For a renewal that writes the lock's value under a condition on the version read
    /// (NATS KV's `update(key, value, revision)`, S3's `if_match(etag)`): written where the code
    /// found the lease run out (`if claim.expires_at < now { … }`), it takes the lock over, an
    /// acquisition.
    #[serde(default)]
    pub takeover_when_expired: bool,
    /// Where the lock stays when the call hands none back (sqlx's `Migrate::lock(&mut self)
    /// -> Result<()>` leaves it with the connection): `"receiver"` — the region runs to the
    /// release called on the same receiver, and the reply is no lock value.
    #[serde(default)]
    pub held: Option<HeldIn>,
    /// Whether this call's store has consensus, where it differs from the pack's `consensus`.
    #[serde(default)]
    pub consensus: Option<bool>,
    /// What the library takes this lock for, when it is the library's own (sqlx's migrator
    /// serialises migrations): the site's purpose unless the code or the config says otherwise.
    #[serde(default)]
    pub purpose: Option<crate::directives::DeclaredPurpose>,
    /// With `purpose = "correctness"`: what keeps a stale holder out, as `fenced-by = "…"` would.
    #[serde(default)]
    pub fenced_by: Option<String>,
    /// For a wrapper of the analysed crate (inferred, or declared with `[[lock]]`): its path,
    /// reported as `via`.
    #[serde(skip)]
    pub via: Option<String>,
    /// For an inferred wrapper: which function it is (`WrapperCandidate::origin`).
    #[serde(skip)]
    pub origin: Option<std::sync::Arc<str>>,
    /// For an inferred wrapper: what its call sites inherit from the primitive inside it.
    #[serde(skip)]
    pub inherit: Option<Inherited>,
}

/// What a wrapper's call sites inherit from the primitive inside it.
#[derive(Debug, Clone, PartialEq)]
pub struct Inherited {
    pub ttl_ms: Option<f64>,
    pub fencing: crate::sites::Fencing,
    pub sql: bool,
    pub backend: Option<String>,
    /// Where the lock stays when the wrapper hands none back (the key argument, the receiver).
    pub held: Option<crate::sites::Held>,
    /// The lock command is in a pipeline the caller runs: its reply is judged there.
    pub pipeline: Option<crate::sites::PipeVia>,
    /// The primitive hands out a lock value; false for a reply about a key.
    pub handle: bool,
    /// The value handed back carries the connection a pool lent, with the session lock on it
    /// (`Guard { conn, key }` after `pool.acquire()`): unless its `Drop` unlocks, dropping it
    /// gives the connection back to the pool still holding the lock.
    pub lent: bool,
    /// The argument holding the connection a session lock stays on (`WrapperCandidate::session_arg`).
    pub session_arg: Option<usize>,
}

impl CallDef {
    /// Does the entry say which *use* of an operation locks (by its arguments, the calls around
    /// it, the object it writes, the URL it sends to, the script it runs), rather than that
    /// every call of it does?
    pub fn is_conditional(&self) -> bool {
        !self.when.is_empty()
            || !self.when_calls.is_empty()
            || !self.when_methods.is_empty()
            || self.when_lock_key
            || self.when_says_lock
            || !self.when_fields.is_empty()
            || self.fields_arg.is_some()
            || !self.url_contains.is_empty()
            || self.script.is_some()
    }

    /// A call to a function of the analysed crate that wraps a lock.
    pub fn wrapper(w: &crate::sites::WrapperCandidate) -> CallDef {
        let (receiver, function, method) = match &w.method {
            Some((ty, m)) => (Some(OneOrMany::One(ty.clone())), None, Some(m.clone())),
            None => (None, Some(w.canonical.clone()), None),
        };
        CallDef {
            kind: w.kind,
            receiver,
            in_scope: Vec::new(),
            function,
            method,
            key_arg: w.key_gate.map(|(k, _)| k).or(w.key_arg),
            ttl_arg: w.ttl_arg.map(|(i, _)| i),
            ttl_unit: w.ttl_arg.map_or(TtlUnit::Ms, |(_, u)| u),
            // `self.ttl` in the primitive: the receiver's type holds it.
            ttl_field: w.ttl_field.as_ref().zip(w.method.as_ref()).map(
                |((field, unit), (owner, _))| TtlField {
                    struct_path: owner.clone(),
                    field: field.clone(),
                    unit: *unit,
                    required: false,
                },
            ),
            lease_arg: None,
            server_lease_s: None,
            lease_id_arg: None,
            // `match call { Call::Lock => … }`: a call site is one when its argument names
            // the variant, as an options argument names `NX`.
            options_arg: w.when_arg.as_ref().map(|(i, _)| *i),
            when: w.when_arg.iter().map(|(_, v)| v.clone()).collect(),
            when_calls: Vec::new(),
            init_calls: Vec::new(),
            when_lock_key: w.key_gate.is_some(),
            value_arg: w.key_gate.map(|(_, v)| v),
            when_says_lock: false,
            key_method: None,
            key_is_prefix: false,
            when_methods: Vec::new(),
            chain_until: Vec::new(),
            off_by: None,
            arity: Some(w.arity),
            type_arg: None,
            not_on_types: Vec::new(),
            lockless_backend: None,
            fields_arg: None,
            when_fields: Vec::new(),
            fields_unknown: false,
            url_arg: None,
            url_contains: Vec::new(),
            url_key_after: None,
            ttl_flags: BTreeMap::new(),
            ttl_options_arg: None,
            script: None,
            script_arg: 0,
            args_arg: None,
            deadline: DeadlineRule::Implicit,
            returns: w.returns,
            returns_type: w.returns_type.clone(),
            success_variant: None,
            owner_check: w.owner_checked,
            auto_renew: w.auto_renew,
            scoped: false,
            stream_ttl: false,
            reply_only: false,
            held: None,
            // A scoped wrapper (`with_lock(key, || …)`) releases before it returns.
            release: w.scoped.then_some(ReleaseStyle::Guard),
            drop_releases: false,
            takeover_when_expired: false,
            // The primitive's store, not the pack's default: a wrapper around fenced-lock's Redis
            // backend has no consensus.
            consensus: Some(w.consensus),
            purpose: w.library_purpose.as_ref().map(|(p, _)| *p),
            fenced_by: w.library_purpose.as_ref().and_then(|(_, f)| f.clone()),
            via: Some(w.via.clone()),
            origin: w.origin.clone(),
            inherit: Some(Inherited {
                ttl_ms: w.ttl_ms,
                fencing: w.fencing,
                sql: w.sql,
                backend: w.backend.clone(),
                held: w.held.clone(),
                pipeline: w.pipeline.clone(),
                handle: w.handle,
                lent: w.lent,
                session_arg: w.session_arg,
            }),
        }
    }
}

impl CallDef {
    /// A primitive's variant as a helper that forwards its `fields-arg`, its `when-calls`
    /// options or its `when-lock-key` key (see `WrapperCandidate::forwards`): the helper's name
    /// and receiver, the primitive's conditions.
    pub fn forwarding(
        primitive: &CallDef,
        w: &crate::sites::WrapperCandidate,
        arg: usize,
    ) -> CallDef {
        let own = CallDef::wrapper(w);
        // The argument forwarded is the one the primitive reads its conditions from: its object
        // (`fields-arg`), or its options (`when-calls`, and the lease they carry).
        let fields = primitive.fields_arg.is_some();
        let key = !fields && primitive.when_lock_key;
        let options = !fields && !key && primitive.options_arg.is_some();
        let lease_in_options = options && primitive.lease_arg == primitive.options_arg;
        CallDef {
            arity: own.arity,
            receiver: own.receiver,
            in_scope: Vec::new(),
            function: own.function,
            method: own.method,
            fields_arg: fields.then_some(arg),
            // The primitive's other arguments are the helper's own business; so is the chain
            // it builds (`when-methods`), now inside the helper.
            key_arg: key.then_some(arg),
            key_method: None,
            when_says_lock: false,
            when_methods: if key {
                Vec::new()
            } else {
                primitive.when_methods.clone()
            },
            chain_until: if key {
                Vec::new()
            } else {
                primitive.chain_until.clone()
            },
            ttl_arg: None,
            lease_arg: lease_in_options.then_some(arg),
            lease_id_arg: None,
            options_arg: options.then_some(arg),
            url_arg: None,
            ttl_options_arg: None,
            returns: w.returns,
            via: own.via,
            origin: own.origin,
            ..primitive.clone()
        }
    }
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct CommandDef {
    pub name: String,
    #[serde(default)]
    pub when: Vec<String>,
    pub kind: CallKind,
    #[serde(default)]
    pub key_arg: Option<usize>,
    #[serde(default)]
    pub ttl_flags: BTreeMap<String, FlagUnit>,
    #[serde(default)]
    pub deadline: DeadlineRule,
    /// As for `[[call]]`: `false` when the command acts on the key whoever holds it.
    #[serde(default = "yes")]
    pub owner_check: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FlagUnit {
    Ms,
    S,
    /// An absolute expiry time: a deadline exists, its length is unknown.
    At,
}

impl FlagUnit {
    /// The unit of the value after a relative flag (`EX` seconds, `PX` milliseconds).
    pub fn ttl_unit(self) -> TtlUnit {
        if self == FlagUnit::S {
            TtlUnit::S
        } else {
            TtlUnit::Ms
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SqlScope {
    Session,
    Transaction,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct SqlDef {
    pub function: String,
    pub kind: CallKind,
    pub scope: SqlScope,
    /// For a try: the 0-based argument that is how long it waits, where a negative literal means
    /// "forever" (MySQL's `GET_LOCK(name, -1)`): then it cannot time out and is a plain acquire.
    #[serde(default)]
    pub wait_arg: Option<usize>,
}

impl Pack {
    /// Parses and validates one pack; `origin` names it in errors.
    pub fn parse(origin: &Path, text: &str) -> Result<Pack, ToolError> {
        let pack: Pack = toml::from_str(text).map_err(|e| {
            let (line, column, message) = toml_error_at(text, &e);
            ToolError::Pack {
                path: origin.to_path_buf(),
                line,
                column,
                message,
            }
        })?;
        pack.validate(origin, text)?;
        Ok(pack)
    }

    fn validate(&self, origin: &Path, text: &str) -> Result<(), ToolError> {
        // Semantic checks run after deserialisation, where spans are gone: point at the entry's header.
        let bad_at = |header: &str, n: usize, msg: String| {
            let line = text
                .match_indices(header)
                .nth(n)
                .map_or(1, |(o, _)| crate::diag::line_col(text, o).0);
            ToolError::Pack {
                path: origin.to_path_buf(),
                line,
                column: 1,
                message: msg,
            }
        };
        if self.pack.name.trim().is_empty() {
            return Err(bad_at("[pack]", 0, "[pack] name must not be empty".into()));
        }
        for (i, c) in self.calls.iter().enumerate() {
            let bad = |msg: String| bad_at("[[call]]", i, msg);
            let at = format!("[[call]] #{} ", i + 1);
            match (&c.function, &c.method) {
                (Some(_), Some(_)) => {
                    return Err(bad(format!(
                        "{at}sets both `function` and `method`; use one"
                    )));
                }
                (None, None) => return Err(bad(format!("{at}needs `function` or `method`"))),
                (None, Some(_)) if c.receiver.is_none() && c.in_scope.is_empty() => {
                    return Err(bad(format!(
                        "{at}is a method call and needs `receiver` (types) or `in-scope` (traits)"
                    )));
                }
                _ => {}
            }
            if c.deadline == DeadlineRule::Required
                && c.ttl_arg.is_none()
                && c.ttl_field.is_none()
                && c.lease_arg.is_none()
                && c.lease_id_arg.is_none()
                && (c.options_arg.or(c.ttl_options_arg).is_none() || c.ttl_flags.is_empty())
            {
                return Err(bad(format!(
                    "{at}has `deadline = \"required\"` but no `ttl-arg`, `ttl-field`, `lease-arg` or `options-arg`/`ttl-options-arg` with `ttl-flags` to read it from"
                )));
            }
            if c.fenced_by.is_some()
                && c.purpose != Some(crate::directives::DeclaredPurpose::Correctness)
            {
                return Err(bad(format!(
                    "{at}has `fenced-by` but not `purpose = \"correctness\"`"
                )));
            }
            if !c.when.is_empty() && c.options_arg.is_none() {
                return Err(bad(format!(
                    "{at}has `when` but no `options-arg` to look in"
                )));
            }
            if c.not_on_types.is_empty() != c.type_arg.is_none() {
                return Err(bad(format!(
                    "{at}has one of `type-arg` and `not-on-types` without the other"
                )));
            }
            if c.lockless_backend
                .as_ref()
                .is_some_and(|b| b.dependency.is_empty() || b.features.is_empty())
            {
                return Err(bad(format!(
                    "{at}has a `lockless-backend` without a dependency or features"
                )));
            }
            if (!c.when_fields.is_empty() || c.fields_unknown) && c.fields_arg.is_none() {
                return Err(bad(format!(
                    "{at}has `when-fields` or `fields-unknown` but no `fields-arg` to read"
                )));
            }
            if !c.when_fields.is_empty() && c.fields_unknown {
                return Err(bad(format!(
                    "{at}has both `when-fields` and `fields-unknown`: one call cannot be both"
                )));
            }
            if (!c.url_contains.is_empty() || c.url_key_after.is_some()) && c.url_arg.is_none() {
                return Err(bad(format!(
                    "{at}has `url-contains` or `url-key-after` but no `url-arg` to read"
                )));
            }
            if !c.when_calls.is_empty() && c.options_arg.is_none() {
                return Err(bad(format!(
                    "{at}has `when-calls` but no `options-arg` to look in"
                )));
            }
            if c.takeover_when_expired && c.kind != CallKind::Renew {
                return Err(bad(format!(
                    "{at}has `takeover-when-expired` but is no renewal: only a renewal's write can take an expired lock over"
                )));
            }
            if c.reply_only && c.returns_type.is_some() {
                return Err(bad(format!(
                    "{at}has both `reply-only` and `returns-type`: a call that returns a lock value is not reply-only"
                )));
            }
            for p in &c.when_methods {
                if method_pattern(p).is_none() {
                    return Err(bad(format!(
                        "{at}`when-methods` entry `{p}` is not a method name or `name(TEXT)` like `condition_expression(attribute_not_exists)`"
                    )));
                }
            }
            if let Some(m) = c
                .chain_until
                .iter()
                .find(|m| method_pattern(m) != Some((m.as_str(), None)))
            {
                return Err(bad(format!(
                    "{at}`chain-until` entry `{m}` is not a method name"
                )));
            }
            if c.when_lock_key && c.key_arg.is_none() && c.key_method.is_none() {
                return Err(bad(format!(
                    "{at}has `when-lock-key` but no `key-arg` or `key-method` to read"
                )));
            }
            if !c.init_calls.is_empty() && c.when_calls.is_empty() {
                return Err(bad(format!("{at}has `init-calls` but no `when-calls`")));
            }
            for (field, p) in c
                .when_calls
                .iter()
                .map(|p| ("when-calls", p))
                .chain(c.init_calls.iter().map(|p| ("init-calls", p)))
            {
                if !matches!(
                    syn::parse_str::<syn::Expr>(p),
                    Ok(syn::Expr::Call(_) | syn::Expr::Path(_))
                ) {
                    return Err(bad(format!(
                        "{at}`{field}` entry `{p}` is not a call pattern like `Type::f(_, 0)`"
                    )));
                }
            }
        }
        for (i, c) in self.commands.iter().enumerate() {
            if c.name.trim().is_empty() {
                return Err(bad_at(
                    "[[command]]",
                    i,
                    format!("[[command]] #{} has an empty name", i + 1),
                ));
            }
        }
        for (i, s) in self.sql.iter().enumerate() {
            if !s
                .function
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_')
                || s.function.is_empty()
            {
                return Err(bad_at(
                    "[[sql]]",
                    i,
                    format!(
                        "[[sql]] #{}: `{}` is not a SQL function name",
                        i + 1,
                        s.function
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// The embedded packs, parsed. A broken embedded pack is a build defect, caught by the tests.
pub fn builtin() -> Result<Vec<Pack>, ToolError> {
    BUILTIN
        .iter()
        .map(|(name, text)| Pack::parse(Path::new(name), text))
        .collect()
}

/// Where a matched call's description lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CallRef {
    pub pack: usize,
    pub call: usize,
}

/// All packs in force for a file, indexed for matching.
#[derive(Debug, Default, Clone)]
pub struct PackSet {
    pub packs: Vec<Pack>,
    /// Method name -> calls declared with that method.
    pub methods: HashMap<String, Vec<CallRef>>,
    /// Canonical function path -> calls declared with that function.
    pub functions: HashMap<String, Vec<CallRef>>,
    /// Canonical type path (and aliases) -> (pack, canonical path).
    pub types: HashMap<String, (usize, String)>,
    /// The crates the packs' own types and receivers live in (`etcd_client`), not wrappers'.
    pub type_crates: HashSet<String>,
    /// Canonical type path -> associated functions returning the type.
    pub constructors: HashMap<String, Vec<String>>,
    /// (canonical type path, method) -> the type the method returns.
    pub method_returns: HashMap<(String, String), String>,
    /// Macro path -> the canonical type its expansion is.
    pub macro_types: HashMap<String, String>,
    /// Command builder function path -> packs with `[[command]]` entries.
    pub command_builders: HashMap<String, Vec<usize>>,
    /// Pipeline builder function path -> packs with `[[command]]` entries.
    pub pipeline_builders: HashMap<String, Vec<usize>>,
    /// Lower-case SQL function name -> (pack, index into its `sql`).
    pub sql_functions: HashMap<String, (usize, usize)>,
    /// The pack describing lease rows, if any.
    pub lease_table: Option<usize>,
    /// Query builders' statement functions (`diesel::update`) -> the lease-row pack.
    pub statement_builders: HashMap<String, usize>,
    /// Names of calls that run SQL text.
    pub sql_calls: HashMap<String, usize>,
    /// Last segments of the functions that wrap SQL text into a statement.
    pub sql_statements: HashSet<String>,
    /// Methods called on SQL text with the connection as argument.
    pub sql_receiver_calls: HashSet<String>,
    /// Path prefixes that name a library through another crate -> the library's own prefix.
    pub crate_aliases: Vec<(String, String)>,
    /// Script builder function path -> the pack.
    pub script_builders: HashMap<String, usize>,
    /// Inside a library the packs describe: its own spellings of the packs' paths (`crate::…`)
    /// -> the public path, for traits brought into scope by those spellings.
    pub own_spellings: Vec<(String, String)>,
}

/// What [`PackSet::inside_library`] needs to know of the crate: its items, in its own terms.
pub trait CrateItems {
    /// A `crate::` path through the crate's re-exports.
    fn canonical(&self, path: &str) -> String;
    fn is_struct(&self, path: &str) -> bool;
    fn is_fn(&self, path: &str) -> bool;
}

impl PackSet {
    pub fn new(packs: Vec<Pack>) -> Result<PackSet, ToolError> {
        let mut set = PackSet::default();
        let mut seen = HashMap::new();
        for (pi, pack) in packs.iter().enumerate() {
            if seen.insert(pack.pack.name.clone(), pi).is_some() {
                return Err(ToolError::Usage(format!(
                    "two rule packs are named `{}`; pack names must be unique",
                    pack.pack.name
                )));
            }
            for b in &pack.pack.script_builders {
                set.script_builders.insert(b.clone(), pi);
            }
            set.crate_aliases.extend(
                pack.pack
                    .crate_aliases
                    .iter()
                    .map(|(from, to)| (from.clone(), to.clone())),
            );
            for t in &pack.types {
                let mut ctors = t.constructors.clone();
                if !ctors.iter().any(|c| c == "new") {
                    ctors.push("new".into());
                }
                for p in std::iter::once(&t.path).chain(&t.aliases) {
                    set.types.insert(p.clone(), (pi, t.path.clone()));
                    set.constructors.insert(p.clone(), ctors.clone());
                }
                for m in &t.macros {
                    set.macro_types.insert(m.clone(), t.path.clone());
                }
                for (m, ret) in &t.methods {
                    set.method_returns
                        .insert((t.path.clone(), m.clone()), ret.clone());
                }
            }
            let receivers = pack
                .calls
                .iter()
                .filter(|c| c.via.is_none())
                .filter_map(|c| c.receiver.as_ref())
                .flat_map(|r| r.to_vec());
            for p in pack.types.iter().map(|t| t.path.clone()).chain(receivers) {
                let root = crate::model::imports::first_segment(&p);
                if !matches!(root, "crate" | "self" | "super" | "") {
                    set.type_crates.insert(root.to_string());
                }
            }
            for (ci, c) in pack.calls.iter().enumerate() {
                let r = CallRef { pack: pi, call: ci };
                if let Some(f) = &c.function {
                    set.functions.entry(f.clone()).or_default().push(r);
                }
                if let Some(m) = &c.method {
                    set.methods.entry(m.clone()).or_default().push(r);
                }
            }
            if !pack.commands.is_empty() {
                let builders = if pack.pack.command_builders.is_empty() {
                    vec![format!("{}::cmd", pack.pack.name)]
                } else {
                    pack.pack.command_builders.clone()
                };
                for b in builders {
                    set.command_builders.entry(b).or_default().push(pi);
                }
                for b in &pack.pack.pipeline_builders {
                    set.pipeline_builders.entry(b.clone()).or_default().push(pi);
                }
            }
            if let Some(l) = &pack.lease_table {
                set.lease_table.get_or_insert(pi);
                for b in &l.statement_builders {
                    set.statement_builders.entry(b.clone()).or_insert(pi);
                }
            }
            for (si, s) in pack.sql.iter().enumerate() {
                set.sql_functions
                    .insert(s.function.to_ascii_lowercase(), (pi, si));
            }
            set.sql_receiver_calls
                .extend(pack.pack.sql_receiver_calls.iter().cloned());
            for c in &pack.pack.sql_statements {
                set.sql_statements
                    .insert(c.rsplit("::").next().unwrap_or(c).to_string());
            }
            for c in &pack.pack.sql_calls {
                set.sql_calls.insert(c.clone(), pi);
            }
        }
        set.packs = packs;
        Ok(set)
    }

    pub fn call(&self, r: CallRef) -> &CallDef {
        &self.packs[r.pack].calls[r.call]
    }

    /// The pack type a canonical path names, with its canonical spelling.
    pub fn type_of_path(&self, path: &str) -> Option<&(usize, String)> {
        self.types.get(path)
    }

    /// A path as the library's own: `deadpool_redis::redis::cmd` is `redis::cmd`.
    pub fn unalias(&self, path: String) -> String {
        for (from, to) in &self.crate_aliases {
            if let Some(rest) = path.strip_prefix(from.as_str())
                && (rest.is_empty() || rest.starts_with("::"))
            {
                return format!("{to}{rest}");
            }
        }
        path
    }

    /// The spellings of a library path through the crates that re-export it, for matching imports
    /// (`redis::AsyncCommands` is also `deadpool_redis::redis::AsyncCommands`).
    pub fn aliases_of<'a>(&'a self, path: &'a str) -> impl Iterator<Item = String> + 'a {
        self.crate_aliases
            .iter()
            .filter_map(move |(from, to)| {
                let rest = path.strip_prefix(to.as_str())?;
                (rest.is_empty() || rest.starts_with("::")).then(|| format!("{from}{rest}"))
            })
            .chain(
                self.own_spellings
                    .iter()
                    .filter(move |(_, public)| public == path)
                    .map(|(own, _)| own.clone()),
            )
    }

    /// The crates these packs describe, by the first segment of the paths they name
    /// (`zookeeper_client` for `zookeeper_client::Client`).
    pub fn library_roots(&self) -> HashSet<&str> {
        self.types
            .keys()
            .chain(self.functions.keys())
            .map(|p| crate::model::imports::first_segment(p))
            .filter(|r| !matches!(*r, "crate" | "self" | "super" | ""))
            .collect()
    }

    /// The packs as seen from inside the library they describe: a crate named `own` writes its
    /// items as `crate::client::Client` where the pack names the public `own::Client`.
    /// `crate_items` gives a `crate::` path's canonical spelling (through the crate's
    /// re-exports); the path as written and that spelling both name what the public path names.
    ///
    /// A pack entry that says a function of the crate *is* a lock operation (sqlx's
    /// `Migrator::run`) is dropped here: its body is in view, and the primitive inside it is the
    /// site (its callers in the crate are not acquisitions of their own). An entry that says which
    /// *use* of a general operation locks (`create` with `EphemeralSequential`) stays. `None` when
    /// no pack names this crate.
    pub fn inside_library(&self, own: &str, crate_items: &dyn CrateItems) -> Option<PackSet> {
        let rooted = |p: &str| crate::model::imports::first_segment(p) == own;
        let spellings = |p: &str| {
            let written = format!("crate{}", &p[own.len()..]);
            let canonical = crate_items.canonical(&written);
            let mut out = vec![written];
            if canonical != out[0] && canonical.starts_with("crate") {
                out.push(canonical);
            }
            out
        };
        let defined = |def: &CallDef| -> bool {
            if def.is_conditional() {
                return false;
            }
            match (&def.receiver, &def.function) {
                // Each receiver a struct of the crate, by any of the type's names rooted here
                // (`sqlx::migrate::Migrator` is also `sqlx_core::migrate::Migrator`).
                (Some(r), _) => {
                    let rs = r.to_vec();
                    !rs.is_empty()
                        && rs.iter().all(|r| {
                            let public = self.types.get(r).map_or(r.as_str(), |t| t.1.as_str());
                            self.types
                                .iter()
                                .filter(|(k, t)| t.1 == public && rooted(k))
                                .any(|(k, _)| spellings(k).iter().any(|s| crate_items.is_struct(s)))
                        })
                }
                (None, Some(f)) => rooted(f) && spellings(f).iter().any(|s| crate_items.is_fn(s)),
                (None, None) => false,
            }
        };
        let mut set = self.clone();
        let mut changed = false;
        for (p, t) in self.types.iter().filter(|(p, _)| rooted(p)) {
            for inner in spellings(p) {
                set.types.entry(inner.clone()).or_insert_with(|| t.clone());
                if let Some(c) = self.constructors.get(p) {
                    set.constructors.entry(inner).or_insert_with(|| c.clone());
                }
                changed = true;
            }
        }
        for (p, calls) in self.functions.iter().filter(|(p, _)| rooted(p)) {
            let kept: Vec<CallRef> = calls
                .iter()
                .copied()
                .filter(|r| !defined(self.call(*r)))
                .collect();
            for inner in spellings(p) {
                set.functions.entry(inner).or_default().extend(&kept);
            }
            set.functions.insert(p.clone(), kept);
            changed = true;
        }
        for calls in set.methods.values_mut() {
            let before = calls.len();
            calls.retain(|r| !defined(self.call(*r)));
            changed |= calls.len() != before;
        }
        for (p, (_, public)) in self.types.iter().filter(|(p, _)| rooted(p)) {
            for written in spellings(p) {
                set.own_spellings.push((written, public.clone()));
            }
        }
        set.own_spellings.sort();
        set.own_spellings.dedup();
        changed.then_some(set)
    }

    /// The backend a pack type declares for itself.
    pub fn type_backend(&self, path: &str) -> Option<&str> {
        let (pi, canonical) = self.types.get(path)?;
        self.packs[*pi]
            .types
            .iter()
            .find(|t| &t.path == canonical)?
            .backend
            .as_deref()
    }

    /// Is this type one of a described library's (`etcd_client::ResignOptions`)? The library
    /// uses what it is handed (options, tokens, keys); it does not hold a lock for anyone.
    pub fn is_library_type(&self, path: &str) -> bool {
        self.type_crates
            .contains(crate::model::imports::first_segment(path))
    }

    /// Is this a path the packs know (a type or a function)? Used to settle glob imports.
    pub fn knows(&self, path: &str) -> bool {
        self.types.contains_key(path)
            || self.functions.contains_key(path)
            || self.command_builders.contains_key(path)
    }

    /// Is `name` the crate of a library a pack describes (`rslock`, `redis`)? Such a crate's
    /// own examples and tests name it as its users do, and are matched as its users are.
    pub fn names_library(&self, name: &str) -> bool {
        let prefix = format!("{name}::");
        self.types.keys().any(|p| p.starts_with(&prefix))
            || self.functions.keys().any(|p| p.starts_with(&prefix))
            || self.command_builders.keys().any(|p| p.starts_with(&prefix))
    }
}

/// A `when-methods` entry: the method's name and the text its first argument must contain.
pub fn method_pattern(p: &str) -> Option<(&str, Option<&str>)> {
    let ident = |n: &str| {
        !n.is_empty()
            && !n.starts_with(|c: char| c.is_ascii_digit())
            && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    match p.split_once('(') {
        Some((name, rest)) => {
            let text = rest.strip_suffix(')')?;
            (ident(name) && !text.is_empty()).then_some((name, Some(text)))
        }
        None => ident(p).then_some((p, None)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn when_methods_entries_are_names_or_name_with_text() {
        let call = "[[call]]\nkind = \"try-acquire\"\nreceiver = \"x::C\"\nmethod = \"put_item\"\n";
        let ok = parse(&format!(
            "{call}when-methods = [\"condition_expression(attribute_not_exists)\", \"upsert\"]\nchain-until = [\"send\"]\n"
        ))
        .expect("valid");
        assert_eq!(ok.calls[0].when_methods.len(), 2);
        assert_eq!(
            method_pattern("condition_expression(attribute_not_exists(pk))"),
            Some(("condition_expression", Some("attribute_not_exists(pk)")))
        );
        for bad in ["", "cond(", "cond()", "a b", "1x", "x.y(z)"] {
            let err = parse(&format!("{call}when-methods = [\"{bad}\"]\n")).unwrap_err();
            assert!(
                err.to_string().contains("`when-methods` entry"),
                "{bad}: {err}"
            );
            assert!(err.to_string().contains("t.toml"), "{err}");
        }
        let err = parse(&format!(
            "{call}reply-only = true\nreturns-type = \"x::L\"\n"
        ))
        .unwrap_err();
        assert!(
            err.to_string().contains("`reply-only` and `returns-type`"),
            "{err}"
        );
        let err = parse(&format!("{call}chain-until = [\"send()\"]\n")).unwrap_err();
        assert!(
            err.to_string().contains("`chain-until` entry `send()`"),
            "{err}"
        );
    }

    const HEAD: &str =
        "[pack]\nname = \"t\"\nconsensus = true\nfencing = \"none\"\nrelease = \"explicit\"\n";

    fn parse(body: &str) -> Result<Pack, ToolError> {
        Pack::parse(Path::new("t.toml"), &format!("{HEAD}{body}"))
    }

    #[test]
    fn when_calls_need_an_options_arg_and_call_patterns() {
        let call = "[[call]]\nkind = \"try-acquire\"\nreceiver = \"x::C\"\nmethod = \"txn\"\n";
        let err = parse(&format!("{call}when-calls = [\"T::put\"]\n")).unwrap_err();
        assert!(err.to_string().contains("no `options-arg`"), "{err}");
        let err = parse(&format!("{call}options-arg = 0\nwhen-calls = [\"1 + \"]\n")).unwrap_err();
        assert!(err.to_string().contains("not a call pattern"), "{err}");
        let ok = parse(&format!(
            "{call}options-arg = 0\nwhen-calls = [\"Compare::version(_, CompareOp::Equal, 0)\", \"TxnOp::put(KEY, _, _)\"]\n"
        ))
        .expect("valid");
        assert_eq!(ok.calls[0].when_calls.len(), 2);
        let err = parse(&format!(
            "{call}options-arg = 0\ninit-calls = [\"T::get(KEY, _)\"]\n"
        ))
        .unwrap_err();
        assert!(
            err.to_string().contains("`init-calls` but no `when-calls`"),
            "{err}"
        );
        let err = parse(&format!(
            "{call}options-arg = 0\nwhen-calls = [\"T::put(KEY, _)\"]\ninit-calls = [\"+\"]\n"
        ))
        .unwrap_err();
        assert!(err.to_string().contains("`init-calls` entry `+`"), "{err}");
    }

    #[test]
    fn fenced_by_needs_a_correctness_purpose() {
        let call = "[[call]]\nkind = \"acquire\"\nreceiver = \"x::M\"\nmethod = \"run\"\n";
        let err = parse(&format!(
            "{call}purpose = \"efficiency\"\nfenced-by = \"x\"\n"
        ))
        .unwrap_err();
        assert!(err.to_string().contains("fenced-by"), "{err}");
        let ok = parse(&format!(
            "{call}purpose = \"correctness\"\nfenced-by = \"x\"\n"
        ))
        .expect("valid");
        assert_eq!(ok.calls[0].fenced_by.as_deref(), Some("x"));
    }

    #[test]
    fn lease_id_arg_satisfies_a_required_deadline() {
        let call = "[[call]]\nkind = \"acquire\"\nreceiver = \"x::E\"\nmethod = \"campaign\"\ndeadline = \"required\"\n";
        assert!(parse(call).is_err());
        assert!(parse(&format!("{call}lease-id-arg = 2\nserver-lease-s = 60\n")).is_ok());
    }

    #[test]
    fn builtin_packs_parse_and_index() {
        let packs = builtin().expect("embedded packs are valid");
        let set = PackSet::new(packs).expect("unique names");
        assert_eq!(
            set.macro_types.get("sqlx::migrate").map(String::as_str),
            Some("sqlx::migrate::Migrator")
        );
        assert!(set.sql_functions.contains_key("get_lock"));
    }
}
