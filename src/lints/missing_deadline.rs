use super::{Violation, lock_name};
use crate::classify::Classified;
use crate::config::RuleOptions;
use crate::report::{Edit, Fix};
use crate::sites::{Site, Ttl};

/// ## What it does
/// Flags an acquisition that sets no deadline where the caller must set one: `SET … NX` without
/// `EX`/`PX`/`EXAT`/`PXAT`, `SETNX`/`set_nx` (even when an `EXPIRE` follows: the two are not
/// atomic), etcd `lock` without a lease, or options with no lease attached.
///
/// ## Why it matters
/// A Redis lock with no deadline outlives its holder. When the process crashes, is killed or loses
/// its network between acquiring and releasing, the key stays, and every later acquisition fails
/// until someone deletes it by hand. `SETNX` followed by `EXPIRE` has the same hole between its two
/// commands.
///
/// etcd fails the other way. Its lock service does not keep a lease-less lock forever: it attaches
/// a lease of its own with a 60 s TTL and never renews it, so the lock key is deleted 60 s after it
/// was taken. A holder still working then goes on without the lock, and nothing tells it; the next
/// caller acquires. The deadline exists, but nobody chose it and nobody can keep it alive.
///
/// Locks bound to a session, a transaction or a library default (PostgreSQL advisory locks,
/// ZooKeeper, Consul sessions, DynamoDB lease defaults, Kubernetes leases) end with their owner and
/// are not flagged.
///
/// ## Example
/// ```rust
/// let ok: bool = con.set_nx("lock:import", token).await?;
/// let _: () = con.expire("lock:import", 30).await?;
/// ```
///
/// ## Use instead
/// ```rust
/// let ok: Option<String> = redis::cmd("SET")
///     .arg("lock:import").arg(&token).arg("NX").arg("PX").arg(30_000)
///     .query_async(&mut con).await?;
/// ```
/// `lockaudit check --fix` makes this change itself when `let ok: bool = …set_nx(k, v)…;` (or
/// `redis::cmd("SETNX")`) is directly followed by an `EXPIRE`/`PEXPIRE` of the same key on the
/// same connection whose reply is thrown away.
///
/// For etcd, a lease you grant, keep alive while you work and pass with the lock:
/// ```rust
/// let lease = client.lease_grant(30, None).await?;
/// let (mut keeper, mut replies) = client.lease_keep_alive(lease.id()).await?;
/// let lock = client.lock("jobs/import", Some(LockOptions::new().with_lease(lease.id()))).await?;
/// ```
/// or a lease with a fencing token from `fenced-lock`:
/// ```rust
/// let lease = backend.acquire("import", Duration::from_secs(30), Duration::from_secs(5)).await?;
/// ```
///
/// A wrapper's call is judged by what its caller passes: a `None` TTL given to the wrapper's TTL
/// parameter, a transaction without a lease handed to a helper that runs it
/// (`etcd.do_in_txn(txn)`). A wrapper's own primitive is judged inside it.
///
/// ## Known limits
/// A TTL set through a value the analysis cannot follow (a parameter, a field filled elsewhere) is
/// assumed present.
pub struct MissingDeadline;

pub fn check(c: &Classified, _: &RuleOptions) -> Option<Violation> {
    // A wrapper's call is missing a deadline only by what its caller passes (a `None` TTL, a
    // transaction without a lease): a wrapper's own primitive is judged inside it.
    let Ttl::Missing { reason } = &c.site.ttl else {
        return None;
    };
    Some(Violation {
        span: c.site.span,
        message: format!(
            "{} acquires without setting a deadline: {reason}",
            lock_name(c)
        ),
        help: if c.site.library == "etcd" || c.site.backend.as_deref() == Some("etcd") {
            "grant a lease with the TTL you need, keep it alive while you work (lease_keep_alive) and pass it with LockOptions::with_lease, so the lock ends when its holder does and not before".into()
        } else {
            "set the expiry in the acquiring call itself (SET … NX PX <ms>), so a crashed holder cannot keep the lock forever".into()
        },
        fix: setnx_then_expire(&c.site),
        ..Default::default()
    })
}

/// `let ok: bool = con.set_nx(k, v)…;` directly followed by `con.expire(k, ttl)…;`: one
/// `SET k v NX EX ttl` (`PX` for `pexpire`), and the `EXPIRE` statement removed. The reply
/// converts to the same `bool` (`OK` is true, nil false, as 1 and 0 were).
fn setnx_then_expire(site: &Site) -> Option<Fix> {
    let c = site.command.as_ref()?;
    let after = site.expire_after.as_ref()?;
    let [key, value] = c.args.as_slice() else {
        return None;
    };
    let ttl = &after.command.args.get(1)?.text;
    let krate = c.krate.as_deref()?;
    let unit = if after.command.name == "PEXPIRE" {
        "PX"
    } else {
        "EX"
    };
    let set = match (&c.builder, &c.conn) {
        (builder, Some(conn)) => format!(
            "{}(\"SET\").arg({}).arg({}).arg(\"NX\").arg(\"{unit}\").arg({ttl}).{}({conn})",
            builder.clone().unwrap_or_else(|| format!("{krate}cmd")),
            key.text,
            value.text,
            if c.is_async { "query_async" } else { "query" },
        ),
        // `SetExpiry` takes an integer whose type differs between redis versions: only a
        // literal fits them all.
        (None, None)
            if ttl.starts_with(|d: char| d.is_ascii_digit())
                && ttl.bytes().all(|b| b.is_ascii_digit() || b == b'_') =>
        {
            format!(
                "{}.set_options({}, {}, {krate}SetOptions::default().conditional_set({krate}ExistenceCheck::NX).with_expiration({krate}SetExpiry::{unit}({ttl})))",
                c.receiver.as_deref()?,
                key.text,
                value.text,
            )
        }
        _ => return None,
    };
    Some(Fix {
        message: format!("set the key and its expiry in one `SET … NX {unit}`"),
        edits: vec![
            Edit::replace(c.span, set),
            Edit::delete_lines(after.lines.0, after.lines.1),
        ],
    })
}
