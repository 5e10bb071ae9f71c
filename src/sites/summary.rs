//! Wrapper summaries: what a function leaves behind for its callers when it hands no lock back.
//!
//! An acquire function that returns nothing (`async fn lock_resource(&self, key: &str) -> Result<()>`
//! running `SET key token NX PX ttl`) leaves the lock in the store under a key its caller passed,
//! or in the receiver (`self.lease = Some(id)`); its release function (`unlock_resource(key)`,
//! `unlock(&mut self)`) releases what that parameter or receiver names. Each is summarised as
//! [`Held`]: at call sites the acquisition's key is that argument (or the receiver), and the
//! region pairs acquire and release by the same key expression.
//!
//! This module reads one function's own code (its parameters, what each local is computed from,
//! what it stores in `self`, what it does after acquiring); the walker asks it after the walk.

use std::collections::{HashMap, HashSet};

use syn::visit::Visit;
use syn::{Expr, Stmt};

use crate::region::{Pos, end_of, start_of};
use crate::source::Span;

/// Where a lock stays after the call that took it, or which lock a release call releases.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Held {
    /// In the store, under the key passed as argument #i (the receiver not counted).
    KeyArg(usize),
    /// In the receiver: a guard, lease or key kept in a field of `self`.
    Receiver,
    /// With the connection's session (SQL advisory locks): paired by library, as SQL locks are.
    Session,
}

/// What a function's summary needs from its code.
pub(super) struct FnFlow {
    /// Typed parameters in order (the receiver not counted).
    params: Vec<String>,
    has_receiver: bool,
    /// Local -> identifiers in what it was computed from (`let`, `if let`, `while let`, `match` arms).
    derived: HashMap<String, HashSet<String>>,
    /// Identifier sets stored into a field of `self` (`self.x = …`, `self.x.insert(…)`).
    stored_in_self: Vec<HashSet<String>>,
    /// Where the values stored into a field of `self` are written (`self.guard = Some(l.acquire(..)?)`).
    stored_spans: Vec<(Pos, Pos)>,
}

impl FnFlow {
    pub(super) fn of(sig: &syn::Signature, body: &syn::Block) -> FnFlow {
        let mut params = Vec::new();
        let mut has_receiver = false;
        for input in &sig.inputs {
            match input {
                syn::FnArg::Receiver(_) => has_receiver = true,
                syn::FnArg::Typed(pt) => {
                    let mut names = HashSet::new();
                    pat_names(&pt.pat, &mut names);
                    params.push(names.into_iter().next().unwrap_or_default());
                }
            }
        }
        let mut v = FlowVisitor::default();
        v.visit_block(body);
        FnFlow {
            params,
            has_receiver,
            derived: v.derived,
            stored_in_self: v.stored,
            stored_spans: v.stored_spans,
        }
    }

    /// Do the two sets of names share a root (`flag = Arc::clone(&is_leader)` and
    /// `is_leader`; `tx` and `rx` of one `channel()`)? Parameters do not count: a task and the
    /// value handed back both reading the caller's pool share nothing the caller sees.
    /// A value computed from the task itself (`let handle = spawn(async move { … })`) reads
    /// every name the task does, and shares nothing for that.
    pub(super) fn shares_state(&self, a: &HashSet<String>, b: &HashSet<String>) -> bool {
        let b: HashSet<String> = b
            .iter()
            .filter(|n| !self.derived.get(*n).is_some_and(|d| d.is_superset(a)))
            .cloned()
            .collect();
        if b.is_empty() {
            return false;
        }
        let params: HashSet<&String> = self.params.iter().collect();
        let rb = self.roots(&b);
        self.roots(a)
            .iter()
            .any(|n| rb.contains(n) && !params.contains(n) && n != "self")
    }

    /// The names `names` are computed from, transitively (themselves included).
    pub(super) fn roots(&self, names: &HashSet<String>) -> HashSet<String> {
        let mut out = names.clone();
        let mut todo: Vec<String> = names.iter().cloned().collect();
        while let Some(n) = todo.pop() {
            if out.len() > 256 {
                break;
            }
            for d in self.derived.get(&n).into_iter().flatten() {
                if out.insert(d.clone()) {
                    todo.push(d.clone());
                }
            }
        }
        out
    }

    /// Which caller-visible thing a key (its identifiers) comes from: an argument, or `self`.
    pub(super) fn source_of(&self, idents: &HashSet<String>) -> Option<Held> {
        let roots = self.roots(idents);
        if let Some(i) = self
            .params
            .iter()
            .position(|p| !p.is_empty() && roots.contains(p))
        {
            return Some(Held::KeyArg(i));
        }
        (self.has_receiver && roots.contains("self")).then_some(Held::Receiver)
    }

    /// Which parameter (receiver not counted) `name` is.
    pub(super) fn param_index(&self, name: &str) -> Option<usize> {
        self.params.iter().position(|p| p == name)
    }

    /// Is the acquisition at `at` written straight into a field of `self`?
    fn stored_at(&self, at: Pos) -> bool {
        self.has_receiver && self.stored_spans.iter().any(|&(s, e)| s <= at && at <= e)
    }

    /// Is the lock (bound to `names`, or anything computed from it) stored in a field of `self`?
    pub(super) fn stored_in_self(&self, names: &HashSet<String>) -> bool {
        self.has_receiver
            && !names.is_empty()
            && self
                .stored_in_self
                .iter()
                .any(|s| !self.roots(s).is_disjoint(names))
    }
}

/// Where an acquisition that is neither released here nor handed back stays when the function
/// returns, when the function is an acquire function: it does nothing after acquiring but report
/// how it went, and the lock is known by something its caller has (a key argument, the receiver,
/// the connection's session).
/// `from`: where work would run under the lock (a lock known by its key after a `match` on the
/// reply has its region start after the `match`, but the success arm's work runs under it too).
/// `handle`: the lock is a value its library releases by that value alone (`unlock(&lock)`).
#[allow(clippy::too_many_arguments)] // the holding's parts, as the walk has them
pub(super) fn held_after(
    flow: &FnFlow,
    site: &super::Site,
    from: Pos,
    names: &HashSet<String>,
    key: Option<&HashSet<String>>,
    body: &syn::Block,
    ops: &LockCalls<'_>,
    handle: bool,
) -> Option<Held> {
    // A guard that is not handed back is released when it drops, and a scoped wrapper's call
    // releases before it returns: neither stays held after the function.
    if site.region.release.is_some()
        || site.release == crate::packs::ReleaseStyle::Guard && !site.leaked
        || works_after(body, from, names, ops)
    {
        return None;
    }
    if flow.stored_in_self(names) || flow.stored_at(start_of(site.span)) {
        return Some(Held::Receiver);
    }
    // A session lock (SQL, or a typed call whose guard was leaked) lives on in the connection
    // the caller lent.
    if site.sql || site.leaked {
        return (!flow.params.is_empty() || flow.has_receiver).then_some(Held::Session);
    }
    // A lock value bound here and dropped (`let lock = rl.lock(key, ttl).await?;` with no
    // `unlock(&lock)`): the caller gets no handle to release it with, whatever key it passed.
    if handle && !names.is_empty() {
        return None;
    }
    match key {
        Some(k) if !k.is_empty() && !k.iter().all(|n| is_constant_name(n)) => flow.source_of(k),
        // A key the program fixes (`LEASE_NAME`, a literal, or none written: the name inside
        // the object) is the one lock the receiver manages: `elector.acquire()` takes it and
        // `elector.release()` frees it.
        _ => flow.has_receiver.then_some(Held::Receiver),
    }
}

/// Is `t` a type of the program's own named as a lock (`RedisRelayerLock`, `LeaseGuard`,
/// `SlotClaim`), by its CamelCase words (`Block` and `Clock` are not)? A value of such a type
/// built from the key's ingredients is the lock's handle: the key can be rebuilt from it.
pub(super) fn lock_named_own_type(t: &crate::model::Ty) -> bool {
    const WORDS: &[&str] = &[
        "Lock",
        "Locked",
        "Lease",
        "Guard",
        "Mutex",
        "Permit",
        "Claim",
        "Leader",
        "Leadership",
        "Election",
        "Semaphore",
        "Latch",
    ];
    let t = t.peeled();
    if !t.path.starts_with("crate::") {
        return false;
    }
    let name = t.last_segment();
    let mut words = Vec::new();
    let mut start = 0;
    for (i, c) in name.char_indices() {
        if i > 0 && c.is_ascii_uppercase() {
            words.push(&name[start..i]);
            start = i;
        }
    }
    words.push(&name[start..]);
    words.iter().any(|w| WORDS.contains(w))
}

/// `LEASE_NAME`, `Self::KEY`: a constant's name.
fn is_constant_name(n: &str) -> bool {
    n == "Self"
        || n.chars().any(|c| c.is_ascii_uppercase())
            && n.chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

/// Where the lock of a wrapper that returns only a report (`Ok(reply.is_some())`, not a lock
/// value) stays: under its key argument or in the receiver, as for one that returns nothing.
pub(super) fn reported_held(flow: &FnFlow, key: Option<&HashSet<String>>) -> Option<Held> {
    flow.source_of(key?)
}

/// How the pipeline holding a wrapper's lock command reaches its caller: passed in as argument
/// #i, or handed back. `None` when the function runs the pipeline itself.
pub(super) fn pipe_via(
    flow: &FnFlow,
    local: Option<&str>,
    returned: &HashSet<String>,
    returns_pipeline: bool,
) -> Option<super::PipeVia> {
    match local {
        Some(n) => match flow.params.iter().position(|p| p == n) {
            Some(i) => Some(super::PipeVia::Arg(i)),
            None => (returned.contains(n) || returns_pipeline).then_some(super::PipeVia::Returned),
        },
        None => returns_pipeline.then_some(super::PipeVia::Returned),
    }
}

/// What the call of an acquire function that hands no lock back says about the acquisition:
/// `Result<bool>`/`bool` whether it was taken, `Result<()>` only that nothing failed.
pub(super) fn reported(ret: Option<&crate::model::Ty>) -> crate::packs::Returns {
    use crate::packs::Returns;
    let Some(t) = ret else {
        return Returns::Value;
    };
    let first = t.args.first().map(|a| a.last_segment());
    // `anyhow::Result`, `RedisResult`, `sqlx::Result`: any `…Result` alias.
    match (t.last_segment(), first) {
        (r, Some("bool")) if r.ends_with("Result") => Returns::ResultBool,
        (r, _) if r.ends_with("Result") => Returns::Result,
        ("bool", _) => Returns::Bool,
        _ => Returns::Value,
    }
}

/// How a function that leaves its lock held reports it: `Result<bool>`/`bool` say whether it
/// was taken, unless after the acquisition it only ever answers `true` (its failure leaves as an
/// error, `ensure!(resp.succeeded())`, and a `false` before it means something else, such as
/// "already ours"): then only the error says anything.
pub(super) fn reported_after(
    ret: Option<&crate::model::Ty>,
    body: &syn::Block,
    from: Pos,
) -> crate::packs::Returns {
    use crate::packs::Returns;
    let returns = reported(ret);
    if !matches!(returns, Returns::ResultBool | Returns::Bool) {
        return returns;
    }
    let (returned, tail) = answers(body);
    let mut out: Vec<&Expr> = returned
        .into_iter()
        .filter(|x| start_of(Span::of(*x)) > from)
        .collect();
    out.extend(tail);
    fn literal_true(e: &Expr) -> bool {
        match e {
            Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Bool(b),
                ..
            }) => b.value,
            Expr::Call(c) if c.args.len() == 1 => {
                matches!(&*c.func, Expr::Path(p) if p.path.is_ident("Ok"))
                    && literal_true(&c.args[0])
            }
            Expr::Paren(p) => literal_true(&p.expr),
            _ => false,
        }
    }
    if !out.is_empty() && out.iter().all(|e| literal_true(e)) {
        return match returns {
            Returns::ResultBool => Returns::Result,
            _ => Returns::Value,
        };
    }
    returns
}

/// Does the function answer `None` only before it acquires (`if cfg.coordinator.is_empty() {
/// return Ok(None); }`: no lock service configured, run unlocked)? Then `None` is a setting,
/// not "held by another", and only the error reports a failed acquisition.
pub(super) fn none_only_before(body: &syn::Block, from: Pos) -> bool {
    fn is_none(e: &Expr) -> bool {
        match e {
            Expr::Path(p) => p.path.is_ident("None"),
            Expr::Call(c) if c.args.len() == 1 => {
                matches!(&*c.func, Expr::Path(p) if p.path.is_ident("Ok")) && is_none(&c.args[0])
            }
            Expr::Paren(p) => is_none(&p.expr),
            _ => false,
        }
    }
    let (returned, tail) = answers(body);
    let (after, before): (Vec<&Expr>, Vec<&Expr>) = returned
        .into_iter()
        .filter(|x| is_none(x))
        .partition(|x| start_of(Span::of(*x)) > from);
    !before.is_empty() && after.is_empty() && !tail.is_some_and(is_none)
}

/// What a function answers with: each `return`'s value (outside closures, `async` blocks and
/// items, which answer for themselves) and the body's tail.
fn answers(body: &syn::Block) -> (Vec<&Expr>, Option<&Expr>) {
    struct Returns<'b>(Vec<&'b Expr>);
    impl<'b> Visit<'b> for Returns<'b> {
        fn visit_expr_return(&mut self, r: &'b syn::ExprReturn) {
            self.0.extend(r.expr.as_deref());
            syn::visit::visit_expr_return(self, r);
        }
        fn visit_expr_closure(&mut self, _: &'b syn::ExprClosure) {}
        fn visit_expr_async(&mut self, _: &'b syn::ExprAsync) {}
        fn visit_item(&mut self, _: &'b syn::Item) {}
    }
    let mut r = Returns(Vec::new());
    r.visit_block(body);
    let tail = match body.stmts.last() {
        Some(Stmt::Expr(tail, None)) => Some(tail),
        _ => None,
    };
    (r.0, tail)
}

/// The argument `held` names, if it is one.
pub(super) fn key_arg(held: Option<&Held>) -> Option<usize> {
    match held? {
        Held::KeyArg(i) => Some(*i),
        _ => None,
    }
}

/// Which lock a release in this function releases, for its callers: the one under a key
/// argument, the one kept in the receiver, or (SQL) the session's. `None` when it releases a
/// lock value passed in (`fn release(&self, lock: &Lock)`), which call sites pair by name.
pub(super) fn released(
    flow: &FnFlow,
    e: &crate::region::Event,
    key: Option<&HashSet<String>>,
    sql_pack: bool,
) -> Option<Held> {
    if let Some(key) = key
        && let Some(h) = flow.source_of(key)
    {
        return Some(h);
    }
    let mut values: HashSet<String> = e.mentions.clone();
    values.remove("self");
    // A lock value taken out of the receiver (`if let Some((_, lock)) = self.locks.remove(name)`)
    // is the receiver's, even when the lookup is keyed by an argument; a lock passed in
    // (`lock.release(&mut self.conn)`) is not.
    if flow.has_receiver
        && !values.iter().any(|v| flow.param_index(v).is_some())
        && flow.roots(&values).contains("self")
    {
        return Some(Held::Receiver);
    }
    if matches!(flow.source_of(&values), Some(Held::KeyArg(_))) {
        return None;
    }
    if flow.has_receiver && flow.roots(&e.mentions).contains("self") {
        return Some(Held::Receiver);
    }
    (sql_pack && e.mentions.is_empty() && (flow.has_receiver || !flow.params.is_empty()))
        .then_some(Held::Session)
}

#[derive(Default)]
struct FlowVisitor {
    derived: HashMap<String, HashSet<String>>,
    stored: Vec<HashSet<String>>,
    stored_spans: Vec<(Pos, Pos)>,
}

impl FlowVisitor {
    fn derive(&mut self, pat: &syn::Pat, from: &Expr) {
        let mut names = HashSet::new();
        pat_names(pat, &mut names);
        let mut ids = reads(from);
        // The halves of one value (`let (tx, rx) = channel()`) share a root no identifier can
        // spell: what is sent on one is received on the other.
        if names.len() > 1 {
            let mut all: Vec<&String> = names.iter().collect();
            all.sort();
            ids.insert(format!(
                "({})",
                all.iter().map(|n| n.as_str()).collect::<Vec<_>>().join(",")
            ));
        }
        for n in names {
            self.derived
                .entry(n)
                .or_default()
                .extend(ids.iter().cloned());
        }
    }
}

impl<'ast> Visit<'ast> for FlowVisitor {
    fn visit_local(&mut self, l: &'ast syn::Local) {
        if let Some(init) = &l.init {
            self.derive(&l.pat, &init.expr);
        }
        syn::visit::visit_local(self, l);
    }

    fn visit_expr(&mut self, e: &'ast Expr) {
        match e {
            Expr::Let(l) => self.derive(&l.pat, &l.expr),
            Expr::Match(m) => {
                for arm in &m.arms {
                    self.derive(&arm.pat, &m.expr);
                }
            }
            Expr::ForLoop(f) => self.derive(&f.pat, &f.expr),
            // `lock = mgr.lock(..)` after `let lock;`: the deferred binding is computed here.
            Expr::Assign(a) => {
                if let Some(n) = plain_name(&a.left) {
                    self.derived.entry(n).or_default().extend(reads(&a.right));
                } else if is_self_field(&a.left) {
                    self.stored.push(reads(&a.right));
                    let s = Span::of(&*a.right);
                    self.stored_spans.push((start_of(s), end_of(s)));
                }
            }
            // `self.held.insert(key, guard)`, `self.lease.replace(id)`, `self.guards.push(g)`.
            Expr::MethodCall(m)
                if is_self_field(&m.receiver)
                    && matches!(
                        m.method.to_string().as_str(),
                        "insert" | "replace" | "push" | "push_back" | "get_or_insert" | "set"
                    ) =>
            {
                let mut ids = HashSet::new();
                for a in &m.args {
                    ids.extend(reads(a));
                    let s = Span::of(a);
                    self.stored_spans.push((start_of(s), end_of(s)));
                }
                self.stored.push(ids);
            }
            _ => {}
        }
        syn::visit::visit_expr(self, e);
    }

    // Nested items are functions of their own.
    fn visit_item(&mut self, _: &'ast syn::Item) {}
}

/// The identifiers an expression reads, with those named inside format strings
/// (`format!("lock:{job}")` reads `job`).
pub(super) fn reads(e: &Expr) -> HashSet<String> {
    struct Lits<'o>(&'o mut HashSet<String>);
    impl Lits<'_> {
        fn tokens(&mut self, ts: proc_macro2::TokenStream) {
            for t in ts {
                match t {
                    proc_macro2::TokenTree::Literal(l) => self.literal(&l.to_string()),
                    proc_macro2::TokenTree::Group(g) => self.tokens(g.stream()),
                    _ => {}
                }
            }
        }
        fn literal(&mut self, text: &str) {
            for part in text.split('{').skip(1) {
                let name: String = part
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if name.starts_with(|c: char| c.is_alphabetic() || c == '_') {
                    self.0.insert(name);
                }
            }
        }
    }
    impl<'ast> Visit<'ast> for Lits<'_> {
        fn visit_macro(&mut self, m: &'ast syn::Macro) {
            self.tokens(m.tokens.clone());
        }
    }
    let mut out = super::walk::idents_in(e);
    Lits(&mut out).visit_expr(e);
    out
}

fn plain_name(e: &Expr) -> Option<String> {
    match e {
        Expr::Path(p) => p.path.get_ident().map(ToString::to_string),
        _ => None,
    }
}

/// `self.x`, `self.x.y`, `*self.x`.
fn is_self_field(e: &Expr) -> bool {
    match e {
        Expr::Field(f) => match &*f.base {
            Expr::Path(p) => p.path.is_ident("self"),
            other => is_self_field(other),
        },
        Expr::Unary(u) => is_self_field(&u.expr),
        Expr::Paren(p) => is_self_field(&p.expr),
        _ => false,
    }
}

pub(super) fn pat_names(p: &syn::Pat, out: &mut HashSet<String>) {
    struct Names<'o>(&'o mut HashSet<String>);
    impl<'ast> Visit<'ast> for Names<'_> {
        fn visit_pat_ident(&mut self, pi: &'ast syn::PatIdent) {
            self.0.insert(pi.ident.to_string());
            syn::visit::visit_pat_ident(self, pi);
        }
    }
    Names(out).visit_pat(p);
}

/// The calls a function makes on its lock besides acquiring it: the spans of its renewals and
/// releases, and the key expression as the acquisition wrote it (not a literal).
#[derive(Default)]
pub(super) struct LockCalls<'a> {
    pub spans: &'a [Span],
    pub key: Option<&'a str>,
    /// The lock is a row its claim's transaction writes: that transaction's `commit` finishes
    /// the claim (the row persists), it is not work under the lock.
    pub row: bool,
}

/// Does the function do work of its own after `from` (the end of an acquisition), beyond
/// reporting how the acquisition went? An acquire function checks the reply, maybe waits and
/// retries, and returns; a function that then does the work the lock protects is no wrapper,
/// even when it leaves the lock to expire. `ops`: the lock calls it makes besides acquiring
/// (setting the expiry of the key just taken, deleting it when that fails), which finish the
/// acquisition rather than work under it.
pub(super) fn works_after(
    body: &syn::Block,
    from: Pos,
    lock: &HashSet<String>,
    ops: &LockCalls<'_>,
) -> bool {
    struct Work<'l> {
        from: Pos,
        /// Where the function returns after the acquisition, when the block holding it does
        /// (`api.patch(..).await?; return Ok(true);`): code past it (another arm) never runs
        /// after this acquisition.
        until: Option<Pos>,
        found: bool,
        /// The lock's own names: reading its value (`resp.key()`) is reporting, not work.
        lock: &'l HashSet<String>,
        /// Names bound from the lock's value (`Err(err) => { let e = err.into_service_error();`):
        /// reading them is reporting too.
        derived: HashSet<String>,
        ops: &'l LockCalls<'l>,
    }
    impl Work<'_> {
        /// A method chain that is one of the lock's own calls (its renewal, its release), where
        /// the call's span may be any link of the chain (`cmd("EXPIRE")` of `redis::cmd(
        /// "EXPIRE").arg(key).query_async(..)`).
        fn op_chain(&self, m: &syn::ExprMethodCall) -> bool {
            let root = match chain_base(&m.receiver) {
                Expr::Call(c) => &*c.func,
                other => other,
            };
            let (from, to) = (start_of(Span::of(root)), end_of(Span::of(&m.method)));
            self.ops
                .spans
                .iter()
                .any(|o| from <= start_of(*o) && start_of(*o) <= to)
        }
        /// A call on the lock's own key, spelled as the acquisition spelled it (`conn
        /// .set_expiry(&lock_key.into(), ttl)` after `conn.set_nx(&lock_key.into(), ..)`): the
        /// program's helper acting on the lock, whatever it is called.
        fn on_key(&self, args: &syn::punctuated::Punctuated<Expr, syn::Token![,]>) -> bool {
            self.ops.key.is_some_and(|k| {
                args.iter()
                    .any(|a| quote::ToTokens::to_token_stream(peel_key(a)).to_string() == k)
            })
        }
        fn after(&self, s: Span) -> bool {
            // `>=`: a match arm's region starts at its body's first token, which may be work.
            start_of(s) >= self.from && self.until.is_none_or(|u| start_of(s) <= u)
        }
        fn of_lock(&self, n: &str) -> bool {
            self.lock.contains(n) || self.derived.contains(n)
        }
        /// A condition on the lock's reply (`resp.succeeded()`, `!acquired`, `let Some(l) = r`),
        /// or the acquisition itself (`match self.try_lock().await { … }`).
        fn tests_lock(&self, cond: &Expr) -> bool {
            let inner = match cond {
                Expr::Unary(u) => &*u.expr,
                Expr::Let(l) => &*l.expr,
                other => other,
            };
            let span = Span::of(inner);
            chain_root(inner).is_some_and(|r| self.of_lock(&r))
                || start_of(span) < self.from && self.from <= end_of(span)
        }
        /// A test that the attempt succeeded, on its reply bound earlier (`result.is_some()`,
        /// `acquired`): not the acquisition itself, whose answer may mean either
        /// (`if already_locked(..).await? { return Ok(()) }`).
        fn tests_success(&self, cond: &Expr) -> bool {
            let reply = match cond {
                Expr::MethodCall(m)
                    if m.args.is_empty()
                        && matches!(m.method.to_string().as_str(), "is_some" | "is_ok") =>
                {
                    &*m.receiver
                }
                Expr::Path(_) => cond,
                _ => return false,
            };
            start_of(Span::of(cond)) >= self.from
                && super::walk::local_named(reply).is_some_and(|n| self.of_lock(&n))
        }
        fn derive(&mut self, from: &Expr, pat: &syn::Pat) {
            if chain_root(from).is_some_and(|r| self.of_lock(&r)) {
                pat_names(pat, &mut self.derived);
            }
        }
    }
    impl<'ast> Visit<'ast> for Work<'_> {
        fn visit_local(&mut self, l: &'ast syn::Local) {
            if let Some(init) = &l.init {
                self.derive(&init.expr, &l.pat);
            }
            syn::visit::visit_local(self, l);
        }
        fn visit_expr(&mut self, e: &'ast Expr) {
            if self.found {
                return;
            }
            match e {
                // What runs when the attempt failed runs without the lock: not work under it
                // (`if resp.succeeded() { record } else { look up the holder }`).
                Expr::If(i) if self.tests_lock(&i.cond) => {
                    let failed_then = match &*i.cond {
                        Expr::Unary(u) => matches!(u.op, syn::UnOp::Not(_)),
                        Expr::Let(l) => super::failure::is_failure_pattern(&l.pat),
                        _ => false,
                    };
                    if let Expr::Let(l) = &*i.cond {
                        self.derive(&l.expr, &l.pat);
                    }
                    if !failed_then {
                        self.visit_block(&i.then_branch);
                    } else if let Some((_, els)) = &i.else_branch {
                        self.visit_expr(els);
                    }
                    return;
                }
                Expr::Match(m) if self.tests_lock(&m.expr) => {
                    for (i, a) in m.arms.iter().enumerate() {
                        let earlier: Vec<&syn::Pat> = m.arms[..i].iter().map(|a| &a.pat).collect();
                        if !super::failure::is_failure_pattern(&a.pat)
                            && !super::failure::catches_rest_of_success(&earlier, &a.pat)
                        {
                            self.derive(&m.expr, &a.pat);
                            self.visit_expr(&a.body);
                        }
                    }
                    return;
                }
                Expr::Match(m) => m.arms.iter().for_each(|a| self.derive(&m.expr, &a.pat)),
                Expr::Let(l) => self.derive(&l.expr, &l.pat),
                // The error handed back (`Err(LockError::internal(..))`) is built, not run.
                Expr::Call(c) if matches!(&*c.func, Expr::Path(p) if p.path.is_ident("Err")) => {
                    return;
                }
                Expr::Call(c) => {
                    // A tuple variant or struct (`MyError::Locked(key)`) is built, not run; a
                    // call made only of the lock's own value (`String::from_utf8_lossy(
                    // resp.key())`) reads the reply, as a method on it does.
                    let names: HashSet<String> =
                        c.args.iter().flat_map(super::walk::idents_in).collect();
                    let of_lock = !names.is_empty() && names.iter().all(|n| self.of_lock(n));
                    if let Expr::Path(p) = &*c.func
                        && let Some(last) = p.path.segments.last()
                        && !of_lock
                        && !PLUMBING_FNS.contains(&last.ident.to_string().as_str())
                        && !records(&p.path)
                        && !keeps_up(&last.ident.to_string())
                        && !last
                            .ident
                            .to_string()
                            .starts_with(|c: char| c.is_ascii_uppercase())
                        && self.after(Span::of(&last.ident))
                    {
                        self.found = true;
                        return;
                    }
                }
                // The lock's own call, with the chain that builds it (`redis::cmd("EXPIRE")
                // .arg(key)` before `.query_async(..)`).
                Expr::MethodCall(m)
                    if !self.ops.spans.is_empty() && self.op_chain(m) || self.on_key(&m.args) =>
                {
                    return;
                }
                Expr::MethodCall(m) if self.ops.row && m.method == "commit" => {}
                Expr::MethodCall(m) => {
                    let on_lock = chain_root(&m.receiver).is_some_and(|r| self.of_lock(&r));
                    // Bookkeeping in the receiver's own state (`self.state.store(1, SeqCst)`,
                    // `self.held.insert(key)`) records the acquisition; it is not the work.
                    let method = m.method.to_string();
                    let bookkeeping = is_self_field(&m.receiver)
                        && (STATE_METHODS.contains(&method.as_str())
                            || m.args.is_empty() && GUARD_METHODS.contains(&method.as_str()))
                        || is_self(&m.receiver) && CONFIRMING.iter().any(|v| method.starts_with(v))
                        // The lock read back (`let after = self.read().await?` after the claim's
                        // write): the receiver's one object, its holder and expiry, reported.
                        || is_self(&m.receiver) && m.args.is_empty() && READ_BACK.contains(&method.as_str());
                    if !on_lock
                        && !bookkeeping
                        && !PLUMBING_METHODS.contains(&m.method.to_string().as_str())
                        && self.after(Span::of(&m.method))
                    {
                        self.found = true;
                        return;
                    }
                }
                Expr::Macro(m) => {
                    if let Some(last) = m.mac.path.segments.last()
                        && !PLUMBING_MACROS.contains(&last.ident.to_string().as_str())
                        && self.after(Span::of(&last.ident))
                    {
                        self.found = true;
                        return;
                    }
                }
                // Closures and async blocks run later, somewhere else.
                Expr::Closure(_) | Expr::Async(_) => return,
                _ => {}
            }
            syn::visit::visit_expr(self, e);
        }
        fn visit_stmt_macro(&mut self, m: &'ast syn::StmtMacro) {
            if let Some(last) = m.mac.path.segments.last()
                && !PLUMBING_MACROS.contains(&last.ident.to_string().as_str())
                && self.after(Span::of(&last.ident))
            {
                self.found = true;
            }
        }
        fn visit_item(&mut self, _: &'ast syn::Item) {}
        fn visit_block(&mut self, b: &'ast syn::Block) {
            for s in &b.stmts {
                self.visit_stmt(s);
                if self.found {
                    return;
                }
                // `if taken { tx.commit().await?; return Ok(()); }`: what follows in the block
                // runs only when the attempt failed.
                if let Stmt::Expr(Expr::If(i), _) = s
                    && i.else_branch.is_none()
                    && self.tests_success(&i.cond)
                    && leaves_answering_success(&i.then_branch)
                {
                    return;
                }
            }
        }
        fn visit_stmt(&mut self, s: &'ast Stmt) {
            // What only tests compile in (a stall seam after the lock) is no production work.
            if !super::test_code::is_test_stmt(s) && !only_says(s) {
                syn::visit::visit_stmt(self, s);
            }
        }
    }
    let mut w = Work {
        from,
        until: returns_after(body, from),
        found: false,
        lock,
        derived: HashSet::new(),
        ops,
    };
    w.visit_block(body);
    w.found
}

/// The block ends by returning a success (`…; return Ok(())`, not `return Ok(false)`).
fn leaves_answering_success(b: &syn::Block) -> bool {
    matches!(
        b.stmts.last(),
        Some(Stmt::Expr(Expr::Return(r), _))
            if r.expr.as_deref().is_some_and(|e| !super::failure::failure_value(e))
    )
}

/// The end of the `return` that ends the innermost block holding `from`, after it: what
/// follows in the function is not reached from there.
fn returns_after(body: &syn::Block, from: Pos) -> Option<Pos> {
    struct Find {
        from: Pos,
        /// (block start, the return's end): the innermost block wins.
        best: Option<(Pos, Pos)>,
    }
    impl<'ast> Visit<'ast> for Find {
        fn visit_block(&mut self, b: &'ast syn::Block) {
            let span = Span::of_block(b);
            if start_of(span) <= self.from && self.from <= end_of(span) {
                let ret = b.stmts.iter().find(|s| {
                    matches!(s, Stmt::Expr(Expr::Return(_), _))
                        && start_of(Span::of(*s)) >= self.from
                });
                if let Some(r) = ret
                    && self.best.is_none_or(|(st, _)| st <= start_of(span))
                {
                    self.best = Some((start_of(span), end_of(Span::of(r))));
                }
            }
            syn::visit::visit_block(self, b);
        }
        fn visit_expr_closure(&mut self, _: &'ast syn::ExprClosure) {}
        fn visit_item(&mut self, _: &'ast syn::Item) {}
    }
    let mut f = Find { from, best: None };
    f.visit_block(body);
    f.best.map(|(_, end)| end)
}

fn chain_root(e: &Expr) -> Option<String> {
    plain_name(chain_base(e))
}

/// What a method chain starts from, through awaits, `?`, borrows and fields (`redis::cmd(
/// "EXPIRE")` of `redis::cmd("EXPIRE").arg(key).query_async(..).await`).
fn chain_base(e: &Expr) -> &Expr {
    match e {
        Expr::MethodCall(m) => chain_base(&m.receiver),
        Expr::Await(a) => chain_base(&a.base),
        Expr::Try(t) => chain_base(&t.expr),
        Expr::Paren(p) => chain_base(&p.expr),
        Expr::Reference(r) => chain_base(&r.expr),
        Expr::Field(f) => chain_base(&f.base),
        other => other,
    }
}

/// Calls that report an outcome or wait for the next attempt: not work.
const PLUMBING_FNS: &[&str] = &[
    "Ok",
    "Err",
    "Some",
    "new",
    "from",
    "into",
    "sleep",
    "now",
    "from_millis",
    "from_secs",
    "default",
    "drop",
];
/// Own argument-less methods that read back the one object a lock's receiver manages.
const READ_BACK: &[&str] = &[
    "read",
    "fetch",
    "load",
    "current",
    "current_holder",
    "holder",
    "read_lease",
    "get_lease",
    "read_lock",
    "get_lock",
];
/// Own methods that confirm, record or keep up an acquisition rather than use it
/// (`self.wait_for_write_replication()`, `self.verify_owner(..)`, `self.keep_lease_alive(..)`).
const CONFIRMING: &[&str] = &[
    "wait_for",
    "confirm",
    "ensure_",
    "check_",
    "verify",
    "validate",
    "record_",
    "log_",
    "mark_",
    "notify",
    "keep_",
    "keepalive",
    "renew",
    "refresh",
    "heartbeat",
    "start_keep",
    "spawn_keep",
    "start_renew",
    "spawn_renew",
    "start_heartbeat",
    "spawn_heartbeat",
];

/// A free function that records the outcome (`crate::metrics::record_lock_acquired(id)`,
/// `telemetry::inc_locks()`, `log_acquired(..)`): bookkeeping, not the work.
pub(super) fn records(path: &syn::Path) -> bool {
    const MODULES: &[&str] = &[
        "metrics",
        "metric",
        "telemetry",
        "stats",
        "statsd",
        "prometheus",
    ];
    const VERBS: &[&str] = &["record_", "log_", "emit_", "observe_", "inc_", "increment_"];
    let Some(last) = path.segments.last() else {
        return false;
    };
    let name = last.ident.to_string();
    VERBS.iter().any(|v| name.starts_with(v))
        || path
            .segments
            .iter()
            .rev()
            .skip(1)
            .any(|s| MODULES.contains(&s.ident.to_string().as_str()))
}

/// A free function that confirms or keeps up the lock just taken (`spawn_lock_heartbeat(..)`,
/// `verify_quorum(..)`), as the receiver's own confirming methods do.
fn keeps_up(name: &str) -> bool {
    CONFIRMING.iter().any(|v| name.starts_with(v))
        || (name.starts_with("spawn_") || name.starts_with("start_"))
            && ["heartbeat", "keep", "renew", "refresh"]
                .iter()
                .any(|w| name.contains(w))
}

/// `self`, `&self`, `(*self)`.
fn is_self(e: &Expr) -> bool {
    match e {
        Expr::Path(p) => p.path.is_ident("self"),
        Expr::Reference(r) => is_self(&r.expr),
        Expr::Paren(p) => is_self(&p.expr),
        Expr::Unary(u) => is_self(&u.expr),
        _ => false,
    }
}

/// What a field of `self` that records state is told (atomics, flags, sets of held keys).
const STATE_METHODS: &[&str] = &[
    "store",
    "fetch_add",
    "fetch_sub",
    "fetch_or",
    "fetch_and",
    "fetch_max",
    "swap",
    "compare_exchange",
    "insert",
    "remove",
    "set",
    "replace",
    "take",
    "push",
    "send",
    "send_replace",
];
/// Taking a field's own lock to record state (`*self.state.write().await = Leader`).
const GUARD_METHODS: &[&str] = &["read", "write", "lock", "borrow", "borrow_mut", "get_mut"];
const PLUMBING_METHODS: &[&str] = &[
    "contains",
    "starts_with",
    "ends_with",
    "is_empty",
    "is_some",
    "is_none",
    "is_ok",
    "is_err",
    "map_err",
    "map",
    "ok",
    "ok_or",
    "ok_or_else",
    "context",
    "with_context",
    "into",
    "to_string",
    "to_owned",
    "clone",
    "unwrap_or",
    "unwrap_or_default",
    "unwrap_or_else",
    "unwrap",
    "expect",
    "elapsed",
    "as_str",
    "as_ref",
    "len",
    "eq",
    "take",
    "insert",
    "replace",
    "push",
    "set",
    "await",
    // `enabled.then(|| spawn_heartbeat(..))`: the closure is judged on its own.
    "then",
    "then_some",
    "tick",
    // Accessors: reading an id or a key to keep beside the lock (`lease_id: lease.id()`).
    "id",
    "key",
    "as_bytes",
    "to_vec",
    "as_secs",
    "as_millis",
];
const PLUMBING_MACROS: &[&str] = &[
    "bail",
    "anyhow",
    "eyre",
    "ensure",
    "format",
    "format_err",
    "debug",
    "info",
    "warn",
    "error",
    "trace",
    "event",
    "println",
    "eprintln",
    "print",
    "eprint",
    "log",
];

/// A statement that only says something (`say("lock acquired");`, `note(&format!(..));`): a
/// call not awaited nor tried whose arguments are all text written in place.
fn only_says(s: &Stmt) -> bool {
    fn text(a: &Expr) -> bool {
        match a {
            Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(_),
                ..
            }) => true,
            Expr::Reference(r) => text(&r.expr),
            Expr::Macro(m) => m.mac.path.is_ident("format"),
            _ => false,
        }
    }
    matches!(s, Stmt::Expr(Expr::Call(c), Some(_)) if !c.args.is_empty() && c.args.iter().all(text))
}

/// The key expression a wrapper's call passes, without what only reborrows or converts it
/// (`&key`, `key.as_str()`, `key.clone()`): `lock(&key)` and `unlock(key.as_str())` name one key.
pub(super) fn peel_key(mut e: &Expr) -> &Expr {
    loop {
        e = match e {
            Expr::Reference(r) => &r.expr,
            Expr::Paren(p) => &p.expr,
            Expr::Group(g) => &g.expr,
            Expr::MethodCall(m)
                if m.args.is_empty()
                    && matches!(
                        m.method.to_string().as_str(),
                        "as_str"
                            | "as_ref"
                            | "as_bytes"
                            | "clone"
                            | "to_string"
                            | "to_owned"
                            | "borrow"
                            | "as_mut"
                    ) =>
            {
                &m.receiver
            }
            _ => return e,
        };
    }
}

/// String-like struct field initialisers of one file, as source text (read back and evaluated
/// where `self.field` is used): `LockRepo { lock_sql: format!("SELECT pg_advisory_lock({id})") }`.
/// Only texts that may name a lock, and calls of the functions that may build one, are kept.
#[derive(Debug, Default, Clone)]
pub struct FieldInits(HashMap<(String, String), Vec<String>>);

impl FieldInits {
    pub fn of(file: &syn::File) -> FieldInits {
        struct Collect {
            out: HashMap<(String, String), Vec<String>>,
            self_ty: Option<String>,
            /// The text-valued locals of the function being visited, by name: a field given
            /// one (`let lock_query = format!(..); Self { db, lock_query }`) is given its text.
            locals: HashMap<String, String>,
        }
        impl Collect {
            fn in_fn(&mut self, visit: impl FnOnce(&mut Self)) {
                let saved = std::mem::take(&mut self.locals);
                visit(self);
                self.locals = saved;
            }
        }
        impl<'ast> Visit<'ast> for Collect {
            fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
                self.in_fn(|c| syn::visit::visit_item_fn(c, f));
            }
            fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
                self.in_fn(|c| syn::visit::visit_impl_item_fn(c, f));
            }
            fn visit_local(&mut self, l: &'ast syn::Local) {
                syn::visit::visit_local(self, l);
                let name = match &l.pat {
                    syn::Pat::Ident(i) => Some(i.ident.to_string()),
                    syn::Pat::Type(t) => match &*t.pat {
                        syn::Pat::Ident(i) => Some(i.ident.to_string()),
                        _ => None,
                    },
                    _ => None,
                };
                if let Some(name) = name {
                    match l.init.as_ref().filter(|i| stringy(&i.expr)) {
                        Some(init) => {
                            let text = quote::ToTokens::to_token_stream(&init.expr).to_string();
                            self.locals.insert(name, text);
                        }
                        None => {
                            self.locals.remove(&name);
                        }
                    }
                }
            }
            fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
                let saved = self.self_ty.take();
                if let syn::Type::Path(p) = &*i.self_ty {
                    self.self_ty = p.path.segments.last().map(|s| s.ident.to_string());
                }
                syn::visit::visit_item_impl(self, i);
                self.self_ty = saved;
            }
            fn visit_expr_struct(&mut self, s: &'ast syn::ExprStruct) {
                let name = s.path.segments.last().map(|x| x.ident.to_string());
                let name = match name.as_deref() {
                    Some("Self") => self.self_ty.clone(),
                    _ => name,
                };
                if let Some(name) = name {
                    for f in &s.fields {
                        let syn::Member::Named(field) = &f.member else {
                            continue;
                        };
                        let local = match &f.expr {
                            Expr::Path(p) => p
                                .path
                                .get_ident()
                                .and_then(|id| self.locals.get(&id.to_string()))
                                .cloned(),
                            _ => None,
                        };
                        if let Some(text) = local.or_else(|| {
                            stringy(&f.expr)
                                .then(|| quote::ToTokens::to_token_stream(&f.expr).to_string())
                        }) {
                            if text.to_ascii_lowercase().contains("lock") {
                                self.out
                                    .entry((name.clone(), field.to_string()))
                                    .or_default()
                                    .push(text);
                            }
                        } else if let Some(call) = text_call(&f.expr, self.self_ty.as_deref()) {
                            // A text built by a function of the program (`campaign:
                            // self.campaign_sql()`), kept as a call by path, which the
                            // evaluator reads through the function's tail.
                            self.out
                                .entry((name.clone(), field.to_string()))
                                .or_default()
                                .push(call);
                        }
                    }
                }
                syn::visit::visit_expr_struct(self, s);
            }
        }
        let mut c = Collect {
            out: HashMap::new(),
            self_ty: None,
            locals: HashMap::new(),
        };
        c.visit_file(file);
        FieldInits(c.out)
    }

    /// Adds another piece's initialisers (a file parsed in pieces).
    pub fn extend(&mut self, other: FieldInits) {
        for (k, v) in other.0 {
            self.0.entry(k).or_default().extend(v);
        }
    }

    pub(super) fn get(&self, ty: &str, field: &str) -> Option<&[String]> {
        self.0
            .get(&(ty.to_string(), field.to_string()))
            .map(Vec::as_slice)
    }
}

/// `self.m(..)` or `Self::m(..)` in an impl of `self_ty`, or `Type::m(..)`: the call as a path
/// without arguments (`SelfTy::m()`), the shape a text function is looked up by.
fn text_call(e: &Expr, self_ty: Option<&str>) -> Option<String> {
    match e {
        Expr::MethodCall(m) if matches!(&*m.receiver, Expr::Path(p) if p.path.is_ident("self")) => {
            Some(format!("{}::{}()", self_ty?, m.method))
        }
        Expr::Call(c) => {
            let Expr::Path(f) = &*c.func else { return None };
            let segs: Vec<String> = f
                .path
                .segments
                .iter()
                .map(|s| s.ident.to_string())
                .collect();
            if segs.len() < 2 || !segs.last()?.starts_with(|c: char| c.is_lowercase()) {
                return None;
            }
            let first = match segs[0].as_str() {
                "Self" => self_ty?.to_string(),
                other => other.to_string(),
            };
            Some(format!("{first}::{}()", segs[1..].join("::")))
        }
        _ => None,
    }
}

/// A string literal, `format!`/`concat!`, or one converted (`"…".to_string()`, `String::from(..)`).
fn stringy(e: &Expr) -> bool {
    match e {
        Expr::Lit(l) => matches!(l.lit, syn::Lit::Str(_)),
        Expr::Macro(m) => m
            .mac
            .path
            .segments
            .last()
            .is_some_and(|s| matches!(s.ident.to_string().as_str(), "format" | "concat")),
        Expr::MethodCall(m) => stringy(&m.receiver),
        Expr::Call(c) => c.args.first().is_some_and(stringy),
        Expr::Paren(p) => stringy(&p.expr),
        _ => false,
    }
}

/// A helper that runs SQL its caller passes (`async fn exec(conn, sql: &str, key)` calling
/// `sqlx::query(sql)`): the pack whose SQL call runs it, and the argument (receiver not counted)
/// that holds the text. Its call sites are SQL calls of that pack.
/// A function's parameters named by a plain identifier (the receiver not counted): position,
/// name, and whether its type is text (`&str`, `String`).
fn named_params(sig: &syn::Signature) -> Vec<(usize, String, bool)> {
    sig.inputs
        .iter()
        .filter_map(|a| match a {
            syn::FnArg::Typed(pt) => Some(pt),
            syn::FnArg::Receiver(_) => None,
        })
        .enumerate()
        .filter_map(|(i, pt)| match &*pt.pat {
            syn::Pat::Ident(pi) => Some((i, pi.ident.to_string(), text_type(&pt.ty))),
            _ => None,
        })
        .collect()
}

/// A helper that runs the Lua script its caller passes: `Script::new(script)` (a pack's script
/// builder) on a text parameter, invoked in the helper. The script's parameter, the pack, and
/// the parameter that `.key(..)` names.
pub(super) fn script_runner(
    sig: &syn::Signature,
    body: &syn::Block,
    packs: &crate::packs::PackSet,
) -> Option<(usize, usize, Option<usize>)> {
    let params = named_params(sig);
    if !params.iter().any(|p| p.2) || packs.script_builders.is_empty() {
        return None;
    }
    // Builders by their last two segments (`Script::new`), as the helper spells them.
    let builders: Vec<(String, usize)> = packs
        .script_builders
        .iter()
        .map(|(path, &pi)| {
            let tail: Vec<&str> = path.rsplit("::").take(2).collect();
            (format!("{}::{}", tail.get(1).unwrap_or(&""), tail[0]), pi)
        })
        .collect();
    struct Find<'p> {
        builders: &'p [(String, usize)],
        params: &'p [(usize, String, bool)],
        script: Option<(usize, usize)>,
        key: Option<usize>,
        invoked: bool,
    }
    impl Find<'_> {
        fn param(&self, e: &Expr, text: bool) -> Option<usize> {
            let n = plain_name(peel_key(e))?;
            self.params
                .iter()
                .find(|(_, p, t)| *p == n && (*t || !text))
                .map(|p| p.0)
        }
    }
    impl<'ast> Visit<'ast> for Find<'_> {
        fn visit_expr(&mut self, e: &'ast Expr) {
            match e {
                Expr::Call(c) => {
                    if let Expr::Path(p) = &*c.func
                        && p.path.segments.len() >= 2
                        && c.args.len() == 1
                    {
                        let n = p.path.segments.len();
                        let tail = format!(
                            "{}::{}",
                            p.path.segments[n - 2].ident,
                            p.path.segments[n - 1].ident
                        );
                        if let Some(&(_, pi)) = self.builders.iter().find(|(b, _)| *b == tail)
                            && let Some(i) = self.param(&c.args[0], true)
                        {
                            self.script = Some((pi, i));
                        }
                    }
                }
                Expr::MethodCall(m) => {
                    let name = m.method.to_string();
                    if name == "key" && m.args.len() == 1 && self.key.is_none() {
                        self.key = self.param(&m.args[0], false);
                    }
                    self.invoked |= matches!(name.as_str(), "invoke" | "invoke_async");
                }
                _ => {}
            }
            syn::visit::visit_expr(self, e);
        }
        fn visit_item(&mut self, _: &'ast syn::Item) {}
    }
    let mut f = Find {
        builders: &builders,
        params: &params,
        script: None,
        key: None,
        invoked: false,
    };
    f.visit_block(body);
    let (pack, text) = f.script.filter(|_| f.invoked)?;
    Some((pack, text, f.key))
}

pub(super) fn sql_runner(
    sig: &syn::Signature,
    body: &syn::Block,
    packs: &crate::packs::PackSet,
) -> Option<(usize, usize)> {
    let texts: Vec<(usize, String)> = named_params(sig)
        .into_iter()
        .filter(|p| p.2)
        .map(|(i, n, _)| (i, n))
        .collect();
    if texts.is_empty() || packs.sql_calls.is_empty() {
        return None;
    }
    struct Find<'p> {
        packs: &'p crate::packs::PackSet,
        texts: &'p [(usize, String)],
        found: Option<(usize, usize)>,
    }
    impl Find<'_> {
        fn check<'e>(&mut self, name: &str, args: impl Iterator<Item = &'e Expr>) {
            let Some(&pack) = self.packs.sql_calls.get(name) else {
                return;
            };
            for a in args {
                if let Some(n) = plain_name(peel_key(a))
                    && let Some(&(i, _)) = self.texts.iter().find(|(_, t)| *t == n)
                {
                    self.found = Some((pack, i));
                }
            }
        }
    }
    impl<'ast> Visit<'ast> for Find<'_> {
        fn visit_expr(&mut self, e: &'ast Expr) {
            if self.found.is_some() {
                return;
            }
            match e {
                Expr::MethodCall(m) => self.check(&m.method.to_string(), m.args.iter()),
                Expr::Call(c) => {
                    if let Expr::Path(p) = &*c.func
                        && let Some(last) = p.path.segments.last()
                    {
                        self.check(&last.ident.to_string(), c.args.iter());
                    }
                }
                _ => {}
            }
            syn::visit::visit_expr(self, e);
        }
        fn visit_item(&mut self, _: &'ast syn::Item) {}
    }
    let mut f = Find {
        packs,
        texts: &texts,
        found: None,
    };
    f.visit_block(body);
    f.found
}

/// `&str`, `String`, `&String`, `Cow<str>`, `impl AsRef<str>` / `impl Into<String>`.
fn text_type(t: &syn::Type) -> bool {
    match t {
        syn::Type::Reference(r) => text_type(&r.elem),
        syn::Type::Paren(p) => text_type(&p.elem),
        syn::Type::Path(p) => p
            .path
            .segments
            .last()
            .is_some_and(|s| matches!(s.ident.to_string().as_str(), "str" | "String" | "Cow")),
        syn::Type::ImplTrait(it) => it.bounds.iter().any(|b| {
            matches!(b, syn::TypeParamBound::Trait(tb)
            if tb.path.segments.last().is_some_and(|s| {
                matches!(s.ident.to_string().as_str(), "AsRef" | "Into" | "ToString")
                    && quote::ToTokens::to_token_stream(&s.arguments).to_string().contains("str")
                    || s.ident == "ToString"
            }))
        }),
        _ => false,
    }
}

/// Does the function hand the connection in local `name` on, or close it: moved into a call
/// (other than `drop`), a value, another local or a `move` closure, or detached/closed? A
/// connection only borrowed (`&mut *conn`) goes back to its pool when the function ends.
pub(super) fn connection_kept(body: &syn::Block, name: &str) -> bool {
    struct Kept<'n> {
        name: &'n str,
        kept: bool,
    }
    impl Kept<'_> {
        fn is_name(&self, e: &Expr) -> bool {
            match e {
                Expr::Paren(p) => self.is_name(&p.expr),
                Expr::Path(p) => p.path.is_ident(self.name),
                _ => false,
            }
        }
    }
    impl<'ast> syn::visit::Visit<'ast> for Kept<'_> {
        fn visit_expr(&mut self, e: &'ast Expr) {
            let moved = match e {
                Expr::Call(c) => {
                    let is_drop = matches!(&*c.func, Expr::Path(p) if p.path.segments.last().is_some_and(|s| s.ident == "drop"));
                    !is_drop && c.args.iter().any(|a| self.is_name(a))
                }
                Expr::MethodCall(m) => {
                    m.args.iter().any(|a| self.is_name(a))
                        || self.is_name(&m.receiver)
                            && matches!(
                                m.method.to_string().as_str(),
                                "detach" | "close" | "leak" | "into_inner" | "take"
                            )
                }
                Expr::Struct(st) => st.fields.iter().any(|f| self.is_name(&f.expr)),
                Expr::Tuple(t) => t.elems.iter().any(|x| self.is_name(x)),
                Expr::Array(a) => a.elems.iter().any(|x| self.is_name(x)),
                Expr::Assign(a) => self.is_name(&a.right),
                Expr::Return(r) => r.expr.as_deref().is_some_and(|x| self.is_name(x)),
                Expr::Closure(c) if c.capture.is_some() => {
                    super::walk::idents_in(&c.body).contains(self.name)
                }
                _ => false,
            };
            if moved {
                self.kept = true;
                return;
            }
            syn::visit::visit_expr(self, e);
        }
        fn visit_local(&mut self, l: &'ast syn::Local) {
            // Unwrapped (`let Some(lock) = lock else { .. }`), the value goes on under the
            // pattern's name, which the caller asks about too.
            let unwrapped = matches!(&l.pat, syn::Pat::TupleStruct(ts)
                if ts.elems.len() == 1
                    && ts.path.segments.last().is_some_and(|s| s.ident == "Some" || s.ident == "Ok"));
            if !unwrapped && l.init.as_ref().is_some_and(|i| self.is_name(&i.expr)) {
                self.kept = true;
                return;
            }
            syn::visit::visit_local(self, l);
        }
    }
    let mut k = Kept { name, kept: false };
    syn::visit::Visit::visit_block(&mut k, body);
    k.kept
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(src: &str) -> FnFlow {
        let f: syn::ItemFn = syn::parse_str(src).expect("test fn parses");
        FnFlow::of(&f.sig, &f.block)
    }

    fn set(words: &[&str]) -> HashSet<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn a_key_derived_from_a_parameter_names_it() {
        let f = flow(
            "fn f(&self, con: &mut C, job: &str) { let key = format!(\"lock:{job}\"); let k2 = key.clone(); }",
        );
        assert_eq!(f.source_of(&set(&["k2"])), Some(Held::KeyArg(1)));
        assert_eq!(f.source_of(&set(&["self", "key"])), Some(Held::KeyArg(1)));
        assert_eq!(f.source_of(&set(&["self"])), Some(Held::Receiver));
        assert_eq!(f.source_of(&set(&["other"])), None);
    }

    #[test]
    fn stored_in_self_through_derived_values() {
        let f = flow(
            "fn f(&mut self) { let resp = c.lock(n).await?; let key = resp.key().to_vec(); self.key = Some(key); }",
        );
        assert!(f.stored_in_self(&set(&["resp"])));
        assert!(!f.stored_in_self(&set(&["other"])));
        let f = flow("fn f(&mut self) { let g = m.lock().await?; self.held.insert(k, g); }");
        assert!(f.stored_in_self(&set(&["g"])));
        // A free function has no `self` to store into.
        let f = flow("fn f(x: u8) { let g = m.lock(); }");
        assert!(!f.stored_in_self(&set(&["g"])));
    }

    #[test]
    fn work_after_the_acquisition_is_seen() {
        let f: syn::ItemFn = syn::parse_str(
            "fn f() {\n let ok = acquire();\n if ok.is_none() { bail!(\"busy\"); }\n Ok(())\n}",
        )
        .unwrap();
        let none = HashSet::new();
        assert!(!works_after(
            &f.block,
            (2, 30),
            &none,
            &LockCalls::default()
        ));
        let f: syn::ItemFn =
            syn::parse_str("fn f() {\n let ok = acquire();\n import_rows();\n Ok(())\n}").unwrap();
        assert!(works_after(&f.block, (2, 30), &none, &LockCalls::default()));
        // Reading the lock's own reply is no work.
        let f: syn::ItemFn = syn::parse_str(
            "fn f() {\n let resp = acquire();\n self.key = Some(resp.key().to_vec());\n Ok(())\n}",
        )
        .unwrap();
        assert!(!works_after(
            &f.block,
            (2, 30),
            &set(&["resp"]),
            &LockCalls::default()
        ));
    }

    #[test]
    fn bookkeeping_after_the_acquisition_is_no_work() {
        let lock = set(&["resp"]);
        // A free function over the reply only, state flags in `self`, a failure arm's checks.
        let f: syn::ItemFn = syn::parse_str(
            "fn f() {\n let resp = acquire();\n self.id = String::from_utf8_lossy(resp.key()).to_string();\n self.state.store(1, Ordering::SeqCst);\n if !err.to_string().contains(\"timeout\") { return Err(e); }\n Ok(())\n}",
        )
        .unwrap();
        assert!(!works_after(
            &f.block,
            (2, 30),
            &lock,
            &LockCalls::default()
        ));
        // The same method on something that is not the receiver's state is work.
        let f: syn::ItemFn = syn::parse_str(
            "fn f() {\n let resp = acquire();\n object_store.store(1, data);\n Ok(())\n}",
        )
        .unwrap();
        assert!(works_after(&f.block, (2, 30), &lock, &LockCalls::default()));
        // An own method that confirms the acquisition (Redis WAIT for replicas) is no work; an
        // own method that processes is.
        let f: syn::ItemFn = syn::parse_str(
            "fn f() {\n let resp = acquire();\n self.wait_for_write_replication().await?;\n Ok(())\n}",
        )
        .unwrap();
        assert!(!works_after(
            &f.block,
            (2, 30),
            &lock,
            &LockCalls::default()
        ));
        let f: syn::ItemFn = syn::parse_str(
            "fn f() {\n let resp = acquire();\n self.process_batch().await?;\n Ok(())\n}",
        )
        .unwrap();
        assert!(works_after(&f.block, (2, 30), &lock, &LockCalls::default()));
        // A free function over anything else is work.
        let f: syn::ItemFn =
            syn::parse_str("fn f() {\n let resp = acquire();\n upload(resp, rows);\n Ok(())\n}")
                .unwrap();
        assert!(works_after(&f.block, (2, 30), &lock, &LockCalls::default()));
    }

    #[test]
    fn what_runs_only_when_the_attempt_failed_is_no_work() {
        let works = |src: &str, from: Pos, ops: &LockCalls<'_>| {
            let f: syn::ItemFn = syn::parse_str(src).unwrap();
            works_after(&f.block, from, &set(&["result"]), ops)
        };
        let row = LockCalls {
            row: true,
            ..LockCalls::default()
        };
        // The claim's transaction committed in the success branch, which returns; the holder
        // looked up and an error built on the way out when it failed.
        let claim = "fn f() {\n let result = claim();\n if result.is_some() { tx.commit().await?; return Ok(()); }\n let holder = lookup_holder(&mut *tx).await?;\n Err(LockError::held(id, holder))\n}";
        assert!(!works(claim, (2, 30), &row));
        // A session or key lock's transaction ending is no claim finishing.
        assert!(works(claim, (2, 30), &LockCalls::default()));
        // A catch-all arm after the specific success arm is the failure.
        let retry = "fn f() {\n let result = set_nx();\n match result { Ok(Value::Okay) => return Ok(guard), Ok(_) => { let d = self.next_delay(n); sleep(d).await; } Err(e) => return Err(e) }\n}";
        assert!(!works(retry, (2, 30), &LockCalls::default()));
        // The acquisition's own answer may mean either: what follows is work.
        let either =
            "fn f() {\n if already_locked(key).await? { return Ok(()); }\n publish(key)\n}";
        assert!(works(either, (2, 10), &LockCalls::default()));
    }

    #[test]
    fn keys_are_peeled_of_borrows_and_conversions() {
        let e: Expr = syn::parse_str("&key.as_str()").unwrap();
        let peeled = peel_key(&e);
        assert!(matches!(peeled, Expr::Path(_)));
    }
}
