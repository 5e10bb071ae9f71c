//! The function walker: keeps a scope of local variables and their types, knows how each
//! expression's value is used, and asks the matchers whether a call is a lock site.

use std::collections::{HashMap, HashSet};

use syn::visit::Visit;
use syn::{Expr, Pat, Stmt};

use super::command::{self, Command};
use super::failure::{self, Use};
use super::matchers::{self, Matched};
use super::summary::{self, FnFlow};
use super::{Clock, ExpireAfter, FileCx, FileFacts, FnInfo, Site};
use crate::model::eval::{Lookup, Value};
use crate::model::index::ty_with;
use crate::model::{Imports, Ty};
use crate::region::{self, Event, Holding, Marker, MarkerKind, Pos};
use crate::source::Span;

mod clocks;
mod owner;
mod typing;

use clocks::Clocks;

/// Finds every lock site in a parsed file.
pub fn analyze_file(file: &syn::File, cx: &FileCx<'_>) -> FileFacts {
    analyze_file_with(file, cx, summary::FieldInits::of(file))
}

/// [`analyze_file`] with the file's struct field initialisers found beforehand (on the whole
/// text, when the tree walked has bodies blanked out: see `blank`).
pub fn analyze_file_with(
    file: &syn::File,
    cx: &FileCx<'_>,
    field_inits: summary::FieldInits,
) -> FileFacts {
    let mut facts = FileFacts {
        field_inits,
        ..Default::default()
    };
    // Macro arguments are parsed on the fly and must live as long as the tree they extend.
    let arena = MacroArena::new();
    items(&file.items, cx, cx.imports, &arena, &mut facts);
    facts
}

type MacroArgs = syn::punctuated::Punctuated<Expr, syn::Token![,]>;

/// What macro bodies parse into, kept as long as the tree they extend: expressions, and the
/// patterns of `select!` arms.
struct MacroArena {
    args: typed_arena::Arena<MacroArgs>,
    pats: typed_arena::Arena<Pat>,
}

impl MacroArena {
    fn new() -> MacroArena {
        MacroArena {
            args: typed_arena::Arena::new(),
            pats: typed_arena::Arena::new(),
        }
    }

    fn alloc(&self, args: MacroArgs) -> &mut MacroArgs {
        self.args.alloc(args)
    }
}

/// One arm of `tokio::select!` / `futures::select!`: `pat = future [, if guard] => handler`, or
/// `else => handler` (no pattern, no future).
pub(super) struct SelectArm {
    pat: Option<Pat>,
    future: Option<Expr>,
    guard: Option<Expr>,
    pub(super) handler: Expr,
}

pub(super) struct SelectArms(pub(super) Vec<SelectArm>);

impl syn::parse::Parse for SelectArms {
    fn parse(input: syn::parse::ParseStream<'_>) -> syn::Result<SelectArms> {
        let mut arms = Vec::new();
        if input.peek(syn::Ident) && input.peek2(syn::Token![;]) {
            let word: syn::Ident = input.parse()?;
            if word != "biased" {
                return Err(syn::Error::new(word.span(), "expected `biased;`"));
            }
            input.parse::<syn::Token![;]>()?;
        }
        while !input.is_empty() {
            let (pat, future, guard) = if input.peek(syn::Token![else]) {
                input.parse::<syn::Token![else]>()?;
                (None, None, None)
            } else {
                let pat = Pat::parse_multi_with_leading_vert(input)?;
                input.parse::<syn::Token![=]>()?;
                let future: Expr = input.parse()?;
                let guard = if input.peek(syn::Token![,]) && input.peek2(syn::Token![if]) {
                    input.parse::<syn::Token![,]>()?;
                    input.parse::<syn::Token![if]>()?;
                    Some(input.parse()?)
                } else {
                    None
                };
                (Some(pat), Some(future), guard)
            };
            input.parse::<syn::Token![=>]>()?;
            // A block handler ends at its brace, as in the macro itself: parsed as an expression,
            // `{} () = next => ..` would run on into a call and an assignment.
            let handler: Expr = if input.peek(syn::token::Brace) {
                Expr::Block(syn::ExprBlock {
                    attrs: Vec::new(),
                    label: None,
                    block: input.parse()?,
                })
            } else {
                input.parse()?
            };
            arms.push(SelectArm {
                pat,
                future,
                guard,
                handler,
            });
            if input.peek(syn::Token![,]) {
                input.parse::<syn::Token![,]>()?;
            }
        }
        Ok(SelectArms(arms))
    }
}

fn items<'a>(
    list: &'a [syn::Item],
    cx: &FileCx<'_>,
    imports: &Imports,
    arena: &'a MacroArena,
    out: &mut FileFacts,
) {
    for item in list {
        match item {
            syn::Item::Fn(f) => {
                let path = fn_path(imports, None, &f.sig.ident.to_string());
                let source = FnSource {
                    sig: &f.sig,
                    body: &f.block,
                    outer: None,
                };
                analyze_fn(source, cx, imports, None, path, arena, out);
            }
            syn::Item::Impl(imp) => {
                let known = |p: &str| cx.index.knows(p) || cx.packs.knows(p);
                let self_ty =
                    ty_with(&imp.self_ty, imports, None, &known).map(|t| cx.index.normalize(&t));
                for it in &imp.items {
                    if let syn::ImplItem::Fn(f) = it {
                        let path = fn_path(imports, self_ty.as_ref(), &f.sig.ident.to_string());
                        analyze_fn(
                            FnSource {
                                sig: &f.sig,
                                body: &f.block,
                                outer: Some(&imp.generics),
                            },
                            cx,
                            imports,
                            self_ty.clone(),
                            path,
                            arena,
                            out,
                        );
                    }
                }
            }
            syn::Item::Trait(t) => {
                // A default method's `self` is the trait: what it acquires, calls through the
                // trait reach.
                let own = Ty::simple(
                    cx.index
                        .through_reexports(format!("{}::{}", imports.module, t.ident)),
                );
                for it in &t.items {
                    if let syn::TraitItem::Fn(f) = it
                        && let Some(block) = &f.default
                    {
                        let path = fn_path(
                            imports,
                            Some(&Ty::simple(t.ident.to_string())),
                            &f.sig.ident.to_string(),
                        );
                        analyze_fn(
                            FnSource {
                                sig: &f.sig,
                                body: block,
                                outer: Some(&t.generics),
                            },
                            cx,
                            imports,
                            Some(own.clone()),
                            path,
                            arena,
                            out,
                        );
                    }
                }
            }
            syn::Item::Mod(m) => {
                if let Some((_, content)) = &m.content {
                    let mut child = imports.child_module(&m.ident.to_string());
                    child.add_items(content);
                    items(content, cx, &child, arena, out);
                }
            }
            _ => {}
        }
    }
}

/// `crate::jobs::import` + `Importer` + `run` -> `jobs::import::Importer::run`.
fn fn_path(imports: &Imports, self_ty: Option<&Ty>, name: &str) -> String {
    let module = imports
        .module
        .strip_prefix("crate")
        .unwrap_or(&imports.module)
        .trim_start_matches("::");
    let mut parts: Vec<&str> = Vec::new();
    if !module.is_empty() {
        parts.push(module);
    }
    if let Some(t) = self_ty {
        parts.push(t.last_segment());
    }
    parts.push(name);
    parts.join("::")
}

/// The name a key expression starts from (`key` of `key.as_str()`, `self` of `self.key`).
fn key_root(key: &str) -> &str {
    key.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .next()
        .unwrap_or("")
}

/// A function's syntax: its signature, body, and the generics of the impl or trait around it.
struct FnSource<'a> {
    sig: &'a syn::Signature,
    body: &'a syn::Block,
    outer: Option<&'a syn::Generics>,
}

fn analyze_fn<'a>(
    source: FnSource<'a>,
    cx: &FileCx<'_>,
    imports: &Imports,
    self_ty: Option<Ty>,
    path: String,
    arena: &'a MacroArena,
    out: &mut FileFacts,
) {
    let FnSource { sig, body, outer } = source;
    // `use` items inside the body extend the module's imports for this function only.
    let local_uses: Vec<syn::Item> = body
        .stmts
        .iter()
        .filter_map(|s| match s {
            Stmt::Item(i @ (syn::Item::Use(_) | syn::Item::ExternCrate(_))) => Some(i.clone()),
            _ => None,
        })
        .collect();
    let owned;
    let imports = if local_uses.is_empty() {
        imports
    } else {
        let mut i = imports.clone();
        i.add_items(&local_uses);
        owned = i;
        &owned
    };
    let info = FnInfo {
        path,
        sig_line: Span::of(&sig.fn_token).line,
    };
    let name = sig.ident.to_string();
    let is_method = sig
        .inputs
        .first()
        .is_some_and(|a| matches!(a, syn::FnArg::Receiver(_)));
    let (canonical, method) = match (&self_ty, is_method) {
        (Some(t), true) => (
            format!("{}::{name}", t.path),
            Some((t.path.clone(), name.clone())),
        ),
        (Some(t), false) => (format!("{}::{name}", t.path), None),
        (None, _) => (format!("{}::{name}", imports.module), None),
    };
    let mut w = Walker {
        cx,
        imports,
        self_ty,
        scopes: vec![HashMap::new()],
        generics: HashMap::new(),
        pending: Vec::new(),
        rest: Vec::new(),
        stmt_line: info.sig_line,
        info,
        done: HashSet::new(),
        arena,
        out,
        events: Vec::new(),
        markers: Vec::new(),
        guards: region::Guards::default(),
        unset_flags: Vec::new(),
        compared_reads: Vec::new(),
        holder_compared: false,
        held_by_us: false,
        lease_expired: false,
        store_reads: HashMap::new(),
        closure_depth: 0,
        inline_depth: 0,
        inline_async: HashSet::new(),
        forwarded_depth: 0,
        forwarding: HashSet::new(),
        outer_returns: Vec::new(),
        spawning: HashMap::new(),
        spawn_names: HashMap::new(),
        in_spawned: None,
        spawned: HashMap::new(),
        value_closures: HashMap::new(),
        in_value_closures: Vec::new(),
        closure_values: HashSet::new(),
        in_closure_value: 0,
        loops: Vec::new(),
        for_loops: Vec::new(),
        block_ends: Vec::new(),
        holdings: Vec::new(),
        carried: HashMap::new(),
        site_gates: HashMap::new(),
        saw_ttl_check: false,
        kept_streams: Vec::new(),
        stmt_end: (0, 0),
        first_site: 0,
        in_return: 0,
        returned: HashSet::new(),
        returned_types: Vec::new(),
        returned_sites: Vec::new(),
        value_exprs: HashSet::new(),
        scoped_results: HashSet::new(),
        switches: HashSet::new(),
        body: Some(body),
        arms: Vec::new(),
        site_arms: HashMap::new(),
        callables: HashSet::new(),
        params: HashSet::new(),
        op_names: HashSet::new(),
        checkouts: HashSet::new(),
        canonical,
        method,
        ret: None,
        sig,
        key_names: HashMap::new(),
        deferred: HashMap::new(),
        deferred_region: None,
        pipe_locals: HashMap::new(),
        in_closures: HashSet::new(),
        forwarded: std::cell::RefCell::new(None),
        macro_reads: Default::default(),
        counter_keys: HashSet::new(),
        value_loop: None,
        let_loops: Vec::new(),
        rebound: HashMap::new(),
        serials: 0,
        param_serials: 0,
        owners: Vec::new(),
    };
    w.first_site = w.out.sites.len();
    // The function's own generics shadow the impl's (`impl<K: Kv> Alloc<K>`).
    for generics in outer.into_iter().chain([&sig.generics]) {
        for gp in &generics.params {
            if let syn::GenericParam::Type(tp) = gp {
                w.add_generic(&tp.ident.to_string(), tp.bounds.iter());
            }
        }
        if let Some(wc) = &generics.where_clause {
            for pred in &wc.predicates {
                if let syn::WherePredicate::Type(pt) = pred
                    && let syn::Type::Path(p) = &pt.bounded_ty
                    && let Some(id) = p.path.get_ident()
                {
                    w.add_generic(&id.to_string(), pt.bounds.iter());
                }
            }
        }
    }
    // A method on the lock's own holder (`fn release(self)` reading `self.key`) releases what
    // its receiver holds: `self` is a parameter for release wrappers.
    if sig.receiver().is_some() {
        w.params.insert("self".into());
    }
    for input in &sig.inputs {
        if let syn::FnArg::Typed(pt) = input {
            let ty = w.ty_of_type(&pt.ty);
            // Closures and futures the caller hands in: running one while holding makes a wrapper.
            if ty.as_ref().is_some_and(|t| is_callable(t.last_segment()))
                && let Some(n) = single_name(&pt.pat)
            {
                w.callables.insert(n);
            }
            let mut names = Vec::new();
            pattern_idents(&pt.pat, &mut names);
            w.params.extend(names);
            w.bind(&pt.pat, None, ty);
        }
    }
    w.param_serials = w.serials;
    w.ret = match &sig.output {
        syn::ReturnType::Default => None,
        syn::ReturnType::Type(_, t) => w.ty_of_type(t),
    };
    w.block_ends.push(region::end_of(Span::of_block(body)));
    w.counter_keys = counted_keys(body);
    w.visit_block(body);
    w.finish(body);
    if w.out.sites.len() > w.first_site || w.out.wrappers.iter().any(|x| x.canonical == w.canonical)
    {
        return;
    }
    // A helper that hands its caller's object to a call judged by it (`fields-arg`), or one
    // that runs its caller's SQL: each call of it is judged by what the caller passes.
    let forward = w.forwarded.borrow().clone();
    let runner = match forward {
        Some((pack, api, param, kind)) => {
            param_index(sig, &param).map(|i| (pack, Runs::Object(api, i, kind)))
        }
        None => None,
    }
    .or_else(|| summary::sql_runner(sig, body, cx.packs).map(|(pack, arg)| (pack, Runs::Sql(arg))))
    .or_else(|| {
        summary::script_runner(sig, body, cx.packs)
            .map(|(pack, text, key)| (pack, Runs::Script(text, key)))
    });
    if let Some((pack, runs)) = runner {
        let sql = matches!(runs, Runs::Sql(_));
        let (sql_arg, forwards, script_arg) = match runs {
            Runs::Sql(arg) => (Some(arg), None, None),
            Runs::Object(api, i, kind) => (None, Some((api, i, kind)), None),
            Runs::Script(text, key) => (None, None, Some((text, key))),
        };
        w.out.wrappers.push(super::WrapperCandidate {
            canonical: w.canonical.clone(),
            method: w.method.clone(),
            via: w.info.path.clone(),
            arity: arity(sig),
            library: cx.packs.packs[pack].pack.name.clone(),
            kind: if sql {
                crate::packs::CallKind::Acquire
            } else {
                crate::packs::CallKind::TryAcquire
            },
            returns: crate::packs::Returns::Result,
            returns_type: None,
            scoped: false,
            ttl_ms: None,
            ttl_arg: None,
            ttl_field: None,
            auto_renew: false,
            fencing: super::Fencing::None,
            sql,
            consensus: cx.packs.packs[pack].pack.consensus,
            backend: None,
            qualified: false,
            handle: sql,
            key_arg: None,
            held: None,
            sql_arg,
            script_arg,
            pipeline: None,
            forwards,
            when_arg: None,
            origin: None,
            owner_checked: true,
            library_purpose: None,
            lent: false,
            session_arg: None,
            key_gate: None,
        });
    }
}

/// The keys a body counts with: the key argument of `incr`/`incr_by`/`decr`/`hincr_by`-style
/// methods, or of a raw `cmd("INCR" | "INCRBY" | "DECR" | …).arg(key)`.
fn counted_keys(body: &syn::Block) -> HashSet<String> {
    struct Counts(HashSet<String>);
    const COUNTERS: [&str; 6] = ["incr", "incr_by", "incrby", "decr", "decr_by", "decrby"];
    fn text(e: &Expr) -> String {
        quote::ToTokens::to_token_stream(summary::peel_key(e)).to_string()
    }
    impl<'ast> Visit<'ast> for Counts {
        fn visit_expr_method_call(&mut self, m: &'ast syn::ExprMethodCall) {
            let name = m.method.to_string().to_ascii_lowercase();
            if COUNTERS.contains(&name.as_str())
                && let Some(k) = m.args.first()
            {
                self.0.insert(text(k));
            }
            // `cmd("INCRBY").arg(&key)`: the first `.arg` on a counting command.
            if m.method == "arg"
                && let Expr::Call(c) = &*m.receiver
                && let Expr::Path(f) = &*c.func
                && f.path.segments.last().is_some_and(|s| s.ident == "cmd")
                && let Some(Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(cmd),
                    ..
                })) = c.args.first()
                && COUNTERS.contains(&cmd.value().to_ascii_lowercase().as_str())
                && let Some(k) = m.args.first()
            {
                self.0.insert(text(k));
            }
            syn::visit::visit_expr_method_call(self, m);
        }
    }
    let mut c = Counts(HashSet::new());
    c.visit_block(body);
    c.0
}

/// What a runner helper hands on to the call inside it.
enum Runs {
    /// The SQL text, in this argument.
    Sql(usize),
    /// The object a `fields-arg` call reads (or the key a `when-lock-key` call does): the call's
    /// method or function, the parameter, and the kind of the call judged.
    Object(String, usize, crate::packs::CallKind),
    /// A Lua script's text, in this argument; its key, in that one.
    Script(usize, Option<usize>),
}

/// The position of a named parameter (the receiver not counted).
fn param_index(sig: &syn::Signature, name: &str) -> Option<usize> {
    sig.inputs
        .iter()
        .filter_map(|a| match a {
            syn::FnArg::Typed(pt) => Some(pt),
            syn::FnArg::Receiver(_) => None,
        })
        .position(|pt| single_name(&pt.pat).is_some_and(|n| n == name))
}

/// Does `body` test the local `name` in an `if` or `match` (`if !added`, `match added`)?
fn tested(body: &syn::Block, name: &str) -> bool {
    struct Tests<'n> {
        name: &'n str,
        found: bool,
    }
    impl<'ast> Visit<'ast> for Tests<'_> {
        fn visit_expr(&mut self, e: &'ast Expr) {
            let scrutinee = match e {
                Expr::If(i) => Some(&*i.cond),
                Expr::Match(m) => Some(&*m.expr),
                _ => None,
            };
            self.found |= scrutinee.is_some_and(|c| value_idents(c).contains(self.name));
            if !self.found {
                syn::visit::visit_expr(self, e);
            }
        }
    }
    let mut t = Tests { name, found: false };
    t.visit_block(body);
    t.found
}

/// Is a parameter's type one a stored value has: text or bytes, or a type the function `sig` is
/// generic over (`value: &str`, `v: impl ToRedisArgs`, `value: &V`)? Not a number, which a TTL
/// or a count is as often.
fn value_typed(sig: &syn::Signature, ty: &syn::Type) -> bool {
    let mut t = ty;
    while let syn::Type::Reference(r) = t {
        t = &r.elem;
    }
    match t {
        syn::Type::ImplTrait(_) | syn::Type::Slice(_) => true,
        syn::Type::Path(p) => p.path.segments.last().is_some_and(|s| {
            let name = s.ident.to_string();
            matches!(name.as_str(), "str" | "String" | "Vec" | "Bytes" | "Cow")
                || sig.generics.type_params().any(|g| g.ident == name)
        }),
        _ => false,
    }
}

/// A parameter of that name taken by value (`client: Client`), not borrowed.
fn param_by_value(sig: &syn::Signature, name: &str) -> bool {
    sig.inputs.iter().any(|a| match a {
        syn::FnArg::Typed(pt) => {
            single_name(&pt.pat).is_some_and(|n| n == name)
                && !matches!(&*pt.ty, syn::Type::Reference(_))
        }
        syn::FnArg::Receiver(_) => false,
    })
}

/// A local variable: its type when known, and its initialiser for value evaluation.
#[derive(Clone)]
struct Local<'a> {
    ty: Option<Ty>,
    init: Option<&'a Expr>,
    /// Arguments added by later statements (`cmd.arg(key).arg("NX");`), in order.
    args: Vec<&'a Expr>,
    /// Script keys added by later statements (`invoke.key(k);`, also in a loop), in order.
    keys: Vec<&'a Expr>,
    /// Which binding this is: a new `let` of the same name, or an assignment, gets a new one.
    serial: usize,
}

pub(super) struct Walker<'a, 'c> {
    pub(super) cx: &'c FileCx<'c>,
    pub(super) imports: &'c Imports,
    pub(super) self_ty: Option<Ty>,
    scopes: Vec<HashMap<String, Local<'a>>>,
    /// Generic type parameters -> their first trait bound (`C: AsyncCommands`).
    generics: HashMap<String, Ty>,
    /// How specific child expressions are used, set by their parent before descending.
    pending: Vec<(*const Expr, Use<'a>)>,
    /// The statements after the current one, per enclosing block.
    rest: Vec<&'a [Stmt]>,
    stmt_line: usize,
    info: FnInfo,
    /// Call expressions already recorded as sites (a chain is seen from several levels).
    done: HashSet<*const Expr>,
    arena: &'a MacroArena,
    out: &'c mut FileFacts,
    /// Non-acquisition lock calls and the flow markers of this function (see `region`).
    events: Vec<Event>,
    markers: Vec<Marker>,
    /// Identifiers in the conditions around the current point (innermost first, shared with the
    /// markers: an `else if` chain of N branches holds N conditions, not N² copies).
    guards: region::Guards,
    /// Flags the enclosing `if`s require unset where the current point runs (`if
    /// !is_leader.load(..) { … }`): a round taken only then cannot leave them stale.
    pub(super) unset_flags: Vec<String>,
    /// The names read by the `get` of each enclosing `if` that compares what it read
    /// (`if cache.get(key)? == Some(token) { cache.del(key) }`): a check before a release.
    compared_reads: Vec<HashSet<String>>,
    /// Locals holding a value just read from the store by key (`let cur = conn.get(key)?`, and
    /// `if let Some(v) = cur`): name -> the key's text. Comparing with one in a release compares
    /// the key's value with itself.
    store_reads: HashMap<String, String>,
    /// An `if` before this point compared a holder or owner (`if lease_holder != me { return
    /// .. }`): a typed lock object's release after it was checked, if not atomically.
    holder_compared: bool,
    /// The code here runs only while the object read names this program as its holder (after
    /// `if holder != me { return .. }`, inside `if holder == me { .. }`): a typed lock object
    /// written here with its holder is kept, not taken.
    held_by_us: bool,
    /// The code found the lease run out (`if claim.expires_at < now { … }`, or after `if
    /// !claim.is_expired() { return }`): a renewal's conditional write here takes it over.
    lease_expired: bool,
    closure_depth: usize,
    /// Of `closure_depth`, the `async` blocks awaited where they stand (`inline_async`).
    inline_depth: usize,
    inline_async: HashSet<*const Expr>,
    /// How many of the enclosing closures hand their value to the function's (`return
    /// spawn_blocking(move || { … Ok(lock) }).await?`): while every enclosing closure does,
    /// their `return`s and tails are the function's.
    forwarded_depth: usize,
    /// Closures passed to a call whose value the function returns (see `forwarded_depth`).
    forwarding: HashSet<*const Expr>,
    /// `in_return` outside each forwarded closure being walked.
    outer_returns: Vec<usize>,
    /// Tasks the function spawns (`tokio::spawn(async move { … })` at its own level), with the
    /// spawning call's span: a lock taken in one is held by the task, after the function
    /// returns.
    spawning: HashMap<*const Expr, (Pos, Pos)>,
    /// The names a spawned task's closures use, by the spawn's span.
    spawn_names: HashMap<(Pos, Pos), HashSet<String>>,
    /// The spawn of the task being walked, if any (tasks are spawned at the function's own
    /// level, so the task's own level is closure depth 1).
    in_spawned: Option<(Pos, Pos)>,
    /// Sites taken at a spawned task's own level, with the spawn's span.
    spawned: HashMap<usize, (Pos, Pos)>,
    /// Closures whose value becomes a local's (`let r = self.with_conn(|c| cmd.query(c))?;`),
    /// with that local's binding: (name, where its holding starts, the let's block end, the
    /// closure depth of the let).
    value_closures: HashMap<*const Expr, (String, Pos, Pos, usize)>,
    /// The value closures being walked, innermost last, with the closure depth inside each.
    in_value_closures: Vec<(usize, *const Expr)>,
    /// The value expressions of those closures (their tails, each arm of a tail `match`).
    closure_values: HashSet<*const Expr>,
    /// Inside one of `closure_values`.
    in_closure_value: usize,
    loops: Vec<Span>,
    /// Per entry of `loops`: a `for` over items (each round its own item), not a repeating
    /// `loop`/`while` round.
    for_loops: Vec<bool>,
    block_ends: Vec<Pos>,
    /// Sites of this function (index into `out.sites`) and how each is held.
    holdings: Vec<(usize, Holding)>,
    /// Per site: the names a holding gained by a value made from it (`let led = lock.is_some()`),
    /// which report on the lock rather than hold it.
    carried: HashMap<usize, HashSet<String>>,
    /// Per site: the boolean parameter that gates its acquisition (see `Matched::gate`).
    site_gates: HashMap<usize, String>,
    /// Some keep-alive response of this function is checked with `.ttl()`.
    saw_ttl_check: bool,
    /// Keep-alive events (by index into `events`) whose response stream this function kept,
    /// with the stream's name and the keeper's: judged at the end, by whether any response's TTL
    /// is read.
    kept_streams: Vec<(usize, String, Option<String>)>,
    /// End of the statement being walked.
    stmt_end: Pos,
    /// Inside a `return` or the function's tail expression.
    in_return: usize,
    /// Identifiers in `return` and tail expressions: values the function hands back.
    returned: HashSet<String>,
    /// The program's own types of the locals handed back (`lock` of `return Ok(lock as
    /// Box<dyn Send>)`, bound to `Box::new(RedisLock { .. })`): what an opaque return type is.
    returned_types: Vec<String>,
    /// Sites whose value is returned directly.
    returned_sites: Vec<usize>,
    /// The expressions whose value is the function's: the tail expression, or each branch's
    /// value when the tail is an `if`, a `match` or a block (every arm returns, not only the
    /// last one).
    value_exprs: HashSet<*const Expr>,
    /// Scoped wrapper calls that run work of their own: their value is the work's result, never
    /// the lock, whatever name it is bound to before it is returned.
    scoped_results: HashSet<usize>,
    /// Switches told to a local so far (`m.set_locking(false)`): (local, method, value).
    switches: HashSet<(String, String, bool)>,
    /// The function's body, for what is assigned to a local anywhere in it.
    pub(super) body: Option<&'a syn::Block>,
    /// The `match` arms being walked whose scrutinee is a plain name: (name, the variant the
    /// arm's pattern names), innermost last.
    arms: Vec<(String, String)>,
    /// Per site: the innermost such arm it was found in.
    site_arms: HashMap<usize, (String, String)>,
    /// Parameters that are closures or futures.
    callables: HashSet<String>,
    /// Every parameter name.
    params: HashSet<String>,
    /// The names the function's lock operations are given (see `lock_tie`).
    op_names: HashSet<String>,
    /// Locals bound to a connection lent by a pool (a pack's `checkouts`).
    pub(super) checkouts: HashSet<String>,
    /// How calls to this function resolve, and its impl type and name when it is a method.
    canonical: String,
    method: Option<(String, String)>,
    ret: Option<Ty>,
    first_site: usize,
    /// The function's signature, for its wrapper summary.
    sig: &'a syn::Signature,
    /// Per lock call (by the start of its span): the identifiers its key expression reads.
    key_names: HashMap<Pos, HashSet<String>>,
    /// `let name;` declarations: the pattern, the statements after it, the end of its block.
    deferred: HashMap<String, (&'a Pat, &'a [Stmt], Pos)>,
    /// While visiting `name = …` for a deferred `let name;`: the end of the assigned expression,
    /// where the lock's region starts (after the statement of the declaring block that holds
    /// the assignment: `if a { l = x.lock()? } else { l = y.lock()? }` holds it after the `if`)
    /// and where the declaring block ends.
    deferred_region: Option<(Pos, Pos, Pos)>,
    /// Lock commands in a pipeline (by the start of their span): the local holding the pipeline.
    pipe_locals: HashMap<Pos, Option<String>>,
    /// Acquisitions inside a closure or `async` block (by span start): held by whoever runs it,
    /// never left by this function to its caller.
    in_closures: HashSet<Pos>,
    /// The first pack call whose `fields-arg`, `when-calls` options or `when-lock-key` key is a
    /// parameter of this function, as (pack, the call's method or function, the parameter, the
    /// call's kind: the variant judged here): noted while matching, which only reads the walker.
    pub(super) forwarded:
        std::cell::RefCell<Option<(usize, String, String, crate::packs::CallKind)>>,
    /// Keys the function counts with (`INCRBY key 1`, `con.incr(&key, 1)`), as written without
    /// borrows: a create-if-absent of one sets a counter up, it takes no lock.
    counter_keys: HashSet<String>,
    /// The `loop` that is the function's value: a `break` out of it returns.
    value_loop: Option<Span>,
    /// `let pat = loop { … break value; … }`: per such loop, the pattern its breaks bind and
    /// the end of the `let` and of the declaring block.
    let_loops: Vec<(Span, &'a Pat, Pos, Pos)>,
    /// Per holding (index in `holdings`): its names rebound to other values since it was taken.
    rebound: HashMap<usize, HashSet<String>>,
    /// Serials handed out to locals so far.
    serials: usize,
    /// The last serial given to a parameter.
    param_serials: usize,
    /// Acquisitions whose written value is a local (`.arg(&token)`).
    owners: Vec<owner::OwnerNote>,
    /// Macro bodies read so far (see `macro_args`).
    macro_reads: HashMap<*const syn::Macro, Option<&'a MacroArgs>>,
}

impl<'a, 'c> Walker<'a, 'c> {
    /// A macro's body read as comma-separated expressions (`vec![a, b]`), kept for the file.
    pub(super) fn macro_exprs(&self, mac: &syn::Macro) -> Option<&'a MacroArgs> {
        let args = mac.parse_body_with(MacroArgs::parse_terminated).ok()?;
        Some(self.arena.alloc(args))
    }

    /// The same for a macro of the function being walked, read once: the walk and the
    /// detection of a chain through the macro (see `passes_through`) see the same expressions.
    fn macro_args(&mut self, mac: &'a syn::Macro) -> Option<&'a MacroArgs> {
        let key = mac as *const syn::Macro;
        if let Some(&known) = self.macro_reads.get(&key) {
            return known;
        }
        let args = self.macro_exprs(mac);
        self.macro_reads.insert(key, args);
        args
    }

    /// Keeps an expression made during matching (an HTTP lock's key read from its URL) for the file.
    pub(super) fn keep(&self, e: Expr) -> &'a Expr {
        let mut one = MacroArgs::new();
        one.push(e);
        &self.arena.alloc(one)[0]
    }

    /// `cmd.arg(key).arg("NX");` as a statement: the arguments go to the local `cmd`; and
    /// `invoke.key(k);` (a script invocation built by statements) adds a key.
    fn note_added_args(&mut self, e: &'a Expr) {
        let mut levels = Vec::new();
        let mut keys = Vec::new();
        let mut cur = e;
        while let Expr::MethodCall(m) = cur {
            match m.method.to_string().as_str() {
                "arg" if m.args.len() == 1 => levels.push(&m.args[0]),
                "key" if m.args.len() == 1 => keys.push(&m.args[0]),
                _ => return,
            }
            cur = &m.receiver;
        }
        let Expr::Path(p) = cur else { return };
        let Some(name) = p.path.get_ident().map(ToString::to_string) else {
            return;
        };
        if levels.is_empty() && keys.is_empty() {
            return;
        }
        if let Some(local) = self.scopes.iter_mut().rev().find_map(|s| s.get_mut(&name)) {
            for a in levels.into_iter().rev() {
                matchers::flatten_args(a, &mut local.args);
            }
            local.keys.extend(keys.into_iter().rev());
        }
    }

    /// Was `local.method(value)` called earlier in this function?
    pub(super) fn switched(&self, local: &str, method: &str, value: bool) -> bool {
        self.switches
            .contains(&(local.to_string(), method.to_string(), value))
    }

    /// Was this expression already recorded as a site?
    pub(super) fn matched(&self, e: &Expr) -> bool {
        self.done.contains(&(e as *const Expr))
    }

    /// Binds the names a pattern introduces. Every name shadows, even when nothing is known about it.
    fn bind(&mut self, pat: &'a Pat, init: Option<&'a Expr>, ty: Option<Ty>) {
        let mut names = Vec::new();
        pattern_idents(pat, &mut names);
        let mentioned = init.map(value_idents).unwrap_or_default();
        // `let lock = mgr.extend(&lock, ttl)?` rebinds the name to the same lock: not a rebinding.
        for n in names.iter().filter(|n| !mentioned.contains(*n)) {
            self.marker(MarkerKind::Rebind(n.clone()), Span::of(pat));
        }
        // Locks taken before this statement no longer go by the names it rebinds (judged before
        // the value is carried: `let key = resp.key()` makes `key` a name of the lock, it does
        // not rebind one).
        let here = region::start_of(Span::of(pat));
        for (i, (_, h)) in self.holdings.iter().enumerate() {
            if h.start < here {
                for n in names
                    .iter()
                    .filter(|n| !mentioned.contains(*n) && h.names.contains(*n))
                {
                    self.rebound.entry(i).or_default().insert(n.clone());
                }
            }
        }
        // A value computed from a lock's result carries it (`let acquired: bool = row.get(0)`),
        // unless the name it reads was rebound since (`let resp = lease_grant(..)`: `resp.id()`
        // is the lease's, not the lock's).
        if let Some(init) = init {
            let report = tests_a_value(init);
            for n in &names {
                self.carry_into(n, &mentioned, report);
            }
        }
        self.bind_types(pat, init, ty);
    }

    /// Is the value made from the function's parameters: one of them, or an expression (or a
    /// local bound to one) that reads one (`self.key(id)`, `format!("lock:{id}")`)?
    fn made_of_params(&self, e: &Expr) -> bool {
        let reads = |e: &Expr| {
            value_idents(e)
                .iter()
                .any(|n| self.params.contains(n) && self.local_init(n).is_none())
        };
        let e = summary::peel_key(e);
        reads(e)
            || local_named(e)
                .and_then(|n| self.local_init(&n))
                .is_some_and(reads)
    }

    /// A local holding a lock value's result, matched later (`let r = join().await; match r {
    /// Ok((rx, permit)) => send(permit), … }`): the success arm's names hold the lock too, so
    /// handing one on hands the lock on. Only for lock values (a reply says how it went).
    fn unwrap_held(&mut self, scrutinee: &str, pat: &Pat) {
        let mut names = Vec::new();
        pattern_idents(pat, &mut names);
        for (i, (_, h)) in self.holdings.iter_mut().enumerate() {
            let gone = self.rebound.get(&i).is_some_and(|g| g.contains(scrutinee));
            if h.handle && !gone && h.names.contains(scrutinee) {
                h.names.extend(names.iter().cloned());
            }
        }
    }

    /// Is `name` a lock value (a handle or guard) an acquisition of this function handed back,
    /// from the same library (a task row claimed from a queue may take an advisory lock of its
    /// own: `task.try_acquire_lock(&mut tx)`), not rebound since?
    fn holds_lock_value(&self, name: &str, pack: usize) -> bool {
        self.holdings.iter().enumerate().any(|(i, (site, h))| {
            h.handle
                && self.out.sites.get(*site).is_some_and(|s| s.pack == pack)
                && h.names.contains(name)
                && !self.rebound.get(&i).is_some_and(|g| g.contains(name))
        })
    }

    /// Is the local `name` made from the receiver somewhere in the function (`let key =
    /// self.key.clone();`)? Its value is the receiver's own.
    fn copied_from_receiver(&self, name: &str) -> bool {
        struct Find<'n>(&'n str, bool);
        impl<'ast> Visit<'ast> for Find<'_> {
            fn visit_local(&mut self, l: &'ast syn::Local) {
                if single_name(&l.pat).as_deref() == Some(self.0)
                    && l.init
                        .as_ref()
                        .is_some_and(|i| idents_in(&i.expr).contains("self"))
                {
                    self.1 = true;
                }
                syn::visit::visit_local(self, l);
            }
        }
        let Some(body) = self.body.filter(|_| !name.is_empty() && name != "self") else {
            return false;
        };
        let mut f = Find(name, false);
        f.visit_block(body);
        f.1
    }

    /// Is the key `key` (as written) incremented earlier in the function (`cmd("INCR").arg(key)`,
    /// `con.incr(key, 1)`)? The key is a counter.
    fn counted_before(&self, key: &Expr, at: Span) -> bool {
        struct Find {
            key: String,
            before: Pos,
            found: bool,
        }
        fn text(e: &Expr) -> String {
            quote::ToTokens::to_token_stream(summary::peel_key(e))
                .to_string()
                .replace(' ', "")
        }
        fn counting_cmd(e: &Expr) -> bool {
            match e {
                Expr::Call(c) => c.args.first().is_some_and(|a| {
                    matches!(a, Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. })
                        if matches!(s.value().to_ascii_uppercase().as_str(), "INCR" | "INCRBY" | "INCRBYFLOAT" | "HINCRBY"))
                }),
                Expr::MethodCall(m) => counting_cmd(&m.receiver),
                _ => false,
            }
        }
        impl<'ast> Visit<'ast> for Find {
            fn visit_expr_method_call(&mut self, m: &'ast syn::ExprMethodCall) {
                let name = m.method.to_string();
                let first_is_key = m.args.first().is_some_and(|a| text(a) == self.key);
                let counts = first_is_key
                    && (matches!(name.as_str(), "incr" | "incr_by" | "hincr" | "hincr_by")
                        || name == "arg" && counting_cmd(&m.receiver));
                if counts && region::start_of(Span::of(m)) < self.before {
                    self.found = true;
                }
                syn::visit::visit_expr_method_call(self, m);
            }
        }
        let Some(body) = self.body else { return false };
        let mut f = Find {
            key: text(key),
            before: region::start_of(at),
            found: false,
        };
        f.visit_block(body);
        f.found
    }

    /// Does every release pack `pack` describes take the lock value rather than a key
    /// (`unlock(&lock)`)? Such a value dropped leaves its caller nothing to release with.
    fn releases_by_handle(&self, pack: usize) -> bool {
        let mut releases = self.cx.packs.packs[pack]
            .calls
            .iter()
            .filter(|d| d.kind == crate::packs::CallKind::Release && d.via.is_none())
            .peekable();
        releases.peek().is_some() && releases.all(|d| d.key_arg.is_none() && d.script.is_none())
    }

    /// Is `key` the receiver's own (`self.key`, `key` copied from it) in a method of a type that
    /// an acquisition of pack `pack` hands out? A guard's key is the lock's key.
    fn key_of_handed_out_guard(&self, pack: usize, key: Option<&str>) -> bool {
        let (Some((ty, _)), Some(key)) = (&self.method, key) else {
            return false;
        };
        let root = key_root(key.trim_start_matches('&'));
        (root == "self" || self.copied_from_receiver(root))
            && self.cx.packs.packs[pack]
                .calls
                .iter()
                .any(|d| d.kind.is_acquisition() && d.returns_type.as_deref() == Some(ty.as_str()))
    }

    fn set_use(&mut self, e: &'a Expr, u: Use<'a>) {
        self.pending.push((e as *const Expr, u));
    }

    /// A value made from a lock's names and written into `target` makes `target` one of them.
    /// `report`: the value says how the acquisition went (`lease.is_some()`), it does not name
    /// the lock (`resp.key()`).
    fn carry_into(&mut self, target: &str, mentioned: &HashSet<String>, report: bool) {
        for (i, (site, h)) in self.holdings.iter_mut().enumerate() {
            let gone = self.rebound.get(&i);
            let read: Vec<&String> = h
                .names
                .iter()
                .filter(|n| mentioned.contains(*n) && !gone.is_some_and(|g| g.contains(*n)))
                .collect();
            if read.is_empty() {
                continue;
            }
            // Made only from reports (`Runtime { leader }` of `leader = lease.is_some()`), a
            // report too.
            let carried = self.carried.get(site);
            let of_reports = read.iter().all(|n| carried.is_some_and(|c| c.contains(*n)));
            if h.names.insert(target.to_string()) && (report || of_reports) {
                self.carried
                    .entry(*site)
                    .or_default()
                    .insert(target.to_string());
            }
        }
    }

    /// `PostgresLock::new(&mut client, key)`, `Locker { conn: client }`: a value built around a
    /// lent connection holds it; its session locks go back to the pool with the connection.
    fn wraps_checkout(&self, e: &Expr) -> bool {
        let lent = |a: &Expr| local_named(a).is_some_and(|n| self.checkouts.contains(&n));
        match e {
            Expr::Call(c) => c.args.iter().any(lent),
            Expr::Struct(st) => st.fields.iter().any(|f| lent(&f.expr)),
            _ => false,
        }
    }

    /// `pool.acquire().await?`, `self.pool.get().await.unwrap()`: a call a pack lists as lending
    /// a pool's connection, on a receiver of that pool's type.
    fn is_checkout(&self, e: &Expr) -> bool {
        let mut e = e;
        loop {
            e = match e {
                Expr::Try(t) => &t.expr,
                Expr::Await(a) => &a.base,
                Expr::Paren(p) => &p.expr,
                Expr::MethodCall(m)
                    if matches!(
                        m.method.to_string().as_str(),
                        "unwrap" | "expect" | "map_err" | "context" | "with_context" | "into"
                    ) =>
                {
                    &m.receiver
                }
                _ => break,
            };
        }
        let Expr::MethodCall(m) = e else {
            return false;
        };
        let Some(ty) = self.type_of(&m.receiver) else {
            return false;
        };
        let call = format!("{}::{}", ty.peeled().path, m.method);
        self.cx
            .packs
            .packs
            .iter()
            .any(|p| p.pack.checkouts.contains(&call))
    }

    fn take_use(&mut self, e: &Expr) -> Use<'a> {
        let ptr = e as *const Expr;
        match self.pending.iter().rposition(|(p, _)| *p == ptr) {
            Some(i) => self.pending.swap_remove(i).1,
            None => Use::Other,
        }
    }

    /// Inside a repeating round of the function (an election or keep-alive `loop`/`while`)?
    /// A `for` over items is not one: each round has its own item, and its own lock.
    pub(super) fn in_loop(&self) -> bool {
        self.for_loops.last() == Some(&false)
    }

    pub(super) fn rest(&self) -> &'a [Stmt] {
        self.rest.last().copied().unwrap_or(&[])
    }

    /// The statements after the current one in each enclosing block, innermost first (what
    /// runs after a `for` loop's body, for a command the body adds to a pipeline).
    pub(super) fn rests(&self) -> impl Iterator<Item = &'a [Stmt]> + '_ {
        self.rest.iter().rev().copied()
    }

    /// Looks for a site at the heart of a method chain (`mgr.lock(k, t).await?`), innermost first.
    fn detect(&mut self, e: &'a Expr, u: Use<'a>) {
        let mut levels: Vec<&'a Expr> = Vec::new();
        let mut cur = e;
        loop {
            levels.push(cur);
            cur = match cur {
                Expr::MethodCall(m) => &m.receiver,
                Expr::Await(a) => &a.base,
                Expr::Try(t) => &t.expr,
                Expr::Paren(p) => &p.expr,
                // `timeout(d, client.campaign(..)).await??`: the bounded future's result, in
                // one more `Result`.
                Expr::Call(c) if is_timeout_call(c) => &c.args[1],
                // `diesel::select(pg_try_advisory_lock(k)).get_result(conn)`: the statement
                // answers what the function it selects answers.
                Expr::Call(c) if self.is_dsl_select(c) => &c.args[0],
                // `log_if_error!(relayers.acquire(id).await)?`: a macro of the program's around
                // one expression hands it on (see `passes_through`).
                Expr::Macro(m) if passes_through(&m.mac) => match self.macro_args(&m.mac) {
                    Some(args) if args.len() == 1 => &args[0],
                    _ => break,
                },
                _ => break,
            };
        }
        for i in (0..levels.len()).rev() {
            let core = levels[i];
            if self.done.contains(&(core as *const Expr)) {
                return;
            }
            if let Some(mut m) = matchers::match_site(self, core, &levels[..i]) {
                self.done.insert(core as *const Expr);
                // `held.renew(ttl)` on the lock value an earlier acquisition here handed back:
                // the wrapper renews it, whatever the method does for a value built unheld.
                if m.via.is_some()
                    && m.kind.is_acquisition()
                    && let Expr::MethodCall(call) = core
                    && local_named(&call.receiver)
                        .is_some_and(|n| self.holds_lock_value(&n, m.pack))
                {
                    m.kind = crate::packs::CallKind::Renew;
                }
                if self.initialises_once(&m) {
                    return;
                }
                let outward: Vec<&'a Expr> = levels[..i - m.consumed.min(i)]
                    .iter()
                    .rev()
                    .copied()
                    .collect();
                let outer: Vec<&'a Expr> = levels[..i].iter().rev().copied().collect();
                let command = (self.cx.packs.packs[m.pack].pack.name == "redis")
                    .then(|| {
                        let env = command::Env {
                            conn_param: &|r| self.conn_param(r),
                            resolve: &|p| self.imports_path(p),
                        };
                        command::read(self.cx.source, core, &outer, &env)
                    })
                    .flatten();
                self.record(m, &outward, u, region::end_of(Span::of(e)), command);
                return;
            }
        }
    }

    fn record(
        &mut self,
        m: Matched<'a>,
        outward: &[&'a Expr],
        u: Use<'a>,
        chain_end: Pos,
        command: Option<Command>,
    ) {
        if m.use_decides && !self.reply_decides(&u) {
            return;
        }
        self.op_names.extend(m.mentions.iter().cloned());
        // A lock object written with its holder where the object read names us already (a
        // Lease's renewal written whole, in place or by the program's helper): kept, not taken.
        let mut m = m;
        if self.held_by_us
            && m.kind.is_acquisition()
            && self.cx.packs.packs[m.pack].pack.lock_objects
        {
            m.kind = crate::packs::CallKind::Renew;
        }
        if self.lease_expired
            && !self.held_by_us
            && m.takeover
            && m.kind == crate::packs::CallKind::Renew
        {
            m.kind = crate::packs::CallKind::TryAcquire;
        }
        // `INCR key` then `EXPIRE key window`: a counter given its window (a rate limit), not a
        // lock kept alive.
        if m.kind == crate::packs::CallKind::Renew
            && m.key.is_some_and(|k| self.counted_before(k, m.span))
        {
            return;
        }
        let failure = match &m.pipeline {
            // A lock command in a pipeline: its reply is judged where the pipeline runs.
            Some(run) if m.discarded.is_none() => super::pipeline::judge(self, run, outward, &u),
            _ => failure::judge(
                self,
                m.returns,
                m.success_variant.as_deref(),
                outward,
                &u,
                m.discarded.as_deref(),
                m.kind == crate::packs::CallKind::Renew,
                m.via.is_some(),
            ),
        };
        if let Some(run) = &m.pipeline {
            self.pipe_locals
                .insert(region::start_of(m.span), run.local.clone());
        }
        if let Some(k) = m.key {
            self.key_names
                .insert(region::start_of(m.span), summary::reads(k));
        }
        let pack = &self.cx.packs.packs[m.pack].pack;
        let evaluated = m
            .key
            .as_ref()
            .and_then(|k| crate::model::eval::eval_str(k, &*self));
        let key_literal = evaluated.is_some();
        // As written, without the borrows and copies that keep the same key (`&self.key`,
        // `self.key.clone()`): one spelling per key, for matching a release with its lock.
        let key = evaluated.or_else(|| {
            m.key
                .as_ref()
                .map(|k| quote::ToTokens::to_token_stream(summary::peel_key(k)).to_string())
        });
        if !m.kind.is_acquisition() {
            let (result_var, passed_on) = match &u {
                Use::Bind { pat, .. } => (single_name(pat), false),
                Use::Escape => (None, true),
                _ => (None, false),
            };
            let mut failure = failure;
            if m.stream_ttl {
                failure = self.keep_alive_stream_checked(&u);
                if let Use::Bind { pat, .. } = &u
                    && let Pat::Tuple(t) = peel_pat(pat)
                    && let Some(stream) = t.elems.iter().nth(1).and_then(single_name)
                {
                    let keeper = t.elems.first().and_then(single_name);
                    self.kept_streams.push((self.events.len(), stream, keeper));
                }
            }
            let owner = command
                .as_ref()
                .and_then(|c| self.owner_for(c, m.span, key.as_deref()));
            // Checked, if not atomically, when an enclosing `if` compared the key's value.
            let lock_object = self.cx.packs.packs[m.pack].pack.lock_objects;
            // A compare-and-delete given the value just read from the key compares it with
            // itself: it deletes whoever holds the lock.
            let self_compared = m.kind == crate::packs::CallKind::Release
                && m.owner_checked
                && m.mentions.iter().any(|n| {
                    self.store_reads.get(n).is_some_and(|read| {
                        // The same key: as written, or the same local (`key`, `&key`).
                        key.as_deref() == Some(read.as_str()) || m.mentions.contains(read)
                    })
                });
            let holder_tested = lock_object && self.holder_compared;
            let compared_first = m.kind == crate::packs::CallKind::Release
                && self.compared_reads.iter().any(|read| {
                    key.as_ref().is_some_and(|k| read.contains(k))
                        || m.mentions.iter().any(|n| read.contains(n))
                })
                // A lock object's release or renewal under a test of its holder.
                || matches!(
                    m.kind,
                    crate::packs::CallKind::Release | crate::packs::CallKind::Renew
                ) && holder_tested;
            // `lock` anywhere (`lock_key`, `locks:{id}`), or another word for one standing alone
            // (`mutex.key`, `leader_key`, `"lease/{id}"`).
            let says_lock = |t: &str| {
                t.to_ascii_lowercase().contains("lock")
                    || matchers::names_lock(t, matchers::KEY_WORDS)
            };
            let key_says_lock = key.as_deref().is_some_and(says_lock)
                || m.key
                    .as_ref()
                    .and_then(|k| local_named(k))
                    .and_then(|n| self.local_init(&n))
                    .is_some_and(|init| {
                        says_lock(&quote::ToTokens::to_token_stream(init).to_string())
                    })
                // A key a function of the program builds (`self.key(id)` answering
                // `format!("{LOCK_NAMESPACE}:{id}")`), as its text says.
                || m.key.as_ref().is_some_and(|k| {
                    let k = summary::peel_key(k);
                    let built = |e: &Expr| {
                        matchers::text_fn_tail(self, e).is_some_and(|t| {
                            says_lock(&quote::ToTokens::to_token_stream(&t).to_string())
                        })
                    };
                    built(k)
                        || local_named(k)
                            .and_then(|n| self.local_init(&n))
                            .is_some_and(|init| built(summary::peel_key(init)))
                })
                // A key made from the caller's arguments, in a function named for what it does
                // to a lock (`fn renew_lock(conn, key, ms)` running `PEXPIRE key ms`,
                // `fn unlock_resource(&self, id)` deleting `self.key(id)`): a lock's key.
                || m.key.as_ref().is_some_and(|k| self.made_of_params(k))
                    && self
                        .own_name()
                        .split('_')
                        .any(|w| matches!(w, "lock" | "unlock"))
                // The receiver's own key (`self.key`, or a local copied from it) in a method of
                // a type that an acquiring function of the same library hands out (`lock_tile
                // -> Option<TileGuard>`, `impl Drop for TileGuard`): the guard's lock.
                || m.kind == crate::packs::CallKind::Release
                    && self.key_of_handed_out_guard(m.pack, key.as_deref());
            self.events.push(Event {
                kind: m.kind,
                key_says_lock,
                lock_object,
                via: m.via.clone(),
                holder_tested,
                pack: m.pack,
                api: m.api,
                span: m.span,
                mentions: m.mentions,
                key,
                failure,
                result_var,
                passed_on,
                auto_renew: m.auto_renew,
                owner_checked: (m.owner_checked && !self_compared) || compared_first,
                fn_line: self.info.sig_line,
                function: self.info.path.clone(),
                command,
                owner,
            });
            return;
        }
        // Inside a closure or `async` block of the returned expression, the lock is what the
        // function hands back only when it hands back that future (`Box::pin(async move { … })`
        // for a `BoxFuture`); `block_on(async { … })` in `main` hands back the block's result.
        // A scoped wrapper's call (`with_lock(key, async { … })`) hands back what the work
        // returns, not the lock: it is handed back only with a closure of the caller's own.
        let scoped_call = m.scoped;
        let forwards_work = m.mentions.iter().any(|n| self.callables.contains(n));
        if self.in_return > 0
            && (self.closure_depth == self.forwarded_depth || self.returns_future())
            && (!scoped_call || forwards_work)
        {
            self.returned_sites.push(self.out.sites.len());
        }
        if scoped_call && !forwards_work {
            self.scoped_results.insert(self.out.sites.len());
        }
        // The value of a closure that a local takes (`let r = with_conn(|c| SET NX …)?`) is
        // held under that local, from the `let` on.
        let bound_by_closure = (self.in_closure_value > 0)
            .then(|| self.in_value_closures.last())
            .flatten()
            .filter(|(depth, _)| *depth == self.closure_depth)
            .and_then(|(_, c)| self.value_closures.get(c))
            .cloned();
        if let Some(spawn) = self.in_spawned
            && self.closure_depth == 1
        {
            self.spawned.insert(self.out.sites.len(), spawn);
        }
        if self.closure_depth > self.forwarded_depth && bound_by_closure.is_none() {
            self.in_closures.insert(region::start_of(m.span));
        }
        let mut holding = self.holding_for(&u, key.clone(), m.auto_renew, m.sql);
        if let Some((name, start, end, depth)) = &bound_by_closure {
            holding.names.insert(name.clone());
            holding.start = *start;
            holding.scope_end = *end;
            holding.closure = *depth;
            holding.runs_at = *depth;
            holding.escapes_at_site = false;
        }
        holding.lease_names = m.lease_names.clone();
        holding.start = holding.start.max(chain_end);
        if let Some((at, start, end)) = self.deferred_region
            && at == chain_end
        {
            holding.start = holding.start.max(start);
            holding.scope_end = end;
        }
        holding.handle = m.handle;
        // A scoped wrapper's call released before it returned: nothing is held after it.
        if scoped_call && !forwards_work {
            holding.scope_end = holding.start;
        }
        // Only after a success arm that is known (`Ok(v)`): with the program's own variants
        // nothing says which arm holds the lock.
        if !m.handle
            && bound_by_closure.is_none()
            && let Use::Match {
                bound: None, arms, ..
            } = &u
            && arms.iter().any(|a| failure::is_success_pattern(&a.pat))
            && let Some(&end) = self.block_ends.last()
        {
            holding.after_match = Some((self.stmt_end, end));
        }
        // A lock kept in the store or with the receiver, in no value, outlives the block that
        // took it: `if self.locking { conn.lock().await?; }` … `if self.locking { conn.unlock() }`.
        if !m.handle
            && holding.names.is_empty()
            && self.closure_depth == 0
            && matches!(u, Use::Discard)
            && !scoped_call
            && let Some(&end) = self.block_ends.first()
        {
            holding.scope_end = holding.scope_end.max(end);
        }
        if let Some(c) = &command {
            self.note_owner(c);
        }
        let expire_after = command.as_ref().and_then(|c| self.expire_after(c, &u));
        if let Some(arm) = self.arms.last() {
            self.site_arms.insert(self.out.sites.len(), arm.clone());
        }
        if let Some(g) = m.gate.clone() {
            self.site_gates.insert(self.out.sites.len(), g);
        }
        // Only awaited and unwrapped on the way to a statement that drops it (`let _ =`
        // too): the guard goes at the `;`. Also a helper's guard: a type of the program whose
        // `Drop` releases, handed out by the program's acquire function.
        let guard_dropped = m.drop_releases
            && outward
                .iter()
                .all(|e| matches!(e, Expr::Await(_) | Expr::Try(_) | Expr::Paren(_)))
            && match &u {
                u if u.drops_value() => true,
                // `match lock.acquire(..).await { Ok(Some(g)) => g, _ => return };`: the success
                // arm makes the guard the `match`'s value, and the statement drops it.
                Use::Match {
                    arms,
                    discarded: true,
                    ..
                } => arms.iter().any(|a| {
                    failure::is_success_pattern(&a.pat) && {
                        let mut names = Vec::new();
                        pattern_idents(&a.pat, &mut names);
                        names.len() == 1
                            && local_named(&a.body).as_deref() == Some(names[0].as_str())
                    }
                }),
                _ => false,
            };
        let key_gate = self.caller_set_if_absent(&m);
        self.holdings.push((self.out.sites.len(), holding));
        self.out.sites.push(Site {
            pack: m.pack,
            library: pack.name.clone(),
            api: m.api,
            kind: m.kind,
            span: m.span,
            stmt_line: self.stmt_line,
            function: Some(self.info.clone()),
            key: if key_literal { key.clone() } else { None },
            key_expr: if key_literal { None } else { key },
            key_is_prefix: m.key_is_prefix,
            ttl: m.ttl,
            failure,
            fencing: m.fencing,
            release: m.release.unwrap_or(pack.release),
            scoped: m.scoped,
            consensus: m.consensus.unwrap_or(pack.consensus),
            backend: m.backend,
            sql: m.sql,
            pool: m.pool,
            checkout: m.checkout,
            lent_back: false,
            lent_handle: m.lent_handle,
            session_on: m.session_on,
            region: Default::default(),
            via: m.via,
            via_origin: m.origin,
            in_fn: self.canonical.clone(),
            wrapped: false,
            released_inside: false,
            library_purpose: m.purpose,
            command,
            expire_after,
            guard_dropped,
            // A session lock's guard leaked on the way out (`lock.acquire(conn).await?.leak()`)
            // releases nothing when dropped: the lock stays with the connection's session.
            leaked: m.drop_releases
                && pack.release == crate::packs::ReleaseStyle::Session
                && leaks(outward),
            txn_ended: None,
            key_gate,
        });
    }

    /// Does the reply decide what runs next: tested where it stands (`if`, `match`, `let … else`,
    /// a wait loop), or bound to a name the function tests later (`let added = ..; if !added`)?
    fn reply_decides(&self, u: &Use<'_>) -> bool {
        match u {
            Use::Cond { .. } | Use::IfLet { .. } | Use::Match { .. } | Use::Until => true,
            Use::Bind { has_else: true, .. } => true,
            Use::Bind { pat, .. } => {
                let mut names = Vec::new();
                pattern_idents(pat, &mut names);
                self.body
                    .is_some_and(|b| names.iter().any(|n| tested(b, n)))
            }
            _ => false,
        }
    }

    /// A set-if-absent whose key and value are both the caller's, in a function that nothing
    /// (its name, its type's or module's, the key parameter's) names for a lock: a store's
    /// generic "add" (`Cache::add(key, value, ttl)`), a cache write or a lock as each call says.
    /// The key's and the value's parameter positions.
    fn caller_set_if_absent(&self, m: &Matched<'_>) -> Option<(usize, usize)> {
        if !m.kind.is_acquisition() || m.sql || m.via.is_some() || m.handle || m.scoped {
            return None;
        }
        let key =
            super::fields::parameter(summary::peel_key(m.key?), &|n| self.is_param(n))?.to_string();
        if matchers::names_lock(&key, matchers::KEY_WORDS)
            || matchers::fn_says_lock(self.own_name())
        {
            return None;
        }
        if matchers::names_lock(&self.canonical, matchers::KEY_WORDS) {
            return None;
        }
        let key_at = self.param_position(&key)?;
        let ttl_at = m.ttl.param().map(|(i, _)| i);
        let (value_at, value) = m
            .mentions
            .iter()
            .filter(|n| {
                **n != key && self.is_param(n) && !matchers::names_lock(n, matchers::KEY_WORDS)
            })
            .filter_map(|n| Some((self.param_position(n)?, n)))
            .filter(|(i, n)| {
                Some(*i) != ttl_at && self.param_type(n).is_some_and(|t| value_typed(self.sig, t))
            })
            .min()?;
        // A value taken as an owner's token (`token: &str`, `node_id`) is a lock's.
        if matchers::names_lock(value, matchers::OWNER_WORDS) {
            return None;
        }
        Some((key_at, value_at))
    }

    /// Enters a closure or an `async` block: one level deeper, and, when its value is the
    /// function's (forwarded) or a local's (valued), its tail counted as such.
    fn enter_deferred(&mut self, e: &'a Expr) -> (bool, bool) {
        let ptr = e as *const Expr;
        let forwarded =
            self.closure_depth == self.forwarded_depth && self.forwarding.contains(&ptr);
        if forwarded {
            // Inside, only the tail is the value: `spawn(async move { let l = lock().await;
            // work().await })` returns no lock.
            self.outer_returns.push(std::mem::take(&mut self.in_return));
            self.forwarded_depth += 1;
            if let Some(tail) = deferred_tail(e) {
                value_leaves(tail, &mut self.value_exprs, 0);
                self.returned.extend(returned_names(tail));
            }
        }
        self.closure_depth += 1;
        if self.closure_depth == 1
            && let Some(&spawn) = self.spawning.get(&ptr)
        {
            self.in_spawned = Some(spawn);
        }
        let valued = self.value_closures.contains_key(&ptr);
        if valued {
            self.in_value_closures.push((self.closure_depth, ptr));
            if let Some(tail) = deferred_tail(e) {
                value_leaves(tail, &mut self.closure_values, 0);
            }
        }
        (forwarded, valued)
    }

    fn leave_deferred(&mut self, forwarded: bool, valued: bool) {
        if valued {
            self.in_value_closures.pop();
        }
        if self.closure_depth == 1 {
            self.in_spawned = None;
        }
        self.closure_depth -= 1;
        if forwarded {
            self.forwarded_depth -= 1;
            self.in_return = self.outer_returns.pop().unwrap_or_default();
        }
    }

    /// The parameter and variant a site's `match` arm selects on, when the scrutinee is a
    /// parameter (see `WrapperCandidate::when_arg`).
    /// Only when every acquisition of the function is in that arm: a function whose arms all
    /// acquire (`Mode::Fast => a(..), Mode::Slow => b(..)`) locks whatever its caller passes.
    fn arm_condition(&self, flow: Option<&FnFlow>, idx: usize) -> Option<(usize, String)> {
        let Some(arm) = self.site_arms.get(&idx) else {
            let gate = self.site_gates.get(&idx)?;
            return Some((
                flow?.param_index(gate)?,
                super::matchers::GATE_OPEN.to_string(),
            ));
        };
        let same = (self.first_site..self.out.sites.len())
            .filter(|&i| self.out.sites[i].kind.is_acquisition())
            .all(|i| self.site_arms.get(&i) == Some(arm));
        if !same {
            return None;
        }
        Some((flow?.param_index(&arm.0)?, arm.1.clone()))
    }

    /// How the acquired lock is held: the names it is bound to and where that binding ends.
    fn holding_for(
        &self,
        u: &Use<'a>,
        key: Option<String>,
        auto_renew: bool,
        sql: bool,
    ) -> Holding {
        let mut h = Holding {
            scope_end: self.block_ends.last().copied().unwrap_or((usize::MAX, 0)),
            loops: self.loops.clone(),
            auto_renew,
            // Raw commands and SQL are known by their key; values by their names.
            key: if sql { None } else { key },
            closure: self.closure_depth,
            runs_at: self.closure_depth - self.inline_depth,
            ..Default::default()
        };
        match u {
            Use::Bind { pat, .. } => {
                let mut names = Vec::new();
                pattern_idents(pat, &mut names);
                h.names.extend(names);
                // `let … else { return }` and `let x = match … { None => return … }`: the
                // statement's own exits are failure paths.
                h.start = self.stmt_end;
            }
            Use::IfLet { pat, then, .. } => {
                // `if let Err(e) = …` binds the error; the lock value, if any, was dropped.
                if failure::is_success_pattern(pat) {
                    let mut names = Vec::new();
                    pattern_idents(pat, &mut names);
                    h.names.extend(names);
                }
                h.scope_end = region::end_of(Span::of(*then));
            }
            // Held in the arm that matched success, and only there (or wherever that arm hands
            // it); also under a `let` whose success arm keeps the lock to itself and gives
            // something else (`let code = match lock().await { Ok(l) => { ..; unlock(&l); code }
            // .. }`).
            Use::Match { arms, bound, .. } if bound.is_none() || arm_keeps_lock(arms) => {
                if let Some(arm) = arms.iter().find(|a| failure::is_success_pattern(&a.pat)) {
                    let mut names = Vec::new();
                    pattern_idents(&arm.pat, &mut names);
                    h.escapes_at_site = names.iter().any(|n| hands_on(&arm.body, n));
                    h.names.extend(names);
                    h.start = region::start_of(Span::of(&*arm.body));
                    h.scope_end = region::end_of(Span::of(&*arm.body));
                } else {
                    h.scope_end = h.start;
                }
            }
            Use::Match { bound, .. } => {
                let mut names = Vec::new();
                if let Some(p) = bound {
                    pattern_idents(p, &mut names);
                }
                h.names.extend(names);
                h.start = self.stmt_end;
            }
            Use::Escape => h.escapes_at_site = true,
            // `if !mgr.try_lock(..)? { return … }`, `while !… { wait }`: held from after the
            // statement to the end of the block; inside it the attempt failed.
            Use::Cond {
                then,
                negated: true,
                ..
            } if failure::diverges_block(then) => h.start = self.stmt_end,
            Use::Until => h.start = self.stmt_end,
            Use::Cond { then, .. } => h.scope_end = region::end_of(Span::of(*then)),
            Use::Discard | Use::Other => {}
        }
        h
    }

    /// etcd's keep-alive: an expired lease answers with TTL 0, not an error, so the response stream
    /// must be kept and its `ttl()` looked at.
    fn keep_alive_stream_checked(&self, u: &Use<'a>) -> super::Failure {
        let dropped = match u {
            Use::Bind { pat, .. } => match peel_pat(pat) {
                Pat::Tuple(t) => t.elems.iter().nth(1).is_none_or(|p| match peel_pat(p) {
                    Pat::Wild(_) => true,
                    Pat::Ident(i) => i.ident.to_string().starts_with('_'),
                    _ => false,
                }),
                _ => false,
            },
            Use::Discard => true,
            _ => false,
        };
        if dropped {
            super::Failure::Ignored {
                reason:
                    "its response stream is dropped, so a lease that expired (TTL 0) goes unnoticed"
                        .into(),
            }
        } else {
            super::Failure::Handled
        }
    }

    /// `e` is handed back by the function: its names, and the program's types of its locals.
    fn hand_back(&mut self, e: &Expr) {
        let names = returned_names(e);
        for n in &names {
            if let Some(t) = self.lookup(n).and_then(|l| l.ty.as_ref()) {
                let t = &t.peeled().path;
                if t.starts_with("crate::") && !self.returned_types.contains(t) {
                    self.returned_types.push(t.clone());
                }
            }
        }
        self.returned.extend(names);
    }

    fn marker(&mut self, kind: MarkerKind, span: Span) {
        let target_loop = match kind {
            MarkerKind::Exit("break" | "continue") | MarkerKind::Diverges("break" | "continue") => {
                self.loops.last().copied()
            }
            _ => None,
        };
        self.markers.push(Marker {
            kind,
            span,
            guards: self.guards.clone(),
            closure: self.closure_depth,
            runs_at: self.closure_depth - self.inline_depth,
            target_loop,
        });
    }

    /// After the walk: regions of this function's sites, its events, and wall-clock deadlines.
    fn finish(&mut self, body: &'a syn::Block) {
        // The keep-alive check is function-wide: the stream may be polled anywhere in it.
        if self.saw_ttl_check {
            for e in &mut self.events {
                if e.kind == crate::packs::CallKind::KeepAlive
                    && matches!(&e.failure, super::Failure::Ignored { reason } if reason.contains("response stream"))
                {
                    e.failure = super::Failure::Handled;
                }
            }
        } else {
            // A stream this function polls itself (`stream.message().await`), and hands to
            // nothing else, whose responses' TTL is never read: `Ok(Some(_))` takes the TTL-0
            // answer of an expired lease for a renewal.
            for (i, stream, keeper) in std::mem::take(&mut self.kept_streams) {
                if !self
                    .events
                    .get(i)
                    .is_some_and(|e| e.failure == super::Failure::Handled)
                    || !only_polled(body, &stream)
                {
                    continue;
                }
                let ignored = super::Failure::Ignored {
                    reason: "the TTL of its responses is never read, so a lease that expired (TTL 0) passes for renewed".into(),
                };
                // Said where the keeper sends the renewal (`keeper.keep_alive().await`), when
                // this function does; else at the call that opened the pair.
                let opened = region::end_of(self.events[i].span);
                match keeper.and_then(|k| keeper_send(body, &k, opened)) {
                    Some(span) => {
                        let mut send = self.events[i].clone();
                        send.span = span;
                        send.api = "LeaseKeeper::keep_alive".into();
                        send.failure = ignored;
                        self.events.push(send);
                    }
                    None => self.events[i].failure = ignored,
                }
            }
        }
        // A lease this function grants and keeps alive, but takes no lock with, gives data an
        // expiry (`put(key, status, with_lease(id))`: keys that vanish with the process): its
        // keep-alives renew no lock. (After the stream checks, which index the events.)
        let grants = |e: &Event| e.kind == crate::packs::CallKind::LeaseGrant;
        if self.out.sites.len() == self.first_site && self.events.iter().any(grants) {
            self.events
                .retain(|e| e.kind != crate::packs::CallKind::KeepAlive);
        }
        // What a wrapper that hands no lock back leaves its caller (see `summary`).
        let flow = (self.out.sites.len() > self.first_site || !self.events.is_empty())
            .then(|| FnFlow::of(self.sig, body));
        // Indexed once: per site, a scan of the whole function made N acquisitions cost N².
        let facts = region::Facts::new(&self.events, &self.markers);
        let mut callbacks: Vec<Pos> = self
            .markers
            .iter()
            .filter(|m| m.kind == MarkerKind::Callback)
            .map(|m| region::start_of(m.span))
            .collect();
        callbacks.sort_unstable();
        // A transaction lock whose transaction ends right after it (`tx.commit().await?` before
        // anything is awaited): released at once, whatever the function answers.
        for i in self.first_site..self.out.sites.len() {
            let site = &self.out.sites[i];
            if site.sql
                && site.fencing == super::Fencing::Transaction
                && site.kind.is_acquisition()
                && site.via.is_none()
            {
                let ended = txn_ended_after(body, region::start_of(site.span));
                self.out.sites[i].txn_ended = ended;
            }
        }
        // A wrapper's handle carrying a lent connection is that connection here: known by the
        // name it is bound to (none: dropped at once).
        for (idx, h) in &self.holdings {
            if !self.out.sites[*idx].lent_handle || self.out.sites[*idx].checkout.is_some() {
                continue;
            }
            let back = h.names.iter().any(|n| self.returned.contains(n));
            let kept = back || h.names.iter().any(|n| summary::connection_kept(body, n));
            let site = &mut self.out.sites[*idx];
            site.lent_back = back;
            if !kept {
                site.checkout = Some(h.names.iter().min().cloned().unwrap_or_else(|| "_".into()));
            }
        }
        // A lent connection handed on (returned, moved into a value or a call) or closed is no
        // longer the pool's at the end of the function; handed back, the caller holds it.
        for i in self.first_site..self.out.sites.len() {
            if let Some(n) = self.out.sites[i].checkout.clone() {
                let back = self.returned.contains(&n);
                if back || summary::connection_kept(body, &n) {
                    self.out.sites[i].checkout = None;
                    self.out.sites[i].lent_back = back;
                }
            }
        }
        let ambiguous = self
            .method
            .as_ref()
            .is_some_and(|(owner, m)| self.cx.index.traits_defining(owner, m).len() > 1);
        // The lock calls besides acquisitions (an expiry set on the key just taken, its delete
        // when that fails): finishing an acquisition, not work under it.
        let ops: Vec<Span> = self
            .events
            .iter()
            .filter(|e| {
                use crate::packs::CallKind::*;
                matches!(e.kind, Renew | Release | KeepAlive)
            })
            .map(|e| e.span)
            .collect();
        for (idx, h) in std::mem::take(&mut self.holdings) {
            let key_expr = self.out.sites[idx].key_expr.clone();
            let own = summary::LockCalls {
                spans: &ops,
                key: key_expr.as_deref(),
                row: self.cx.packs.lease_table.is_some_and(|pi| {
                    self.cx.packs.packs[pi].pack.name == self.out.sites[idx].library
                }),
            };
            let site = &self.out.sites[idx];
            let mut r = region::compute_with(site.span, &h, &facts, site.pack, site.sql);
            // Where an acquire function's work would run under the lock: in the success arm of a
            // `match` on the reply too, except for a session lock, whose arm typically readies
            // the connection it lives on (`COMMIT` of the `SET LOCAL`s) before handing it back.
            let arm_start = (!site.sql).then_some(r.start);
            if r.release.is_none()
                && !r.escapes
                && let Some((start, scope_end)) = h.after_match
            {
                // Known by its key from here: the arm's binding was only the reply, and its
                // name may be reused (`Ok(v) => Some(v)` in a later match).
                let after = region::Holding {
                    start,
                    scope_end,
                    names: HashSet::new(),
                    ..h.clone()
                };
                r = region::compute_with(site.span, &after, &facts, site.pack, site.sql);
            }
            // A wrapper: hands the lock back, or runs the caller's closure while holding it.
            // A lock known by its key is handed back with the value that names it (a Redlock
            // quorum loop's `return Ok(lock)` after `instance.acquire(&lock)` on each node).
            // …unless it is released here (`persistence.unlock().await` as the tail answers
            // the release, it does not hand the receiver's lock back).
            let key_returned = !h.handle
                && r.release.is_none()
                && self
                    .key_names
                    .get(&region::start_of(site.span))
                    .is_some_and(|k| k.iter().any(|n| n != "self" && self.returned.contains(n)));
            // A receiver taken by value and handed back as the locked state of the same type
            // (`fn acquire(self) -> Result<DistributedLock<Locked>>` ending in `Ok(self
            // .transition())`, the key in `self.lock_key`) is the handle below too.
            let consumed = self
                .sig
                .receiver()
                .is_some_and(|r| r.reference.is_none() && r.colon_token.is_none());
            // A value of the program's own lock type built from the key's ingredients (`Ok(Self
            // { address: relayer, .. })` after `SET relayer-lock:<relayer> NX`) is the lock's
            // handle, whatever else the function read under the lock to fill it.
            let key_in_handle = !h.handle
                && r.release.is_none()
                && (self.ret.as_ref().is_some_and(summary::lock_named_own_type)
                    || returns_assoc_lock(&self.sig.output))
                && flow.as_ref().is_some_and(|f| {
                    self.key_names
                        .get(&region::start_of(site.span))
                        .is_some_and(|k| {
                            f.roots(k)
                                .iter()
                                .any(|n| (n != "self" || consumed) && self.returned.contains(n))
                                // …or the key itself, moved into the value handed back
                                // (`Box::new(RedisLock { key: lock_key, .. })`).
                                || f.roots(&self.returned)
                                    .iter()
                                    .any(|n| n != "self" && k.contains(n))
                                // …or both made from the same parameter (`let key = self
                                // .resource_key(resource)`, `LockGuard::new(resource
                                // .to_string(), token, ..)`).
                                || {
                                    let ingredients = f.roots(k);
                                    f.roots(&self.returned).iter().any(|n| {
                                        n != "self"
                                            && self.params.contains(n)
                                            && ingredients.contains(n)
                                    })
                                }
                        })
                });
            // A session lock lives in its connection: a connection taken by value and handed
            // back in the program's lock type (`Ok(Some(Self { client, lock_key }))` after
            // `client.query_one("SELECT pg_try_advisory_lock($1)", ..)`) hands the lock back.
            let session_in_handle = site.sql
                && site.release == crate::packs::ReleaseStyle::Session
                && r.release.is_none()
                && self.ret.as_ref().is_some_and(summary::lock_named_own_type)
                && self.returned.iter().any(|n| param_by_value(self.sig, n));
            let key_in_handle = key_in_handle || session_in_handle;
            // Handed back only as a report made from it (`Runtime { leader: lease.is_some() }`)
            // by a function that goes on working under the lock: the lock's user, not a wrapper.
            let carried = self.carried.get(&idx);
            let (reports, values): (Vec<&String>, Vec<&String>) = h
                .names
                .iter()
                .filter(|n| self.returned.contains(*n))
                .partition(|n| carried.is_some_and(|c| c.contains(*n)));
            // Released here, the lock is not what goes back: a value made from it then is the
            // work's result (`let out = drain(lock.cursor).await; lock.unlock(..).await?; out`).
            let names_returned = !values.is_empty() && r.release.is_none()
                || !reports.is_empty() && !summary::works_after(body, r.start, &h.names, &own);
            let returned = self.returned_sites.contains(&idx)
                || (!self.scoped_results.contains(&idx)
                    && (names_returned || key_returned || key_in_handle));
            // A task spawned to hold the lock (`start_leader_election(..)` spawning the loop
            // that campaigns, then returning): its caller starts the lock and holds nothing.
            // A task that takes a lock on each round of a loop (a cron loop) uses it itself:
            // only a lock the task takes once and keeps makes its spawner a starter.
            // An election loop is a starter too: it takes or renews the lock each round and
            // keeps it (no release within the round), publishing the outcome through state the
            // spawner hands back (`flag.store(acquired)` with `Self { is_leader }`, `tx.set(role)`
            // with `rx`).
            let spawned = self.spawned.get(&idx).is_some_and(|&(start, end)| {
                let rounds: Vec<&Span> = h
                    .loops
                    .iter()
                    .filter(|l| region::start_of(**l) > start)
                    .collect();
                // A task that runs its work under the lock once and gives it back (a scoped
                // wrapper's call, a release in the task) uses the lock itself: the spawner
                // starts no holder.
                let used_once = self.out.sites[idx].scoped
                    || !looped_in(
                        body,
                        region::start_of(self.out.sites[idx].span),
                        (start, end),
                    ) && r.release.is_some_and(|rel| {
                        let at = region::start_of(rel);
                        start <= at && at <= end
                    });
                if used_once {
                    return false;
                }
                let kept_across_rounds = || {
                    r.release.is_none_or(|rel| {
                        let at = region::start_of(rel);
                        !rounds
                            .iter()
                            .any(|l| region::start_of(**l) <= at && at <= region::end_of(**l))
                    }) && flow.as_ref().is_some_and(|f| {
                        self.spawn_names
                            .get(&(start, end))
                            .is_some_and(|used| f.shares_state(used, &self.returned))
                    })
                };
                (rounds.is_empty() || kept_across_rounds())
                    && !summary::works_after(body, end, &HashSet::new(), &own)
            });
            // Taken at the function's own level, not inside a closure or task of it.
            let at_fn_level = !self
                .in_closures
                .contains(&region::start_of(self.out.sites[idx].span));
            // Taken here, then kept by a task spawned after it that renews it (or takes it
            // again each round), whose handle goes back to the caller (`Ok(LeaderGuard {
            // renew_task })`): calling the function starts holding the lock, as a starter's
            // spawned task does.
            let kept_by_task = at_fn_level
                && r.release.is_none()
                && self.spawn_names.iter().any(|(&(start, end), used)| {
                    let inside = |p: Pos| start <= p && p <= end;
                    let site = &self.out.sites[idx];
                    let renewal = |e: &&Event| {
                        matches!(
                            e.kind,
                            crate::packs::CallKind::Renew | crate::packs::CallKind::KeepAlive
                        )
                    };
                    // A renewal in the task, or the keeper of one opened before it (`let (mut
                    // keeper, replies) = client.lease_keep_alive(id)`) moved into it.
                    let kept = self
                        .events
                        .iter()
                        .filter(renewal)
                        .any(|e| inside(region::start_of(e.span)))
                        || self
                            .events
                            .iter()
                            .filter(renewal)
                            .flat_map(|e| bound_by(body, region::start_of(e.span)))
                            .any(|n| used.contains(&n));
                    start > region::end_of(site.span)
                        && (kept
                            || self.spawned.iter().any(|(&j, &at)| {
                                j != idx
                                    && at == (start, end)
                                    && self
                                        .out
                                        .sites
                                        .get(j)
                                        .is_some_and(|o| o.library == site.library)
                            }))
                        && spawn_bound(body, (start, end))
                            .is_some_and(|h| self.returned.contains(&h))
                });
            // A function whose lock work is one self-contained call (`MIGRATOR.run(pool)
            // .await?; Ok(())`) and that does nothing after it but report: its callers run it.
            // (A library's own self-contained call only: a scoped wrapper of the program's
            // runs the caller's work, and is judged by what it hands back.)
            let thin = self.out.sites[idx].scoped
                && self.out.sites[idx].via.is_none()
                && at_fn_level
                && !summary::works_after(
                    body,
                    region::end_of(self.out.sites[idx].span),
                    &h.names,
                    &own,
                );
            // A function that never returns, holding the lock to the end: it takes the lock
            // once before an endless loop that keeps it alive (`lock(..)?; loop { sleep;
            // extend }`), or takes or renews it every round without releasing it and tells its
            // caller how each round went (`loop { match lease.try_acquire_or_renew() { ..
            // tx.send(led) } sleep }`). Calling it holds the lock for as long as it runs.
            let endless = at_fn_level
                && endless_tail(body).is_some_and(|l| {
                    let (ls, le) = (region::start_of(Span::of(l)), region::end_of(Span::of(l)));
                    let at = region::start_of(self.out.sites[idx].span);
                    let released_in_round = r.release.is_some_and(|rel| {
                        let p = region::start_of(rel);
                        ls <= p && p <= le
                    });
                    // Taken before the loop, the loop must keep it alive (renew it) or report on
                    // it: one that only works under the lock is the lock's own user.
                    let renews_in_loop = self.events.iter().any(|e| {
                        let p = region::start_of(e.span);
                        e.kind == crate::packs::CallKind::Renew && ls <= p && p <= le
                    });
                    let tends = publishes(&l.body, &self.params) || at < ls && renews_in_loop;
                    at <= le && !released_in_round && tends
                });
            let scoped = spawned
                || kept_by_task
                || thin
                || endless
                || callbacks
                    .get(callbacks.partition_point(|&p| p <= r.start))
                    .is_some_and(|&p| p <= r.end);
            self.out.sites[idx].region = r;
            // A method that several impls of the type define (`impl Clocking<Locking> for K`,
            // `impl Clocking<Locked> for K`, each `fn clock`): its calls cannot be told apart
            // from the other impls' by name, so the lock is judged here, not at `self.clock(..)`.
            if ambiguous {
                self.out.sites[idx].region.escapes |= returned;
                continue;
            }
            // One wrapper per library: a helper that takes the lock from one backend or
            // another (`match backend { Redis => .., Etcd => .. }`) is a wrapper of each, so
            // its release helper, also of each, pairs with it whichever is named first.
            let library = &self.out.sites[idx].library;
            if (returned || scoped)
                && !self
                    .out
                    .wrappers
                    .iter()
                    .any(|w| w.canonical == self.canonical && &w.library == library)
            {
                let pipeline = self.pipe_via(flow.as_ref(), idx);
                let in_place = self.cx.judged_in_place(self.out.sites[idx].span);
                let library_purpose = self.out.sites[idx].library_purpose.clone();
                let when_arg = self.arm_condition(flow.as_ref(), idx);
                let site = &mut self.out.sites[idx];
                site.wrapped = !in_place;
                // (A function that never returns holds it for as long as its caller runs it.)
                site.released_inside = scoped && !endless && !returned;
                // Handing back a scoped wrapper's call with the caller's work is a scoped
                // wrapper too: its callers hold nothing afterwards.
                let forwards_scope = site.scoped;
                // Judged where it is, a lock handed back is the unseen caller's to release.
                site.region.escapes |= in_place && returned;
                let ret = self.ret.as_ref();
                // `anyhow::Result`, `RedisResult`, `TaskResult<Option<Guard>>`: any `…Result`
                // alias; `None` inside it is "held by another".
                let returns = match ret
                    .map(|t| (t.last_segment(), t.args.first().map(|a| a.last_segment())))
                {
                    Some((r, Some("Option")))
                        if r.ends_with("Result")
                            && !summary::none_only_before(body, region::end_of(site.span)) =>
                    {
                        crate::packs::Returns::ResultOption
                    }
                    Some((r, _)) if r.ends_with("Result") => crate::packs::Returns::Result,
                    Some(("Option", _))
                        if !summary::none_only_before(body, region::end_of(site.span)) =>
                    {
                        crate::packs::Returns::Option
                    }
                    Some(("bool", _)) => crate::packs::Returns::Bool,
                    _ => crate::packs::Returns::Value,
                };
                // `-> Option<impl Drop>` names no type but says how the value is released.
                // `-> Result<Self::Guard, E>` names the trait's: the value handed back says
                // which type it is here (`Box::new(RedisLock { .. })`), when it is one.
                let returns_type = match &self.returned_types[..] {
                    [own] if returns_assoc_lock(&self.sig.output) => Some(own.clone()),
                    _ => ret
                        .map(|t| t.peeled())
                        .filter(|t| t.path.contains("::") || t.path == "Drop")
                        .map(|t| t.path.clone()),
                };
                // A lock type of the code's own (a struct holding the key) is a handle even
                // around a reply-only primitive; the reply itself is not, nor an enum of the
                // code's that says how it went (`SetnxReply::KeySet`).
                let own_type = returns_type.as_deref().is_some_and(|t| {
                    t.starts_with("crate::")
                        && !self
                            .cx
                            .index
                            .is_enum(&crate::model::Ty::simple(t.to_string()))
                });
                // A returned report (a boolean, the reply) leaves the lock where it was taken.
                let reported = flow.as_ref().and_then(|f| {
                    summary::reported_held(f, self.key_names.get(&region::start_of(site.span)))
                });
                // Which argument is the key, also of a wrapper handing back the reply (`->
                // Result<SetnxReply>`) or a handle (where `held` is not asked): its callers' key
                // expressions name the lock.
                let key_arg = summary::key_arg(reported.as_ref());
                let held = reported.filter(|_| returns_type.is_none() && !scoped);
                // A session lock reported on stays on the connection the caller passed.
                let session_arg = site
                    .session_on
                    .as_deref()
                    .filter(|_| {
                        returns_type.is_none()
                            && !scoped
                            && site.release == crate::packs::ReleaseStyle::Session
                    })
                    .and_then(|n| flow.as_ref()?.param_index(n));
                // A report of a lock left held says whether it was taken (`Result<bool>`).
                let returns = if held.is_some() || session_arg.is_some() {
                    summary::reported(ret)
                } else {
                    returns
                };
                self.out.wrappers.push(super::WrapperCandidate {
                    canonical: self.canonical.clone(),
                    method: self.method.clone(),
                    via: self.info.path.clone(),
                    arity: arity(self.sig),
                    library: site.library.clone(),
                    kind: site.kind,
                    returns,
                    returns_type: if scoped || forwards_scope {
                        None
                    } else {
                        returns_type
                    },
                    scoped: scoped && !returned || forwards_scope,
                    ttl_ms: site.ttl.ms().map(|m| m as f64),
                    ttl_arg: site.ttl.param(),
                    ttl_field: site.ttl.field(),
                    auto_renew: site.region.renewed || site.region.keeper,
                    fencing: site.fencing,
                    sql: site.sql,
                    consensus: site.consensus,
                    backend: site.backend.clone(),
                    qualified: false,
                    // A lock type of the code's own (a struct holding the key) is a handle
                    // even around a reply-only primitive; the reply itself is not.
                    handle: h.handle || own_type,
                    key_arg,
                    held,
                    sql_arg: None,
                    script_arg: None,
                    pipeline,
                    forwards: None,
                    when_arg,
                    origin: None,
                    owner_checked: true,
                    library_purpose: library_purpose.clone(),
                    lent: site.lent_back && !scoped,
                    session_arg,
                    key_gate: site.key_gate,
                });
            } else if returned || scoped {
                // A second acquisition handed back by the same wrapper (another arm, another
                // branch): judged at the wrapper's call sites too.
                let in_place = self.cx.judged_in_place(self.out.sites[idx].span);
                self.out.sites[idx].wrapped = !in_place;
                self.out.sites[idx].released_inside = scoped && !endless && !returned;
                self.out.sites[idx].region.escapes |= in_place && returned;
            } else if let Some(flow) = &flow
                && at_fn_level
                && !self
                    .out
                    .wrappers
                    .iter()
                    .any(|w| w.canonical == self.canonical)
                // A session lock's handle of the program's own (a lock type owning its
                // connection) holds the lock, not the session it was taken on: dropped here, it
                // is given back here.
                && !(h.handle && self.out.sites[idx].via.is_some() && self.out.sites[idx].sql)
                && let Some(held) = summary::held_after(
                    flow,
                    &self.out.sites[idx],
                    arm_start.unwrap_or(self.out.sites[idx].region.start),
                    &self.names_with_pipeline(&h.names, idx),
                    self.key_names
                        .get(&region::start_of(self.out.sites[idx].span)),
                    body,
                    &own,
                    h.handle && self.releases_by_handle(self.out.sites[idx].pack),
                )
            {
                let pipeline = self.pipe_via(Some(flow), idx);
                let in_place = self.cx.judged_in_place(self.out.sites[idx].span);
                let library_purpose = self.out.sites[idx].library_purpose.clone();
                // A lock type of the code's own handed back for the lock left held (`Ok(acquired
                // .then(|| LeaderGuard { key, .. }))`): whether dropping it releases is its `Drop`'s
                // business, as for a handle returned.
                let returns_type = self
                    .ret
                    .as_ref()
                    .map(|t| t.peeled())
                    .filter(|t| {
                        t.path.starts_with("crate::")
                            && !self
                                .cx
                                .index
                                .is_enum(&crate::model::Ty::simple(t.path.clone()))
                    })
                    .map(|t| t.path.clone());
                // A session lock left on a connection the caller passed: the caller's argument
                // is the connection that holds it.
                let session_arg = (held == summary::Held::Session)
                    .then(|| self.out.sites[idx].session_on.as_deref())
                    .flatten()
                    .and_then(|n| flow.param_index(n));
                let key_gate = self.out.sites[idx].key_gate;
                let site = &mut self.out.sites[idx];
                site.wrapped = !in_place;
                // Left held for the caller (in the store, in `self`): released elsewhere.
                site.region.escapes |= in_place;
                self.out.wrappers.push(super::WrapperCandidate {
                    canonical: self.canonical.clone(),
                    method: self.method.clone(),
                    via: self.info.path.clone(),
                    arity: arity(self.sig),
                    library: site.library.clone(),
                    kind: site.kind,
                    returns: summary::reported_after(
                        self.ret.as_ref(),
                        body,
                        region::end_of(site.span),
                    ),
                    returns_type,
                    scoped: false,
                    ttl_ms: site.ttl.ms().map(|m| m as f64),
                    ttl_arg: site.ttl.param(),
                    ttl_field: site.ttl.field(),
                    auto_renew: site.region.renewed || site.region.keeper,
                    fencing: site.fencing,
                    sql: site.sql,
                    consensus: site.consensus,
                    backend: site.backend.clone(),
                    qualified: false,
                    handle: true,
                    key_arg: summary::key_arg(Some(&held)),
                    held: Some(held),
                    sql_arg: None,
                    script_arg: None,
                    pipeline,
                    forwards: None,
                    when_arg: self.arm_condition(Some(flow), idx),
                    origin: None,
                    owner_checked: true,
                    library_purpose: library_purpose.clone(),
                    lent: false,
                    session_arg,
                    key_gate,
                });
            } else if at_fn_level
                && self.out.sites[idx].region.release.is_none()
                && self.out.sites[idx].release != crate::packs::ReleaseStyle::Guard
                && self.out.wrappers.iter().any(|w| {
                    w.canonical == self.canonical && w.library == self.out.sites[idx].library
                })
                && !summary::works_after(
                    body,
                    arm_start.unwrap_or(self.out.sites[idx].region.start),
                    &h.names,
                    &own,
                )
            {
                // Another branch of an acquire helper already summarised (`create` when the
                // Lease is missing, `patch` when it expired), ending the function as that one
                // does: judged at the helper's call sites too.
                let in_place = self.cx.judged_in_place(self.out.sites[idx].span);
                self.out.sites[idx].wrapped = !in_place;
                self.out.sites[idx].region.escapes |= in_place;
            }
        }
        // A release wrapper: releases a lock its caller passes in (`fn release(&self, lock: &Lock)`);
        // a renewal wrapper likewise renews one (`fn renew(&self, key: &str)` running `EXPIRE`).
        // One per library, as for acquisitions: `match backend { Etcd(l) => l.unlock(), Redis(l)
        // => l.unlock() }` releases the lock of either.
        let releases: Vec<(usize, Option<summary::Held>)> = if self.out.sites.len()
            == self.first_site
            && !self
                .out
                .wrappers
                .iter()
                .any(|w| w.canonical == self.canonical)
        {
            let mut seen = HashSet::new();
            self.events
                .iter()
                .enumerate()
                .filter_map(|(i, e)| {
                    if !matches!(
                        e.kind,
                        crate::packs::CallKind::Release | crate::packs::CallKind::Renew
                    ) || seen.contains(&e.pack)
                    {
                        return None;
                    }
                    let sql_pack = !self.cx.packs.packs[e.pack].sql.is_empty();
                    let key = self.key_names.get(&region::start_of(e.span));
                    let held = flow
                        .as_ref()
                        .and_then(|f| summary::released(f, e, key, sql_pack));
                    // A blind command on a key that is neither the caller's (passed on) nor
                    // known for a lock's: computed (`PEXPIRE vote_key(provider)`) or a local
                    // (`for p in providers { self.vote(&p) }`). Judged here, it was no lock's;
                    // the callers never see the key: no renewal or release to hand on.
                    // (A local copied from the receiver, `let key = self.key.clone()` in a
                    // guard's `Drop`, is the receiver's own key.)
                    let unknown_key = e.key.as_deref().is_some_and(|k| {
                        !self.copied_from_receiver(key_root(k))
                            && (k.contains('(')
                                || k.contains('!')
                                || syn::parse_str::<syn::Ident>(k).is_ok_and(|id| {
                                    let n = id.to_string();
                                    n.chars().next().is_some_and(|c| c.is_ascii_lowercase())
                                        && !self.params.contains(&n)
                                }))
                    });
                    if !e.owner_checked
                        && !e.key_says_lock
                        && unknown_key
                        && summary::key_arg(held.as_ref()).is_none()
                    {
                        return None;
                    }
                    (held.is_some() || e.mentions.iter().any(|m| self.params.contains(m))).then(
                        || {
                            seen.insert(e.pack);
                            (i, held)
                        },
                    )
                })
                .collect()
        } else {
            Vec::new()
        };
        for (i, held) in releases {
            let e = &self.events[i];
            let library = self.cx.packs.packs[e.pack].pack.name.clone();
            let key_arg = summary::key_arg(held.as_ref());
            self.out.wrappers.push(super::WrapperCandidate {
                canonical: self.canonical.clone(),
                method: self.method.clone(),
                via: self.info.path.clone(),
                arity: arity(self.sig),
                library,
                kind: e.kind,
                // A renewal's answer says whether the lock is still held (`-> bool`,
                // `-> Result<()>`): its callers' handling of it is judged.
                returns: if e.kind == crate::packs::CallKind::Renew {
                    summary::reported(self.ret.as_ref())
                } else {
                    crate::packs::Returns::Value
                },
                returns_type: None,
                scoped: false,
                ttl_ms: None,
                ttl_arg: None,
                ttl_field: None,
                auto_renew: false,
                fencing: super::Fencing::None,
                sql: false,
                consensus: self.cx.packs.packs[e.pack].pack.consensus,
                backend: None,
                qualified: false,
                handle: true,
                key_arg,
                held,
                sql_arg: None,
                script_arg: None,
                pipeline: None,
                forwards: None,
                when_arg: None,
                origin: None,
                // A blind delete of the caller's key is judged where the key is known to be a
                // lock's; one of the receiver's own key is judged here (`self.key`).
                // One judged here, on a key this function already knows for a lock's, is not
                // judged again at each call.
                owner_checked: e.owner_checked || key_arg.is_none() || e.key_says_lock,
                library_purpose: None,
                lent: false,
                session_arg: None,
                key_gate: None,
            });
        }
        let has_lock_work = self.out.sites.len() > self.first_site || !self.events.is_empty();
        let fn_events_from = self.out.events.len();
        self.out.events.append(&mut self.events);
        // A helper that decides a lease's expiry (`fn has_expired(renewed, ttl) -> bool`) is
        // looked at too; its readings count when the file takes a lock (FileFacts::merge).
        let answers_bool = matches!(&self.sig.output,
            syn::ReturnType::Type(_, t) if matches!(&**t, syn::Type::Path(p) if p.path.is_ident("bool")));
        let owner = self.self_ty.as_ref().map(|t| t.last_segment().to_string());
        let owner = owner.as_deref();
        let expiry_helper = !has_lock_work && expiry_helper(self.own_name(), answers_bool, owner);
        if has_lock_work || expiry_helper {
            let tie = self.lock_tie(fn_events_from);
            let mut clocks = Clocks {
                w: self,
                found: Vec::new(),
                lets: Vec::new(),
                helper: expiry_helper,
                tie,
            };
            clocks.visit_block(body);
            let found = clocks.found;
            let (line, function) = (self.info.sig_line, self.info.path.clone());
            let into = if expiry_helper {
                &mut self.out.helper_clocks
            } else {
                &mut self.out.clocks
            };
            into.extend(found.into_iter().map(|(span, what)| Clock {
                span,
                what,
                fn_line: line,
                function: function.clone(),
            }));
        }
    }

    /// A create-if-absent of a counter the function then counts with, or one that never expires
    /// in a function named for setting a value up
    /// (`fn initialize_if_missing(&self, next: u64) { conn.set_nx(key, next) }`), on a key that
    /// names no lock: a value written once (a counter's seed), not a lock left without deadline.
    fn initialises_once(&self, m: &Matched<'a>) -> bool {
        // A key the function then counts with: `SET key 0 NX PX t` before `INCRBY key 1`.
        if m.kind.is_acquisition()
            && m.via.is_none()
            && m.key.is_some_and(|k| {
                self.counter_keys
                    .contains(&quote::ToTokens::to_token_stream(summary::peel_key(k)).to_string())
            })
        {
            return true;
        }
        m.kind.is_acquisition()
            && m.via.is_none()
            && matches!(m.ttl, super::Ttl::Missing { .. })
            && matchers::names_lock(self.own_name(), matchers::INIT_FN_WORDS)
            && !matchers::fn_says_lock(self.own_name())
            && !m.key.is_some_and(|k| {
                matchers::names_lock(
                    &quote::ToTokens::to_token_stream(k).to_string(),
                    matchers::KEY_WORDS,
                )
            })
    }

    /// For a method: its impl type and name.
    pub(in crate::sites) fn own_method(&self) -> Option<&(String, String)> {
        self.method.as_ref()
    }

    /// The function's own name, without its module or type (`renew_lock`).
    pub(in crate::sites) fn own_name(&self) -> &str {
        self.info
            .path
            .rsplit("::")
            .next()
            .unwrap_or(&self.info.path)
    }

    /// The function's lock operations as `wall-clock-deadline` relates clock readings to them:
    /// its name, where the first starts, the names passed to them.
    fn lock_tie(&self, events_from: usize) -> clocks::LockTie {
        let first_op = self.out.sites[self.first_site..]
            .iter()
            .map(|s| region::start_of(s.span))
            .chain(
                self.out.events[events_from..]
                    .iter()
                    .map(|e| region::start_of(e.span)),
            )
            .min();
        clocks::LockTie {
            named: clocks::says_lock(self.own_name()),
            first_op,
            args: self.op_names.clone(),
        }
    }

    /// `tokio::select! { pat = future => handler, … }`: each arm walked as `let pat =
    /// future.await;` followed by its handler, in a scope of its own.
    fn visit_select(&mut self, mac: &'a syn::Macro) -> bool {
        let Ok(SelectArms(arms)) = mac.parse_body::<SelectArms>() else {
            return false;
        };
        for arm in arms {
            let mut exprs = MacroArgs::new();
            let has_future = arm.future.is_some();
            let has_guard = arm.guard.is_some();
            exprs.extend(arm.future);
            exprs.extend(arm.guard);
            exprs.push(arm.handler);
            let exprs: &'a MacroArgs = self.arena.alloc(exprs);
            let mut it = exprs.iter();
            let future = if has_future { it.next() } else { None };
            let guard = if has_guard { it.next() } else { None };
            let handler = it.next().expect("every arm has a handler");
            self.scopes.push(HashMap::new());
            // What follows the binding is the handler: how the answer is checked is read there.
            let after: &'a [Stmt] = match handler {
                Expr::Block(b) => &b.block.stmts,
                _ => &[],
            };
            self.rest.push(after);
            // The arm's binding is its statement: the lock is held from the end of the future.
            let saved_end = self.stmt_end;
            if let Some(future) = future {
                self.stmt_end = region::end_of(Span::of(future));
            }
            if let (Some(future), Some(pat)) = (future, arm.pat) {
                let pat: &'a Pat = self.arena.pats.alloc(pat);
                self.set_use(
                    future,
                    Use::Bind {
                        pat,
                        has_else: false,
                    },
                );
                self.visit_expr(future);
                let ty = self.type_of(future);
                self.bind(pat, Some(future), ty);
            }
            if let Some(g) = guard {
                self.visit_expr(g);
            }
            self.stmt_end = saved_end;
            self.rest.pop();
            self.set_use(handler, Use::Escape);
            self.visit_expr(handler);
            self.scopes.pop();
        }
        true
    }

    fn visit_macro_args(&mut self, mac: &'a syn::Macro) {
        let name = mac.path.segments.last().map(|s| s.ident.to_string());
        if matches!(name.as_deref(), Some("select" | "select_biased")) && self.visit_select(mac) {
            return;
        }
        // Macro bodies are token streams; most that matter (`format!`, `info!`, `assert!`)
        // are comma-separated expressions.
        if let Some(args) = self.macro_args(mac) {
            // `write!(&mut path, "{sequence}")`: the text written into `path` carries what it
            // was made from (a lock node's sequence number makes `path` the node's name).
            let name = mac.path.segments.last().map(|s| s.ident.to_string());
            if matches!(name.as_deref(), Some("write" | "writeln"))
                && let Some(target) = args.first().and_then(local_named)
            {
                let mut mentioned = HashSet::new();
                for a in args.iter().skip(1) {
                    mentioned.extend(idents_in(a));
                    if let Expr::Lit(syn::ExprLit {
                        lit: syn::Lit::Str(l),
                        ..
                    }) = a
                    {
                        mentioned.extend(format_captures(&l.value()));
                    }
                }
                self.carry_into(&target, &mentioned, false);
            }
            for a in args.iter() {
                self.set_use(a, Use::Escape);
                self.visit_expr(a);
            }
        }
        // `bail!(…)` (anyhow, eyre) returns an error; `ensure!(cond, …)` may.
        if matches!(name.as_deref(), Some("bail" | "ensure")) {
            self.marker(MarkerKind::Exit("return"), Span::of(&mac.path));
        }
    }
}

impl<'a> Visit<'a> for Walker<'a, '_> {
    fn visit_block(&mut self, b: &'a syn::Block) {
        if !self.enter() {
            return;
        }
        self.scopes.push(HashMap::new());
        // A branch that ends by leaving (not the function's own body, whose end is the end).
        if self.block_ends.len() > 1
            && let Some(how) = b.stmts.last().and_then(leaves).or_else(|| {
                // A branch answering that the attempt failed (`Err(e) => { conn.del(key).await;
                // false }`): what it releases is that failed path's cleanup, not the release of
                // the lock the other paths keep.
                matches!(b.stmts.last(), Some(Stmt::Expr(e, None)) if super::failure::failure_value(e))
                    .then_some("fails")
            })
        {
            self.marker(MarkerKind::Diverges(how), Span::of_block(b));
        }
        self.block_ends.push(region::end_of(Span::of_block(b)));
        let saved_line = self.stmt_line;
        // `if holder != me { continue }` in a loop's body speaks for the rest of that body only.
        let held_by_us = self.held_by_us;
        let lease_expired = self.lease_expired;
        // A block's constants are in scope in all of it, and shadow the module's.
        for stmt in &b.stmts {
            if let Stmt::Item(syn::Item::Const(c)) = stmt {
                let local = Local {
                    ty: self.ty_of_type(&c.ty),
                    init: Some(&*c.expr),
                    args: Vec::new(),
                    keys: Vec::new(),
                    serial: self.next_serial(),
                };
                if let Some(scope) = self.scopes.last_mut() {
                    scope.insert(c.ident.to_string(), local);
                }
            }
        }
        for (i, stmt) in b.stmts.iter().enumerate() {
            self.rest.push(&b.stmts[i + 1..]);
            // From its first and last tokens: spanning the node would re-tokenize it.
            let span = super::span::of_stmt(stmt);
            self.stmt_line = span.line;
            self.stmt_end = region::end_of(span);
            match stmt {
                Stmt::Local(l) => {
                    let mut ty = None;
                    if let Some(init) = &l.init {
                        self.set_use(
                            &init.expr,
                            Use::Bind {
                                pat: &l.pat,
                                has_else: init.diverge.is_some(),
                            },
                        );
                        if init.diverge.is_none()
                            && matches!(&*init.expr, Expr::Loop(_))
                            && let Some(&end) = self.block_ends.last()
                        {
                            self.let_loops.push((
                                Span::of(&*init.expr),
                                &l.pat,
                                self.stmt_end,
                                end,
                            ));
                        }
                        if init.diverge.is_none()
                            && let Some(n) = single_name(&l.pat)
                            && let Some(c) = valued_closure(&init.expr)
                        {
                            let end = self.block_ends.last().copied().unwrap_or((usize::MAX, 0));
                            let start = region::end_of(Span::of(&*init.expr));
                            self.value_closures
                                .insert(c as *const Expr, (n, start, end, self.closure_depth));
                        }
                        self.visit_expr(&init.expr);
                        if let Some((_, els)) = &init.diverge {
                            // The `else` of `let … else` runs when the pattern did not match.
                            self.guards = self
                                .guards
                                .push(idents_in(&init.expr).into_iter().collect());
                            self.visit_expr(els);
                            self.guards = self.guards.pop();
                        }
                        ty = self.type_of(&init.expr);
                        // `let mut token = None; … token = Some(lock.acquire(..)?)`: a
                        // placeholder, then the lock, as a deferred `let token;` would be.
                        if init.diverge.is_none()
                            && matches!(&*init.expr, Expr::Path(p) if p.path.is_ident("None"))
                            && let Some(n) = single_name(&l.pat)
                            && let Some(&end) = self.block_ends.last()
                        {
                            self.deferred
                                .insert(n.clone(), (&l.pat, &b.stmts[i + 1..], end));
                        }
                        if let Some(n) = single_name(&l.pat) {
                            if self.is_checkout(&init.expr) || self.wraps_checkout(&init.expr) {
                                self.checkouts.insert(n);
                            } else {
                                self.checkouts.remove(&n);
                            }
                        }
                    } else if let Some(n) = single_name(&l.pat)
                        && let Some(&end) = self.block_ends.last()
                    {
                        self.deferred.insert(n, (&l.pat, &b.stmts[i + 1..], end));
                    }
                    if let Some(init) = &l.init {
                        self.note_store_read(&l.pat, &init.expr);
                    }
                    self.bind(&l.pat, l.init.as_ref().map(|i| &*i.expr), ty);
                }
                Stmt::Expr(e, semi) => {
                    let tail_of_fn =
                        semi.is_none() && self.block_ends.len() == 2 && i + 1 == b.stmts.len();
                    self.set_use(
                        e,
                        if semi.is_some() {
                            Use::Discard
                        } else {
                            Use::Escape
                        },
                    );
                    if tail_of_fn {
                        value_leaves(e, &mut self.value_exprs, 0);
                    }
                    if tail_of_fn {
                        self.escape_if_name(e);
                        self.hand_back(e);
                        // `loop { … break Ok(lock) }` as the function's value: its breaks return.
                        if matches!(e, Expr::Loop(_)) {
                            self.value_loop = Some(Span::of(e));
                        }
                    }
                    if semi.is_some() {
                        self.note_added_args(e);
                    }
                    self.visit_expr(e);
                }
                Stmt::Item(syn::Item::Fn(f)) => {
                    let path = format!("{}::{}", self.info.path, f.sig.ident);
                    let source = FnSource {
                        sig: &f.sig,
                        body: &f.block,
                        outer: None,
                    };
                    analyze_fn(
                        source,
                        self.cx,
                        self.imports,
                        None,
                        path,
                        self.arena,
                        self.out,
                    );
                }
                // A `const` inside the function is a local for evaluation (`const SQL: &str = …`).
                Stmt::Item(syn::Item::Const(c)) => {
                    let ty = self.ty_of_type(&c.ty);
                    let serial = self.next_serial();
                    if let Some(scope) = self.scopes.last_mut() {
                        let local = Local {
                            ty,
                            init: Some(&c.expr),
                            args: Vec::new(),
                            keys: Vec::new(),
                            serial,
                        };
                        scope.insert(c.ident.to_string(), local);
                    }
                }
                Stmt::Item(_) => {}
                Stmt::Macro(m) => self.visit_macro_args(&m.mac),
            }
            self.rest.pop();
        }
        self.stmt_line = saved_line;
        self.held_by_us = held_by_us;
        self.lease_expired = lease_expired;
        self.block_ends.pop();
        self.scopes.pop();
        self.out.depth -= 1;
    }

    fn visit_expr(&mut self, e: &'a Expr) {
        // `m.set_locking(false)`: a switch a pack's `off-by` may name.
        if let Expr::MethodCall(m) = e
            && m.args.len() == 1
            && let Some(Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Bool(b),
                ..
            })) = m.args.first()
            && let Some(local) = local_named(&m.receiver)
        {
            self.switches.insert((local, m.method.to_string(), b.value));
        }
        let value = !self.value_exprs.is_empty() && self.value_exprs.contains(&(e as *const Expr));
        let closure_value =
            !self.closure_values.is_empty() && self.closure_values.contains(&(e as *const Expr));
        if value {
            self.in_return += 1;
        }
        if closure_value {
            self.in_closure_value += 1;
        }
        self.visit_expr_inner(e);
        if value {
            self.in_return -= 1;
        }
        if closure_value {
            self.in_closure_value -= 1;
        }
    }

    // Nested items are analysed as functions of their own (see `visit_block`); the generic visitor
    // must not walk into them with this function's scope.
    fn visit_item(&mut self, _: &'a syn::Item) {}
}

/// How deeply the walk may recurse (blocks and expressions, nested functions included). Files
/// are refused before parsing when they nest past `lex::MAX_NESTING`, which keeps walks far below
/// this; it is the walk's own guard should that estimate ever fall short.
const MAX_WALK_DEPTH: usize = 4 * crate::lex::MAX_NESTING;

impl<'a> Walker<'a, '_> {
    fn visit_expr_inner(&mut self, e: &'a Expr) {
        if !self.enter() {
            return;
        }
        let u = self.take_use(e);
        let bound = match &u {
            Use::Bind {
                pat,
                has_else: false,
            } => Some(*pat),
            _ => None,
        };
        let discarded = u.drops_value();
        if matches!(
            e,
            Expr::MethodCall(_)
                | Expr::Call(_)
                | Expr::Await(_)
                | Expr::Try(_)
                | Expr::Macro(_)
                | Expr::Paren(_)
        ) {
            self.detect(e, u);
        }
        // A task spawned at the function's own level (`tokio::spawn(async move { … })`,
        // `runtime.spawn(..)`, `thread::spawn(move || ..)`).
        if self.closure_depth == 0 && spawns(e) {
            let at = Span::of(e);
            let at = (region::start_of(at), region::end_of(at));
            for c in closure_args(e) {
                self.spawning.insert(c as *const Expr, at);
                self.spawn_names.entry(at).or_default().extend(idents_in(c));
            }
        }
        // A closure handed to a call whose value is returned (`spawn_blocking(move || { … })
        // .await?`, `block_on(..)`, `retry(|| ..)`) gives the function its value.
        if self.in_return > 0 && self.closure_depth == self.forwarded_depth {
            for c in closure_args(e) {
                self.forwarding.insert(c as *const Expr);
            }
        }
        match e {
            Expr::If(i) => {
                self.scopes.push(HashMap::new());
                let cond_names: Vec<String> = idents_in(&i.cond).into_iter().collect();
                match &*i.cond {
                    Expr::Let(l) => {
                        self.set_use(
                            &l.expr,
                            Use::IfLet {
                                pat: &l.pat,
                                then: &i.then_branch,
                                els: i.else_branch.as_ref().map(|(_, e)| &**e),
                            },
                        );
                        self.visit_expr(&l.expr);
                        let ty = self.type_of(&l.expr);
                        self.note_store_read(&l.pat, &l.expr);
                        // The scrutinee is the init for taint (`if let Some(l) = lock`).
                        self.bind(&l.pat, Some(&l.expr), ty);
                    }
                    Expr::Unary(un) if matches!(un.op, syn::UnOp::Not(_)) => {
                        self.set_use(
                            &un.expr,
                            Use::Cond {
                                then: &i.then_branch,
                                els: i.else_branch.as_ref().map(|(_, e)| &**e),
                                negated: true,
                            },
                        );
                        self.visit_expr(&un.expr);
                    }
                    // A let-chain (`if let Some(ref l) = self.locks && let Some(t) = token`):
                    // each `let` binds, in order, for the conjuncts after it and the body.
                    cond if let Some(parts) = let_chain(cond) => {
                        for part in parts {
                            match part {
                                Expr::Let(l) => {
                                    self.visit_expr(&l.expr);
                                    let ty = self.type_of(&l.expr);
                                    self.bind(&l.pat, Some(&l.expr), ty);
                                }
                                other => self.visit_expr(other),
                            }
                        }
                    }
                    cond => {
                        self.set_use(
                            cond,
                            Use::Cond {
                                then: &i.then_branch,
                                els: i.else_branch.as_ref().map(|(_, e)| &**e),
                                negated: false,
                            },
                        );
                        self.visit_expr(cond);
                    }
                }
                // `let r = if let Some(m) = &self.locks { match m.lock(..).await { .. } } else
                // { .. };`: the `match` ending a branch gives the `let` its value.
                if let Some(pat) = bound
                    && let Some(Stmt::Expr(tail @ Expr::Match(_), None)) =
                        i.then_branch.stmts.last()
                {
                    self.set_use(
                        tail,
                        Use::Bind {
                            pat,
                            has_else: false,
                        },
                    );
                }
                // `if locked { … }`, `if held.is_some() { … }`: the branch runs with the lock the
                // flag says was taken, so its exits leave a held lock (a guard names the flag only
                // on the branch that runs without it).
                let held_flag = positive_flag(&i.cond);
                let then_names: Vec<String> = cond_names
                    .iter()
                    .filter(|n| Some(n.as_str()) != held_flag.as_deref())
                    .cloned()
                    .collect();
                self.guards = self.guards.push(then_names);
                // `let ours = holder == me; if !ours { return }`: the test the local holds.
                let named_test = self.named_condition(&i.cond);
                let cond = named_test.as_ref().unwrap_or(&i.cond);
                self.holder_compared |= compares_holder(cond);
                let held_before = self.held_by_us;
                let holder_test = holder_test(cond);
                self.held_by_us |= holder_test == Some(true);
                let expired_before = self.lease_expired;
                let expiry = expiry_test(&i.cond);
                self.lease_expired |= expiry == Some(true);
                let compared = compared_read(&i.cond);
                let pushed = compared.is_some();
                self.compared_reads.extend(compared);
                let unset_before = self.unset_flags.len();
                unset_flags(&i.cond, &mut self.unset_flags);
                self.visit_block(&i.then_branch);
                self.unset_flags.truncate(unset_before);
                // `if holder != me { return … }`: what follows runs only while we hold it.
                self.held_by_us = held_before
                    || holder_test == Some(false)
                        && i.else_branch.is_none()
                        && super::failure::diverges_block(&i.then_branch);
                // `if claim.expires_at > now { return Ok(false) }`: what follows runs only on an
                // expired lease.
                self.lease_expired = expired_before
                    || expiry == Some(false)
                        && i.else_branch.is_none()
                        && super::failure::diverges_block(&i.then_branch);
                if pushed {
                    self.compared_reads.pop();
                }
                self.scopes.pop();
                self.guards = self.guards.pop();
                self.guards = self.guards.push(cond_names);
                if let Some((_, els)) = &i.else_branch {
                    // `if self.is_leader() { renew } else { acquire }`: the else runs with the
                    // flag unset.
                    let unset_before = self.unset_flags.len();
                    set_flags(&i.cond, &mut self.unset_flags);
                    self.visit_expr(els);
                    self.unset_flags.truncate(unset_before);
                }
                self.guards = self.guards.pop();
            }
            Expr::While(w) => {
                self.marker(MarkerKind::Loop, Span::of(&w.while_token));
                self.scopes.push(HashMap::new());
                if let Expr::Let(l) = &*w.cond {
                    self.set_use(&l.expr, Use::Escape);
                    self.visit_expr(&l.expr);
                    let ty = self.type_of(&l.expr);
                    self.bind(&l.pat, None, ty);
                } else if let Expr::Unary(un) = &*w.cond
                    && matches!(un.op, syn::UnOp::Not(_))
                {
                    // `while !mgr.try_lock(..)? { sleep }`: a wait, then held after the loop.
                    self.set_use(&un.expr, Use::Until);
                    self.visit_expr(&w.cond);
                } else {
                    self.set_use(&w.cond, Use::Escape);
                    self.visit_expr(&w.cond);
                }
                self.loops.push(Span::of(e));
                self.for_loops.push(false);
                self.visit_block(&w.body);
                self.for_loops.pop();
                self.loops.pop();
                self.scopes.pop();
            }
            Expr::Loop(l) => {
                self.marker(MarkerKind::Loop, Span::of(&l.loop_token));
                self.loops.push(Span::of(e));
                self.for_loops.push(false);
                self.visit_block(&l.body);
                self.for_loops.pop();
                self.loops.pop();
            }
            Expr::ForLoop(f) => {
                // The iterated expression runs before the loop: mark the body. In an async
                // function, a loop over items that awaits nothing only computes (rows mapped
                // into values), and one that awaits only recording calls keeps books (an audit
                // row per claimed job): no long work.
                if self.sig.asyncness.is_none() || super::failure::block_awaits_work(&f.body) {
                    self.marker(MarkerKind::Loop, Span::of_block(&f.body));
                }
                let held_before = self.holdings.len();
                self.visit_expr(&f.expr);
                let elem = self.element_type(&f.expr);
                self.scopes.push(HashMap::new());
                self.bind(&f.pat, None, elem);
                // The rows a claim hands out, one per round (`for id in lease_jobs(..).await?`,
                // `for job in claimed`): each is the lock's, renewed and released by it.
                let mut each = Vec::new();
                pattern_idents(&f.pat, &mut each);
                for (_, h) in self.holdings.iter_mut().skip(held_before) {
                    h.names.extend(each.iter().cloned());
                }
                let iterated = idents_in(&f.expr);
                for n in &each {
                    self.carry_into(n, &iterated, false);
                }
                self.loops.push(Span::of(e));
                self.for_loops.push(true);
                self.visit_block(&f.body);
                self.for_loops.pop();
                self.loops.pop();
                self.scopes.pop();
            }
            Expr::Match(m) => {
                self.set_use(
                    &m.expr,
                    Use::Match {
                        arms: &m.arms,
                        bound,
                        discarded,
                    },
                );
                self.visit_expr(&m.expr);
                let ty = self.type_of(&m.expr);
                self.guards = self.guards.push(idents_in(&m.expr).into_iter().collect());
                let scrutinee = match super::summary::peel_key(&m.expr) {
                    Expr::Path(p) => p.path.get_ident().map(|i| i.to_string()),
                    _ => None,
                };
                for arm in &m.arms {
                    self.scopes.push(HashMap::new());
                    // What a variant of the program's own binds is made from the scrutinee
                    // (`Acquisition::Owned(guard) => held.insert(k, guard)` moves the lock on);
                    // `Ok`/`Some`/`Err` arms are read by the acquisition's own use (`Use::Match`).
                    let init = failure::is_other_variant(&arm.pat).then_some(&*m.expr);
                    self.bind(&arm.pat, init, ty.clone());
                    if let Some(name) = &scrutinee
                        && matches!(&arm.pat, Pat::TupleStruct(_))
                        && failure::is_success_pattern(&arm.pat)
                    {
                        self.unwrap_held(name, &arm.pat);
                    }
                    if let Some((_, g)) = &arm.guard {
                        self.visit_expr(g);
                    }
                    let variant = scrutinee.clone().zip(variant_of(&arm.pat));
                    if let Some(v) = &variant {
                        self.arms.push(v.clone());
                    }
                    // `let result = match backend { A(x) => x.lock().await, .. }`: an arm's call
                    // is bound where the `match` is.
                    let arm_use = match bound {
                        Some(pat) if is_call_chain(&arm.body) => Use::Bind {
                            pat,
                            has_else: false,
                        },
                        _ => Use::Escape,
                    };
                    self.set_use(&arm.body, arm_use);
                    self.visit_expr(&arm.body);
                    if variant.is_some() {
                        self.arms.pop();
                    }
                    self.scopes.pop();
                }
                self.guards = self.guards.pop();
            }
            Expr::Closure(c) => {
                let (forwarded, valued) = self.enter_deferred(e);
                self.scopes.push(HashMap::new());
                for p in &c.inputs {
                    self.bind(p, None, None);
                }
                self.set_use(&c.body, Use::Escape);
                self.visit_expr(&c.body);
                self.scopes.pop();
                self.leave_deferred(forwarded, valued);
            }
            Expr::Async(a) => {
                // `?` and `return` inside an async block leave the block, not the function.
                let inline = self.inline_async.contains(&(e as *const Expr));
                let (forwarded, valued) = self.enter_deferred(e);
                self.inline_depth += usize::from(inline);
                self.visit_block(&a.block);
                self.inline_depth -= usize::from(inline);
                self.leave_deferred(forwarded, valued);
            }
            // `let result = async { work().await? }.await;`: the block runs here and now.
            Expr::Await(a) if matches!(&*a.base, Expr::Async(_)) => {
                self.inline_async.insert(&*a.base as *const Expr);
                self.visit_expr(&a.base);
            }
            Expr::Try(t) => {
                self.visit_expr(&t.expr);
                // `res?` leaves only when `res` failed: for that value it is the failure path.
                self.guards = self.guards.push(chain_root(&t.expr).into_iter().collect());
                self.marker(MarkerKind::Exit("?"), Span::of(&t.question_token));
                self.guards = self.guards.pop();
            }
            Expr::Return(r) => {
                if let Some(x) = &r.expr {
                    self.set_use(x, Use::Escape);
                    self.escape_if_name(x);
                    let returns = self.closure_depth == self.forwarded_depth;
                    if returns {
                        self.hand_back(x);
                        self.in_return += 1;
                    }
                    self.visit_expr(x);
                    if returns {
                        self.in_return -= 1;
                    }
                }
                self.marker(MarkerKind::Exit("return"), Span::of(&r.return_token));
            }
            Expr::Break(b) => {
                if let Some(x) = &b.expr {
                    self.set_use(x, Use::Escape);
                    if !self.break_binds(b, x) {
                        self.escape_if_name(x);
                    }
                    let returns = self.closure_depth == 0
                        && b.label.is_none()
                        && self.value_loop.is_some()
                        && self.loops.last() == self.value_loop.as_ref();
                    if returns {
                        self.hand_back(x);
                        self.in_return += 1;
                    }
                    self.visit_expr(x);
                    if returns {
                        self.in_return -= 1;
                    }
                }
                self.marker(MarkerKind::Exit("break"), Span::of(&b.break_token));
            }
            Expr::Continue(c) => {
                self.marker(MarkerKind::Exit("continue"), Span::of(&c.continue_token))
            }
            Expr::Call(c) => {
                if let Some(n) = name_of(&c.func)
                    && self.callables.contains(&n)
                {
                    self.marker(MarkerKind::Callback, Span::of(&*c.func));
                }
                self.visit_expr(&c.func);
                let mut only_borrows = false;
                if let Expr::Path(f) = &*c.func {
                    let path = self.resolve(&f.path);
                    only_borrows = borrows_only(&path);
                    let last = path.rsplit("::").next().unwrap_or(&path);
                    if last == "sleep" {
                        self.marker(MarkerKind::Sleep, Span::of(&*c.func));
                    } else if last == "drop"
                        && c.args.len() == 1
                        && let Some(n) = name_of(&c.args[0])
                    {
                        self.marker(MarkerKind::Drop(n), Span::of(e));
                    }
                    let shown = path.strip_prefix("crate::").unwrap_or(&path).to_string();
                    // Configured as long, or a function of the program that sleeps or loops
                    // over awaited calls (unless it is a lock call itself: a wrapper retrying
                    // an acquisition is the lock's event, not work).
                    let waits = self.cx.index.long_fn(&path)
                        && !self.cx.packs.functions.contains_key(&path);
                    if (self.cx.long_call)(&shown) || waits {
                        self.marker(MarkerKind::LongCall(shown), Span::of(&*c.func));
                    }
                }
                // `token = Some(lock)` into a deferred binding wraps the lock where it stays.
                let wraps_into_binding = self.deferred_region.is_some() && constructs(&c.func);
                self.call_args(e, c.args.iter(), only_borrows || wraps_into_binding);
                self.callables_handed(c.args.iter());
                for a in &c.args {
                    self.set_use(a, Use::Escape);
                    self.visit_expr(a);
                }
            }
            Expr::MethodCall(m) => {
                self.visit_expr(&m.receiver);
                let method = m.method.to_string();
                if method == "ttl" {
                    self.saw_ttl_check = true;
                }
                let owner = self.type_of(&m.receiver).map(|t| t.peeled().clone());
                // A described library's method uses what it is handed (a leader key into
                // `ResignOptions::with_leader`); the lock stays the caller's.
                let library_callee = owner
                    .as_ref()
                    .is_some_and(|t| self.cx.packs.is_library_type(&t.path));
                let own_long = !self.cx.packs.methods.contains_key(&method)
                    && owner
                        .as_ref()
                        .is_some_and(|o| self.cx.index.long_fn(&format!("{}::{method}", o.path)));
                let shown = owner.map_or(method.clone(), |o| {
                    format!("{}::{method}", o.last_segment())
                });
                if own_long || (self.cx.long_call)(&shown) || (self.cx.long_call)(&method) {
                    self.marker(MarkerKind::LongCall(shown), Span::of(&m.method));
                }
                self.call_args(e, m.args.iter(), library_callee);
                self.callables_handed(m.args.iter());
                for a in &m.args {
                    self.set_use(a, Use::Escape);
                    self.visit_expr(a);
                }
            }
            Expr::Await(a) if name_of(&a.base).is_some_and(|n| self.callables.contains(&n)) => {
                self.marker(MarkerKind::Callback, Span::of(&*a.base));
                self.visit_expr(&a.base);
            }
            Expr::Macro(m) => self.visit_macro_args(&m.mac),
            Expr::Assign(a) if name_of(&a.left).is_some_and(|n| self.deferred.contains_key(&n)) => {
                self.assign_deferred(a);
            }
            Expr::Assign(a) => {
                if let Some(n) = name_of(&a.left) {
                    let serial = self.next_serial();
                    if let Some(l) = self.scopes.iter_mut().rev().find_map(|s| s.get_mut(&n)) {
                        l.serial = serial;
                    }
                }
                self.visit_expr(&a.left);
                match (&*a.right, name_of(&a.left)) {
                    // `lock = match lock.renew().await { Ok(l) => l, Err(_) => None };`: read as
                    // the `let` it re-binds, whose value is checked before the work goes on.
                    (Expr::Match(_), Some(n)) => {
                        let pat: &'a Pat = self.arena.pats.alloc(Pat::Ident(syn::PatIdent {
                            attrs: Vec::new(),
                            by_ref: None,
                            mutability: None,
                            ident: syn::Ident::new(&n, proc_macro2::Span::call_site()),
                            subpat: None,
                        }));
                        self.set_use(
                            &a.right,
                            Use::Bind {
                                pat,
                                has_else: false,
                            },
                        );
                    }
                    _ => {
                        self.set_use(&a.right, Use::Escape);
                        self.escape_if_name(&a.right);
                    }
                }
                self.visit_expr(&a.right);
            }
            Expr::Struct(s) => {
                for f in &s.fields {
                    self.set_use(&f.expr, Use::Escape);
                    self.escape_if_name(&f.expr);
                    self.visit_expr(&f.expr);
                }
                if let Some(r) = &s.rest {
                    self.visit_expr(r);
                }
            }
            Expr::Tuple(t) => {
                for x in &t.elems {
                    self.set_use(x, Use::Escape);
                    self.escape_if_name(x);
                    self.visit_expr(x);
                }
            }
            Expr::Array(t) => {
                for x in &t.elems {
                    self.set_use(x, Use::Escape);
                    self.escape_if_name(x);
                    self.visit_expr(x);
                }
            }
            _ => syn::visit::visit_expr(self, e),
        }
        self.out.depth -= 1;
    }

    /// A site's lock names, with the pipeline that carries its command: running the pipeline is
    /// part of the acquisition, not work after it.
    fn names_with_pipeline(&self, names: &HashSet<String>, idx: usize) -> HashSet<String> {
        let mut out = names.clone();
        let at = region::start_of(self.out.sites[idx].span);
        if let Some(Some(local)) = self.pipe_locals.get(&at) {
            out.insert(local.clone());
        }
        out
    }

    /// For a wrapper around a lock command in a pipeline: how the pipeline reaches the caller.
    fn pipe_via(&self, flow: Option<&FnFlow>, idx: usize) -> Option<super::PipeVia> {
        let run = self
            .pipe_locals
            .get(&region::start_of(self.out.sites[idx].span))?;
        let returns_pipeline = self
            .ret
            .as_ref()
            .is_some_and(|t| t.peeled().last_segment() == "Pipeline");
        summary::pipe_via(flow?, run.as_deref(), &self.returned, returns_pipeline)
    }

    /// `name = value` for a `let name;` declared earlier: the value is bound to `name` as a `let`
    /// would bind it, in the declaring block's scope (the lock it holds is the one released later).
    fn assign_deferred(&mut self, a: &'a syn::ExprAssign) {
        self.visit_expr(&a.left);
        let Some(name) = name_of(&a.left) else { return };
        let Some(&(pat, after, end)) = self.deferred.get(&name) else {
            return;
        };
        let value_end = region::end_of(Span::of(&*a.right));
        let start = after
            .iter()
            .map(|s| region::end_of(Span::of(s)))
            .find(|&e| e >= value_end)
            .unwrap_or(self.stmt_end);
        self.set_use(
            &a.right,
            Use::Bind {
                pat,
                has_else: false,
            },
        );
        let saved = self.deferred_region.replace((value_end, start, end));
        self.visit_expr(&a.right);
        self.deferred_region = saved;
        let ty = self.type_of(&a.right);
        if let Some(local) = self.scopes.iter_mut().rev().find_map(|s| s.get_mut(&name)) {
            // Declared `None`, it is of the type it is given (`last = Some(Epoch::from_key(k)?)`).
            let none = local
                .init
                .is_some_and(|i| matches!(i, Expr::Path(p) if p.path.is_ident("None")));
            local.ty = if none && ty.is_some() {
                ty
            } else {
                local.ty.take().or(ty)
            };
            local.init = local.init.or(Some(&*a.right));
        }
        // `lock = l;` with `l` a lock bound inside a loop (`if let Some(l) = rl.lock(..)? { lock =
        // l; break; }`): the lock now lives in `lock`, to the end of the declaring block, and
        // leaving the inner loops does not leave it behind.
        // Held from the end of the statement that assigns it: the other arms and branches of
        // that statement (`None => return Ok(())`) are where the attempt failed.
        self.move_into_binding(&idents_in(&a.right), pat, &[name], Some(start), end);
    }

    /// The caller's work handed to a call (`tokio::spawn(func)`, `timeout(d, func)`,
    /// `select(func, tick)`) runs there: as much a callback as calling it.
    fn callables_handed<'e>(&mut self, args: impl Iterator<Item = &'e Expr>) {
        for a in args {
            if name_of(a).is_some_and(|n| self.callables.contains(&n)) {
                self.marker(MarkerKind::Callback, Span::of(a));
            }
        }
    }

    /// `break lock` out of `let held = loop { … }`: the lock now lives under the `let`'s names,
    /// to the end of the declaring block, and leaving the loop does not leave it behind (a retry
    /// loop around a try-lock). False when the break is not out of such a loop.
    fn break_binds(&mut self, b: &'a syn::ExprBreak, x: &'a Expr) -> bool {
        let target = match &b.label {
            None => self.loops.last().copied(),
            Some(_) => None,
        };
        let Some(&(_, pat, after, end)) =
            target.and_then(|t| self.let_loops.iter().rev().find(|(l, ..)| *l == t))
        else {
            return false;
        };
        let mut names = Vec::new();
        pattern_idents(pat, &mut names);
        // Held from the `let` on: the rest of the loop runs only when the try failed.
        self.move_into_binding(&idents_in(x), pat, &names, Some(after), end);
        true
    }

    /// A lock named in `mentioned` now lives under `names`, bound by `pat` in an outer block
    /// that ends at `end`: leaving the loops inside that block does not leave it behind. From
    /// `start`, when the region restarts there.
    fn move_into_binding(
        &mut self,
        mentioned: &HashSet<String>,
        pat: &Pat,
        names: &[String],
        start: Option<Pos>,
        end: Pos,
    ) {
        let declared = region::start_of(Span::of(pat));
        for (_, h) in &mut self.holdings {
            if h.names.iter().any(|n| mentioned.contains(n)) {
                h.names.extend(names.iter().cloned());
                if let Some(start) = start {
                    h.start = start;
                }
                h.scope_end = h.scope_end.max(end);
                h.loops.retain(|l| region::start_of(*l) < declared);
            }
        }
    }

    /// See `store_reads`: a local bound to a `GET` of a key, or unwrapped from one.
    fn note_store_read(&mut self, pat: &Pat, init: &Expr) {
        let key = store_read_key(init).or_else(|| {
            let n = name_of(init)?;
            self.store_reads.get(&n).cloned()
        });
        let mut names = Vec::new();
        pattern_idents(pat, &mut names);
        for n in names {
            match &key {
                Some(k) => {
                    self.store_reads.insert(n, k.clone());
                }
                None => {
                    self.store_reads.remove(&n);
                }
            }
        }
    }

    /// One level deeper into the tree; false (and the file marked) past [`MAX_WALK_DEPTH`].
    fn enter(&mut self) -> bool {
        if self.out.depth >= MAX_WALK_DEPTH {
            self.out.too_deep = true;
            return false;
        }
        self.out.depth += 1;
        true
    }

    /// A value moved by name (`consume(lock)`, `Holder { lock }`, `return lock`) escapes the region.
    fn escape_if_name(&mut self, e: &Expr) {
        if let Some(n) = name_of(e) {
            self.marker(MarkerKind::Escape(n), Span::of(e));
        }
    }

    /// Records what a call's arguments mention (token sinks), and moves by value.
    /// `only_borrows`: the callee is one of the standard library's readers (`borrows_only`).
    fn call_args<'e>(
        &mut self,
        call: &Expr,
        args: impl Iterator<Item = &'e Expr>,
        only_borrows: bool,
    ) {
        let mut names = Vec::new();
        let mut moved = Vec::new();
        for a in args {
            names.extend(idents_in(a));
            if let Some(n) = name_of(a).or_else(|| shared_clone_of(a)) {
                moved.push(n);
            }
        }
        let is_drop = matches!(call, Expr::Call(c) if matches!(&*c.func, Expr::Path(p) if p.path.is_ident("drop")));
        // Same span as the lock event this call may be, so that a release's own move is not an escape.
        let span = match call {
            Expr::MethodCall(m) => Span::of(&m.method),
            Expr::Call(c) => func_name_span(c),
            other => Span::of(other),
        };
        if !is_drop && !only_borrows {
            for n in moved {
                self.marker(MarkerKind::Escape(n), span);
            }
        }
        if !names.is_empty() {
            self.marker(MarkerKind::CallArgs(names), span);
        }
    }
}

/// Standard functions that read their argument and hand it back to no one: passing the lock's
/// key to one (`str::from_utf8(resp.key())?` between an etcd lock and its unlock) is no move.
fn borrows_only(path: &str) -> bool {
    let mut segs = path.rsplit("::");
    let (f, parent) = (segs.next().unwrap_or(""), segs.next().unwrap_or(""));
    matches!(
        (parent, f),
        ("str", "from_utf8" | "from_utf8_mut")
            | ("String", "from_utf8_lossy")
            | ("mem", "size_of_val" | "align_of_val")
    )
}

/// Does an arm body hand `name` on (`break name`, `return name`, or `name` as its value)?
fn hands_on(body: &Expr, name: &str) -> bool {
    match body {
        Expr::Break(b) => b
            .expr
            .as_deref()
            .and_then(name_of)
            .is_some_and(|n| n == name),
        Expr::Return(r) => r
            .expr
            .as_deref()
            .and_then(name_of)
            .is_some_and(|n| n == name),
        Expr::Block(b) => match b.block.stmts.last() {
            Some(Stmt::Expr(e, None)) => hands_on(e, name),
            Some(Stmt::Expr(e @ (Expr::Break(_) | Expr::Return(_)), Some(_))) => hands_on(e, name),
            _ => false,
        },
        other => name_of(other).is_some_and(|n| n == name),
    }
}

/// `name` or `name.clone()`-free plain path: the name of a local moved by value.
fn name_of(e: &Expr) -> Option<String> {
    match e {
        Expr::Path(p) if p.qself.is_none() => p
            .path
            .get_ident()
            .map(|i| i.to_string())
            .filter(|n| n.starts_with(|c: char| c.is_lowercase() || c == '_')),
        Expr::Paren(p) => name_of(&p.expr),
        _ => None,
    }
}

/// A shared handle of a local passed on (`tx.send(lock.clone())`, `spawn(Arc::clone(&lock))`):
/// another owner holds the lock from here, as if it were moved.
fn shared_clone_of(e: &Expr) -> Option<String> {
    match e {
        Expr::MethodCall(m) if m.method == "clone" && m.args.is_empty() => name_of(&m.receiver),
        Expr::Call(c)
            if c.args.len() == 1
                && matches!(&*c.func, Expr::Path(p) if p.path.segments.len() == 2
                    && matches!(p.path.segments[0].ident.to_string().as_str(), "Arc" | "Rc")
                    && p.path.segments[1].ident == "clone") =>
        {
            match &c.args[0] {
                Expr::Reference(r) => name_of(&r.expr),
                other => name_of(other),
            }
        }
        _ => None,
    }
}

/// The locals whose values an expression hands back (`Ok(Holder { lock })` -> `lock`), looking
/// through calls, structs and the tails of `if`/`match`/blocks, not into conditions or statements.
/// The expressions that are `e`'s value: `e` itself, or, through `if`, `match` and blocks, the
/// value of each branch. Loops are left out: their value is what they `break` with.
fn value_leaves(e: &Expr, out: &mut HashSet<*const Expr>, depth: usize) {
    // A loop's value is its `break`s', which this set does not track.
    each_value_leaf(e, depth, &mut |leaf| {
        if !matches!(leaf, Expr::Loop(_) | Expr::While(_) | Expr::ForLoop(_)) {
            out.insert(leaf as *const Expr);
        }
    });
}

/// The expressions a value can end as, looking through the `if`/`match` arms and blocks that
/// decide it (a branch ending in a statement gives nothing); loops are handed out as leaves.
fn each_value_leaf<'e>(e: &'e Expr, depth: usize, f: &mut dyn FnMut(&'e Expr)) {
    if depth > 64 {
        return;
    }
    let tail = |b: &'e syn::Block, f: &mut dyn FnMut(&'e Expr)| {
        if let Some(Stmt::Expr(x, None)) = b.stmts.last() {
            each_value_leaf(x, depth + 1, f);
        }
    };
    match e {
        Expr::If(i) => {
            tail(&i.then_branch, f);
            if let Some((_, els)) = &i.else_branch {
                each_value_leaf(els, depth + 1, f);
            }
        }
        Expr::Match(m) => m
            .arms
            .iter()
            .for_each(|a| each_value_leaf(&a.body, depth + 1, f)),
        Expr::Block(b) => tail(&b.block, f),
        Expr::Paren(p) => each_value_leaf(&p.expr, depth + 1, f),
        other => f(other),
    }
}

/// The names a `let` binds whose value holds the position `at` (`let (keeper, replies) =
/// client.lease_keep_alive(id).await?;` for the call's position).
fn bound_by(body: &syn::Block, at: Pos) -> HashSet<String> {
    struct Find {
        at: Pos,
        found: HashSet<String>,
    }
    impl<'ast> Visit<'ast> for Find {
        fn visit_local(&mut self, l: &'ast syn::Local) {
            if let Some(init) = &l.init {
                let span = Span::of(&*init.expr);
                if region::start_of(span) <= self.at && self.at <= region::end_of(span) {
                    summary::pat_names(&l.pat, &mut self.found);
                }
            }
            syn::visit::visit_local(self, l);
        }
        fn visit_item(&mut self, _: &'ast syn::Item) {}
    }
    let mut f = Find {
        at,
        found: HashSet::new(),
    };
    f.visit_block(body);
    f.found
}

/// Is `at` inside a loop that lies within `within` (a spawned task's rounds)?
fn looped_in(body: &syn::Block, at: Pos, within: (Pos, Pos)) -> bool {
    struct Loops {
        at: Pos,
        within: (Pos, Pos),
        found: bool,
    }
    impl<'ast> Visit<'ast> for Loops {
        fn visit_expr(&mut self, e: &'ast Expr) {
            if matches!(e, Expr::Loop(_) | Expr::While(_) | Expr::ForLoop(_)) {
                let s = Span::of(e);
                let (ls, le) = (region::start_of(s), region::end_of(s));
                self.found |=
                    self.within.0 <= ls && le <= self.within.1 && ls <= self.at && self.at <= le;
            }
            if !self.found {
                syn::visit::visit_expr(self, e);
            }
        }
    }
    let mut l = Loops {
        at,
        within,
        found: false,
    };
    l.visit_block(body);
    l.found
}

/// The local a spawned task's handle is bound to (`let renew_task = tokio::spawn(..);`), the
/// spawn at `at` being that `let`'s whole value.
fn spawn_bound(body: &syn::Block, at: (Pos, Pos)) -> Option<String> {
    struct Find {
        at: (Pos, Pos),
        found: Option<String>,
    }
    impl<'ast> Visit<'ast> for Find {
        fn visit_local(&mut self, l: &'ast syn::Local) {
            if let (syn::Pat::Ident(p), Some(init)) = (&l.pat, &l.init) {
                let span = Span::of(&*init.expr);
                if (region::start_of(span), region::end_of(span)) == self.at {
                    self.found = Some(p.ident.to_string());
                }
            }
            syn::visit::visit_local(self, l);
        }
        fn visit_item(&mut self, _: &'ast syn::Item) {}
    }
    let mut f = Find { at, found: None };
    f.visit_block(body);
    f.found
}

/// `tokio::spawn(..)`, `thread::spawn(..)`, `runtime.spawn(..)`, `set.spawn_local(..)`: starts
/// a task and returns.
fn spawns(e: &Expr) -> bool {
    let is_spawn = |i: &syn::Ident| i == "spawn" || i == "spawn_local";
    match e {
        Expr::Call(c) => {
            matches!(&*c.func, Expr::Path(p) if p.path.segments.last().is_some_and(|s| is_spawn(&s.ident)))
        }
        Expr::MethodCall(m) => is_spawn(&m.method),
        _ => false,
    }
}

/// The names read by a `get` whose answer the condition compares (`cache.get(key)? == Some(t)`,
/// `conn.get::<_, String>(&key)? != token`); `None` for any other condition.
fn compared_read(cond: &Expr) -> Option<HashSet<String>> {
    struct Gets(bool);
    impl<'ast> Visit<'ast> for Gets {
        fn visit_expr_method_call(&mut self, m: &'ast syn::ExprMethodCall) {
            self.0 |= m.method == "get";
            syn::visit::visit_expr_method_call(self, m);
        }
    }
    let reads_get = |e: &Expr| {
        let mut g = Gets(false);
        g.visit_expr(e);
        g.0
    };
    match cond {
        Expr::Binary(b) if matches!(b.op, syn::BinOp::Eq(_) | syn::BinOp::Ne(_)) => {
            [&*b.left, &*b.right]
                .into_iter()
                .find(|side| reads_get(side))
                .map(idents_in)
        }
        Expr::Binary(b) if matches!(b.op, syn::BinOp::And(_)) => {
            compared_read(&b.left).or_else(|| compared_read(&b.right))
        }
        Expr::Paren(p) => compared_read(&p.expr),
        _ => None,
    }
}

/// The key of a `GET` the expression reads (`conn.get(key).await?`, `redis::cmd("GET").arg(key)
/// .query_async(..).await?`), as written. Only a read that answers through `?` or `.await`
/// counts: a map's `get` (`self.tokens.get(&key)`, this process's own token) answers at once.
fn store_read_key(e: &Expr) -> Option<String> {
    fn key_of(e: &Expr, answered: bool) -> Option<String> {
        let text = |x: &Expr| {
            quote::ToTokens::to_token_stream(match x {
                Expr::Reference(r) => &*r.expr,
                other => other,
            })
            .to_string()
        };
        match e {
            Expr::Try(t) => key_of(&t.expr, true),
            Expr::Await(a) => key_of(&a.base, true),
            Expr::Paren(p) => key_of(&p.expr, answered),
            Expr::MethodCall(m) if m.method == "get" && m.args.len() == 1 => {
                answered.then(|| text(&m.args[0]))
            }
            Expr::MethodCall(m) if m.method == "arg" && m.args.len() == 1 => {
                // `cmd("GET").arg(key)`: the command's first argument.
                let Expr::Call(c) = &*m.receiver else {
                    return key_of(&m.receiver, answered);
                };
                let is_get = c.args.len() == 1
                    && matches!(&c.args[0], Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. }) if s.value().eq_ignore_ascii_case("GET"));
                (is_get && answered).then(|| text(&m.args[0]))
            }
            Expr::MethodCall(m) => key_of(&m.receiver, answered),
            _ => None,
        }
    }
    key_of(e, false)
}

/// A call, with what awaits, propagates or unwraps it: `x.lock_tail().await?`.
fn is_call_chain(e: &Expr) -> bool {
    match e {
        Expr::Call(_) | Expr::MethodCall(_) => true,
        Expr::Await(a) => is_call_chain(&a.base),
        Expr::Try(t) => is_call_chain(&t.expr),
        Expr::Paren(p) => is_call_chain(&p.expr),
        _ => false,
    }
}

/// Macros whose one argument is not the macro's value: the standard library's, logging and
/// tracing, assertions, and the collection and text builders.
const OPAQUE_MACROS: &[&str] = &[
    "format",
    "format_args",
    "print",
    "println",
    "eprint",
    "eprintln",
    "write",
    "writeln",
    "panic",
    "assert",
    "assert_eq",
    "assert_ne",
    "debug_assert",
    "debug_assert_eq",
    "debug_assert_ne",
    "todo",
    "unimplemented",
    "unreachable",
    "vec",
    "matches",
    "concat",
    "stringify",
    "env",
    "option_env",
    "include",
    "include_str",
    "include_bytes",
    "cfg",
    "compile_error",
    "file",
    "line",
    "column",
    "module_path",
    "trace",
    "debug",
    "info",
    "warn",
    "error",
    "event",
    "span",
    "trace_span",
    "debug_span",
    "info_span",
    "warn_span",
    "error_span",
    "log",
    "json",
    "anyhow",
    "bail",
    "ensure",
    "eyre",
    "select",
    "select_biased",
    "join",
    "try_join",
    "pin",
    "ready",
    "thread_local",
    "lazy_static",
    "hashmap",
    "btreemap",
];

/// A macro around one expression that (as the program's pass-through helpers do: logging an
/// error, timing a call) gives that expression's value: one not known to do otherwise.
fn passes_through(mac: &syn::Macro) -> bool {
    mac.path
        .segments
        .last()
        .is_some_and(|s| !OPAQUE_MACROS.contains(&s.ident.to_string().as_str()))
}

/// The local a condition tests as a plain "taken" flag: `locked`, `held.is_some()`,
/// `acquired.is_ok()`, `let Some(lock) = acquired`.
fn positive_flag(cond: &Expr) -> Option<String> {
    match cond {
        Expr::Path(p) => p.path.get_ident().map(|i| i.to_string()),
        Expr::Paren(p) => positive_flag(&p.expr),
        // `if let Some(lock) = acquired { … }`: the branch that unwrapped the lock.
        Expr::Let(l) if failure::is_success_pattern(&l.pat) => {
            local_named(super::summary::peel_key(&l.expr))
        }
        Expr::MethodCall(m)
            if m.args.is_empty() && (m.method == "is_some" || m.method == "is_ok") =>
        {
            match &*m.receiver {
                Expr::Path(p) => p.path.get_ident().map(|i| i.to_string()),
                _ => None,
            }
        }
        _ => None,
    }
}

/// Does a value test something (`lease.is_some()`, `a == b`, `matches!(r, Acquired)`)? Made
/// from a lock, such a value reports on it.
fn tests_a_value(e: &Expr) -> bool {
    struct Find(bool);
    impl<'ast> Visit<'ast> for Find {
        fn visit_expr_method_call(&mut self, m: &'ast syn::ExprMethodCall) {
            self.0 |= m.args.is_empty()
                && matches!(
                    m.method.to_string().as_str(),
                    "is_some" | "is_none" | "is_ok" | "is_err"
                );
            syn::visit::visit_expr_method_call(self, m);
        }
        fn visit_expr_binary(&mut self, b: &'ast syn::ExprBinary) {
            self.0 |= matches!(b.op, syn::BinOp::Eq(_) | syn::BinOp::Ne(_));
            syn::visit::visit_expr_binary(self, b);
        }
        fn visit_macro(&mut self, m: &'ast syn::Macro) {
            self.0 |= m.path.is_ident("matches");
        }
        fn visit_expr_closure(&mut self, _: &'ast syn::ExprClosure) {}
    }
    let mut f = Find(false);
    f.visit_expr(e);
    f.0
}

/// The flags a condition requires unset, of its `&&` parts: `!flag`, `!is_leader.load(..)`,
/// `lease.is_none()`, `flag == false`; each by its last name (`self.leader` is `leader`).
fn unset_flags(cond: &Expr, out: &mut Vec<String>) {
    fn name(e: &Expr) -> Option<String> {
        match e {
            // `flag.load(Ordering::Acquire)`, `leader.borrow()`: the flag read.
            Expr::MethodCall(m)
                if matches!(m.method.to_string().as_str(), "load" | "get" | "borrow") =>
            {
                name(&m.receiver)
            }
            other => super::failure::last_name(other),
        }
    }
    match cond {
        Expr::Paren(p) => unset_flags(&p.expr, out),
        Expr::Binary(b) if matches!(b.op, syn::BinOp::And(_)) => {
            unset_flags(&b.left, out);
            unset_flags(&b.right, out);
        }
        Expr::Unary(u) if matches!(u.op, syn::UnOp::Not(_)) => out.extend(name(&u.expr)),
        Expr::MethodCall(m) if m.args.is_empty() && m.method == "is_none" => {
            out.extend(name(&m.receiver))
        }
        Expr::Binary(b)
            if matches!(b.op, syn::BinOp::Eq(_))
                && matches!(&*b.right, Expr::Lit(syn::ExprLit { lit: syn::Lit::Bool(v), .. }) if !v.value) =>
        {
            out.extend(name(&b.left))
        }
        _ => {}
    }
}

/// A function walked for its clock readings though it takes no lock: one named for expiry
/// (`fn has_expired(renewed, ttl) -> bool`), or a yes/no helper named for the lock it decides
/// on (`fn can_acquire_lease(&self, lease: &Lease) -> bool`): whether a takeover may go ahead is
/// an expiry decision; or any method of a type named for a lock (`impl LockInfo { fn new(..)
/// { let expires_at = Utc::now() + ttl; .. } fn is_valid(&self) -> bool { .. } }`): the lock
/// handle's own times are the lock's. (`blank` keeps such functions by the same test.)
pub(crate) fn expiry_helper(name: &str, answers_bool: bool, owner: Option<&str>) -> bool {
    let own = name.to_ascii_lowercase();
    own.contains("expir")
        || answers_bool && clocks::says_lock(&own)
        || owner.is_some_and(clocks::says_lock)
}

/// The flags a condition tests set, all of which its `else` runs without: `flag`,
/// `leader.load(..)`, a getter named for the flag (`self.is_leader()`), `flag == true`, and
/// each of an `||` of them. An `&&` says nothing of its parts when it fails.
fn set_flags(cond: &Expr, out: &mut Vec<String>) {
    match cond {
        Expr::Paren(p) => set_flags(&p.expr, out),
        Expr::Binary(b) if matches!(b.op, syn::BinOp::Or(_)) => {
            set_flags(&b.left, out);
            set_flags(&b.right, out);
        }
        Expr::Binary(b)
            if matches!(b.op, syn::BinOp::Eq(_))
                && matches!(&*b.right, Expr::Lit(syn::ExprLit { lit: syn::Lit::Bool(v), .. }) if v.value) =>
        {
            set_flags(&b.left, out)
        }
        Expr::MethodCall(m)
            if m.args.len() <= 1
                && matches!(m.method.to_string().as_str(), "load" | "get" | "borrow") =>
        {
            out.extend(super::failure::last_name(&m.receiver))
        }
        Expr::MethodCall(m) if m.args.is_empty() => out.push(m.method.to_string()),
        Expr::Path(p) if p.path.get_ident().is_some() => {
            out.extend(super::failure::last_name(cond))
        }
        Expr::Field(_) => out.extend(super::failure::last_name(cond)),
        _ => {}
    }
}

/// Does a condition compare a holder or owner (`current_holder != me`, `!holder.eq(&id)`), or
/// ask a predicate of the program that does (`are_we_leading(&lease)`)?
pub(super) fn compares_holder(cond: &Expr) -> bool {
    let text = quote::ToTokens::to_token_stream(cond)
        .to_string()
        .to_ascii_lowercase();
    names_holder(&text)
        && ["==", "!=", ". eq (", ". ne ("]
            .iter()
            .any(|op| text.contains(op))
        // A predicate of the program asked of the object (`if !self.are_we_leading(&lease)?`).
        || ["leading (", "is_leader (", "is_holder (", "is_owner (", "is_ours ("]
            .iter()
            .any(|p| text.contains(p))
}

/// Is every use of the local `name` in the body a `name.message()` poll, some of them in a loop
/// (a keep-alive kept up round after round)? A stream passed on (to a call, a task, a field) may
/// be checked there; one polled once, right after the grant, answers for a lease just made.
/// For a transaction lock taken at `at`: the `tx.commit()`/`tx.rollback()` that ends the
/// transaction it ran on (`tx` named in the lock's statement) among the statements right after
/// it, with nothing awaited in between (checking the answer, logging, binding it are no work).
fn txn_ended_after(body: &syn::Block, at: Pos) -> Option<String> {
    /// The innermost block holding `at` in one of its statements, and that statement's index.
    struct Find<'a> {
        at: Pos,
        found: Option<(&'a syn::Block, usize)>,
    }
    impl<'a> Visit<'a> for Find<'a> {
        fn visit_block(&mut self, b: &'a syn::Block) {
            for (i, st) in b.stmts.iter().enumerate() {
                let span = Span::of(st);
                if region::start_of(span) <= self.at && self.at <= region::end_of(span) {
                    self.found = Some((b, i));
                    self.visit_stmt(st);
                }
            }
        }
    }
    let mut f = Find { at, found: None };
    f.visit_block(body);
    let (block, i) = f.found?;
    let named = value_idents_of_stmt(&block.stmts[i]);
    for st in &block.stmts[i + 1..] {
        if let Some(call) = ends_transaction(st)
            && named.contains(&call.0)
        {
            return Some(format!("{}.{}()", call.0, call.1));
        }
        if failure::stmt_awaits(st) {
            return None;
        }
    }
    None
}

/// `tx.commit().await?;`, `tx.rollback().await.ok();`: the transaction's name and the call.
fn ends_transaction(st: &Stmt) -> Option<(String, String)> {
    let mut e = match st {
        Stmt::Expr(e, _) => e,
        Stmt::Local(l) => &*l.init.as_ref()?.expr,
        _ => return None,
    };
    loop {
        e = match e {
            Expr::Await(a) => &a.base,
            Expr::Try(t) => &t.expr,
            Expr::MethodCall(m)
                if matches!(m.method.to_string().as_str(), "commit" | "rollback")
                    && m.args.is_empty() =>
            {
                let Expr::Path(p) = &*m.receiver else {
                    return None;
                };
                return Some((p.path.get_ident()?.to_string(), m.method.to_string()));
            }
            Expr::MethodCall(m) => &m.receiver,
            _ => return None,
        };
    }
}

/// The identifiers a statement names.
fn value_idents_of_stmt(st: &Stmt) -> HashSet<String> {
    let mut out = HashSet::new();
    token_idents(quote::ToTokens::to_token_stream(st), &mut out);
    out
}

/// How a statement ending a block leaves: `return`, `break` or `continue` (also as `return
/// Err(..);` and anyhow's `bail!`).
fn leaves(st: &Stmt) -> Option<&'static str> {
    match st {
        Stmt::Expr(Expr::Return(_), _) => Some("return"),
        Stmt::Expr(Expr::Break(_), _) => Some("break"),
        Stmt::Expr(Expr::Continue(_), _) => Some("continue"),
        Stmt::Macro(m) if m.mac.path.is_ident("bail") => Some("return"),
        Stmt::Expr(Expr::Macro(m), _) if m.mac.path.is_ident("bail") => Some("return"),
        _ => None,
    }
}

/// Every identifier in the tokens, at any depth.
pub(super) fn token_idents(ts: proc_macro2::TokenStream, out: &mut HashSet<String>) {
    for t in ts {
        match t {
            proc_macro2::TokenTree::Ident(i) => {
                out.insert(i.to_string());
            }
            proc_macro2::TokenTree::Group(g) => token_idents(g.stream(), out),
            _ => {}
        }
    }
}

/// The first `keeper.keep_alive()` after `after`: where the keeper sends a renewal.
fn keeper_send(body: &syn::Block, keeper: &str, after: Pos) -> Option<Span> {
    struct Find<'k> {
        keeper: &'k str,
        after: Pos,
        found: Option<Span>,
    }
    impl<'ast> Visit<'ast> for Find<'_> {
        fn visit_expr_method_call(&mut self, m: &'ast syn::ExprMethodCall) {
            let span = Span::of(&m.method);
            if self.found.is_none()
                && m.method == "keep_alive"
                && m.args.is_empty()
                && matches!(&*m.receiver, Expr::Path(p) if p.path.is_ident(self.keeper))
                && region::start_of(span) > self.after
            {
                self.found = Some(span);
            }
            syn::visit::visit_expr_method_call(self, m);
        }
        fn visit_macro(&mut self, m: &'ast syn::Macro) {
            // `select!` arms (`_ = tick => keeper.keep_alive().await?`) hold the send.
            if let Ok(SelectArms(arms)) = m.parse_body::<SelectArms>() {
                for a in &arms {
                    self.visit_expr(&a.handler);
                }
            }
        }
    }
    let mut f = Find {
        keeper,
        after,
        found: None,
    };
    f.visit_block(body);
    f.found
}

fn only_polled(body: &syn::Block, name: &str) -> bool {
    struct Uses<'n> {
        name: &'n str,
        polls: usize,
        looped: usize,
        other: usize,
        depth: usize,
    }
    impl<'ast> Visit<'ast> for Uses<'_> {
        fn visit_expr_method_call(&mut self, m: &'ast syn::ExprMethodCall) {
            if m.method == "message" && local_named(&m.receiver).as_deref() == Some(self.name) {
                self.polls += 1;
                self.looped += usize::from(self.depth > 0);
                for a in &m.args {
                    self.visit_expr(a);
                }
                return;
            }
            syn::visit::visit_expr_method_call(self, m);
        }
        fn visit_expr_loop(&mut self, l: &'ast syn::ExprLoop) {
            self.depth += 1;
            syn::visit::visit_expr_loop(self, l);
            self.depth -= 1;
        }
        fn visit_expr_while(&mut self, l: &'ast syn::ExprWhile) {
            self.depth += 1;
            syn::visit::visit_expr_while(self, l);
            self.depth -= 1;
        }
        fn visit_expr_path(&mut self, p: &'ast syn::ExprPath) {
            self.other += usize::from(p.path.is_ident(self.name));
        }
        fn visit_macro(&mut self, m: &'ast syn::Macro) {
            // `select!` arms and the like: their tokens name the stream as they poll it.
            let text = m.tokens.to_string();
            let polls = text.matches(&format!("{} . message ()", self.name)).count();
            let mentions = text
                .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .filter(|w| *w == self.name)
                .count();
            self.polls += polls;
            self.looped += if self.depth > 0 { polls } else { 0 };
            self.other += mentions.saturating_sub(polls);
        }
    }
    let mut u = Uses {
        name,
        polls: 0,
        looped: 0,
        other: 0,
        depth: 0,
    };
    u.visit_block(body);
    u.looped > 0 && u.other == 0
}

/// Does lower-cased code text speak of a lock's holder (`holder_identity`, `lock_owner`, a lease
/// row's `locked_by`)?
fn names_holder(text: &str) -> bool {
    [
        "holder",
        "owner",
        "locked_by",
        "leased_by",
        "claimed_by",
        "held_by",
    ]
    .iter()
    .any(|w| text.contains(w))
}

/// A condition that is one comparison of a holder or owner with something else and nothing more
/// (`spec.holder_identity.as_deref() != Some(me)`): `Some(true)` for equality, `Some(false)` for
/// inequality. A conjunction (`holder != me && !expired`) is no such test: its branch may run
/// for a lease that another holds and that ran out.
fn holder_test(cond: &Expr) -> Option<bool> {
    let says_holder = |e: &Expr| {
        names_holder(
            &quote::ToTokens::to_token_stream(e)
                .to_string()
                .to_ascii_lowercase(),
        )
    };
    match cond {
        Expr::Paren(p) => holder_test(&p.expr),
        Expr::Unary(u) if matches!(u.op, syn::UnOp::Not(_)) => holder_test(&u.expr).map(|t| !t),
        Expr::Binary(b) if says_holder(cond) => match b.op {
            syn::BinOp::Eq(_) => Some(true),
            syn::BinOp::Ne(_) => Some(false),
            _ => None,
        },
        Expr::MethodCall(m) if m.args.len() == 1 && says_holder(cond) => {
            match m.method.to_string().as_str() {
                "eq" => Some(true),
                "ne" => Some(false),
                _ => None,
            }
        }
        // A predicate of the program asked of the object read (`self.holds_lease(&lease)`,
        // `is_ours(&lock)`): named for this process holding it.
        Expr::MethodCall(m) if !m.args.is_empty() => {
            holder_predicate(&m.method.to_string()).then_some(true)
        }
        Expr::Call(c) if !c.args.is_empty() => match &*c.func {
            Expr::Path(p) => p
                .path
                .segments
                .last()
                .is_some_and(|s| holder_predicate(&s.ident.to_string()))
                .then_some(true),
            _ => None,
        },
        _ => None,
    }
}

/// A function named for this process holding what it is asked of: `holds_lease`, `owns_lock`,
/// `is_holder`, `is_ours`, `held_by_me`.
fn holder_predicate(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    n == "holds"
        || n == "owns"
        || n.starts_with("holds_")
        || n.starts_with("owns_")
        || n.starts_with("we_hold")
        || n.starts_with("we_own")
        || [
            "is_holder",
            "is_owner",
            "is_ours",
            "is_mine",
            "am_holder",
            "am_owner",
            "held_by_me",
            "owned_by_me",
            "is_held_by_me",
        ]
        .contains(&n.as_str())
}

/// Does the condition say a lease ran out (`Some(true)`: `claim.expires_at < now`, `now >
/// deadline`, `lease.is_expired()`) or that it still runs (`Some(false)`: `expires_at > now`,
/// `!lease.is_expired()`)? Anything else, conjunctions included, says neither.
fn expiry_test(cond: &Expr) -> Option<bool> {
    let says_expiry = |e: &Expr| {
        let t = quote::ToTokens::to_token_stream(e)
            .to_string()
            .to_ascii_lowercase();
        t.contains("expir") || t.contains("deadline") || t.contains("until")
    };
    match cond {
        Expr::Paren(p) => expiry_test(&p.expr),
        Expr::Unary(u) if matches!(u.op, syn::UnOp::Not(_)) => expiry_test(&u.expr).map(|b| !b),
        Expr::Binary(b) => {
            let (l, r) = (says_expiry(&b.left), says_expiry(&b.right));
            if l == r {
                return None;
            }
            // The expiry on the left: `expires_at < now` is run out; on the right, `now >
            // expires_at` is.
            match b.op {
                syn::BinOp::Lt(_) | syn::BinOp::Le(_) => Some(l),
                syn::BinOp::Gt(_) | syn::BinOp::Ge(_) => Some(r),
                _ => None,
            }
        }
        Expr::MethodCall(m) if m.args.is_empty() || m.args.len() == 1 => {
            names_expiry(&m.method).then_some(true)
        }
        Expr::Call(c) => match &*c.func {
            Expr::Path(p) => p
                .path
                .segments
                .last()
                .and_then(|s| names_expiry(&s.ident).then_some(true)),
            _ => None,
        },
        _ => None,
    }
}

/// `is_expired`, `expired`, `has_expired`: a predicate named for a lease having run out.
fn names_expiry(name: &syn::Ident) -> bool {
    matches!(
        name.to_string().as_str(),
        "is_expired" | "expired" | "has_expired"
    )
}

/// The function body's last statement, when it is a `loop` that no `break` leaves (nested
/// loops' own breaks aside): the function never returns normally.
fn endless_tail(body: &syn::Block) -> Option<&syn::ExprLoop> {
    let Some(Stmt::Expr(Expr::Loop(l), _)) = body.stmts.last() else {
        return None;
    };
    (!loop_exits(l).leaves).then_some(l)
}

/// Does the block tell a parameter of the function how things went (`leader_tx.send(led)`,
/// `flag.store(true, ..)`): a channel or flag the caller holds?
fn publishes(block: &syn::Block, params: &HashSet<String>) -> bool {
    struct Sends<'p> {
        params: &'p HashSet<String>,
        found: bool,
    }
    impl<'ast> Visit<'ast> for Sends<'_> {
        fn visit_expr_method_call(&mut self, m: &'ast syn::ExprMethodCall) {
            let name = m.method.to_string();
            let publishing = super::failure::publishing(&name) || name == "set";
            self.found |=
                publishing && chain_root(&m.receiver).is_some_and(|r| self.params.contains(&r));
            syn::visit::visit_expr_method_call(self, m);
        }
    }
    let mut v = Sends {
        params,
        found: false,
    };
    v.visit_block(block);
    v.found
}

/// The conjuncts of a let-chain (`a && let P = x && b`), left to right; `None` without a `let`.
fn let_chain(cond: &Expr) -> Option<Vec<&Expr>> {
    fn flatten<'e>(e: &'e Expr, out: &mut Vec<&'e Expr>) {
        match e {
            Expr::Binary(b) if matches!(b.op, syn::BinOp::And(_)) => {
                flatten(&b.left, out);
                flatten(&b.right, out);
            }
            other => out.push(other),
        }
    }
    let mut parts = Vec::new();
    flatten(cond, &mut parts);
    parts
        .iter()
        .any(|p| matches!(p, Expr::Let(_)))
        .then_some(parts)
}

impl Walker<'_, '_> {
    /// A condition that is a local (`ours`, `!ours`), as the test its initialiser makes
    /// (`holder == me`, `!(holder == me)`); `None` for any other condition.
    fn named_condition(&self, cond: &Expr) -> Option<Expr> {
        let (negated, inner) = match cond {
            Expr::Unary(u) if matches!(u.op, syn::UnOp::Not(_)) => (true, &*u.expr),
            other => (false, other),
        };
        let init = self.local_init(&local_named(inner)?)?;
        let init: Expr = syn::parse_quote!((#init));
        Some(if negated {
            syn::parse_quote!(!#init)
        } else {
            init
        })
    }

    /// `diesel::select(expr)`: a statement selecting one expression.
    fn is_dsl_select(&self, c: &syn::ExprCall) -> bool {
        c.args.len() == 1
            && matches!(&*c.func, Expr::Path(p)
                if p.path.segments.last().is_some_and(|s| s.ident == "select")
                    && matches!(self.resolve(&p.path).as_str(), "diesel::select" | "diesel::dsl::select"))
    }
}

/// `tokio::time::timeout(d, fut)`, `async_std::future::timeout(d, fut)`: a future bounded in
/// time, whose output is the inner future's in a `Result`.
pub(super) fn is_timeout_call(c: &syn::ExprCall) -> bool {
    c.args.len() == 2
        && matches!(&*c.func, Expr::Path(p) if p.path.segments.last().is_some_and(|s| s.ident == "timeout"))
}

/// Is a called path a constructor: a tuple struct or variant (`Ok`, `Holder`), or a `new`,
/// `from`, `pin` or `into` function?
fn constructs(func: &Expr) -> bool {
    let Expr::Path(p) = func else {
        return false;
    };
    p.path.segments.last().is_some_and(|s| {
        let name = s.ident.to_string();
        name.starts_with(|c: char| c.is_ascii_uppercase())
            || matches!(
                name.as_str(),
                "new" | "from" | "pin" | "into" | "with_capacity"
            )
            || name.starts_with("new_")
    })
}

/// The closure whose value an initialiser takes: the closure argument of the call at its root,
/// through `?`, `.await` and error conversions (`self.with_conn(|c| cmd.query(c))?`,
/// `spawn_blocking(move || …).await??`). One closure argument only: with two, which one's
/// value comes back is the callee's choice.
fn valued_closure(e: &Expr) -> Option<&Expr> {
    match e {
        Expr::Try(t) => valued_closure(&t.expr),
        Expr::Await(a) => valued_closure(&a.base),
        Expr::Paren(p) => valued_closure(&p.expr),
        Expr::MethodCall(m)
            if matches!(
                m.method.to_string().as_str(),
                "map_err" | "context" | "with_context" | "wrap_err" | "wrap_err_with"
            ) =>
        {
            valued_closure(&m.receiver)
        }
        Expr::Call(_) | Expr::MethodCall(_) => {
            let mut closures = closure_args(e);
            let first = closures.next();
            first.filter(|_| closures.next().is_none())
        }
        _ => None,
    }
}

/// The closures and `async` blocks a call or method call is handed (see `closure_value`).
fn closure_args(e: &Expr) -> impl Iterator<Item = &Expr> {
    let args = match e {
        Expr::Call(c) => Some(&c.args),
        Expr::MethodCall(m) => Some(&m.args),
        _ => None,
    };
    args.into_iter().flatten().filter_map(closure_value)
}

/// What a closure or an `async` block evaluates to: the closure's body, the block's tail.
fn deferred_tail(e: &Expr) -> Option<&Expr> {
    match e {
        Expr::Closure(c) => Some(&c.body),
        Expr::Async(a) => match a.block.stmts.last() {
            Some(Stmt::Expr(x, None)) => Some(x),
            _ => None,
        },
        _ => None,
    }
}

/// The closure (or `async` block) an argument is: itself, or the tail of a block that prepares its captures
/// (`{ let key = key.to_string(); move || … }`).
fn closure_value(e: &Expr) -> Option<&Expr> {
    match e {
        Expr::Closure(_) | Expr::Async(_) => Some(e),
        Expr::Paren(p) => closure_value(&p.expr),
        Expr::Block(b) => match b.block.stmts.last() {
            Some(Stmt::Expr(x, None)) => closure_value(x),
            _ => None,
        },
        _ => None,
    }
}

/// The acquisition's guard given up on the way out: `.leak()` (sqlx's advisory lock guard hands
/// its connection back and queues no unlock).
fn leaks(outward: &[&Expr]) -> bool {
    outward
        .iter()
        .any(|e| matches!(e, Expr::MethodCall(m) if m.method == "leak" && m.args.is_empty()))
}

/// `-> Result<Self::Guard, E>`: the trait's associated type named for a lock (the impl may make
/// it `Box<dyn Send>`), so what goes back is the lock's handle.
fn returns_assoc_lock(output: &syn::ReturnType) -> bool {
    struct Find(bool);
    impl<'a> Visit<'a> for Find {
        fn visit_type_path(&mut self, p: &'a syn::TypePath) {
            let segs = &p.path.segments;
            if p.qself.is_none() && segs.len() == 2 && segs[0].ident == "Self" {
                let name = format!("crate::{}", segs[1].ident);
                self.0 |= summary::lock_named_own_type(&Ty::simple(name));
            }
            syn::visit::visit_type_path(self, p);
        }
    }
    let mut f = Find(false);
    f.visit_return_type(output);
    f.0
}

/// Does the success arm of a `match` bound by a `let` use the lock it binds and give back
/// something else (`Ok(rl) => { work; unlock(&rl); code }`)? Then the lock lives in the arm.
fn arm_keeps_lock(arms: &[syn::Arm]) -> bool {
    let Some(arm) = arms.iter().find(|a| failure::is_success_pattern(&a.pat)) else {
        return false;
    };
    let mut names = Vec::new();
    pattern_idents(&arm.pat, &mut names);
    names.retain(|n| !n.starts_with('_'));
    if names.is_empty() {
        return false;
    }
    let value = match &*arm.body {
        Expr::Block(b) => match b.block.stmts.last() {
            Some(Stmt::Expr(x, None)) => x,
            _ => return false,
        },
        other => other,
    };
    let out = returned_names(value);
    let used = idents_in(&arm.body);
    names.iter().all(|n| !out.contains(n) && used.contains(n))
        && !matches!(&*arm.body, Expr::Path(_))
}

fn returned_names(e: &Expr) -> HashSet<String> {
    let mut out = HashSet::new();
    let tail = |b: &syn::Block| match b.stmts.last() {
        Some(Stmt::Expr(x, None)) => returned_names(x),
        _ => HashSet::new(),
    };
    match e {
        Expr::Path(_) => out.extend(name_of(e)),
        // A constructor hands its arguments back (`Ok(lock)`, `Some(Holder(lock))`,
        // `Box::new(lock)`); a function of the program takes them (`publish(&key)`).
        Expr::Call(c) if constructs(&c.func) => {
            c.args.iter().for_each(|a| out.extend(returned_names(a)))
        }
        // What a field's method answers is not the field's owner (`q.zk.delete(..)`), and a
        // call that ends its receiver answers only how that went (`lock_tx.commit().await`).
        Expr::MethodCall(m)
            if !matches!(&*m.receiver, Expr::Field(_))
                && !matches!(
                    m.method.to_string().as_str(),
                    "commit" | "rollback" | "close" | "unlock" | "release" | "execute"
                ) =>
        {
            out.extend(returned_names(&m.receiver))
        }
        Expr::Struct(s) => s
            .fields
            .iter()
            .for_each(|f| out.extend(returned_names(&f.expr))),
        Expr::Tuple(t) => t.elems.iter().for_each(|x| out.extend(returned_names(x))),
        Expr::Array(t) => t.elems.iter().for_each(|x| out.extend(returned_names(x))),
        Expr::Paren(p) => out.extend(returned_names(&p.expr)),
        // `lock as Box<dyn Send>`: the same value, under a trait object.
        Expr::Cast(c) => out.extend(returned_names(&c.expr)),
        // A report made from the reply (`resp == SetnxReply::KeySet`, `!taken`).
        Expr::Binary(b) => {
            out.extend(returned_names(&b.left));
            out.extend(returned_names(&b.right));
        }
        Expr::Unary(u) => out.extend(returned_names(&u.expr)),
        // A report read off the result (`Ok(result.acquired_lease)`,
        // `Ok(matches!(result, LeaseLockResult::Acquired(_)))`).
        Expr::Field(f) => out.extend(returned_names(&f.base)),
        Expr::Macro(m) if m.mac.path.is_ident("matches") => {
            let scrutinee = m.mac.parse_body_with(|input: syn::parse::ParseStream| {
                let e: Expr = input.parse()?;
                input.parse::<proc_macro2::TokenStream>()?;
                Ok(e)
            });
            if let Ok(x) = scrutinee {
                out.extend(returned_names(&x));
            }
        }
        Expr::Reference(r) => out.extend(returned_names(&r.expr)),
        Expr::Await(a) => out.extend(returned_names(&a.base)),
        Expr::Try(t) => out.extend(returned_names(&t.expr)),
        Expr::Block(b) => out.extend(tail(&b.block)),
        Expr::If(i) => {
            out.extend(tail(&i.then_branch));
            if let Some((_, els)) = &i.else_branch {
                out.extend(returned_names(els));
            }
        }
        Expr::Match(m) => m
            .arms
            .iter()
            .for_each(|a| out.extend(returned_names(&a.body))),
        _ => {}
    }
    out
}

/// `Fn`, `FnOnce`, `FnMut`, `Future` and their async and boxed forms.
fn is_callable(trait_name: &str) -> bool {
    matches!(
        trait_name,
        "Fn" | "FnOnce"
            | "FnMut"
            | "Future"
            | "IntoFuture"
            | "AsyncFn"
            | "AsyncFnOnce"
            | "AsyncFnMut"
    )
}

/// The span matchers give a function call: its last path segment.
fn func_name_span(c: &syn::ExprCall) -> Span {
    match &*c.func {
        Expr::Path(p) => p
            .path
            .segments
            .last()
            .map_or_else(|| Span::of(&p.path), |s| Span::of(&s.ident)),
        other => Span::of(other),
    }
}

/// The local at the root of a method chain (`res` in `res.context("…")`), if any.
fn chain_root(e: &Expr) -> Option<String> {
    match e {
        Expr::MethodCall(m) => chain_root(&m.receiver),
        Expr::Await(a) => chain_root(&a.base),
        Expr::Paren(p) => chain_root(&p.expr),
        Expr::Reference(r) => chain_root(&r.expr),
        other => name_of(other),
    }
}

/// Every identifier used as a path in an expression (locals it reads).
/// The local an expression names through references and derefs: `conn`, `&mut conn`,
/// `&mut *conn`, `&mut **conn`, `conn.as_mut()` (an executor, the target of a `write!`).
pub(super) fn local_named(e: &Expr) -> Option<String> {
    match e {
        Expr::Path(p) => p.path.get_ident().map(|i| i.to_string()),
        Expr::Reference(r) => local_named(&r.expr),
        Expr::Paren(p) => local_named(&p.expr),
        Expr::Unary(u) if matches!(u.op, syn::UnOp::Deref(_)) => local_named(&u.expr),
        Expr::MethodCall(m)
            if m.args.is_empty()
                && matches!(
                    m.method.to_string().as_str(),
                    "as_mut" | "deref_mut" | "as_ref" | "deref"
                ) =>
        {
            local_named(&m.receiver)
        }
        _ => None,
    }
}

/// The names a format string captures inline: `"{sequence}"`, `"{id:>4}"` (not `{0}`, `{}`,
/// `{{`).
fn format_captures(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find('{') {
        rest = &rest[i + 1..];
        if let Some(r) = rest.strip_prefix('{') {
            rest = r;
            continue;
        }
        let end = rest.find(['}', ':']).unwrap_or(rest.len());
        let name = &rest[..end];
        if name.starts_with(|c: char| c.is_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_alphanumeric() || c == '_')
        {
            out.push(name.to_string());
        }
        rest = &rest[end..];
    }
    out
}

/// What a value made from `e` can carry: for a `loop`, only what its `break`s hand out (the
/// body's other names are not in the value: `let v = loop { renew(&lock); … break out; }`).
fn value_idents(e: &Expr) -> HashSet<String> {
    match e {
        Expr::Loop(l) => loop_exits(l).values,
        // A spawned task's handle carries what the task ends with, not what it used on the
        // way (`let handle = spawn(async move { lease = take(..); … })` is no lock).
        Expr::Call(_) | Expr::MethodCall(_) if spawns(e) => {
            let args: Vec<&Expr> = match e {
                Expr::Call(c) => c.args.iter().collect(),
                Expr::MethodCall(m) => m.args.iter().collect(),
                _ => Vec::new(),
            };
            args.into_iter()
                .flat_map(|a| match closure_value(a) {
                    Some(task) => deferred_tail(task).map(ends_with).unwrap_or_default(),
                    None => idents_in(a),
                })
                .collect()
        }
        // `let code = match lock().await { Ok(l) => { ..; unlock(&l); code } .. }`: the value
        // is what the arms end with, not the lock they used.
        Expr::Match(m) if arm_keeps_lock(&m.arms) => ends_with(e),
        // …also when that `match` ends a branch of an `if`.
        Expr::If(i)
            if matches!(i.then_branch.stmts.last(),
                Some(Stmt::Expr(Expr::Match(m), None)) if arm_keeps_lock(&m.arms)) =>
        {
            ends_with(e)
        }
        other => idents_in(other),
    }
}

/// The names an expression's value can be made of, looking through the branches that decide
/// it: an `if` or `match` whose blocks end in statements is `()`, whatever they used.
fn ends_with(e: &Expr) -> HashSet<String> {
    let mut out = HashSet::new();
    each_value_leaf(e, 0, &mut |leaf| match leaf {
        Expr::Unsafe(b) => {
            if let Some(Stmt::Expr(x, None)) = b.block.stmts.last() {
                out.extend(ends_with(x));
            }
        }
        Expr::Loop(l) => out.extend(loop_exits(l).values),
        Expr::While(_) | Expr::ForLoop(_) => {}
        other => out.extend(idents_in(other)),
    });
    out
}

/// The `break`s that leave a `loop` (unlabelled at its own level, or labelled), not counting
/// nested loops' own breaks, closures or items.
struct LoopExits {
    /// Some `break` leaves it.
    leaves: bool,
    /// The names the leaving `break`s hand out as the loop's value.
    values: HashSet<String>,
}

fn loop_exits(l: &syn::ExprLoop) -> LoopExits {
    struct Breaks {
        depth: usize,
        exits: LoopExits,
    }
    impl<'ast> Visit<'ast> for Breaks {
        fn visit_expr_break(&mut self, b: &'ast syn::ExprBreak) {
            if self.depth == 0 || b.label.is_some() {
                self.exits.leaves = true;
                if let Some(x) = &b.expr {
                    self.exits.values.extend(idents_in(x));
                }
            }
        }
        fn visit_expr_loop(&mut self, l: &'ast syn::ExprLoop) {
            self.depth += 1;
            syn::visit::visit_expr_loop(self, l);
            self.depth -= 1;
        }
        fn visit_expr_while(&mut self, l: &'ast syn::ExprWhile) {
            self.depth += 1;
            syn::visit::visit_expr_while(self, l);
            self.depth -= 1;
        }
        fn visit_expr_for_loop(&mut self, l: &'ast syn::ExprForLoop) {
            self.depth += 1;
            syn::visit::visit_expr_for_loop(self, l);
            self.depth -= 1;
        }
        fn visit_expr_closure(&mut self, _: &'ast syn::ExprClosure) {}
        fn visit_expr_async(&mut self, _: &'ast syn::ExprAsync) {}
        fn visit_item(&mut self, _: &'ast syn::Item) {}
    }
    let mut b = Breaks {
        depth: 0,
        exits: LoopExits {
            leaves: false,
            values: HashSet::new(),
        },
    };
    b.visit_block(&l.body);
    b.exits
}

pub(super) fn idents_in(e: &Expr) -> HashSet<String> {
    struct Ids(HashSet<String>);
    impl<'ast> Visit<'ast> for Ids {
        fn visit_expr_path(&mut self, p: &'ast syn::ExprPath) {
            if let Some(id) = p.path.get_ident() {
                self.0.insert(id.to_string());
            }
        }
        fn visit_macro(&mut self, m: &'ast syn::Macro) {
            token_idents(m.tokens.clone(), &mut self.0);
        }
    }
    let mut ids = Ids(HashSet::new());
    ids.visit_expr(e);
    ids.0
}

fn peel_pat(p: &Pat) -> &Pat {
    match p {
        Pat::Type(t) => peel_pat(&t.pat),
        Pat::Paren(x) => peel_pat(&x.pat),
        Pat::Reference(r) => peel_pat(&r.pat),
        other => other,
    }
}

fn single_name(p: &Pat) -> Option<String> {
    match peel_pat(p) {
        Pat::Ident(i) => Some(i.ident.to_string()),
        _ => None,
    }
}

fn pattern_idents(p: &Pat, out: &mut Vec<String>) {
    struct Names<'o>(&'o mut Vec<String>);
    impl<'ast> Visit<'ast> for Names<'_> {
        fn visit_pat_ident(&mut self, pi: &'ast syn::PatIdent) {
            self.0.push(pi.ident.to_string());
            syn::visit::visit_pat_ident(self, pi);
        }
    }
    Names(out).visit_pat(p);
}

/// The variant an arm's pattern names (`Call::Lock`, `Mode::Try(_)`, `Op::Put { .. }`): its
/// last segment, when it is written as a path.
fn variant_of(pat: &Pat) -> Option<String> {
    let path = match pat {
        Pat::Path(p) => &p.path,
        Pat::TupleStruct(t) => &t.path,
        Pat::Struct(s) => &s.path,
        Pat::Reference(r) => return variant_of(&r.pat),
        _ => return None,
    };
    (path.segments.len() > 1).then(|| path.segments.last().map(|s| s.ident.to_string()))?
}

/// The arguments a call of a function with this signature passes, the receiver aside.
fn arity(sig: &syn::Signature) -> usize {
    sig.inputs
        .iter()
        .filter(|i| matches!(i, syn::FnArg::Typed(_)))
        .count()
}

#[cfg(test)]
mod tests {
    use super::format_captures;

    #[test]
    fn format_strings_capture_names_inline() {
        assert_eq!(
            format_captures("{prefix}{sequence:010}"),
            ["prefix", "sequence"]
        );
        assert_eq!(format_captures("{{literal}} {} {0} {id:>4}"), ["id"]);
        assert!(format_captures("no braces").is_empty());
        assert!(format_captures("{unclosed").len() <= 1);
    }
}
