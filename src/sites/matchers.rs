//! Does this call match a rule pack? Method calls by the resolved type of their receiver (or a
//! trait in scope), function calls by their resolved path, raw commands by name and arguments,
//! SQL by the advisory-lock functions in the text it runs.

use std::collections::HashSet;

use syn::Expr;

use super::walk::{Walker, idents_in};
use super::{Fencing, Ttl, ttl};
use crate::model::Ty;
use crate::model::eval::{self, Value};
use crate::model::imports::first_segment;
use crate::model::lua;
use crate::packs::{
    CallDef, CallKind, CallRef, DeadlineRule, FlagUnit, PackFencing, ReleaseStyle, Returns,
    ScriptArg, SqlScope,
};
use crate::source::Span;

/// A call that a pack describes.
pub(super) struct Matched<'a> {
    pub pack: usize,
    pub api: String,
    pub kind: CallKind,
    pub span: Span,
    pub key: Option<&'a Expr>,
    pub ttl: Ttl,
    pub fencing: Fencing,
    pub returns: Returns,
    /// Outward chain levels that belong to the call itself (a raw command's `.arg(..)`s).
    pub consumed: usize,
    /// Set when the executing call throws away the result that says whether the lock was taken.
    pub discarded: Option<String>,
    /// Identifiers in the receiver and arguments.
    pub mentions: HashSet<String>,
    pub owner_checked: bool,
    pub auto_renew: bool,
    pub stream_ttl: bool,
    pub sql: bool,
    /// For SQL: the pool type the statement ran on, when it ran on a pool rather than on one
    /// connection or transaction.
    pub pool: Option<String>,
    /// For SQL: the local holding a connection lent by a pool that the statement ran on.
    pub checkout: Option<String>,
    /// A wrapper's call whose handle carries a pool-lent connection holding the lock.
    pub lent_handle: bool,
    /// For SQL: the local or parameter the statement ran on (`fetch_one(&mut *conn)`).
    pub session_on: Option<String>,
    /// The call returns a lock value (handle or guard) rather than a reply about a key.
    pub handle: bool,
    /// The key is a prefix the store keeps the lock under (see `CallDef::key_is_prefix`).
    pub key_is_prefix: bool,
    /// How this call's lock is released, when it differs from the pack's.
    pub release: Option<ReleaseStyle>,
    /// The lock value returned gives the lock back when dropped (see `CallDef::drop_releases`).
    pub drop_releases: bool,
    /// A renewal whose write takes an expired lock over (see `CallDef::takeover_when_expired`).
    pub takeover: bool,
    /// A call of a scoped wrapper (`with_lock(key, || …)`): released before it returns. (A
    /// wrapper handing out a guard whose `Drop` releases is released by `Guard` too, later.)
    pub scoped: bool,
    pub consensus: Option<bool>,
    /// The store, when the receiver's type says which (else the pack's).
    pub backend: Option<String>,
    /// Identifiers in the lease argument (etcd's `with_lease(lease.id())`).
    pub lease_names: HashSet<String>,
    /// A call to a wrapper: its path, and which function it is.
    pub via: Option<String>,
    pub origin: Option<std::sync::Arc<str>>,
    /// A lock command whose reply comes when its pipeline runs.
    pub pipeline: Option<super::pipeline::PipeRun>,
    /// The purpose the library declares for its own lock, with what fences it.
    pub purpose: Option<(crate::directives::DeclaredPurpose, Option<String>)>,
    /// See `CallDef::success_variant`.
    pub success_variant: Option<String>,
    /// The boolean parameter under which the function writes what makes this call an
    /// acquisition (`if steal { spec.holder_identity = Some(me) }`): a call of the function
    /// passing `false` for it only renews.
    pub gate: Option<String>,
    /// A call of the program's set-if-absent (see `WrapperCandidate::key_gate`) that nothing
    /// names for a lock: one only when its reply decides whether work runs (`if !cache.add(..)?
    /// { return }`), as a lock's does; a write whose reply is dropped or handed on is a cache's.
    pub use_decides: bool,
}

impl<'a> Matched<'a> {
    /// A match with nothing known beyond what it is: no key, an implicit deadline, no fencing, a
    /// `Result`, owner-checked. Matchers fill in what their call says.
    fn plain(pack: usize, api: String, kind: CallKind, span: Span) -> Matched<'a> {
        Matched {
            pack,
            api,
            kind,
            span,
            key: None,
            ttl: Ttl::Implicit,
            fencing: Fencing::None,
            returns: Returns::Result,
            consumed: 0,
            discarded: None,
            mentions: HashSet::new(),
            owner_checked: true,
            auto_renew: false,
            stream_ttl: false,
            sql: false,
            pool: None,
            checkout: None,
            lent_handle: false,
            session_on: None,
            handle: false,
            key_is_prefix: false,
            release: None,
            drop_releases: false,
            takeover: false,
            scoped: false,
            consensus: None,
            backend: None,
            lease_names: HashSet::new(),
            via: None,
            origin: None,
            pipeline: None,
            purpose: None,
            success_variant: None,
            gate: None,
            use_decides: false,
        }
    }
}

fn mentions_of(receiver: Option<&Expr>, args: &[&Expr]) -> HashSet<String> {
    let mut out = HashSet::new();
    for e in receiver.into_iter().chain(args.iter().copied()) {
        out.extend(idents_in(e));
    }
    out
}

/// `outward` holds the enclosing chain levels, outermost first.
pub(super) fn match_site<'a>(
    w: &Walker<'a, '_>,
    core: &'a Expr,
    outward: &[&'a Expr],
) -> Option<Matched<'a>> {
    match core {
        Expr::MethodCall(m) => {
            let args: Vec<&'a Expr> = m.args.iter().collect();
            if let Some(found) = match_method(
                w,
                &m.method.to_string(),
                &m.receiver,
                &args,
                Span::of(&m.method),
                outward,
            ) {
                // `pipe.set_nx(k, v)`, `pipe.del(k).ignore()`: a pipeline's own command method.
                return Some(match pipeline_of(w, &m.receiver) {
                    Some(_) => in_pipeline(found, &m.receiver, outward),
                    None => found,
                });
            }
            // `redis::pipe().atomic().cmd("SET").arg(k)…`: a command inside a pipeline.
            if m.method == "cmd"
                && let Some(packs) = pipeline_of(w, &m.receiver)
            {
                let (cmd_args, consumed) = command_args(outward);
                let span = Span::join(Span::of(&m.method), Span::of(&m.args));
                let found = match_command(w, packs, &args, cmd_args, consumed, span)?;
                return Some(in_pipeline(found, &m.receiver, outward));
            }
            if let Some(found) = match_command_argument(w, m) {
                return Some(found);
            }
            if w.cx.packs.sql_calls.contains_key(&m.method.to_string()) {
                // `pool.execute("SELECT pg_advisory_lock(1)")`: the receiver runs it.
                return match_sql(
                    w,
                    &args,
                    outward,
                    Span::of(&m.method),
                    &m.method.to_string(),
                )
                .map(|found| on_pool(w, found, Some(&m.receiver)));
            }
            if w.cx
                .packs
                .sql_receiver_calls
                .contains(&m.method.to_string())
            {
                // `"SELECT GET_LOCK(?, 5)".with((name,)).first(&mut conn)`: the text runs itself.
                let mut text = &*m.receiver;
                while let Expr::MethodCall(inner) = text
                    && inner.method == "with"
                {
                    text = &inner.receiver;
                }
                let sql = eval::eval_str(text, w)?;
                let span = if is_literal(text) {
                    Span::of(text)
                } else {
                    Span::of(&m.method)
                };
                return sql_match(w, &sql, span, &m.method.to_string(), None)
                    .map(|found| on_pool(w, found, m.args.first()));
            }
            None
        }
        Expr::Call(c) => {
            let Expr::Path(f) = &*c.func else { return None };
            let path = w.resolve(&f.path);
            let name_span = f
                .path
                .segments
                .last()
                .map_or_else(|| Span::of(&f.path), |s| Span::of(&s.ident));
            let args: Vec<&'a Expr> = c.args.iter().collect();
            if let Some(refs) = w.cx.packs.functions.get(&path) {
                for &r in refs {
                    let def = w.cx.packs.call(r);
                    // A method called by its path passes its receiver first.
                    let receiver = usize::from(def.method.is_some());
                    if def
                        .arity
                        .is_some_and(|n| n != args.len() && n + receiver != args.len())
                    {
                        continue;
                    }
                    if options_match(w, r.pack, def, &args)
                        && let Some(consumed) = chain_match(w, def, outward)
                    {
                        let mut found =
                            build(w, r, def, &args, None, name_span, api_of_path(&path));
                        found.consumed = consumed;
                        if found.key.is_none() {
                            found.key = url_key(w, def, &args);
                        }
                        return Some(found);
                    }
                }
            }
            // `Type::method(&receiver, args…)`
            if let Some((parent, method)) = path.rsplit_once("::")
                && let Some(refs) = w.cx.packs.methods.get(method)
                && !args.is_empty()
            {
                let recv_ty = Ty::simple(parent);
                for &r in refs {
                    let def = w.cx.packs.call(r);
                    if receiver_is(w, def, &recv_ty) && options_match(w, r.pack, def, &args[1..]) {
                        return Some(build(
                            w,
                            r,
                            def,
                            &args[1..],
                            Some(args[0]),
                            name_span,
                            api_of_path(&path),
                        ));
                    }
                }
            }
            if let Some(packs) = w.cx.packs.command_builders.get(&path) {
                let call_span = Span::join(name_span, Span::of(c));
                let (cmd_args, consumed) = command_args(outward);
                return match_command(w, packs, &args, cmd_args, consumed, call_span);
            }
            // `redis::Cmd::new().arg("SET").arg(key)…`: the first argument names the command.
            if args.is_empty()
                && let Some(packs) = empty_cmd_builder(w, &path)
            {
                let call_span = Span::join(name_span, Span::of(c));
                let (mut cmd_args, consumed) = command_args(outward);
                if cmd_args.is_empty() {
                    return None;
                }
                let name = eval::eval_str(cmd_args.remove(0), w)?.to_ascii_uppercase();
                return match_named_command(w, packs, name, cmd_args, consumed, call_span);
            }
            // A function of the program that builds the command: its arguments in place of its
            // parameters, then whatever the chain adds.
            if let Some(b) = w.cx.index.cmd_builder(&path)
                && let Some(packs) = w.cx.packs.command_builders.get(&b.builder)
            {
                let mut cmd_args: Vec<&'a Expr> = Vec::new();
                for text in &b.args {
                    match b.params.iter().position(|p| !p.is_empty() && p == text) {
                        Some(i) => cmd_args.push(args.get(i)?),
                        None => cmd_args.push(w.keep(syn::parse_str::<Expr>(text).ok()?)),
                    }
                }
                let (chained, consumed) = command_args(outward);
                cmd_args.extend(chained);
                let call_span = Span::join(name_span, Span::of(c));
                return match_named_command(
                    w,
                    packs,
                    b.name.to_ascii_uppercase(),
                    cmd_args,
                    consumed,
                    call_span,
                );
            }
            if let Some(&pi) = w.cx.packs.script_builders.get(&path) {
                return match_script(w, pi, &args, outward, Span::join(name_span, Span::of(c)));
            }
            let last = path.rsplit("::").next().unwrap_or(&path);
            // `diesel::update(jobs.filter(..)).set((locked_by.eq(me), ..))`: the SQL it builds.
            if w.cx.packs.statement_builders.contains_key(&path) {
                let (text, key) = super::dsl_sql::statement(w, last, &args, outward)?;
                return lease_match(w, &text, name_span, key);
            }
            // A constructor of the program's own type that shares a driver's name
            // (`DatabaseError::query(sql, e)`, an error keeping the text) runs nothing.
            let own_ctor = path.rsplit_once("::").is_some_and(|(owner, _)| {
                w.cx.index
                    .fn_return(&path)
                    .is_some_and(|t| t.peeled().path == owner)
            });
            if w.cx.packs.sql_calls.contains_key(last) && !own_ctor {
                return match_sql(w, &args, outward, name_span, last)
                    .map(|found| on_pool(w, found, executor(outward)));
            }
            // `diesel::select(pg_try_advisory_lock(key)).get_result(conn)`: an SQL function the
            // program declared for its query builder, run by the statement that holds it.
            if let Some(function) = w.cx.index.sql_fn(&path) {
                let params: Vec<String> = (1..=args.len()).map(|i| format!("${i}")).collect();
                let text = format!("SELECT {function}({})", params.join(", "));
                let (run, conn) = dsl_runner(outward).unzip();
                let found = sql_match(w, &text, name_span, run.unwrap_or(""), None)?;
                return Some(on_pool(
                    w,
                    Matched {
                        key: args.first().copied(),
                        ..found
                    },
                    conn.flatten(),
                ));
            }
            None
        }
        Expr::Macro(m) => {
            let name = m.mac.path.segments.last()?.ident.to_string();
            // sqlx's `query_file!("queries/x.sql", ..)` (and `query_file_as!`, `_scalar!`,
            // `_unchecked!`) run the text of a file named relative to the crate's manifest.
            let from_file = name.starts_with("query_file");
            if !w
                .cx
                .packs
                .sql_calls
                .contains_key(if from_file { "query" } else { &name })
            {
                return None;
            }
            let args = m
                .mac
                .parse_body_with(
                    syn::punctuated::Punctuated::<Expr, syn::Token![,]>::parse_terminated,
                )
                .ok()?;
            // The SQL text is the first argument that is one (`query_as!(Row, "SELECT …", k)`).
            let (sql, text) = if from_file {
                args.iter().find_map(|a| match a {
                    Expr::Lit(syn::ExprLit {
                        lit: syn::Lit::Str(rel),
                        ..
                    }) => Some((a, w.cx.index.crate_file(&rel.value())?)),
                    _ => None,
                })?
            } else {
                args.iter().find_map(|a| Some((a, eval::eval_str(a, w)?)))?
            };
            let span = if matches!(sql, Expr::Lit(_)) && !from_file {
                Span::of(sql)
            } else {
                Span::of(&m.mac.path)
            };
            sql_match(w, &text, span, &name, None).map(|found| on_pool(w, found, executor(outward)))
        }
        Expr::Path(p) => {
            match_from_local(w, p, outward).or_else(|| match_static_script(w, p, outward))
        }
        _ => None,
    }
}

fn api_of_path(path: &str) -> String {
    // A function at the crate's root is named alone (`spawn_election`, not `crate::…`).
    let path = path.strip_prefix("crate::").unwrap_or(path);
    let mut parts: Vec<&str> = path.rsplit("::").take(2).collect();
    parts.reverse();
    parts.join("::")
}

fn match_method<'a>(
    w: &Walker<'a, '_>,
    name: &str,
    receiver: &'a Expr,
    args: &[&'a Expr],
    span: Span,
    outward: &[&'a Expr],
) -> Option<Matched<'a>> {
    let refs = w.cx.packs.methods.get(name)?;
    let rty = w
        .type_of(receiver)
        .map(|t| t.peeled().clone())
        .or_else(|| pipeline_ty(w, receiver));
    // A call declared on the receiver's own type wins over one matched through a trait in
    // scope: `RedisBackend::try_acquire` is not the other backends' `LockBackend` method.
    let declared = |def: &CallDef| rty.as_ref().is_some_and(|t| receiver_is(w, def, t));
    let by_declaration = refs.iter().filter(|&&r| declared(w.cx.packs.call(r)));
    let by_trait = refs.iter().filter(|&&r| !declared(w.cx.packs.call(r)));
    for &r in by_declaration.chain(by_trait) {
        let def = w.cx.packs.call(r);
        if def.arity.is_some_and(|n| n != args.len()) {
            continue;
        }
        if def.off_by.as_ref().is_some_and(|off| {
            super::walk::local_named(receiver)
                .is_some_and(|local| w.switched(&local, &off.method, off.value))
        }) {
            continue;
        }
        let chain_key = def
            .key_method
            .as_deref()
            .and_then(|m| chain_arg(outward, m));
        if receiver_matches(w, def, rty.as_ref())
            && options_match(w, r.pack, def, args)
            && let Some(consumed) = chain_match(w, def, outward)
            && (def.key_method.is_none()
                || chain_key.is_some_and(|k| !def.when_lock_key || lock_key(w, r.pack, def, k)))
        {
            if let Some(what) = def.script {
                match script_method(w, r.pack, what, def, args, receiver, span, name) {
                    Some(found) => return Some(found),
                    None => continue,
                }
            }
            // Named after the receiver's type when it is one the call is declared on; matched
            // through a trait in scope on a value of unknown type, after the trait (naming the
            // first declared receiver would claim a backend the code may not use).
            let last = |p: &str| p.rsplit("::").next().unwrap_or(p).to_string();
            let owner = rty
                .as_ref()
                .filter(|t| t.path.contains("::") && receiver_is(w, def, t))
                .map(|t| t.last_segment().to_string())
                .or_else(|| {
                    def.in_scope
                        .iter()
                        .find(|t| trait_in_scope(w, t))
                        .map(|t| last(t))
                })
                .or_else(|| {
                    def.receiver.as_ref().and_then(|r| {
                        let first = r.to_vec().first().map(|p| p.to_string())?;
                        Some(last(first.split('<').next().unwrap_or(&first)))
                    })
                })
                .unwrap_or_default();
            let mut found = build(
                w,
                r,
                def,
                args,
                Some(receiver),
                span,
                format!("{owner}::{name}"),
            );
            found.consumed = consumed;
            if found.key.is_none() {
                found.key = chain_key
                    .or_else(|| when_key(w, def, args))
                    .or_else(|| url_key(w, def, args));
            }
            // A session lock taken through a value built around a lent connection
            // (`PostgresLock::new(&mut client, key).acquire()`) goes back to the pool with it.
            if found.sql && found.checkout.is_none() {
                found.checkout =
                    super::walk::local_named(receiver).filter(|n| w.checkouts.contains(n));
            }
            found.backend = rty
                .as_ref()
                .filter(|t| receiver_is(w, def, t))
                .and_then(|t| w.cx.packs.type_backend(&t.path))
                .map(str::to_string);
            return Some(found);
        }
    }
    None
}

fn canonical<'p>(w: &'p Walker<'_, '_>, path: &'p str) -> &'p str {
    w.cx.packs
        .type_of_path(path)
        .map_or(path, |(_, c)| c.as_str())
}

fn receiver_is(w: &Walker<'_, '_>, def: &CallDef, ty: &Ty) -> bool {
    def.receiver
        .as_ref()
        .is_some_and(|r| r.to_vec().iter().any(|d| declared_is(w, d, ty)))
        || def.in_scope.iter().any(|t| t == &ty.path)
}

/// Is `ty` the declared receiver type? A declaration may pin type arguments
/// (`r2d2::PooledConnection<redis::Client>`): a pool's connection is Redis's only when the pool
/// manages Redis connections.
fn declared_is(w: &Walker<'_, '_>, declared: &str, ty: &Ty) -> bool {
    let (path, args) = match declared.split_once('<') {
        Some((path, rest)) => (path, rest.strip_suffix('>').unwrap_or(rest)),
        None => (declared, ""),
    };
    canonical(w, path.trim()) == canonical(w, &ty.path)
        && args
            .split(',')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .enumerate()
            .all(|(i, a)| {
                ty.args
                    .get(i)
                    .is_some_and(|t| canonical(w, &t.path) == canonical(w, a))
            })
}

/// A receiver matches when its type is one the call is declared on, or, for trait methods, when the
/// trait is in scope and the receiver is of unknown type or a type of the trait's own crate.
pub(super) fn receiver_matches(w: &Walker<'_, '_>, def: &CallDef, rty: Option<&Ty>) -> bool {
    if let Some(t) = rty
        && receiver_is(w, def, t)
    {
        return true;
    }
    // A method wrapper of the program's whose name says what it does in three words or more
    // (`set_key_if_not_exists_with_expiry`), on a receiver the typing lost (a connection from a
    // trait object's method, through `change_context(..)?`): the name is the evidence.
    if rty.is_none()
        && def.via.is_some()
        && def.receiver.is_some()
        && def
            .method
            .as_deref()
            .is_some_and(|m| distinctive_method(m) || lock_named_method(m))
    {
        return true;
    }
    if def.in_scope.is_empty() {
        return false;
    }
    let in_scope = def.in_scope.iter().any(|t| trait_in_scope(w, t));
    if !in_scope {
        return false;
    }
    match rty {
        None => true,
        Some(t) => def
            .in_scope
            .iter()
            .any(|tr| first_segment(tr) == first_segment(&t.path)),
    }
}

/// A method name of three words or more (`acquire_job_lock`, not `lock` or `try_lock`): one no
/// library type is likely to share.
fn distinctive_method(name: &str) -> bool {
    name.split('_').filter(|w| !w.is_empty()).count() >= 3
}

/// The lock methods of the standard library and the usual in-process lock crates (tokio,
/// parking_lot, fs2, fd-lock): a wrapper of the program by one of these names is not told from
/// them by its name.
const LIBRARY_LOCK_METHODS: &[&str] = &[
    "try_lock",
    "lock_owned",
    "try_lock_owned",
    "try_lock_for",
    "try_lock_until",
    "lock_arc",
    "try_lock_arc",
    "blocking_lock",
    "read_lock",
    "write_lock",
    "lock_shared",
    "try_lock_shared",
    "lock_exclusive",
    "try_lock_exclusive",
    "unlock_shared",
    "unlock_exclusive",
    "is_locked",
    "force_unlock",
    "try_unlock",
    "unlock_fair",
];

/// A method named for a lock in two words or more (`lock_resource`, `release_lease`), not one of
/// the usual in-process lock methods: on a receiver the typing lost, the name is the evidence.
fn lock_named_method(name: &str) -> bool {
    name.split('_').filter(|w| !w.is_empty()).count() >= 2
        && names_lock(name, KEY_WORDS)
        && !LIBRARY_LOCK_METHODS.contains(&name)
}

/// Is the trait usable here, imported under the library's name or through a crate that
/// re-exports the library?
fn trait_in_scope(w: &Walker<'_, '_>, t: &str) -> bool {
    w.imports.trait_in_scope(t)
        || w.cx
            .packs
            .aliases_of(t)
            .any(|a| w.imports.trait_in_scope(&a))
}

/// Options-builder conditions (`conditional_set(ExistenceCheck::NX)`, and the calls `when-calls`
/// asks for).
fn options_match(w: &Walker<'_, '_>, pack: usize, def: &CallDef, args: &[&Expr]) -> bool {
    // (A set-if-absent of the program's is judged by its key, value and use: see `build`.)
    if def.when_lock_key
        && def.value_arg.is_none()
        && let Some(i) = def.key_arg
        && !args.get(i).is_some_and(|k| lock_key(w, pack, def, k))
    {
        return false;
    }
    if !def.url_contains.is_empty() {
        let Some(url) = def
            .url_arg
            .and_then(|i| args.get(i))
            .and_then(|u| url_template(w, u, 0))
        else {
            return false;
        };
        if !def
            .url_contains
            .iter()
            .all(|part| url.contains(part.as_str()))
        {
            return false;
        }
    }
    if let Some(i) = def.type_arg
        && let Some(t) = args.get(i).and_then(|a| w.type_of(a))
        && names_any(&t, &def.not_on_types)
    {
        return false;
    }
    if def
        .lockless_backend
        .as_ref()
        .is_some_and(|b| w.cx.index.lockless_backend(b))
    {
        return false;
    }
    if let Some(i) = def.fields_arg {
        let Some(arg) = args.get(i) else { return false };
        // The caller's object: this call is judged where the function is called. Unless the
        // function changes it first (`lease.spec = Some(spec)`): what it writes decides.
        if let Some(p) = super::fields::parameter(arg, &|n| w.is_param(n))
            && crate::model::eval::Lookup::assigned_fields(w, &p.to_string()).is_empty()
        {
            return forward(w, pack, def, p);
        }
        let ok = match super::fields::read(arg, w) {
            Some(f) => {
                !def.fields_unknown && def.when_fields.iter().all(|x| super::fields::holds(&f, x))
            }
            None => def.fields_unknown,
        };
        if !ok {
            return false;
        }
    }
    if let Some(i) = def.options_arg
        && !def.when_methods.is_empty()
    {
        let Some(opt) = args.get(i) else { return false };
        if !methods_hold(w, def, &ttl::method_calls_in(w, opt)) {
            return false;
        }
    }
    if def.when.is_empty() && def.when_calls.is_empty() {
        return true;
    }
    let Some(opt) = def.options_arg.and_then(|i| args.get(i)) else {
        return false;
    };
    // The caller's transaction, run as it comes (`fn do_in_txn(&self, txn: Txn) {
    // client.txn(txn) }`): this call is judged where the function is called, as for `fields-arg`.
    if !def.when_calls.is_empty()
        && def.via.is_none()
        && let Some(p) = super::fields::parameter(opt, &|n| w.is_param(n))
        && w.local_init(&p.to_string()).is_none()
    {
        return forward(w, pack, def, p);
    }
    if !def.when_calls.is_empty() && when_calls(w, def, opt).is_none() {
        return false;
    }
    if !def.init_calls.is_empty() && initialises(w, def, opt) {
        return false;
    }
    // A wrapper gated by a boolean parameter: every call but one passing `false`.
    if def.when.len() == 1 && def.when[0] == GATE_OPEN {
        return !matches!(super::summary::peel_key(opt), Expr::Lit(syn::ExprLit { lit: syn::Lit::Bool(b), .. }) if !b.value);
    }
    let names = ttl::names_in(w, opt);
    def.when
        .iter()
        .all(|wanted| names.iter().any(|n| n.eq_ignore_ascii_case(wanted)))
}

/// Notes that the function hands its parameter `p` to this call, which is then judged at each
/// of the function's calls (see `WrapperCandidate::forwards`); not a site here.
fn forward(w: &Walker<'_, '_>, pack: usize, def: &CallDef, p: &syn::Ident) -> bool {
    if let Some(api) = def.method.clone().or_else(|| def.function.clone()) {
        w.forwarded
            .borrow_mut()
            .get_or_insert_with(|| (pack, api, p.to_string(), def.kind));
    }
    false
}

/// `when-lock-key`: does the call's key name a lock? The caller's key (a parameter) is judged at
/// each call of the function (forwarded), unless its name or the function's says lock
/// (`fn try_acquire(&self, key: &str)`: the function is the lock, and a wrapper).
fn lock_key(w: &Walker<'_, '_>, pack: usize, def: &CallDef, k: &Expr) -> bool {
    // The parameter itself, or a copy of it under its own name (`let key = key.to_owned();`
    // before a closure that moves it).
    let peeled = super::summary::peel_key(k);
    let copied = super::walk::local_named(peeled).filter(|n| {
        w.param_position(n).is_some()
            && w.local_init(n).is_some_and(|init| {
                super::walk::local_named(super::summary::peel_key(init)).as_ref() == Some(n)
            })
    });
    let param =
        super::fields::parameter(peeled, &|n| w.is_param(n) || copied.as_deref() == Some(n));
    if let Some(p) = param {
        if names_lock(&p.to_string(), KEY_WORDS) || fn_says_lock(w.own_name()) {
            return true;
        }
        if def.via.is_none() {
            return forward(w, pack, def, p);
        }
    }
    url_template(w, k, 0).is_some_and(|t| names_lock(&t, KEY_WORDS))
}

/// A call of the program's set-if-absent of its caller's key and value (`cache.add(key, value,
/// ttl)`) whose key names no lock: a lock still when the key is kept under a name that says so
/// (`&self.lock_key`), the value is an owner's token (`&self.token`, `Uuid::new_v4()`), or the
/// calling function is named for a lock (`fn try_claim(&self, job)`).
fn set_if_absent_says_lock(w: &Walker<'_, '_>, key: Option<&Expr>, value: Option<&Expr>) -> bool {
    let words = |e: &Expr, words: &[&str]| {
        let e = super::summary::peel_key(e);
        let says = |e: &Expr| names_lock(&quote::ToTokens::to_token_stream(e).to_string(), words);
        says(e)
            || super::walk::local_named(e)
                .and_then(|n| w.local_init(&n))
                .is_some_and(says)
    };
    fn_says_lock(w.own_name())
        || key.is_some_and(|k| words(k, KEY_WORDS))
        || value.is_some_and(|v| words(v, OWNER_WORDS))
}

/// Words that make a stored value an owner's token.
pub(super) const OWNER_WORDS: &[&str] = &[
    "token", "owner", "holder", "uuid", "ulid", "nanoid", "nonce", "instance", "worker", "node",
    "hostname", "pid",
];

/// Words that make a key a lock's (compared whole: `block` and `clock` are not `lock`).
pub(super) const KEY_WORDS: &[&str] = &[
    "lock",
    "locks",
    "locked",
    "locking",
    "unlock",
    "mutex",
    "leader",
    "leadership",
    "lease",
    "leases",
    "election",
];

/// Words that make a function one that takes a lock, besides the key's.
const LOCK_FN_WORDS: &[&str] = &["elect", "acquire", "claim", "campaign"];

/// Is a function named for taking a lock (`try_acquire`, `elect_leader`, `lock_resource`)?
pub(crate) fn fn_says_lock(name: &str) -> bool {
    names_lock(name, KEY_WORDS) || names_lock(name, LOCK_FN_WORDS)
}

/// Words that make a function one that sets a value up once.
pub(super) const INIT_FN_WORDS: &[&str] =
    &["init", "initialize", "initialise", "seed", "bootstrap"];

/// Does `text` hold one of `words` as a word of its own (split at anything not a letter or
/// digit, and where a lower-case letter meets an upper-case one: `lockKey`, `LOCK_KEY`,
/// `"app.lock.{id}"`)?
pub(super) fn names_lock(text: &str, words: &[&str]) -> bool {
    let mut word = String::new();
    let mut prev_lower = false;
    let mut found = false;
    let mut flush = |word: &mut String| {
        found |= words.contains(&word.as_str());
        word.clear();
    };
    for c in text.chars() {
        if !c.is_ascii_alphanumeric() || (c.is_ascii_uppercase() && prev_lower) {
            flush(&mut word);
        }
        if c.is_ascii_alphanumeric() {
            word.push(c.to_ascii_lowercase());
        }
        prev_lower = c.is_ascii_lowercase();
    }
    flush(&mut word);
    found
}

/// The argument of `method` on the builder chain a call starts (`.key(k)`), before its end.
fn chain_arg<'a>(outward: &[&'a Expr], method: &str) -> Option<&'a Expr> {
    // `outward` is outermost first: the chain starts at its end.
    outward.iter().rev().find_map(|level| match level {
        Expr::MethodCall(m) if m.method == method && m.args.len() == 1 => Some(&m.args[0]),
        _ => None,
    })
}

/// The `when` of a wrapper whose acquisition a boolean parameter gates (see `Matched::gate`).
pub(super) const GATE_OPEN: &str = "!false";

/// Does each `when-methods` pattern hold for one of these calls?
fn methods_hold(w: &Walker<'_, '_>, def: &CallDef, calls: &[&syn::ExprMethodCall]) -> bool {
    def.when_methods.iter().all(|p| {
        let Some((name, text)) = crate::packs::method_pattern(p) else {
            return false;
        };
        calls.iter().any(|c| {
            c.method == name
                && text.is_none_or(|t| {
                    c.args
                        .first()
                        .and_then(|a| argument_text(w, a))
                        .is_some_and(|s| s.contains(t))
                })
        })
    })
}

/// An argument's text, read like a URL, inside `Some(..)` (`set_condition_expression(Some(c))`).
fn argument_text(w: &Walker<'_, '_>, mut e: &Expr) -> Option<String> {
    loop {
        e = match e {
            Expr::Reference(r) => &r.expr,
            Expr::Paren(p) => &p.expr,
            Expr::Call(c)
                if c.args.len() == 1
                    && matches!(&*c.func, Expr::Path(p) if p.path.is_ident("Some")) =>
            {
                &c.args[0]
            }
            _ => break,
        };
    }
    url_template(w, e, 0)
}

/// The builder chain a call starts, for a call that reads it (`when-methods` without an
/// `options-arg`, or `chain-until`): `None` when `when-methods` does not hold on it, else how
/// many chain levels (`.table_name(t)…send()`) belong to the call, whose reply comes after them.
fn chain_match(w: &Walker<'_, '_>, def: &CallDef, outward: &[&Expr]) -> Option<usize> {
    let reads_chain = !def.when_methods.is_empty() && def.options_arg.is_none();
    if !reads_chain && def.chain_until.is_empty() && !def.when_says_lock {
        return Some(0);
    }
    // `outward` is outermost first: the chain starts at its end.
    let mut calls = Vec::new();
    let mut consumed = 0;
    for level in outward.iter().rev() {
        let Expr::MethodCall(m) = level else { break };
        calls.push(m);
        consumed += 1;
        if def.chain_until.iter().any(|u| m.method == u.as_str()) {
            break;
        }
    }
    if reads_chain && !methods_hold(w, def, &calls) {
        return None;
    }
    if def.when_says_lock && !chain_says_lock(w, &calls) {
        return None;
    }
    Some(consumed)
}

/// `when-says-lock`: does the builder chain, or the function or type writing it, say lock?
fn chain_says_lock(w: &Walker<'_, '_>, calls: &[&syn::ExprMethodCall]) -> bool {
    /// What a lease item's attributes are called, besides a lock's own words.
    const ITEM_WORDS: &[&str] = &["owner", "holder", "owned", "acquired"];
    let says = |t: &str| names_lock(t, KEY_WORDS) || names_lock(t, ITEM_WORDS);
    if fn_says_lock(w.own_name()) || w.self_ty.as_ref().is_some_and(|t| says(t.last_segment())) {
        return true;
    }
    calls.iter().flat_map(|c| &c.args).any(|a| {
        let mut names = HashSet::new();
        super::walk::token_idents(quote::ToTokens::to_token_stream(a), &mut names);
        argument_text(w, a).is_some_and(|t| says(&t)) || names.iter().any(|n| says(n))
    })
}

/// Does the type, or one of its type arguments at any depth, end in one of these names?
fn names_any(t: &Ty, names: &[String]) -> bool {
    let last = t.path.rsplit("::").next().unwrap_or(&t.path);
    names.iter().any(|n| n == last) || t.args.iter().any(|a| names_any(a, names))
}

/// An HTTP lock's key, read from its URL after `url-key-after` up to the query, kept as a
/// string literal so that the acquire and the release of one key compare equal.
fn url_key<'a>(w: &Walker<'a, '_>, def: &CallDef, args: &[&'a Expr]) -> Option<&'a Expr> {
    let marker = def.url_key_after.as_deref()?;
    let url = url_template(w, args.get(def.url_arg?)?, 0)?;
    let (_, rest) = url.split_once(marker)?;
    let key = rest.split(['?', '#']).next().unwrap_or(rest);
    (!key.is_empty()).then(|| {
        w.keep(Expr::Lit(syn::ExprLit {
            attrs: Vec::new(),
            lit: syn::Lit::Str(syn::LitStr::new(key, proc_macro2::Span::call_site())),
        }))
    })
}

/// The tail of the text-building function a call runs, parsed.
pub(super) fn text_fn_tail(w: &Walker<'_, '_>, e: &Expr) -> Option<Expr> {
    let path = match e {
        Expr::MethodCall(m) => format!("{}::{}", w.type_of(&m.receiver)?.peeled().path, m.method),
        Expr::Call(c) => match &*c.func {
            Expr::Path(f) => w.resolve(&f.path),
            _ => return None,
        },
        _ => return None,
    };
    syn::parse_str(w.cx.index.text_fn(&path)?).ok()
}

/// A URL as text: literals as written, `format!` and `+` joined, locals followed to what they
/// were bound to, anything else as `{expr}`, so that fixed parts (`/v1/kv/`, `?acquire=`) can be
/// looked for and two URLs built from the same names compare equal.
fn url_template(w: &Walker<'_, '_>, e: &Expr, depth: usize) -> Option<String> {
    if depth > 16 {
        return None;
    }
    let hole = |e: &Expr| {
        let t = quote::ToTokens::to_token_stream(e)
            .to_string()
            .replace(' ', "");
        format!("{{{t}}}")
    };
    let rec = |x: &Expr| url_template(w, x, depth + 1);
    Some(match e {
        Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Str(s),
            ..
        }) => s.value(),
        Expr::Reference(r) => rec(&r.expr)?,
        Expr::Paren(p) => rec(&p.expr)?,
        Expr::Group(g) => rec(&g.expr)?,
        Expr::Try(t) => rec(&t.expr)?,
        Expr::Binary(b) if matches!(b.op, syn::BinOp::Add(_)) => rec(&b.left)? + &rec(&b.right)?,
        Expr::MethodCall(m)
            if matches!(
                m.method.to_string().as_str(),
                "as_str" | "to_string" | "to_owned" | "clone" | "into" | "as_ref"
            ) =>
        {
            rec(&m.receiver)?
        }
        // `base.join(&format!("v1/kv/{key}"))`, `Url::parse(&url)`.
        Expr::MethodCall(m) if m.method == "join" && m.args.len() == 1 => {
            rec(&m.receiver)? + "/" + &rec(&m.args[0])?
        }
        Expr::Call(c)
            if c.args.len() == 1
                && matches!(&*c.func, Expr::Path(p) if p.path.segments.last().is_some_and(|s| s.ident == "parse")) =>
        {
            rec(&c.args[0])?
        }
        // A helper of the program that builds the text (`self.kv_url()`, `kv_url(&addr, key)`):
        // its tail, with its own locals and parameters as holes.
        Expr::MethodCall(_) | Expr::Call(_) if let Some(tail) = text_fn_tail(w, e) => rec(&tail)?,
        Expr::Path(p) if p.path.get_ident().is_some() => {
            let name = p.path.get_ident()?.to_string();
            match w.local_init(&name) {
                Some(init) => rec(init)?,
                None => eval::eval_str(e, w).unwrap_or_else(|| format!("{{{name}}}")),
            }
        }
        Expr::Macro(m)
            if m.mac
                .path
                .segments
                .last()
                .is_some_and(|s| s.ident == "format") =>
        {
            let args = w.macro_exprs(&m.mac)?;
            let mut args = args.iter();
            let fmt = match args.next()? {
                Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(s),
                    ..
                }) => s.value(),
                _ => return None,
            };
            let mut out = String::new();
            for piece in eval::format_pieces(&fmt) {
                match piece {
                    eval::FormatPiece::Text(t) => out.push_str(t),
                    eval::FormatPiece::Next => match args.next() {
                        Some(a) => out.push_str(&rec(a).unwrap_or_else(|| hole(a))),
                        None => out.push_str("{?}"),
                    },
                    // An inline capture (`{key}`): a local or a parameter of that name.
                    eval::FormatPiece::Named(name) => match w.local_init(name) {
                        Some(init) => {
                            out.push_str(&rec(init).unwrap_or_else(|| format!("{{{name}}}")))
                        }
                        None => out.push_str(&format!("{{{name}}}")),
                    },
                }
            }
            out
        }
        other => eval::eval_str(other, w).unwrap_or_else(|| hole(other)),
    })
}

/// Do the calls `when-calls` asks for all appear in the options argument? `Some` with the
/// argument a pattern marks `KEY` (`TxnOp::put(KEY, _, _)`), which is the lock's key. When several
/// patterns mark `KEY`, they must be one key: a transaction that checks one key is absent and
/// writes others (`version(claim) == 0`, then `put(task)`) is a guarded update, not a lock.
fn when_calls<'a>(w: &Walker<'a, '_>, def: &CallDef, opt: &'a Expr) -> Option<Option<&'a Expr>> {
    let calls = ttl::calls_in(w, opt);
    // Per pattern that marks KEY: the keys of the calls it matches.
    let mut keyed: Vec<Vec<&'a Expr>> = Vec::new();
    for p in &def.when_calls {
        let pat = syn::parse_str::<Expr>(p).ok()?;
        let mut keys = Vec::new();
        let mut any = false;
        for c in &calls {
            let mut key = None;
            if call_matches(w, &pat, c, &mut key) {
                any = true;
                keys.extend(key);
            }
        }
        if !any {
            return None;
        }
        if !keys.is_empty() {
            keyed.push(keys);
        }
    }
    let Some((last, earlier)) = keyed.split_last() else {
        return Some(None);
    };
    // The same text, or the same value where both are known (`LOCK` and `"locks/a"`).
    let same = |a: &Expr, b: &Expr| {
        key_text(a) == key_text(b)
            || eval::eval_str(a, w).is_some_and(|x| eval::eval_str(b, w) == Some(x))
    };
    let key = last
        .iter()
        .copied()
        .find(|k| earlier.iter().all(|ks| ks.iter().any(|o| same(o, k))))?;
    Some(Some(key))
}

/// A create-if-absent that reads back the value already there and carries no lease (see
/// `init-calls`): a shared value initialised once, not a lock.
fn initialises<'a>(w: &Walker<'a, '_>, def: &CallDef, opt: &'a Expr) -> bool {
    let calls = ttl::calls_in(w, opt);
    let reads_back = def.init_calls.iter().any(|p| {
        syn::parse_str::<Expr>(p)
            .is_ok_and(|pat| calls.iter().any(|c| call_matches(w, &pat, c, &mut None)))
    });
    // A record written once, with no lease: a serialized document under the key
    // (`TxnOp::put(key, serialize(&state)?, None)`), where a lock writes who holds it.
    let document = calls.iter().any(|c| {
        matches!(&*c.func, Expr::Path(p) if p.path.segments.last().is_some_and(|s| s.ident == "put"))
            && c.args.iter().nth(1).is_some_and(serialized)
    });
    (reads_back || document) && !ttl::carries_lease(w, opt)
}

/// A value serialized for storage (`serde_json::to_vec(&state)?`, `bincode::serialize(&x)`,
/// `msg.encode_to_vec()`): a document, not a holder's name.
fn serialized(e: &Expr) -> bool {
    const SERIALIZE: &[&str] = &[
        "serialize",
        "to_vec",
        "to_vec_pretty",
        "to_string_pretty",
        "to_bytes",
        "encode",
    ];
    match super::summary::peel_key(e) {
        Expr::Try(t) => serialized(&t.expr),
        Expr::MethodCall(m) if matches!(m.method.to_string().as_str(), "unwrap" | "expect") => {
            serialized(&m.receiver)
        }
        Expr::MethodCall(m) => matches!(
            m.method.to_string().as_str(),
            "encode_to_vec" | "write_to_bytes" | "to_json"
        ),
        Expr::Call(c) => {
            !c.args.is_empty()
                && matches!(&*c.func, Expr::Path(p) if p.path.segments.last().is_some_and(|s| {
                    SERIALIZE.contains(&s.ident.to_string().as_str())
                        // `serde_json::to_string(&state)`, not `id.to_string()`.
                        || s.ident == "to_string" && p.path.segments.len() > 1
                }))
        }
        _ => false,
    }
}

/// A key expression's text without the conversions that do not change which key it is
/// (`&k`, `k.as_str()`, `k.clone()`, `k.to_string()`).
fn key_text(e: &Expr) -> String {
    quote::ToTokens::to_token_stream(super::summary::peel_key(e)).to_string()
}

/// The lock's key a `when-calls` pattern marks, for a call that has no `key-arg`.
fn when_key<'a>(w: &Walker<'a, '_>, def: &CallDef, args: &[&'a Expr]) -> Option<&'a Expr> {
    if def.when_calls.is_empty() {
        return None;
    }
    when_calls(w, def, def.options_arg.and_then(|i| args.get(i).copied())?)?
}

/// Does a call match a `when-calls` pattern? The pattern's path must end the call's resolved path
/// (`TxnOp::put` matches `etcd_client::TxnOp::put`); its arguments, when it lists any, match one
/// for one: `_` any, `KEY` any (and is captured as the key), otherwise the same tokens or the
/// same constant value.
fn call_matches<'a>(
    w: &Walker<'a, '_>,
    pat: &Expr,
    call: &'a syn::ExprCall,
    key: &mut Option<&'a Expr>,
) -> bool {
    let (pat_path, pat_args) = match pat {
        Expr::Call(c) => match &*c.func {
            Expr::Path(p) => (&p.path, Some(&c.args)),
            _ => return false,
        },
        Expr::Path(p) => (&p.path, None),
        _ => return false,
    };
    let Expr::Path(f) = &*call.func else {
        return false;
    };
    let want: Vec<String> = pat_path
        .segments
        .iter()
        .map(|s| s.ident.to_string())
        .collect();
    let path = w.resolve(&f.path);
    let have: Vec<&str> = path.split("::").collect();
    if have.len() < want.len()
        || !have.ends_with(&want.iter().map(String::as_str).collect::<Vec<_>>())
    {
        return false;
    }
    let Some(pat_args) = pat_args else {
        return true;
    };
    if pat_args.len() != call.args.len() {
        return false;
    }
    let tokens = |e: &Expr| quote::ToTokens::to_token_stream(e).to_string();
    let mut captured = None;
    let all = pat_args.iter().zip(call.args.iter()).all(|(p, a)| {
        if matches!(p, Expr::Infer(_)) || tokens(p) == "_" {
            return true;
        }
        if tokens(p) == "KEY" {
            captured = Some(a);
            return true;
        }
        if let Expr::Path(pp) = p
            && let Expr::Path(ap) = a
        {
            // `CompareOp::Equal` however the code imported it.
            let last = |x: &syn::Path| x.segments.last().map(|s| s.ident.to_string());
            return last(&pp.path) == last(&ap.path)
                && (pp.path.segments.len() == 1
                    || w.resolve(&ap.path).ends_with(&tokens(p).replace(' ', "")));
        }
        if let Expr::Lit(_) = p {
            return eval::eval(p, w)
                .and_then(|v| v.as_f64())
                .is_some_and(|n| eval::eval(a, w).and_then(|v| v.as_f64()) == Some(n))
                || tokens(p) == tokens(a);
        }
        tokens(p) == tokens(a)
    });
    if all && captured.is_some() {
        *key = captured;
    }
    all
}

fn build<'a>(
    w: &Walker<'a, '_>,
    r: CallRef,
    def: &CallDef,
    args: &[&'a Expr],
    receiver: Option<&'a Expr>,
    span: Span,
    api: String,
) -> Matched<'a> {
    let pack = &w.cx.packs.packs[r.pack].pack;
    let mut m = Matched {
        key: def.key_arg.and_then(|i| args.get(i).copied()),
        ttl: ttl::for_call(w, def, args, receiver),
        fencing: if pack.fencing == PackFencing::Token {
            Fencing::Token
        } else {
            Fencing::None
        },
        returns: def.returns,
        mentions: mentions_of(receiver, args),
        owner_checked: def.owner_check,
        auto_renew: def.auto_renew,
        stream_ttl: def.stream_ttl,
        key_is_prefix: def.key_is_prefix,
        handle: !def.reply_only
            && (def.returns_type.is_some()
                || def.in_scope.is_empty()
                    && !matches!(def.returns, Returns::Bool | Returns::ResultBool)),
        release: def.release,
        drop_releases: def.returns_type.is_some()
            && (def.drop_releases || def.release == Some(ReleaseStyle::Guard)),
        takeover: def.takeover_when_expired,
        scoped: def.scoped
            || def.via.is_some()
                && def.release == Some(ReleaseStyle::Guard)
                && def.returns_type.is_none(),
        consensus: def.consensus,
        purpose: def.purpose.map(|p| (p, def.fenced_by.clone())),
        success_variant: def.success_variant.clone(),
        lease_names: def
            .lease_arg
            .or(def.lease_id_arg)
            .and_then(|i| args.get(i))
            .map(|a| ttl::lease_names(w, a))
            .unwrap_or_default(),
        ..Matched::plain(r.pack, api, def.kind, span)
    };
    if let (Some(v), Some(k)) = (def.value_arg, def.key_arg) {
        let key = args.get(k).copied();
        m.use_decides = !key.is_some_and(|k| lock_key(w, r.pack, def, k))
            && !set_if_absent_says_lock(w, key, args.get(v).copied());
    }
    // Re-expiring a key in zero time (`expire(key, 0)`) deletes it: a release, as blind as a
    // `DEL` unless the pack says the call checks the owner.
    if def.kind == CallKind::Renew && matches!(m.ttl, Ttl::Known { ms, .. } if ms == 0.0) {
        m.kind = CallKind::Release;
        m.ttl = Ttl::Implicit;
    }
    // A lock the pack says stays with the receiver is known by the receiver, as a wrapper's
    // that keeps it in `self` is.
    if def.held == Some(crate::packs::HeldIn::Receiver) {
        m.handle = false;
        m.key = receiver.map(super::summary::peel_key);
    }
    // An object the function changes before writing it, whose lock-taking field it sets only
    // under a boolean parameter.
    if let Some(p) = def
        .fields_arg
        .and_then(|i| args.get(i))
        .and_then(|a| super::fields::parameter(a, &|n| w.is_param(n)))
    {
        m.gate = def
            .when_fields
            .iter()
            .flat_map(|f| f.split('|'))
            .filter(|f| !f.ends_with('='))
            .find_map(|f| w.field_gate(&p.to_string(), f));
    }
    // A wrapper's call site inherits what the primitive inside it has.
    m.via = def.via.clone();
    m.origin = def.origin.clone();
    if let Some(info) = &def.inherit {
        // A wrapper whose primitive takes its TTL from a parameter: the argument, evaluated
        // above like a pack's TTL argument, is the deadline.
        // So is one taking it from its receiver's field, read where the receiver was built.
        let from_field = def.ttl_field.is_some() && !matches!(m.ttl, Ttl::Implicit | Ttl::Unknown);
        if def.ttl_arg.is_none() && !from_field {
            m.ttl = info.ttl_ms.map_or(Ttl::Implicit, |ms| Ttl::Known {
                ms,
                span,
                inherited: true,
            });
        }
        m.fencing = info.fencing;
        m.sql = info.sql;
        // A `Drop` that unlocks (the engine then says `Guard`) gives the connection back clean.
        m.lent_handle = info.lent && def.release != Some(ReleaseStyle::Guard);
        m.backend = info.backend.clone();
        // A session lock left on the connection passed: a connection a pool lent goes back
        // to the pool with it.
        if let Some(conn) = info.session_arg.and_then(|i| args.get(i)) {
            m.session_on = super::walk::local_named(conn);
            m.checkout = m.session_on.clone().filter(|n| w.checkouts.contains(n));
            // A pool passed where the helper runs its statement (`try_lock(&pool, key)` running
            // `fetch_one(pool)`): the lock stays on whichever connection served it.
            let pools = &w.cx.packs.packs[m.pack].pack.pools;
            m.pool = w
                .type_of(conn)
                .map(|t| t.peeled().path.clone())
                .filter(|p| pools.iter().any(|pool| pool == p));
        }
        // A lock left in the store or in the receiver is known by its key argument or by the
        // receiver, never by the value the call returns.
        // …and so is a lock whose primitive only replies about a key (a wrapper returning
        // `SET NX`'s reply is not handing out a lock value).
        if info.held.is_some() || !info.handle {
            m.handle = false;
        }
        if info.held == Some(super::Held::Receiver) {
            m.key = receiver;
        }
        m.key = m.key.map(super::summary::peel_key);
        m.pipeline = match &info.pipeline {
            Some(super::PipeVia::Returned) => Some(super::pipeline::PipeRun { local: None }),
            Some(super::PipeVia::Arg(i)) => Some(super::pipeline::PipeRun {
                local: args.get(*i).and_then(|a| local_root(a)),
            }),
            None => None,
        };
        if m.pipeline.is_some() {
            m.returns = Returns::ResultOption;
        }
    }
    m
}

/// The `.arg(..)` calls directly outside a command builder (innermost first), flattened, and how
/// many chain levels they take.
fn command_args<'a>(outward: &[&'a Expr]) -> (Vec<&'a Expr>, usize) {
    let mut cmd_args: Vec<&'a Expr> = Vec::new();
    let mut consumed = 0;
    for level in outward.iter().rev() {
        match level {
            Expr::MethodCall(m) if m.method == "arg" && m.args.len() == 1 => {
                flatten_args(&m.args[0], &mut cmd_args);
                consumed += 1;
            }
            _ => break,
        }
    }
    (cmd_args, consumed)
}

/// A command queued on a pipeline: its reply comes with the pipeline's, not from this
/// expression, unless the next call drops it.
fn in_pipeline<'a>(mut found: Matched<'a>, receiver: &Expr, outward: &[&'a Expr]) -> Matched<'a> {
    let next = outward
        .len()
        .checked_sub(found.consumed + 1)
        .map(|i| outward[i]);
    if matches!(next, Some(Expr::MethodCall(n)) if n.method == "ignore") {
        found.discarded =
            Some("`ignore` drops the reply that says whether the lock was taken".into());
    } else {
        found.returns = Returns::Value;
        found.pipeline = Some(super::pipeline::PipeRun {
            local: local_root(receiver),
        });
    }
    found
}

/// The packs of the pipeline a receiver is: a chain (`.atomic()`, earlier commands) whose root
/// is a pipeline builder's call, directly or through the local it was bound to.
fn pipeline_of<'w>(w: &'w Walker<'_, '_>, receiver: &Expr) -> Option<&'w [usize]> {
    let mut cur = receiver;
    for _ in 0..64 {
        cur = match cur {
            Expr::MethodCall(m) => &m.receiver,
            Expr::Reference(r) => &r.expr,
            Expr::Paren(p) => &p.expr,
            Expr::Path(p) => {
                let name = p.path.get_ident()?.to_string();
                match w.builder(&name) {
                    Some((init, _)) => init,
                    // A pipeline passed in or typed by its annotation (`pipe: &mut Pipeline`).
                    None => return pipeline_type(w, cur),
                }
            }
            Expr::Call(c) => {
                let Expr::Path(f) = &*c.func else { return None };
                return w
                    .cx
                    .packs
                    .pipeline_builders
                    .get(&w.resolve(&f.path))
                    .map(Vec::as_slice);
            }
            _ => return None,
        };
    }
    None
}

/// The type of a pipeline the typing does not know (`let mut p = redis::pipe();`): the one its
/// pack builds with `<Type>::new`.
fn pipeline_ty(w: &Walker<'_, '_>, receiver: &Expr) -> Option<crate::model::Ty> {
    let packs = pipeline_of(w, receiver)?;
    let mut types: Vec<&str> =
        w.cx.packs
            .pipeline_builders
            .iter()
            .filter(|(_, p)| p.iter().any(|i| packs.contains(i)))
            .filter_map(|(b, _)| b.strip_suffix("::new"))
            .collect();
    types.sort_unstable();
    types
        .first()
        .map(|t| crate::model::Ty::simple(t.to_string()))
}

/// The packs whose pipeline type a value has (`redis::Pipeline`, from its builders' paths).
fn pipeline_type<'w>(w: &'w Walker<'_, '_>, e: &Expr) -> Option<&'w [usize]> {
    let ty = w.type_of(e)?;
    let path = &ty.peeled().path;
    w.cx.packs
        .pipeline_builders
        .iter()
        .find(|(b, _)| {
            b.rsplit_once("::")
                .is_some_and(|(parent, _)| parent == path)
        })
        .map(|(_, packs)| packs.as_slice())
}

/// The local a chain starts from (`pipe` in `pipe.atomic()`, `&mut pipe`).
fn local_root(e: &Expr) -> Option<String> {
    match e {
        Expr::MethodCall(m) => local_root(&m.receiver),
        Expr::Reference(r) => local_root(&r.expr),
        Expr::Paren(p) => local_root(&p.expr),
        Expr::Path(p) => p.path.get_ident().map(ToString::to_string),
        _ => None,
    }
}

/// A chain rooted in a local bound to a builder:
/// `let mut cmd = redis::cmd("SET"); cmd.arg(key).arg("NX"); … cmd.arg("PX").arg(ms).query_async(con)`
/// is judged where it runs, with the arguments of the builder expression, of the statements that
/// added to it and of the chain (when the builder expression alone made a site, that site
/// stands); `let s = Script::new(LUA); s.key(k).invoke_async(con)` is a script event.
fn match_from_local<'a>(
    w: &Walker<'a, '_>,
    local: &'a syn::ExprPath,
    outward: &[&'a Expr],
) -> Option<Matched<'a>> {
    let name = local.path.get_ident()?.to_string();
    let (init, added) = w.builder(&name)?;
    // A script runs where it is invoked (`script\n.key(k)\n.invoke_async(con)`), not where the
    // chain names the local.
    let invoked = outward
        .iter()
        .rev()
        .find_map(|e| match e {
            Expr::MethodCall(m) if m.method.to_string().starts_with("invoke") => {
                Some(Span::of(&m.method))
            }
            _ => None,
        })
        .unwrap_or(Span::of(local));
    // `let mut invoke = SCRIPT.prepare_invoke(); for k in keys { invoke.key(k); }
    // invoke.arg(id); invoke.invoke_async(con)`: the script with what the statements added.
    if let Expr::MethodCall(prep) = init
        && prep.method == "prepare_invoke"
        && prep.args.is_empty()
    {
        let (pi, lua) = script_of(w, &prep.receiver)?;
        let keys = w.builder_keys(&name);
        return script_event(w, pi, &lua, outward, invoked, (keys, added));
    }
    if let Some((c, path)) = builder_call(w, init)
        && let Some(&pi) = w.cx.packs.script_builders.get(&path)
    {
        let builder_args: Vec<&'a Expr> = c.args.iter().collect();
        return match_script(w, pi, &builder_args, outward, invoked);
    }
    let built = built_command(w, init, added)?;
    // Only where it runs: the statements that add arguments are no sites.
    let (chained, consumed) = command_args(outward);
    let run = match outward.len().checked_sub(consumed + 1).map(|i| outward[i]) {
        Some(Expr::MethodCall(r)) if RUNS.contains(&r.method.to_string().as_str()) => r,
        _ => return None,
    };
    let mut cmd_args = built.args;
    cmd_args.extend(chained);
    let span = Span::join(Span::of(local), Span::of(&run.method));
    match_named_command(w, &built.packs, built.name, cmd_args, consumed, span)
}

/// The calls that run a built command: on it (`cmd.query_async(con)`), or on a connection it is
/// handed to (`pool.query_async(cmd)`, `con.req_packed_command(&cmd)`).
const RUNS: &[&str] = &[
    "query",
    "query_async",
    "exec",
    "exec_async",
    "req_packed_command",
];

/// `conn.query_async(cmd)` where `cmd` is a local bound to a command builder: the command runs
/// here, with what the builder and the statements after it gave it.
fn match_command_argument<'a>(
    w: &Walker<'a, '_>,
    m: &'a syn::ExprMethodCall,
) -> Option<Matched<'a>> {
    if !RUNS.contains(&m.method.to_string().as_str()) || m.args.len() != 1 {
        return None;
    }
    let name = super::walk::local_named(&m.args[0])?;
    let (init, added) = w.builder(&name)?;
    let built = built_command(w, init, added)?;
    let span = Span::join(Span::of(&*m.receiver), Span::of(&m.method));
    match_named_command(w, &built.packs, built.name, built.args, 0, span)
}

/// The call a builder expression starts from, under its `.arg(..)`s, with its resolved path.
fn builder_call<'a>(w: &Walker<'a, '_>, init: &'a Expr) -> Option<(&'a syn::ExprCall, String)> {
    let mut cur = init;
    while let Expr::MethodCall(mc) = cur {
        if mc.method != "arg" || mc.args.len() != 1 {
            return None;
        }
        cur = &mc.receiver;
    }
    let Expr::Call(c) = cur else { return None };
    let Expr::Path(f) = &*c.func else { return None };
    Some((c, w.resolve(&f.path)))
}

/// A command a local's builder holds so far.
struct Built<'a> {
    packs: Vec<usize>,
    name: String,
    args: Vec<&'a Expr>,
}

/// `redis::cmd(NAME).arg(..)` or redis-rs's command constructors (`Cmd::set(k, v)`,
/// `Cmd::set_nx(k, v)`: the method names the command, its arguments come first), with the
/// arguments statements added after it (`added`). `None` when the builder expression alone made
/// a site already.
fn built_command<'a>(w: &Walker<'a, '_>, init: &'a Expr, added: &[&'a Expr]) -> Option<Built<'a>> {
    let mut own = Vec::new();
    let mut cur = init;
    while let Expr::MethodCall(mc) = cur {
        if mc.method != "arg" || mc.args.len() != 1 {
            return None;
        }
        own.push(&mc.args[0]);
        cur = &mc.receiver;
    }
    let (c, path) = builder_call(w, init)?;
    if w.matched(cur) {
        return None;
    }
    let (packs, name, mut args) = match w.cx.packs.command_builders.get(&path) {
        Some(packs) => (
            packs.clone(),
            eval::eval_str(c.args.first()?, w)?.to_ascii_uppercase(),
            Vec::new(),
        ),
        // `Cmd::new()`: the first argument added names the command.
        None if c.args.is_empty() && empty_cmd_builder(w, &path).is_some() => {
            let packs = empty_cmd_builder(w, &path)?.to_vec();
            let mut all = Vec::new();
            for a in own.iter().rev() {
                flatten_args(a, &mut all);
            }
            all.extend(added.iter().copied());
            if all.is_empty() {
                return None;
            }
            let name = eval::eval_str(all.remove(0), w)?.to_ascii_uppercase();
            return Some(Built {
                packs,
                name,
                args: all,
            });
        }
        None => {
            let (ty, method) = path.rsplit_once("::")?;
            let root = ty
                .strip_suffix("::cmd::Cmd")
                .or_else(|| ty.strip_suffix("::Cmd"))?;
            let packs = w.cx.packs.command_builders.get(&format!("{root}::cmd"))?;
            let args: Vec<&'a Expr> = c.args.iter().collect();
            (
                packs.clone(),
                method.replace('_', "").to_ascii_uppercase(),
                args,
            )
        }
    };
    for a in own.into_iter().rev() {
        flatten_args(a, &mut args);
    }
    args.extend(added.iter().copied());
    Some(Built { packs, name, args })
}

/// The packs of a command built empty (`redis::Cmd::new()`, named by its first `.arg`): the
/// `Cmd` type of a crate whose `cmd` function is a command builder.
fn empty_cmd_builder<'w>(w: &'w Walker<'_, '_>, path: &str) -> Option<&'w [usize]> {
    let ty = path.strip_suffix("::new")?;
    let root = ty
        .strip_suffix("::cmd::Cmd")
        .or_else(|| ty.strip_suffix("::Cmd"))?;
    w.cx.packs
        .command_builders
        .get(&format!("{root}::cmd"))
        .map(Vec::as_slice)
}

/// `redis::cmd("SET").arg(key).arg(val).arg("NX").arg("PX").arg(30_000)`: `args` are the
/// builder's own (the command's name), `cmd_args` the `.arg(..)`s, in order.
fn match_command<'a>(
    w: &Walker<'a, '_>,
    packs: &[usize],
    args: &[&'a Expr],
    cmd_args: Vec<&'a Expr>,
    consumed: usize,
    span: Span,
) -> Option<Matched<'a>> {
    let name = eval::eval_str(args.first()?, w)?.to_ascii_uppercase();
    match_named_command(w, packs, name, cmd_args, consumed, span)
}

fn match_named_command<'a>(
    w: &Walker<'a, '_>,
    packs: &[usize],
    name: String,
    cmd_args: Vec<&'a Expr>,
    consumed: usize,
    span: Span,
) -> Option<Matched<'a>> {
    if let Some(found) = match_script_command(w, packs, &name, &cmd_args, consumed, span) {
        return Some(found);
    }
    let values: Vec<Option<Value>> = cmd_args.iter().map(|a| eval::eval(a, w)).collect();
    let word = |v: &Option<Value>| match v {
        Some(Value::Str(s)) => Some(s.to_ascii_uppercase()),
        _ => None,
    };
    for &pi in packs {
        for c in &w.cx.packs.packs[pi].commands {
            if !c.name.eq_ignore_ascii_case(&name) {
                continue;
            }
            if !c.when.iter().all(|wanted| {
                values
                    .iter()
                    .any(|v| word(v).as_deref() == Some(&wanted.to_ascii_uppercase()))
            }) {
                continue;
            }
            let mut ttl = Ttl::Missing {
                reason: format!(
                    "`{name} … {}` sets no expiry (EX, PX, EXAT or PXAT)",
                    c.when.join(" ")
                ),
            };
            for (i, v) in values.iter().enumerate() {
                let Some(flag) = word(v) else { continue };
                let Some(unit) = c
                    .ttl_flags
                    .iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case(&flag))
                    .map(|(_, u)| *u)
                else {
                    continue;
                };
                // `.arg("PX").arg(ttl)` with `ttl` the function's parameter.
                let from_param = || {
                    cmd_args
                        .get(i + 1)
                        .and_then(|a| ttl::param_ttl(w, a, unit.ttl_unit()))
                        .unwrap_or(Ttl::Unknown)
                };
                ttl = match (unit, values.get(i + 1).cloned().flatten()) {
                    (FlagUnit::At, _) => Ttl::Absolute,
                    (unit, Some(v)) => match v.as_f64() {
                        Some(n) => Ttl::Known {
                            ms: if unit == FlagUnit::S { n * 1000.0 } else { n },
                            span: cmd_args.get(i + 1).map_or(span, |a| Span::of(*a)),
                            inherited: false,
                        },
                        None => from_param(),
                    },
                    (_, None) => from_param(),
                };
                break;
            }
            if c.deadline != DeadlineRule::Required
                && !matches!(
                    ttl,
                    Ttl::Known { .. }
                        | Ttl::Absolute
                        | Ttl::Unknown
                        | Ttl::Param { .. }
                        | Ttl::Field { .. }
                )
            {
                ttl = if c.deadline == DeadlineRule::Never {
                    ttl
                } else {
                    Ttl::Implicit
                };
            }
            let pack = &w.cx.packs.packs[pi].pack;
            let mut api = name.clone();
            for wv in &c.when {
                api.push(' ');
                api.push_str(&wv.to_ascii_uppercase());
            }
            return Some(Matched {
                key: c.key_arg.and_then(|i| cmd_args.get(i).copied()),
                ttl,
                fencing: if pack.fencing == PackFencing::Token {
                    Fencing::Token
                } else {
                    Fencing::None
                },
                // `SET … NX` answers nil when the key exists: the caller must look.
                returns: Returns::ResultOption,
                consumed,
                mentions: mentions_of(None, &cmd_args),
                owner_checked: c.owner_check,
                ..Matched::plain(pi, api, c.kind, span)
            });
        }
    }
    None
}

/// `redis::Script::new(RELEASE).key(k).arg(token).invoke_async(con)`: what the Lua text does to
/// its key ([`lua::script_effect`]). A `SET … NX` (or a read-then-set) takes it, deleting it
/// releases, re-expiring it renews; owner-checked when the script compares the key's value with
/// an argument first (compare-and-delete). Scripts that do none of these are no event.
fn match_script<'a>(
    w: &Walker<'a, '_>,
    pi: usize,
    args: &[&'a Expr],
    outward: &[&'a Expr],
    span: Span,
) -> Option<Matched<'a>> {
    let lua = eval::eval_str(args.first()?, w)?;
    script_event(w, pi, &lua, outward, span, (&[], &[]))
}

/// `added`: the keys and arguments statements gave the invocation before the chain that runs it.
fn script_event<'a>(
    w: &Walker<'a, '_>,
    pi: usize,
    lua: &str,
    outward: &[&'a Expr],
    span: Span,
    added: (&[&'a Expr], &[&'a Expr]),
) -> Option<Matched<'a>> {
    let (effect, owner_checked) = lua::script_effect(lua)?;
    // The `.key(..)`/`.arg(..)` calls directly outside the builder, innermost first.
    let (mut keys, mut script_args, mut consumed) = (added.0.to_vec(), added.1.to_vec(), 0);
    for level in outward.iter().rev() {
        match level {
            Expr::MethodCall(m) if m.method == "key" && m.args.len() == 1 => {
                keys.push(&m.args[0]);
            }
            Expr::MethodCall(m) if m.method == "arg" && m.args.len() == 1 => {
                script_args.push(&m.args[0]);
            }
            _ => break,
        }
        consumed += 1;
    }
    // Only where it runs: `let s = Script::new(LUA);` alone sends nothing.
    let run = outward.len().checked_sub(consumed + 1).map(|i| outward[i]);
    if !matches!(run, Some(Expr::MethodCall(m)) if m.method.to_string().starts_with("invoke")) {
        return None;
    }
    Some(lua_matched(
        w,
        pi,
        "Script::invoke".into(),
        &effect,
        owner_checked,
        &keys,
        &script_args,
        consumed,
        span,
    ))
}

/// A lock event done by server-side Lua, with the keys and arguments the caller passed.
#[allow(clippy::too_many_arguments)]
fn lua_matched<'a>(
    w: &Walker<'a, '_>,
    pi: usize,
    api: String,
    effect: &lua::Effect,
    owner_checked: bool,
    keys: &[&'a Expr],
    script_args: &[&'a Expr],
    consumed: usize,
    span: Span,
) -> Matched<'a> {
    let values = |i: usize| {
        let a = script_args.get(i)?;
        Some((eval::eval(a, w)?.as_f64()?, Span::of(*a)))
    };
    let mentioned: Vec<&Expr> = keys.iter().chain(script_args).copied().collect();
    let mut found = lua_event(pi, api, effect, owner_checked, &values, span);
    found.key = keys.first().copied();
    found.consumed = consumed;
    found.mentions = mentions_of(None, &mentioned);
    found
}

/// The event server-side Lua does, with `arg(i)` the value (and place) of the script's `i`th
/// argument when known.
fn lua_event<'a>(
    pi: usize,
    api: String,
    effect: &lua::Effect,
    owner_checked: bool,
    arg: &dyn Fn(usize) -> Option<(f64, Span)>,
    span: Span,
) -> Matched<'a> {
    let base = Matched {
        owner_checked,
        ..Matched::plain(pi, api.clone(), CallKind::Release, span)
    };
    match effect {
        lua::Effect::Release => base,
        lua::Effect::Renew => Matched {
            kind: CallKind::Renew,
            ..base
        },
        lua::Effect::Acquire(t) => {
            let ttl = match t {
                lua::LuaTtl::Missing => Ttl::Missing {
                    reason: format!(
                        "the script `{api}` runs sets its key with no expiry (no EX, PX or EXPIRE)"
                    ),
                },
                lua::LuaTtl::Ms(ms) => Ttl::Known {
                    ms: *ms,
                    span,
                    inherited: false,
                },
                lua::LuaTtl::Arg(i, unit) => match arg(*i) {
                    Some((n, at)) => Ttl::Known {
                        ms: n * unit,
                        span: at,
                        inherited: false,
                    },
                    None => Ttl::Unknown,
                },
                lua::LuaTtl::Absolute => Ttl::Absolute,
                lua::LuaTtl::Unknown => Ttl::Unknown,
            };
            Matched {
                kind: CallKind::TryAcquire,
                ttl,
                // Like `SET … NX`, the script answers nil (or 0) when the key is taken.
                returns: Returns::ResultOption,
                ..base
            }
        }
    }
}

/// fred's `client.eval(LUA, vec![key], vec![token, ttl])` / `client.fcall("acquire", key, args)`:
/// a `[[call]]` with `script`.
#[allow(clippy::too_many_arguments)]
fn script_method<'a>(
    w: &Walker<'a, '_>,
    pi: usize,
    what: ScriptArg,
    def: &CallDef,
    args: &[&'a Expr],
    receiver: &'a Expr,
    span: Span,
    method: &str,
) -> Option<Matched<'a>> {
    let first = eval::eval_str(args.get(def.script_arg)?, w)?;
    let (effect, owner_checked, api) = match what {
        ScriptArg::Text => {
            let (e, o) = lua::script_effect(&first)?;
            (e, o, method.to_string())
        }
        ScriptArg::Function => {
            let (e, o) = w.cx.index.lua_function(&first)?.clone();
            (e, o, format!("{method} {first}"))
        }
    };
    let script_args = def
        .args_arg
        .and_then(|i| args.get(i))
        .map(|a| listed(w, a))
        .unwrap_or_default();
    let values = |i: usize| {
        let a = script_args.get(i)?;
        Some((eval::eval(a, w)?.as_f64()?, span))
    };
    let mut found = lua_event(pi, api, &effect, owner_checked, &values, span);
    // The key, one expression of the call, or the one element of a list of keys (`vec![key
    // .clone()]`, `&[key]`, fred's `eval(script, vec![key], args)`).
    found.key = def
        .key_arg
        .and_then(|i| args.get(i).copied())
        .and_then(|k| match peel_refs(k) {
            list @ Expr::Macro(m) if m.mac.path.is_ident("vec") => one(listed(w, list)),
            list @ Expr::Array(_) => one(listed(w, list)),
            Expr::Macro(_) | Expr::Tuple(_) => None,
            _ => Some(k),
        });
    found.mentions = mentions_of(Some(receiver), args);
    Some(found)
}

/// `LOCK.key(k).arg(v).invoke(con)` on a static or constant script
/// (`static LOCK: LazyLock<Script> = LazyLock::new(|| Script::new(LUA))`, `lazy_static!`).
fn match_static_script<'a>(
    w: &Walker<'a, '_>,
    p: &'a syn::ExprPath,
    outward: &[&'a Expr],
) -> Option<Matched<'a>> {
    if p.path
        .get_ident()
        .is_some_and(|id| w.local_init(&id.to_string()).is_some())
    {
        return None;
    }
    let (pi, lua) = static_script(w, p)?;
    script_event(w, pi, &lua, outward, Span::of(p), (&[], &[]))
}

/// The script a static or constant holds (through `LazyLock::new(|| ..)` and the like).
fn static_script(w: &Walker<'_, '_>, p: &syn::ExprPath) -> Option<(usize, String)> {
    let path = w.resolve(&p.path);
    // 2015-edition `use scripts::LOCK;` names a path from the crate root.
    let (src, _) =
        w.cx.index
            .constant(&path)
            .or_else(|| w.cx.index.constant(&format!("crate::{path}")))?;
    let mut init: Expr = syn::parse_str(src).ok()?;
    // Through `Lazy::new(|| ..)` / `LazyLock::new(|| ..)` / `OnceLock`-style closures.
    loop {
        match init {
            Expr::Call(ref c)
                if c.args.len() == 1 && matches!(c.args.first(), Some(Expr::Closure(_))) =>
            {
                let Some(Expr::Closure(cl)) = c.args.first() else {
                    break;
                };
                init = (*cl.body).clone();
            }
            Expr::Block(ref b) if b.block.stmts.len() == 1 => match &b.block.stmts[0] {
                syn::Stmt::Expr(e, None) => init = e.clone(),
                _ => break,
            },
            _ => break,
        }
    }
    let Expr::Call(c) = &init else { return None };
    built_script(w, c)
}

/// `Script::new(LUA)`: the pack of the script builder and the Lua text.
fn built_script(w: &Walker<'_, '_>, c: &syn::ExprCall) -> Option<(usize, String)> {
    let Expr::Path(f) = &*c.func else { return None };
    let &pi = w.cx.packs.script_builders.get(&w.resolve(&f.path))?;
    Some((pi, eval::eval_str(c.args.first()?, w)?))
}

/// The script a `prepare_invoke()` is called on: `Script::new(LUA)`, a local bound to one, or a
/// static or constant holding one.
fn script_of(w: &Walker<'_, '_>, e: &Expr) -> Option<(usize, String)> {
    match e {
        Expr::Call(c) => built_script(w, c),
        Expr::Reference(r) => script_of(w, &r.expr),
        Expr::Paren(p) => script_of(w, &p.expr),
        Expr::Path(p) => match p
            .path
            .get_ident()
            .and_then(|i| w.local_init(&i.to_string()))
        {
            Some(init) => script_of(w, init),
            None => static_script(w, p),
        },
        _ => None,
    }
}

/// `redis::cmd("EVAL").arg(LUA).arg(1).arg(key).arg(token)` and
/// `redis::cmd("FCALL").arg("acquire_lock").arg(1).arg(key)…`: a pack's `script-commands`. The
/// script is the text, or the function of that name a Lua library of the crate registers.
fn match_script_command<'a>(
    w: &Walker<'a, '_>,
    packs: &[usize],
    name: &str,
    cmd_args: &[&'a Expr],
    consumed: usize,
    span: Span,
) -> Option<Matched<'a>> {
    let (pi, what) = packs.iter().find_map(|&pi| {
        let sc = &w.cx.packs.packs[pi].pack.script_commands;
        sc.iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| (pi, *v))
    })?;
    let first = eval::eval_str(cmd_args.first()?, w)?;
    let (effect, owner_checked, api) = match what {
        ScriptArg::Text => {
            let (e, o) = lua::script_effect(&first)?;
            (e, o, name.to_string())
        }
        ScriptArg::Function => {
            let (e, o) = w.cx.index.lua_function(&first)?.clone();
            (e, o, format!("{name} {first}"))
        }
    };
    // numkeys, then the keys, then the arguments; an unknown count leaves the keys unknown.
    let rest = cmd_args.get(2..).unwrap_or(&[]);
    let numkeys = cmd_args
        .get(1)
        .and_then(|a| eval::eval(a, w)?.as_f64())
        .map(|n| n as usize);
    let (keys, script_args): (&[&Expr], &[&Expr]) = match numkeys {
        Some(n) if n <= rest.len() => rest.split_at(n),
        _ => (&[], &[]),
    };
    Some(lua_matched(
        w,
        pi,
        api,
        &effect,
        owner_checked,
        keys,
        script_args,
        consumed,
        span,
    ))
}

/// The expressions of a list argument (`vec![a, b]`, `&[a, b]`, a tuple), or the argument itself;
/// `vec!` is a macro: its elements are read from its tokens and kept for the file.
fn listed<'a>(w: &Walker<'a, '_>, e: &'a Expr) -> Vec<&'a Expr> {
    match peel_refs(e) {
        Expr::Macro(m) if m.mac.path.is_ident("vec") => w
            .macro_exprs(&m.mac)
            .map(|p| p.iter().collect())
            .unwrap_or_default(),
        other => {
            let mut out = Vec::new();
            flatten_args(other, &mut out);
            out
        }
    }
}

/// The one element of a list, if it has one.
fn one(list: Vec<&Expr>) -> Option<&Expr> {
    match list[..] {
        [e] => Some(e),
        _ => None,
    }
}

fn peel_refs(mut e: &Expr) -> &Expr {
    while let Expr::Reference(r) = e {
        e = &r.expr;
    }
    e
}

pub(super) fn flatten_args<'a>(e: &'a Expr, out: &mut Vec<&'a Expr>) {
    match e {
        Expr::Reference(r) => flatten_args(&r.expr, out),
        Expr::Array(a) => a.elems.iter().for_each(|x| flatten_args(x, out)),
        Expr::Tuple(t) => t.elems.iter().for_each(|x| flatten_args(x, out)),
        other => out.push(other),
    }
}

fn match_sql<'a>(
    w: &Walker<'a, '_>,
    args: &[&'a Expr],
    outward: &[&'a Expr],
    call_span: Span,
    call_name: &str,
) -> Option<Matched<'a>> {
    for a in args {
        // The literal is the location when it is written at the call; otherwise the executing call.
        let span = if is_literal(a) {
            Span::of(*a)
        } else {
            call_span
        };
        let mut found: Option<Matched<'a>> = None;
        // What the statement is given (a renewal's `.bind(new_expires_at)`) is what the lock
        // operation is given: `wall-clock-deadline` ties a reading to it.
        let bound = bound_names(args, outward);
        for text in sql_texts(w, a, 0) {
            if let Some(mut m) = sql_match(w, &text, span, call_name, lease_key(args, outward)) {
                m.mentions.extend(bound.iter().cloned());
                if matches!(m.ttl, Ttl::Unknown)
                    && Some(m.pack) == w.cx.packs.lease_table
                    && m.kind != crate::packs::CallKind::Release
                    && let Some((n, per_ms)) = super::lease_sql::lease_interval_param(&text)
                    && let Some(value) = bound_params(args, outward).get(n - 1)
                {
                    m.ttl = super::ttl::bound_interval(w, value, per_ms);
                }
                // Of SQL chosen at run time, the acquisition is what the statement may do.
                let acquires = m.kind.is_acquisition();
                if found.is_none() || acquires {
                    found = Some(m);
                }
                if acquires {
                    break;
                }
            }
        }
        if found.is_some() {
            return found;
        }
    }
    None
}

/// The SQL texts an argument may hold: its value, or, for a local, each text it may have been
/// given (`let sql = match mode { Wait => "…lock…", Try => "…try_lock…" }`), or the text of the
/// statement it was prepared from (`let stmt = client.prepare(sql).await?`).
fn sql_texts(w: &Walker<'_, '_>, a: &Expr, depth: usize) -> Vec<String> {
    let chosen = chosen_texts(w, a);
    if !chosen.is_empty() {
        return chosen;
    }
    if let Some(text) = eval::eval_str(a, &Texts(w)) {
        return vec![text];
    }
    if depth > 4 {
        return Vec::new();
    }
    // A statement built from its text (`Statement::from_sql_and_values(backend, sql, values)`):
    // the first argument that holds text.
    if let Some(args) = statement_args(w, a) {
        return args
            .into_iter()
            .map(|arg| sql_texts(w, arg, depth + 1))
            .find(|t| !t.is_empty())
            .unwrap_or_default();
    }
    // A function of the program picking one text of several (`self.lease_acquire()` answering
    // `match self { Pg => "UPDATE …", My => "UPDATE …" }`): each.
    if let Some(tail) = text_fn_tail(w, super::summary::peel_key(a)) {
        let alts = alternatives(&tail);
        if alts.len() > 1 {
            return alts
                .into_iter()
                .filter_map(|alt| eval::eval_str(alt, &Texts(w)))
                .collect();
        }
    }
    let Expr::Path(p) = super::summary::peel_key(a) else {
        return Vec::new();
    };
    let Some(init) = p
        .path
        .get_ident()
        .and_then(|id| w.local_init(&id.to_string()))
    else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for alt in alternatives(init) {
        if let Some(text) = eval::eval_str(alt, &Texts(w)) {
            out.push(text);
        } else if let Some(sql) = prepared_from(alt) {
            out.extend(sql_texts(w, sql, depth + 1));
        }
    }
    out
}

/// SQL assembled from a local chosen by `if` or `match` (`let f = if tx { "pg_advisory_xact_lock" }
/// else { "pg_advisory_lock" }; let sql = format!("SELECT {f}($1)");`): the text for each
/// choice. At most two such locals of at most eight choices each are tried.
fn chosen_texts(w: &Walker<'_, '_>, a: &Expr) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    let add = |tokens: proc_macro2::TokenStream, names: &mut Vec<String>| {
        let mut todo = vec![tokens];
        while let Some(ts) = todo.pop() {
            for t in ts {
                match t {
                    proc_macro2::TokenTree::Ident(i) => names.push(i.to_string()),
                    proc_macro2::TokenTree::Group(g) => todo.push(g.stream()),
                    // `format!("SELECT {func}($1)")` captures `func` inside the literal.
                    proc_macro2::TokenTree::Literal(l) => {
                        let text = l.to_string();
                        let mut rest = text.as_str();
                        while let Some(i) = rest.find('{') {
                            rest = &rest[i + 1..];
                            let end = rest
                                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                                .unwrap_or(rest.len());
                            if end > 0 && matches!(rest[end..].chars().next(), Some('}' | ':')) {
                                names.push(rest[..end].to_string());
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
    };
    add(quote::ToTokens::to_token_stream(a), &mut names);
    if let Expr::Path(p) = super::summary::peel_key(a)
        && let Some(init) = p
            .path
            .get_ident()
            .and_then(|id| w.local_init(&id.to_string()))
    {
        add(quote::ToTokens::to_token_stream(init), &mut names);
    }
    names.sort();
    names.dedup();
    let choices: Vec<(String, Vec<&Expr>)> = names
        .into_iter()
        .filter_map(|n| {
            let alts = alternatives(w.local_init(&n)?);
            (alts.len() > 1 && alts.len() <= 8).then_some((n, alts))
        })
        .take(2)
        .collect();
    if choices.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    let first = &choices[0];
    for &x in &first.1 {
        let seconds: Vec<Option<&Expr>> = match choices.get(1) {
            Some((_, alts)) => alts.iter().map(|&e| Some(e)).collect(),
            None => vec![None],
        };
        for y in seconds {
            let mut picks = vec![(first.0.as_str(), x)];
            if let (Some((n, _)), Some(y)) = (choices.get(1), y) {
                picks.push((n.as_str(), y));
            }
            if let Some(text) = eval::eval_str(
                a,
                &Chosen {
                    inner: &Texts(w),
                    picks,
                },
            ) {
                out.push(text);
            }
        }
    }
    out
}

/// The walker's evaluation environment where text is looked for (SQL): calls of the program's
/// text-building functions read as the text they build (`self.campaign_sql()`, also as a field's
/// initialiser). Not where a value's identity matters: `self.key(id)` stays the call it is.
struct Texts<'w, 'a, 'c>(&'w Walker<'a, 'c>);

impl eval::Lookup for Texts<'_, '_, '_> {
    fn local(&self, name: &str) -> Option<&Expr> {
        self.0.local(name)
    }
    fn constant(&self, path: &syn::Path) -> Option<eval::Value> {
        self.0.constant(path)
    }
    fn resolve_fn(&self, path: &syn::Path) -> String {
        self.0.resolve_fn(path)
    }
    fn field(&self, base: &Expr, member: &syn::Member) -> Option<eval::Value> {
        self.0.field_value(base, member, true)
    }
    fn include(&self, rel: &str) -> Option<String> {
        self.0.include(rel)
    }
    fn text_fn(&self, call: &Expr) -> Option<Expr> {
        text_fn_tail(self.0, call)
    }
    fn assigned_fields(&self, name: &str) -> Vec<(String, &Expr)> {
        self.0.assigned_fields(name)
    }
}

/// An evaluation environment in which some locals take one of their possible values.
struct Chosen<'p, 'w> {
    inner: &'w dyn eval::Lookup,
    picks: Vec<(&'p str, &'p Expr)>,
}

impl eval::Lookup for Chosen<'_, '_> {
    fn local(&self, name: &str) -> Option<&Expr> {
        self.picks
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, e)| *e)
            .or_else(|| self.inner.local(name))
    }
    fn constant(&self, path: &syn::Path) -> Option<eval::Value> {
        self.inner.constant(path)
    }
    fn resolve_fn(&self, path: &syn::Path) -> String {
        self.inner.resolve_fn(path)
    }
    fn field(&self, base: &Expr, member: &syn::Member) -> Option<eval::Value> {
        self.inner.field(base, member)
    }
    fn include(&self, rel: &str) -> Option<String> {
        self.inner.include(rel)
    }
    fn text_fn(&self, call: &Expr) -> Option<Expr> {
        self.inner.text_fn(call)
    }
}

/// The values an expression may take: the tails of a `match`'s arms or an `if`'s branches.
fn alternatives(e: &Expr) -> Vec<&Expr> {
    fn tail(b: &syn::Block) -> Option<&Expr> {
        match b.stmts.last() {
            Some(syn::Stmt::Expr(x, None)) => Some(x),
            _ => None,
        }
    }
    match e {
        Expr::Match(m) => m.arms.iter().flat_map(|a| alternatives(&a.body)).collect(),
        Expr::If(i) => {
            let mut out: Vec<&Expr> = tail(&i.then_branch).map(alternatives).unwrap_or_default();
            if let Some((_, els)) = &i.else_branch {
                out.extend(alternatives(els));
            }
            out
        }
        Expr::Block(b) => tail(&b.block).map(alternatives).unwrap_or_default(),
        Expr::Paren(p) => alternatives(&p.expr),
        other => vec![other],
    }
}

/// `client.prepare(sql).await?` (tokio-postgres, also `prepare_cached`/`prepare_typed`): `sql`.
fn prepared_from(e: &Expr) -> Option<&Expr> {
    match e {
        Expr::Await(a) => prepared_from(&a.base),
        Expr::Try(t) => prepared_from(&t.expr),
        Expr::Paren(p) => prepared_from(&p.expr),
        Expr::MethodCall(m) if m.method.to_string().starts_with("prepare") => m.args.first(),
        Expr::MethodCall(m) => prepared_from(&m.receiver),
        _ => None,
    }
}

/// The arguments of a statement built from its text (`Statement::from_string(DbBackend::Postgres,
/// sql)`, also bound to a local first); none for one built for SQLite.
fn statement_args<'e>(w: &Walker<'e, '_>, e: &'e Expr) -> Option<Vec<&'e Expr>> {
    let mut cur = e;
    for _ in 0..8 {
        cur = match cur {
            Expr::Reference(r) => &r.expr,
            Expr::Paren(p) => &p.expr,
            Expr::Path(p) => w.local_init(&p.path.get_ident()?.to_string())?,
            Expr::Call(c) => {
                let Expr::Path(f) = &*c.func else { return None };
                let last = f.path.segments.last()?.ident.to_string();
                if !w.cx.packs.sql_statements.contains(&last) {
                    return None;
                }
                // Built for SQLite (`Statement::from_sql_and_values(DbBackend::Sqlite, ..)`):
                // one process's file, whose own write lock does the work; no distributed lock.
                if c.args.iter().any(|a| {
                    matches!(a, Expr::Path(p) if p.path.segments.len() > 1
                        && p.path.segments.last().is_some_and(|s| s.ident == "Sqlite"))
                }) {
                    return None;
                }
                return Some(c.args.iter().collect());
            }
            _ => return None,
        };
    }
    None
}

/// The methods that run a built statement on the executor they are given (sqlx's `Execute`).
const EXECUTING: &[&str] = &[
    "execute",
    "execute_many",
    "fetch",
    "fetch_all",
    "fetch_many",
    "fetch_one",
    "fetch_optional",
];

/// `sqlx::query(sql).bind(k).execute(&pool)`: the argument of the call that runs a built
/// statement (`outward` holds the enclosing chain levels, outermost first).
fn executor<'a>(outward: &[&'a Expr]) -> Option<&'a Expr> {
    outward.iter().rev().find_map(|level| match level {
        Expr::MethodCall(m) if EXECUTING.contains(&m.method.to_string().as_str()) => m.args.first(),
        _ => None,
    })
}

/// The call that runs a query builder's statement on the way out (`.get_result(conn)`,
/// `.execute(conn)`), and the connection it runs on.
fn dsl_runner<'a>(outward: &[&'a Expr]) -> Option<(&'static str, Option<&'a Expr>)> {
    const RUNS: &[&str] = &[
        "get_result",
        "get_results",
        "first",
        "load",
        "load_iter",
        "execute",
    ];
    outward.iter().find_map(|level| match level {
        Expr::MethodCall(m) => RUNS
            .iter()
            .find(|r| m.method == **r)
            .map(|r| (*r, m.args.first())),
        _ => None,
    })
}

/// Notes the pool a SQL site runs on, when its executor's type is one of its pack's pools.
fn on_pool<'a>(
    w: &Walker<'a, '_>,
    mut found: Matched<'a>,
    executor: Option<&'a Expr>,
) -> Matched<'a> {
    let pools = &w.cx.packs.packs[found.pack].pack.pools;
    found.pool = executor
        .and_then(|e| w.type_of(e))
        .map(|t| t.peeled().path.clone())
        .filter(|p| pools.iter().any(|pool| pool == p));
    found.session_on = executor.and_then(super::walk::local_named);
    found.checkout = found.session_on.clone().filter(|n| w.checkouts.contains(n));
    found
}

fn is_literal(e: &Expr) -> bool {
    match e {
        Expr::Lit(_) => true,
        Expr::Reference(r) => is_literal(&r.expr),
        Expr::Paren(p) => is_literal(&p.expr),
        Expr::Macro(m) => m
            .mac
            .path
            .segments
            .last()
            .is_some_and(|s| s.ident == "concat" || s.ident == "format"),
        _ => false,
    }
}

/// `bound`: the statement's first bound value, when the call shows it (a lease row is known by
/// it; see `lease_key`).
fn sql_match<'a>(
    w: &Walker<'a, '_>,
    text: &str,
    span: Span,
    call_name: &str,
    bound: Option<&'a Expr>,
) -> Option<Matched<'a>> {
    let funcs = sql_functions(text);
    let mut best: Option<(usize, usize)> = None;
    for f in &funcs {
        if let Some(&(pi, si)) = w.cx.packs.sql_functions.get(f.as_str()) {
            let kind = w.cx.packs.packs[pi].sql[si].kind;
            if kind.is_acquisition() {
                best = Some((pi, si));
                break;
            }
            best.get_or_insert((pi, si));
        }
    }
    let Some((pi, si)) = best else {
        return lease_match(w, text, span, bound);
    };
    let def = &w.cx.packs.packs[pi].sql[si];
    let pack = &w.cx.packs.packs[pi].pack;
    let fencing = match def.scope {
        SqlScope::Transaction => Fencing::Transaction,
        SqlScope::Session if pack.fencing == PackFencing::Token => Fencing::Token,
        SqlScope::Session => Fencing::None,
    };
    // `GET_LOCK(name, -1)` waits forever: it answers 1 or fails, like a blocking acquire.
    let waits_forever = def.wait_arg.is_some_and(|i| {
        sql_args(text, &def.function)
            .and_then(|args| args.get(i).map(|a| a.trim().starts_with('-')))
            .unwrap_or(false)
    });
    let kind = if waits_forever {
        CallKind::Acquire
    } else {
        def.kind
    };
    let try_kind = kind == CallKind::TryAcquire;
    // `… WHERE pg_try_advisory_lock(id)` (an upsert that only updates what it could lock): the
    // answer is which rows the statement touched, not a boolean in the reply.
    let answers_in_rows = try_kind && in_where_clause(text, &def.function);
    Some(Matched {
        fencing,
        returns: if try_kind && !answers_in_rows {
            Returns::ResultBool
        } else {
            Returns::Result
        },
        discarded: (try_kind && pack.sql_discarding_calls.iter().any(|c| c == call_name)).then(
            || format!("`{call_name}` discards the answer that says whether the lock was taken"),
        ),
        sql: true,
        release: (def.scope == SqlScope::Transaction).then_some(ReleaseStyle::Transaction),
        ..Matched::plain(pi, def.function.clone(), kind, span)
    })
}

/// The names in the values a statement is run with: its `.bind(..)`s on the way out, and the
/// parameters a call passes beside the text (`client.execute(sql, &[&key, &until])`).
fn bound_names(args: &[&Expr], outward: &[&Expr]) -> HashSet<String> {
    let mut out = HashSet::new();
    for e in outward {
        if let Expr::MethodCall(m) = e
            && m.method == "bind"
        {
            m.args.iter().for_each(|a| out.extend(idents_in(a)));
        }
    }
    for a in args.iter().skip(1) {
        out.extend(idents_in(a));
    }
    out
}

/// The values a statement is given, in order: sqlx's `.bind(..)`s on the way out, or
/// tokio-postgres's `&[&a, &b]`.
fn bound_params<'a>(args: &[&'a Expr], outward: &[&'a Expr]) -> Vec<&'a Expr> {
    // `outward` runs from the outermost call in: the first `.bind` is the last there.
    let binds: Vec<&'a Expr> = outward
        .iter()
        .rev()
        .filter_map(|e| match e {
            Expr::MethodCall(m) if m.method == "bind" => m.args.first(),
            _ => None,
        })
        .collect();
    if !binds.is_empty() {
        return binds;
    }
    let mut params = Vec::new();
    if let Some(a) = args.get(1) {
        flatten_args(a, &mut params);
    }
    params
}

/// The value a lease statement is keyed by: its first bound parameter (`.bind(name)` on the
/// way out, or the first of tokio-postgres's `&[&name, ..]`).
fn lease_key<'a>(args: &[&'a Expr], outward: &[&'a Expr]) -> Option<&'a Expr> {
    let bound = outward.iter().rev().find_map(|e| match e {
        Expr::MethodCall(m) if m.method == "bind" => m.args.first(),
        _ => None,
    });
    bound.or_else(|| {
        let mut params = Vec::new();
        flatten_args(args.get(1)?, &mut params);
        params.first().copied()
    })
}

/// A lease row claimed, renewed or released by the statement (`sites::lease_sql`): a lock with
/// an expiry whose length the SQL computes, kept in the table (not in the session: no pool or
/// connection concerns), whose claim answers in the rows it touched.
fn lease_match<'a>(
    w: &Walker<'a, '_>,
    text: &str,
    span: Span,
    key: Option<&'a Expr>,
) -> Option<Matched<'a>> {
    let pi = w.cx.packs.lease_table?;
    let vocab = w.cx.packs.packs[pi].lease_table.as_ref()?;
    let op = match super::lease_sql::lease_op(text, vocab) {
        Some(op) => op,
        None => {
            let table = super::lease_sql::keyed_write(text, vocab)?;
            picked_by_row_lock(w, vocab, &table, span)
                .then_some(super::lease_sql::LeaseOp::Claim)?
        }
    };
    let api = match op {
        super::lease_sql::LeaseOp::Claim => "lease row claim",
        super::lease_sql::LeaseOp::Renew => "lease row renewal",
        super::lease_sql::LeaseOp::Release | super::lease_sql::LeaseOp::Clear => {
            "lease row release"
        }
    };
    let ttl = match super::lease_sql::lease_interval_ms(text) {
        Some(ms) if op != super::lease_sql::LeaseOp::Release => Ttl::Known {
            ms,
            span,
            inherited: false,
        },
        _ => Ttl::Unknown,
    };
    Some(Matched {
        ttl,
        key,
        // A renewal or release that tests the holder column is owner-checked by construction.
        owner_checked: op != super::lease_sql::LeaseOp::Clear,
        ..Matched::plain(pi, api.to_string(), op.kind(), span)
    })
}

/// Did the function, before `at`, lock rows of `table` with a select that picks them
/// (`lease_sql::row_pick`: `SELECT … WHERE locked_until < now() FOR UPDATE SKIP LOCKED`, or the
/// query builder's `.for_update().skip_locked()`)? Then a write of holder and expiry to a row
/// by key is the claim's second statement. The whole body is read, closures included: the
/// select and the write commonly share a transaction's closure.
fn picked_by_row_lock(
    w: &Walker<'_, '_>,
    vocab: &crate::packs::LeaseTable,
    table: &str,
    at: Span,
) -> bool {
    struct Picks<'w, 'a, 'b> {
        w: &'w Walker<'a, 'b>,
        vocab: &'w crate::packs::LeaseTable,
        table: &'w str,
        at: (usize, usize),
        found: bool,
    }
    impl Picks<'_, '_, '_> {
        fn text(&mut self, text: &str, span: Span) {
            if (span.line, span.column) < self.at
                && super::lease_sql::row_pick(text, self.vocab).as_deref() == Some(self.table)
            {
                self.found = true;
            }
        }
    }
    impl<'a> syn::visit::Visit<'a> for Picks<'_, 'a, '_> {
        fn visit_expr(&mut self, e: &'a Expr) {
            if self.found {
                return;
            }
            let sql_call = |name: &str| self.w.cx.packs.sql_calls.contains_key(name);
            match e {
                Expr::Call(c)
                    if matches!(&*c.func, Expr::Path(p)
                        if p.path.segments.last().is_some_and(|s| sql_call(&s.ident.to_string()))) =>
                {
                    for a in &c.args {
                        for t in sql_texts(self.w, a, 0) {
                            self.text(&t, Span::of(a));
                        }
                    }
                }
                Expr::MethodCall(m) if sql_call(&m.method.to_string()) => {
                    for a in &m.args {
                        for t in sql_texts(self.w, a, 0) {
                            self.text(&t, Span::of(a));
                        }
                    }
                }
                Expr::MethodCall(m)
                    if m.method == "skip_locked"
                        || m.method == "for_update"
                        || m.method == "for_no_key_update" =>
                {
                    if let Some(t) = super::dsl_sql::locking_select(self.w, e) {
                        self.text(&t, Span::of(&m.method));
                    }
                }
                Expr::Macro(m)
                    if m.mac
                        .path
                        .segments
                        .last()
                        .is_some_and(|s| sql_call(&s.ident.to_string())) =>
                {
                    let args = m.mac.parse_body_with(
                        syn::punctuated::Punctuated::<Expr, syn::Token![,]>::parse_terminated,
                    );
                    for a in args.iter().flatten() {
                        if let Some(t) = eval::eval_str(a, self.w) {
                            self.text(&t, Span::of(a));
                        }
                    }
                }
                _ => {}
            }
            syn::visit::visit_expr(self, e);
        }
    }
    let Some(body) = w.body else {
        return false;
    };
    let mut p = Picks {
        w,
        vocab,
        table,
        at: (at.line, at.column),
        found: false,
    };
    syn::visit::Visit::visit_block(&mut p, body);
    p.found
}

/// Is the first call of `function` in SQL text inside a `WHERE` clause (a `WHERE` keyword comes
/// before it)? Case-insensitive, whole words.
fn in_where_clause(text: &str, function: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    let Some(at) = lower.find(&function.to_ascii_lowercase()) else {
        return false;
    };
    lower[..at]
        .split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
        .any(|w| w == "where")
}

/// The top-level arguments of the first call of `function` in SQL text (`GET_LOCK(?, -1)`:
/// `["?", " -1"]`); case-insensitive.
fn sql_args(text: &str, function: &str) -> Option<Vec<String>> {
    let lower = text.to_ascii_lowercase();
    let name = function.to_ascii_lowercase();
    let mut from = 0;
    let start = loop {
        let i = from + lower[from..].find(&name)?;
        let before_ok = i == 0
            || !lower.as_bytes()[i - 1].is_ascii_alphanumeric() && lower.as_bytes()[i - 1] != b'_';
        let rest = lower[i + name.len()..].trim_start();
        if before_ok && rest.starts_with('(') {
            break lower.len() - rest.len() + 1;
        }
        from = i + name.len();
    };
    let (mut depth, mut args, mut cur) = (0usize, Vec::new(), String::new());
    for c in text[start..].chars() {
        match c {
            '(' => depth += 1,
            ')' if depth == 0 => {
                args.push(cur);
                return Some(args);
            }
            ')' => depth -= 1,
            ',' if depth == 0 => {
                args.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    None
}

/// Lower-case names of the SQL functions called in `text` (an identifier followed by `(`).
pub(super) fn sql_functions(text: &str) -> Vec<String> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_alphabetic() || b[i] == b'_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            let mut j = i;
            while j < b.len() && b[j].is_ascii_whitespace() {
                j += 1;
            }
            if b.get(j) == Some(&b'(') {
                out.push(text[start..i].to_ascii_lowercase());
            }
        } else {
            i += 1;
        }
    }
    out
}

/// The declared result type of a pack method call, for type inference (`client.lease_grant(..)`).
pub(super) fn pack_return_type(
    w: &Walker<'_, '_>,
    m: &syn::ExprMethodCall,
    recv: Option<&Ty>,
) -> Option<Ty> {
    let name = m.method.to_string();
    let peeled = recv.map(|t| t.peeled().clone());
    if let Some(t) = &peeled
        && let Some(ret) =
            w.cx.packs
                .method_returns
                .get(&(canonical(w, &t.path).to_string(), name.clone()))
    {
        return Some(Ty::simple(ret.clone()));
    }
    for &r in w.cx.packs.methods.get(&name)? {
        let def = w.cx.packs.call(r);
        if let Some(ret) = &def.returns_type
            && receiver_matches(w, def, peeled.as_ref())
        {
            return Some(Ty::simple(ret.clone()));
        }
    }
    None
}

/// The type a pack declares for a macro's expansion (`sqlx::migrate!()` is a `Migrator`).
pub(super) fn pack_macro_type(w: &Walker<'_, '_>, m: &syn::ExprMacro) -> Option<Ty> {
    let path = w.resolve(&m.mac.path);
    w.cx.packs
        .macro_types
        .get(&path)
        .map(|t| Ty::simple(t.clone()))
}

pub(super) fn pack_fn_return_type(w: &Walker<'_, '_>, path: &str) -> Option<Ty> {
    for &r in w.cx.packs.functions.get(path)? {
        if let Some(ret) = &w.cx.packs.call(r).returns_type {
            return Some(Ty::simple(ret.clone()));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    #[test]
    fn lock_words_are_whole_words() {
        use super::{KEY_WORDS, names_lock};
        for yes in [
            "lock_key",
            "lockKey",
            "LOCK_KEY",
            "app.lock.{id}",
            "{Self::lock_key(p)}",
            "leader/x",
        ] {
            assert!(names_lock(yes, KEY_WORDS), "{yes}");
        }
        for no in [
            "block_key",
            "clock",
            "{key}",
            "blocks/{n}",
            "unlocked_at",
            "Locksmith",
        ] {
            assert!(!names_lock(no, KEY_WORDS), "{no}");
        }
    }

    #[test]
    fn sql_args_split_at_top_level() {
        assert_eq!(
            super::sql_args("SELECT get_lock(CONCAT('a', ?), -1)", "GET_LOCK"),
            Some(vec!["CONCAT('a', ?)".to_string(), " -1".to_string()])
        );
        assert_eq!(super::sql_args("SELECT is_get_lock(1)", "GET_LOCK"), None);
        assert_eq!(super::sql_args("SELECT GET_LOCK", "GET_LOCK"), None);
    }
}
