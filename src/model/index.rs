//! The crate index: structs and their field types, type aliases, function return types and
//! constants of every analysed file, so that `self.field`, `helper()` and `TTL` resolve across files.
//!
//! Built in two steps because syn trees are not `Send`: each worker extracts a [`FileIndex`] (plain
//! data) while it has the tree, and the run merges them into one [`CrateIndex`] per crate root.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use syn::Expr;

use super::imports::Imports;
use super::ty::Ty;

/// What one file contributes to its crate's index.
#[derive(Debug, Default, Clone)]
pub struct FileIndex {
    pub structs: Vec<(String, Vec<(String, Ty)>)>,
    /// Alias path -> its generic type parameters and what it stands for.
    pub aliases: Vec<(String, Vec<String>, Ty)>,
    /// Function or method path -> declared return type.
    pub fns: Vec<(String, Ty)>,
    /// Constant or static path -> (initialiser source, defining module).
    pub consts: Vec<(String, String, String)>,
    /// Functions that return `Self` resolve to their impl type; recorded as such in `fns`.
    pub modules: Vec<String>,
    /// Paths that `use` items make through a module -> their canonical paths.
    pub reexports: Vec<(String, String)>,
    /// Modules with glob imports -> the globbed prefixes.
    pub glob_reexports: Vec<(String, String)>,
    /// The public ones (`pub use etcd_client::*`).
    pub pub_globs: Vec<(String, String)>,
    /// `impl Trait for Type`: (trait path, type path, the methods the block defines).
    pub impls: Vec<(String, String, Vec<String>)>,
    /// Of those, the ones compiled for tests alone (`#[cfg(test)]`, in a `#[cfg(test)]` module):
    /// (trait path, type path). A test double is no implementation the program runs.
    pub test_impls: Vec<(String, String)>,
    /// Constants and statics with their declared types (`static LOCKS: LazyLock<Manager>`).
    pub const_types: Vec<(String, Ty)>,
    /// Traits declared here.
    pub traits: Vec<String>,
    /// `trait Sub: Super`: (sub, super), each a path as written here.
    pub supertraits: Vec<(String, String)>,
    /// Redis Functions registered by Lua libraries whose text is in this file (a string or an
    /// `include_str!`): name -> what it does to a key, and whether it compares with an argument.
    pub lua_functions: Vec<(String, super::lua::Effect, bool)>,
    /// Enum variants with fields, keyed `<enum path>::<Variant>` like a struct (tuple fields are
    /// named `0`, `1`, …): a pattern `Store::Redis(s)` binds `s` to the variant's field type.
    pub variants: Vec<(String, Vec<(String, Ty)>)>,
    /// Every variant's path, fields or not (`crate::a::Action::Hold`).
    pub variant_names: Vec<String>,
    /// `impl Deref for Type { type Target = T; }`: (type path, target).
    pub derefs: Vec<(String, Ty)>,
    /// Functions that build and hand back a Redis command (see [`CmdBuilder`]).
    pub cmd_builders: Vec<CmdBuilder>,
    /// Functions and methods that answer a text built by their tail (`fn kv_url(&self) ->
    /// String { format!("{addr}/v1/kv/{}", self.key) }`): path -> the tail's source. A URL
    /// built by such a helper keeps its fixed parts.
    pub text_fns: Vec<(String, String)>,
    /// SQL functions declared for a query builder (diesel's `sql_function!`,
    /// `define_sql_function!`, `#[declare_sql_function] extern "SQL" { … }`): Rust path -> the
    /// SQL function's name (the fn's own, or its `#[sql_name = "…"]`). A call of one is that SQL
    /// function run wherever the statement holding it runs.
    pub sql_fns: Vec<(String, String)>,
    /// Functions and methods whose tail reads the wall clock (`fn now_ms() -> u64 {
    /// SystemTime::now().duration_since(UNIX_EPOCH)…as_millis() as u64 }`): calling one is a
    /// wall-clock read where the caller uses it.
    pub clock_fns: Vec<String>,
    /// Functions and methods whose tail (or a branch's) calls other functions of the program
    /// without arguments (`fn now_ms() -> u64 { if cached == 0 { actual_now_ms() } else {
    /// cached } }`): path -> the simple names called. One calling a clock function of the same
    /// file is one too (settled when the file's pieces are merged).
    pub clock_calls: Vec<(String, Vec<String>)>,
    /// Functions and methods that wait or repeat I/O (a sleep, or a loop whose body awaits):
    /// a call to one is long work under a lock its caller holds.
    pub long_fns: Vec<String>,
    /// Free functions whose whole body is one call (`fn put_with_lease(k, v, id) -> TxnOp {
    /// TxnOp::put(k, v, Some(PutOptions::new().with_lease(id))) }`): path -> parameter names
    /// and the call's source, read in place of a call to them where a pack looks for calls.
    pub call_fns: Vec<(String, Vec<String>, String)>,
    /// Free functions and what they do with their parameters for an expiry decision (see
    /// [`DeadlineFn`]); the crate index closes them over calls within each module.
    pub deadline_fns: Vec<DeadlineFn>,
    /// Methods of `impl Trait for Type` blocks and their returns, as `fns`; an inherent method
    /// of the same name wins.
    pub trait_fns: Vec<(String, Ty)>,
}

/// A function of the crate that builds a command and hands it back unrun: `fn acquire_cmd(key:
/// &str, ms: u64) -> redis::Cmd { let mut c = redis::cmd("SET"); c.arg(key).arg("NX").arg("PX")
/// .arg(ms); c }`. Its call runs wherever the command is run, with the caller's arguments in place
/// of the parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct CmdBuilder {
    pub path: String,
    pub params: Vec<String>,
    /// The builder function it starts from, resolved (`redis::cmd`).
    pub builder: String,
    /// The command's name, as written (`SET`).
    pub name: String,
    /// Each `.arg(..)`'s source text, in order.
    pub args: Vec<String>,
}

/// A query builder's SQL function declaration: its Rust path and the SQL name it calls.
fn sql_fn_decl(module: &str, f: &syn::ForeignItemFn) -> (String, String) {
    let sql_name = f.attrs.iter().find_map(|a| match &a.meta {
        syn::Meta::NameValue(nv) if nv.path.is_ident("sql_name") => match &nv.value {
            Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    });
    (
        format!("{module}::{}", f.sig.ident),
        sql_name.unwrap_or_else(|| f.sig.ident.to_string()),
    )
}

/// A function answering text (`String`, `&str`, `Cow<str>`) whose tail builds it (`format!`,
/// `+`), or picks one of several literals (`match self { Pg => "UPDATE …", My => "UPDATE …" }`,
/// a dialect's SQL): its path and the tail's source. A bare literal counts only beside a choice
/// or a build: `fn name(&self) -> &str { "redis" }` is a label, not a text anyone runs.
fn text_tail(path: &str, sig: &syn::Signature, body: &syn::Block) -> Option<(String, String)> {
    let syn::ReturnType::Type(_, ret) = &sig.output else {
        return None;
    };
    let texty = match &**ret {
        syn::Type::Path(rp) => {
            let last = rp.path.segments.last()?;
            last.ident == "String"
                || last.ident == "Cow"
                    && matches!(&last.arguments, syn::PathArguments::AngleBracketed(a)
                        if a.args.iter().any(|g| matches!(g, syn::GenericArgument::Type(syn::Type::Path(t)) if t.path.is_ident("str"))))
        }
        syn::Type::Reference(r) => matches!(&*r.elem, syn::Type::Path(t) if t.path.is_ident("str")),
        _ => false,
    };
    if !texty {
        return None;
    }
    let tail = match body.stmts.last()? {
        syn::Stmt::Expr(e, None) => e,
        syn::Stmt::Macro(m) if m.semi_token.is_none() => {
            return m.mac.path.is_ident("format").then(|| {
                (
                    path.to_string(),
                    quote::ToTokens::to_token_stream(m).to_string(),
                )
            });
        }
        _ => return None,
    };
    let built = |e: &Expr| match e {
        Expr::Macro(m) => m.mac.path.is_ident("format"),
        Expr::Binary(b) => matches!(b.op, syn::BinOp::Add(_)),
        _ => false,
    };
    let chosen = literal_choices(tail).is_some_and(|n| n > 1);
    (built(tail) || chosen).then(|| {
        (
            path.to_string(),
            quote::ToTokens::to_token_stream(tail).to_string(),
        )
    })
}

/// How many string literals a `match` or `if` picks between, when every arm's value is one.
fn literal_choices(e: &Expr) -> Option<usize> {
    let block_tail = |b: &syn::Block| match b.stmts.last() {
        Some(syn::Stmt::Expr(x, None)) => literal_choices(x),
        _ => None,
    };
    match e {
        Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Str(_),
            ..
        }) => Some(1),
        Expr::Paren(p) => literal_choices(&p.expr),
        Expr::Block(b) => block_tail(&b.block),
        Expr::Match(m) => m.arms.iter().map(|a| literal_choices(&a.body)).sum(),
        Expr::If(i) => {
            let (_, els) = i.else_branch.as_ref()?;
            Some(block_tail(&i.then_branch)? + literal_choices(els)?)
        }
        _ => None,
    }
}

impl CmdBuilder {
    /// Reads `f` as a command builder, when its body is one: the builder call with `.arg(..)`s,
    /// as the tail expression or bound to a local that statements add to and the tail returns.
    fn of(
        path: String,
        sig: &syn::Signature,
        body: &syn::Block,
        imports: &Imports,
    ) -> Option<CmdBuilder> {
        let syn::ReturnType::Type(_, ret) = &sig.output else {
            return None;
        };
        let syn::Type::Path(rp) = &**ret else {
            return None;
        };
        if rp.path.segments.last()?.ident != "Cmd" {
            return None;
        }
        let params = sig
            .inputs
            .iter()
            .filter_map(|i| match i {
                syn::FnArg::Typed(t) => match &*t.pat {
                    syn::Pat::Ident(id) => Some(id.ident.to_string()),
                    _ => Some(String::new()),
                },
                syn::FnArg::Receiver(_) => None,
            })
            .collect();
        // `X(NAME).arg(a)…`, innermost call last in `args` once reversed.
        fn chain<'e>(mut e: &'e Expr, args: &mut Vec<&'e Expr>) -> Option<&'e syn::ExprCall> {
            let mut own = Vec::new();
            loop {
                match e {
                    Expr::MethodCall(m) if m.method == "arg" && m.args.len() == 1 => {
                        own.push(&m.args[0]);
                        e = &m.receiver;
                    }
                    Expr::MethodCall(m)
                        if m.args.is_empty()
                            && matches!(m.method.to_string().as_str(), "clone" | "to_owned") =>
                    {
                        e = &m.receiver;
                    }
                    Expr::Call(c) => {
                        args.extend(own.into_iter().rev());
                        return Some(c);
                    }
                    _ => return None,
                }
            }
        }
        let mut args: Vec<&Expr> = Vec::new();
        let call = match body.stmts.as_slice() {
            [.., syn::Stmt::Expr(tail, None)] if !matches!(tail, Expr::Path(_)) => {
                chain(tail, &mut args)?
            }
            [
                syn::Stmt::Local(l),
                middle @ ..,
                syn::Stmt::Expr(Expr::Path(tail), None),
            ] => {
                let syn::Pat::Ident(local) = &l.pat else {
                    return None;
                };
                let name = local.ident.to_string();
                if !tail.path.is_ident(&name) {
                    return None;
                }
                let call = chain(&l.init.as_ref()?.expr, &mut args)?;
                for st in middle {
                    let syn::Stmt::Expr(e, Some(_)) = st else {
                        return None;
                    };
                    let mut added = Vec::new();
                    let mut cur = e;
                    loop {
                        match cur {
                            Expr::MethodCall(m) if m.method == "arg" && m.args.len() == 1 => {
                                added.push(&m.args[0]);
                                cur = &m.receiver;
                            }
                            Expr::Path(p) if p.path.is_ident(&name) => break,
                            _ => return None,
                        }
                    }
                    args.extend(added.into_iter().rev());
                }
                call
            }
            _ => return None,
        };
        let Expr::Path(f) = &*call.func else {
            return None;
        };
        if f.path.segments.last()?.ident != "cmd" || call.args.len() != 1 {
            return None;
        }
        let Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Str(name),
            ..
        }) = &call.args[0]
        else {
            return None;
        };
        Some(CmdBuilder {
            path,
            params,
            builder: imports.resolve(&f.path, None, &|_| false),
            name: name.value(),
            args: args
                .iter()
                .map(|a| quote::ToTokens::to_token_stream(a).to_string())
                .collect(),
        })
    }
}

/// `include_str!(..)` inside a constant's initialiser (`Script::new(include_str!("lock.lua"))`,
/// also inside `LazyLock::new(|| ..)`) replaced by the text it includes.
fn expand_includes(e: &mut Expr, source: &std::path::Path) {
    match e {
        Expr::Macro(m) => {
            if let Some(text) = included(&m.mac, source) {
                *e = Expr::Lit(syn::ExprLit {
                    attrs: Vec::new(),
                    lit: syn::Lit::Str(syn::LitStr::new(&text, proc_macro2::Span::call_site())),
                });
            }
        }
        Expr::Call(c) => c.args.iter_mut().for_each(|a| expand_includes(a, source)),
        Expr::MethodCall(m) => {
            expand_includes(&mut m.receiver, source);
            m.args.iter_mut().for_each(|a| expand_includes(a, source));
        }
        Expr::Reference(r) => expand_includes(&mut r.expr, source),
        Expr::Paren(p) => expand_includes(&mut p.expr, source),
        Expr::Closure(c) => expand_includes(&mut c.body, source),
        _ => {}
    }
}

/// The text of `include_str!("rel")` written in the file at `source`.
fn included(m: &syn::Macro, source: &std::path::Path) -> Option<String> {
    if m.path.segments.last()?.ident != "include_str" {
        return None;
    }
    let rel: syn::LitStr = m.parse_body().ok()?;
    super::lua::read_include(source, &rel.value())
}

/// A type's generic parameters and the first trait bound of each (inline or in `where`): a
/// field of type `Arc<K>` with `K: KvEngine` is, for what can be called on it, a `KvEngine`.
fn generic_bounds(
    g: &syn::Generics,
    imports: &Imports,
    known: &dyn Fn(&str) -> bool,
) -> HashMap<String, Ty> {
    let mut out = HashMap::new();
    let mut add = |name: String, bounds: &mut dyn Iterator<Item = &syn::TypeParamBound>| {
        if out.contains_key(&name) {
            return;
        }
        for b in bounds {
            if let syn::TypeParamBound::Trait(tb) = b
                && !super::ty::is_marker_trait(&tb.path)
            {
                out.insert(name, Ty::simple(imports.resolve(&tb.path, None, known)));
                return;
            }
        }
    };
    for p in &g.params {
        if let syn::GenericParam::Type(tp) = p {
            add(tp.ident.to_string(), &mut tp.bounds.iter());
        }
    }
    if let Some(wc) = &g.where_clause {
        for pred in &wc.predicates {
            if let syn::WherePredicate::Type(pt) = pred
                && let syn::Type::Path(tp) = &pt.bounded_ty
                && let Some(id) = tp.path.get_ident()
            {
                add(id.to_string(), &mut pt.bounds.iter());
            }
        }
    }
    out
}

/// How a struct field's type names the struct's unbounded type parameter #i.
fn param_slot(i: usize) -> String {
    format!("${i}")
}

/// A field's type with the struct's parameter slots filled by the owner's arguments
/// (`Sweeper<E>`'s `engine: Arc<$0>` is `Arc<E>`); slots without an argument stay unknown.
fn fill_slots(t: Ty, args: &[Ty]) -> Ty {
    if let Some(i) = t
        .path
        .strip_prefix('$')
        .and_then(|n| n.parse::<usize>().ok())
        && t.args.is_empty()
        && let Some(a) = args.get(i)
    {
        return a.clone();
    }
    Ty {
        path: t.path,
        args: t.args.into_iter().map(|a| fill_slots(a, args)).collect(),
    }
}

/// Words that make a name or a comparison about a lock's expiry (the walk's clock reading uses
/// them too).
pub(crate) const EXPIRY_WORDS: &[&str] = &[
    "expir", "deadline", "lease", "valid", "ttl", "until", "timeout",
];

/// An expiry decision: a function or comparison that speaks of expiry, or of the renewal that
/// staves it off.
fn expiry_like(text: &str) -> bool {
    let t = text.to_ascii_lowercase();
    EXPIRY_WORDS
        .iter()
        .chain(&["renew", "stale"])
        .any(|w| t.contains(w))
}

/// A function's part in expiry decisions: the parameters it compares with a deadline itself
/// (`now.as_second() - renewed.as_second() > duration` in `fn is_expired`, `now >=
/// self.expires_at` in `fn is_expired_at(&self, now)`), or, named for an expiry, adds a duration
/// to (`now + ttl` in `fn expires_at_with_ttl`), and the parameters it passes on to other
/// functions of its module (`is_expired(.., now)` in `fn is_claimable`). A method's `module` is
/// its type's path; its indices count the receiver.
#[derive(Debug, Clone, Default)]
pub struct DeadlineFn {
    pub module: String,
    pub name: String,
    pub compared: Vec<usize>,
    /// (callee's name, argument index, this function's parameter index).
    pub passes: Vec<(String, usize, usize)>,
}

fn deadline_fns(module: &str, items: &[syn::Item]) -> Vec<DeadlineFn> {
    use syn::visit::Visit;
    fn names_in(e: &Expr, out: &mut std::collections::HashSet<String>) {
        struct Ids<'o>(&'o mut std::collections::HashSet<String>);
        impl<'ast> Visit<'ast> for Ids<'_> {
            fn visit_expr_path(&mut self, p: &'ast syn::ExprPath) {
                if let Some(i) = p.path.get_ident() {
                    self.0.insert(i.to_string());
                }
            }
        }
        Ids(out).visit_expr(e);
    }
    // A parameter on one side of an ordering in an expiry decision, and the calls passing one on.
    struct Reads<'f> {
        fn_expiry: bool,
        params: &'f [String],
        compared: std::collections::HashSet<usize>,
        passes: Vec<(String, usize, usize)>,
    }
    impl<'ast> Visit<'ast> for Reads<'_> {
        fn visit_expr_binary(&mut self, b: &'ast syn::ExprBinary) {
            use syn::BinOp::*;
            let ordering = matches!(b.op, Lt(_) | Le(_) | Gt(_) | Ge(_))
                && (self.fn_expiry
                    || expiry_like(&quote::ToTokens::to_token_stream(b).to_string()));
            // A deadline computed: only in a function whose name says so.
            let sum = matches!(b.op, Add(_)) && self.fn_expiry;
            if ordering || sum {
                let mut names = std::collections::HashSet::new();
                names_in(&b.left, &mut names);
                names_in(&b.right, &mut names);
                self.compared
                    .extend((0..self.params.len()).filter(|&k| names.contains(&self.params[k])));
            }
            syn::visit::visit_expr_binary(self, b);
        }
        fn visit_expr_call(&mut self, c: &'ast syn::ExprCall) {
            if let Expr::Path(p) = &*c.func
                && let Some(last) = p.path.segments.last()
            {
                for (i, a) in c.args.iter().enumerate() {
                    let a = match a {
                        Expr::Reference(r) => &*r.expr,
                        other => other,
                    };
                    if let Expr::Path(ap) = a
                        && let Some(id) = ap.path.get_ident()
                        && let Some(k) = self.params.iter().position(|p| id == p)
                    {
                        self.passes.push((last.ident.to_string(), i, k));
                    }
                }
            }
            syn::visit::visit_expr_call(self, c);
        }
        // `sqlx::query("… WHERE lock_expires_at <= $1 …").bind(now)`: a parameter bound to a
        // placeholder the statement compares with, or sets, an expiry column.
        fn visit_expr_method_call(&mut self, m: &'ast syn::ExprMethodCall) {
            if m.method == "bind"
                && m.args.len() == 1
                && let Expr::Path(ap) = &m.args[0]
                && let Some(id) = ap.path.get_ident()
                && let Some(k) = self.params.iter().position(|p| id == p)
                && let Some((sql, n)) = bound_statement(&m.receiver)
                && expiry_placeholder(&sql, n + 1)
            {
                self.compared.insert(k);
            }
            syn::visit::visit_expr_method_call(self, m);
        }
        fn visit_item(&mut self, _: &'ast syn::Item) {}
    }
    let mut out = Vec::new();
    let mut fns: Vec<(String, &syn::Signature, &syn::Block)> = Vec::new();
    for item in items {
        match item {
            syn::Item::Fn(f) => fns.push((module.to_string(), &f.sig, &f.block)),
            syn::Item::Impl(imp) => {
                let syn::Type::Path(tp) = &*imp.self_ty else {
                    continue;
                };
                let Some(ty) = tp.path.segments.last() else {
                    continue;
                };
                for it in &imp.items {
                    if let syn::ImplItem::Fn(f) = it {
                        fns.push((format!("{module}::{}", ty.ident), &f.sig, &f.block));
                    }
                }
            }
            _ => {}
        }
    }
    for (owner, sig, block) in fns {
        let params: Vec<String> = sig
            .inputs
            .iter()
            .map(|a| match a {
                syn::FnArg::Typed(t) => match &*t.pat {
                    syn::Pat::Ident(i) => i.ident.to_string(),
                    _ => String::new(),
                },
                syn::FnArg::Receiver(_) => String::new(),
            })
            .collect();
        let name = sig.ident.to_string();
        let mut r = Reads {
            fn_expiry: expiry_like(&name),
            params: &params,
            compared: std::collections::HashSet::new(),
            passes: Vec::new(),
        };
        r.visit_block(block);
        let mut compared: Vec<usize> = r
            .compared
            .into_iter()
            .filter(|&k| !params[k].is_empty())
            .collect();
        compared.sort_unstable();
        if !compared.is_empty() || !r.passes.is_empty() {
            out.push(DeadlineFn {
                module: owner,
                name,
                compared,
                passes: r.passes,
            });
        }
    }
    out
}

/// The SQL text of a query builder chain (`query("…")`, `query_as::<_, T>("…")`,
/// `query_scalar("…")`: a literal) and how many values the chain binds before this point. (A
/// constant's text would need the crate's index, which a file's own index, built per piece of a
/// large file, does not have.)
fn bound_statement(e: &Expr) -> Option<(String, usize)> {
    match e {
        Expr::MethodCall(m) if m.method == "bind" => {
            bound_statement(&m.receiver).map(|(sql, n)| (sql, n + 1))
        }
        Expr::Call(c) => {
            let Expr::Path(p) = &*c.func else {
                return None;
            };
            let name = p.path.segments.last()?.ident.to_string();
            if !matches!(name.as_str(), "query" | "query_as" | "query_scalar") {
                return None;
            }
            match c.args.first()? {
                Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(s),
                    ..
                }) => Some((s.value(), 0)),
                _ => None,
            }
        }
        _ => None,
    }
}

/// Does the statement compare an expiry column with placeholder `$n`, or set one from it
/// (`lock_expires_at <= $1`, `lock_expires_at = $1 + make_interval(secs => $4)`)? Read clause by
/// clause: a part between `and`/`or`/`where`/`set`, commas and brackets.
fn expiry_placeholder(sql: &str, n: usize) -> bool {
    const COLUMNS: &[&str] = &["expir", "until", "deadline", "lease_end", "valid_to"];
    let sql = sql.to_ascii_lowercase();
    let placeholder = format!("${n}");
    sql.split([',', '(', ')', '\n'])
        .flat_map(|p| {
            p.split(|c: char| c.is_whitespace())
                .collect::<Vec<_>>()
                .split(|w| matches!(*w, "and" | "or" | "where" | "set" | "on" | "when" | "then"))
                .map(|ws| ws.join(" "))
                .collect::<Vec<_>>()
        })
        .any(|part| {
            let mut at = part
                .match_indices(&placeholder)
                .map(|(i, _)| i + placeholder.len());
            at.any(|end| !part[end..].starts_with(|c: char| c.is_ascii_digit()))
                && part.contains(['<', '>', '='])
                && COLUMNS.iter().any(|c| part.contains(c))
        })
}

/// Each function's deadline parameters (path -> indices): those it compares, and those it passes
/// on to a function of its module that has them, to a fixpoint.
fn close_deadline_fns(fns: Vec<DeadlineFn>) -> HashMap<String, Vec<usize>> {
    let mut known: HashMap<(String, String), std::collections::BTreeSet<usize>> = fns
        .iter()
        .filter(|f| !f.compared.is_empty())
        .map(|f| {
            (
                (f.module.clone(), f.name.clone()),
                f.compared.iter().copied().collect(),
            )
        })
        .collect();
    // Each round adds a parameter or stops; no chain in real code is longer than this.
    for _ in 0..8 {
        let mut added = Vec::new();
        for f in &fns {
            for (callee, arg, param) in &f.passes {
                let key = (f.module.clone(), callee.clone());
                if known.get(&key).is_some_and(|s| s.contains(arg))
                    && !known
                        .get(&(f.module.clone(), f.name.clone()))
                        .is_some_and(|s| s.contains(param))
                {
                    added.push(((f.module.clone(), f.name.clone()), *param));
                }
            }
        }
        if added.is_empty() {
            break;
        }
        for (k, p) in added {
            known.entry(k).or_default().insert(p);
        }
    }
    known
        .into_iter()
        .map(|((module, name), idx)| (format!("{module}::{name}"), idx.into_iter().collect()))
        .collect()
}

/// A free function whose body is one call, or a constructor whose body is one struct
/// expression, with its parameters' names (see [`FileIndex::call_fns`]). `self_ty`: the impl's
/// type, which `Self` stands for in the text kept.
fn call_tail(
    path: &str,
    sig: &syn::Signature,
    body: &syn::Block,
    self_ty: Option<&str>,
) -> Option<(String, Vec<String>, String)> {
    let [syn::Stmt::Expr(tail @ (Expr::Call(_) | Expr::Struct(_)), None)] = body.stmts.as_slice()
    else {
        return None;
    };
    if matches!(tail, Expr::Call(_)) && self_ty.is_some() {
        return None;
    }
    let mut params = Vec::new();
    for input in &sig.inputs {
        let syn::FnArg::Typed(pt) = input else {
            return None;
        };
        let syn::Pat::Ident(id) = &*pt.pat else {
            return None;
        };
        params.push(id.ident.to_string());
    }
    // Shorthand fields written out (`Self { ttl }` as `Self { ttl: ttl }`), so that a call's
    // argument can take the value's place.
    let mut tail = tail.clone();
    if let Expr::Struct(s) = &mut tail {
        for f in s.fields.iter_mut() {
            if f.colon_token.is_none() && matches!(f.member, syn::Member::Named(_)) {
                f.colon_token = Some(Default::default());
            }
        }
    }
    let mut tokens = quote::ToTokens::to_token_stream(&tail);
    if let Some(ty) = self_ty.and_then(|t| syn::parse_str::<syn::Path>(t).ok()) {
        tokens = replace_self(tokens, &quote::ToTokens::to_token_stream(&ty));
    }
    let text = tokens.to_string();
    // A helper of a few lines, not a program.
    (text.len() <= 2_000).then(|| (path.to_string(), params, text))
}

/// `Self { .. }` as the impl's type's path, for a caller's file to read.
fn replace_self(
    ts: proc_macro2::TokenStream,
    ty: &proc_macro2::TokenStream,
) -> proc_macro2::TokenStream {
    use proc_macro2::{Group, TokenTree};
    ts.into_iter()
        .flat_map(|t| -> Vec<TokenTree> {
            match t {
                TokenTree::Ident(i) if i == "Self" => ty.clone().into_iter().collect(),
                TokenTree::Group(g) => {
                    vec![TokenTree::Group(Group::new(
                        g.delimiter(),
                        replace_self(g.stream(), ty),
                    ))]
                }
                other => vec![other],
            }
        })
        .collect()
}

/// A pause written as under a second (`Duration::from_millis(5)`): a yield, not a wait.
fn brief(e: &syn::Expr) -> bool {
    let syn::Expr::Call(c) = e else { return false };
    let syn::Expr::Path(p) = &*c.func else {
        return false;
    };
    let Some(unit) = p.path.segments.last().map(|s| s.ident.to_string()) else {
        return false;
    };
    let n = match c.args.first() {
        Some(syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Int(i),
            ..
        })) => i.base10_parse::<u64>().ok(),
        _ => None,
    };
    match (unit.as_str(), n) {
        ("from_micros" | "from_nanos", _) => true,
        ("from_millis", Some(ms)) => ms < 1_000,
        _ => false,
    }
}

/// Does a body wait or repeat I/O: a call to a `sleep`, or a `loop`, `while` or `for` whose body
/// awaits? (Closures and nested items run elsewhere; a loop that only computes is not long.)
fn waits(block: &syn::Block) -> bool {
    use syn::visit::Visit;
    #[derive(Default)]
    struct Find {
        found: bool,
        loops: usize,
    }
    impl<'a> Visit<'a> for Find {
        fn visit_expr(&mut self, e: &'a syn::Expr) {
            if self.found {
                return;
            }
            match e {
                syn::Expr::Loop(_) | syn::Expr::While(_) | syn::Expr::ForLoop(_) => {
                    self.loops += 1;
                    syn::visit::visit_expr(self, e);
                    self.loops -= 1;
                }
                syn::Expr::Await(_) if self.loops > 0 => self.found = true,
                syn::Expr::Call(c)
                    if matches!(&*c.func, syn::Expr::Path(p)
                        if p.path.segments.last().is_some_and(|s| s.ident == "sleep")) =>
                {
                    self.found |= !c.args.first().is_some_and(brief)
                }
                syn::Expr::Closure(_) | syn::Expr::Async(_) => {}
                _ => syn::visit::visit_expr(self, e),
            }
        }
        fn visit_item(&mut self, _: &'a syn::Item) {}
    }
    let mut f = Find::default();
    f.visit_block(block);
    f.found
}

/// The names of the functions a block's value may come from, called without arguments
/// (`actual_now_ms()`, `Self::now()`, `now().as_millis() as u64`), in its tail or a branch's:
/// simple, or with the type for another type's (`SystemClock::now`).
fn tail_calls(block: &syn::Block) -> Option<Vec<String>> {
    fn calls(e: &syn::Expr, out: &mut Vec<String>, depth: usize) {
        if depth > 8 {
            return;
        }
        let tail = |b: &syn::Block, out: &mut Vec<String>| {
            if let Some(syn::Stmt::Expr(x, None)) = b.stmts.last() {
                calls(x, out, depth + 1);
            }
        };
        match e {
            syn::Expr::Call(c) if c.args.is_empty() => {
                if let syn::Expr::Path(p) = &*c.func
                    && let Some(last) = p.path.segments.last()
                {
                    // Another type's function by its type too (`Instant::now()` is not the
                    // program's `SystemClock::now`).
                    let n = p.path.segments.len();
                    let owner = (n >= 2)
                        .then(|| p.path.segments[n - 2].ident.to_string())
                        .filter(|t| t != "Self" && t.starts_with(|c: char| c.is_ascii_uppercase()));
                    out.push(match owner {
                        Some(t) => format!("{t}::{}", last.ident),
                        None => last.ident.to_string(),
                    });
                }
            }
            syn::Expr::MethodCall(m) => calls(&m.receiver, out, depth + 1),
            syn::Expr::Try(t) => calls(&t.expr, out, depth + 1),
            syn::Expr::Paren(p) => calls(&p.expr, out, depth + 1),
            syn::Expr::Cast(c) => calls(&c.expr, out, depth + 1),
            // `epoch_secs() * 1000`: arithmetic on a reading is a reading.
            syn::Expr::Binary(b)
                if matches!(
                    b.op,
                    syn::BinOp::Add(_)
                        | syn::BinOp::Sub(_)
                        | syn::BinOp::Mul(_)
                        | syn::BinOp::Div(_)
                        | syn::BinOp::Rem(_)
                ) =>
            {
                calls(&b.left, out, depth + 1);
                calls(&b.right, out, depth + 1);
            }
            syn::Expr::Block(b) => tail(&b.block, out),
            syn::Expr::If(i) => {
                tail(&i.then_branch, out);
                if let Some((_, els)) = &i.else_branch {
                    calls(els, out, depth + 1);
                }
            }
            syn::Expr::Match(m) => m.arms.iter().for_each(|a| calls(&a.body, out, depth + 1)),
            _ => {}
        }
    }
    let Some(syn::Stmt::Expr(e, None)) = block.stmts.last() else {
        return None;
    };
    let mut out = Vec::new();
    calls(e, &mut out, 0);
    (!out.is_empty()).then_some(out)
}

/// Does the block's tail read the wall clock: `SystemTime::now()`, `Utc::now()`, `Local::now()`,
/// `OffsetDateTime::now_utc()`, through the conversions that keep its value a time
/// (`.duration_since(UNIX_EPOCH)?.as_millis() as u64`, `.timestamp()`)?
fn clock_tail(block: &syn::Block) -> bool {
    fn reads(e: &syn::Expr) -> bool {
        match e {
            syn::Expr::Call(c) if c.args.is_empty() => match &*c.func {
                syn::Expr::Path(p) => {
                    let n = p.path.segments.len();
                    n >= 2 && {
                        let t = p.path.segments[n - 2].ident.to_string();
                        let f = p.path.segments[n - 1].ident.to_string();
                        matches!(
                            (t.as_str(), f.as_str()),
                            ("SystemTime" | "Utc" | "Local", "now")
                                | ("OffsetDateTime", "now_utc" | "now_local")
                        )
                    }
                }
                _ => false,
            },
            syn::Expr::MethodCall(m) => reads(&m.receiver),
            syn::Expr::Try(t) => reads(&t.expr),
            syn::Expr::Paren(p) => reads(&p.expr),
            syn::Expr::Cast(c) => reads(&c.expr),
            syn::Expr::Call(c) => {
                // `Ok(SystemTime::now()…)`, `u64::try_from(…)`: one argument carrying it.
                c.args.len() == 1 && reads(&c.args[0])
            }
            _ => false,
        }
    }
    matches!(block.stmts.last(), Some(syn::Stmt::Expr(e, None)) if reads(e))
}

/// Replaces generic parameters by their bounds, at any depth.
pub fn substitute_bounds(t: Ty, bounds: &HashMap<String, Ty>) -> Ty {
    if bounds.is_empty() {
        return t;
    }
    let tail = t.path.rsplit("::").next().unwrap_or(&t.path);
    if let Some(b) = bounds.get(tail)
        && (t.path == tail || t.path.ends_with(&format!("::{tail}")) && t.args.is_empty())
    {
        return b.clone();
    }
    Ty {
        path: t.path,
        args: t
            .args
            .into_iter()
            .map(|a| substitute_bounds(a, bounds))
            .collect(),
    }
}

impl FileIndex {
    pub fn build(file: &syn::File, imports: &Imports) -> FileIndex {
        FileIndex::build_piece(file, imports, None)
    }

    /// The index of one piece of a file, given the names of the whole file's items (which
    /// resolve as local items in every piece).
    pub fn build_piece(
        file: &syn::File,
        imports: &Imports,
        file_items: Option<&std::collections::HashSet<String>>,
    ) -> FileIndex {
        let mut out = FileIndex::default();
        out.modules.push(imports.module.clone());
        out.items(&file.items, imports, file_items, false);
        out.deadline_fns = deadline_fns(&imports.module, &file.items);
        out
    }

    /// What the file's texts bring in from elsewhere, read from `source` (the file's path): a
    /// constant's `include_str!("x.lua")` becomes the text it includes, and the Redis Functions
    /// of every Lua library in the file (a literal or an include) are recorded by name.
    pub fn read_includes(&mut self, file: &syn::File, source: &std::path::Path) {
        struct Texts<'p> {
            source: &'p std::path::Path,
            out: Vec<String>,
        }
        impl<'ast> syn::visit::Visit<'ast> for Texts<'_> {
            fn visit_lit_str(&mut self, l: &'ast syn::LitStr) {
                let v = l.value();
                if v.contains("register_function") {
                    self.out.push(v);
                }
            }
            fn visit_macro(&mut self, m: &'ast syn::Macro) {
                if let Some(text) = included(m, self.source) {
                    self.out.push(text);
                } else if let Ok(body) = m.parse_body_with(
                    syn::punctuated::Punctuated::<Expr, syn::Token![,]>::parse_terminated,
                ) {
                    body.iter().for_each(|e| self.visit_expr(e));
                }
            }
        }
        let mut texts = Texts {
            source,
            out: Vec::new(),
        };
        syn::visit::Visit::visit_file(&mut texts, file);
        for text in texts.out {
            self.lua_functions
                .extend(super::lua::library_functions(&text));
        }
        for (_, src, _) in &mut self.consts {
            if !src.contains("include_str") {
                continue;
            }
            let Ok(mut e) = syn::parse_str::<Expr>(src) else {
                continue;
            };
            expand_includes(&mut e, source);
            *src = quote::ToTokens::to_token_stream(&e).to_string();
        }
    }

    /// The names of the items a module's list declares (structs, enums, aliases, functions,
    /// constants, statics, traits, unions).
    pub fn item_names(items: &[syn::Item]) -> impl Iterator<Item = String> + '_ {
        items
            .iter()
            .filter_map(|i| match i {
                syn::Item::Struct(x) => Some(&x.ident),
                syn::Item::Enum(x) => Some(&x.ident),
                syn::Item::Type(x) => Some(&x.ident),
                syn::Item::Fn(x) => Some(&x.sig.ident),
                syn::Item::Const(x) => Some(&x.ident),
                syn::Item::Static(x) => Some(&x.ident),
                syn::Item::Trait(x) => Some(&x.ident),
                syn::Item::Union(x) => Some(&x.ident),
                _ => None,
            })
            .map(|id| id.to_string())
    }

    /// The index of a file parsed in pieces: what each piece declares; what the file's imports
    /// make (its modules and re-exports, found again in every piece) once.
    pub fn merge(parts: Vec<FileIndex>) -> FileIndex {
        let mut out = FileIndex::default();
        for p in parts {
            // Destructured whole: a field added to the index cannot be forgotten here.
            let FileIndex {
                structs,
                aliases,
                fns,
                consts,
                modules,
                reexports,
                glob_reexports,
                pub_globs,
                impls,
                test_impls,
                const_types,
                traits,
                supertraits,
                lua_functions,
                variants,
                variant_names,
                derefs,
                cmd_builders,
                text_fns,
                sql_fns,
                clock_fns,
                clock_calls,
                long_fns,
                call_fns,
                deadline_fns,
                trait_fns,
            } = p;
            out.structs.extend(structs);
            out.aliases.extend(aliases);
            out.fns.extend(fns);
            out.consts.extend(consts);
            out.modules.extend(modules);
            out.reexports.extend(reexports);
            out.glob_reexports.extend(glob_reexports);
            out.pub_globs.extend(pub_globs);
            out.impls.extend(impls);
            out.test_impls.extend(test_impls);
            out.const_types.extend(const_types);
            out.traits.extend(traits);
            out.supertraits.extend(supertraits);
            out.lua_functions.extend(lua_functions);
            out.variants.extend(variants);
            out.variant_names.extend(variant_names);
            out.derefs.extend(derefs);
            out.cmd_builders.extend(cmd_builders);
            out.text_fns.extend(text_fns);
            out.sql_fns.extend(sql_fns);
            out.clock_fns.extend(clock_fns);
            out.clock_calls.extend(clock_calls);
            out.long_fns.extend(long_fns);
            out.call_fns.extend(call_fns);
            out.deadline_fns.extend(deadline_fns);
            out.trait_fns.extend(trait_fns);
        }
        fn dedup<T: Clone + Eq + std::hash::Hash>(v: &mut Vec<T>) {
            let mut seen = std::collections::HashSet::new();
            v.retain(|x| seen.insert(x.clone()));
        }
        dedup(&mut out.modules);
        dedup(&mut out.reexports);
        dedup(&mut out.glob_reexports);
        dedup(&mut out.pub_globs);
        out.settle_clock_calls();
        out
    }

    /// Adds the functions whose tail calls a clock function of this file, to a fixpoint (each
    /// round adds one at least, so at most as many rounds as candidates).
    fn settle_clock_calls(&mut self) {
        // A clock function by its simple name (`now_ms`), and a method also by its type's
        // (`SystemClock::now`), as `tail_calls` records calls.
        let names = |p: &str| {
            let mut segs = p.rsplit("::");
            let last = segs.next().unwrap_or(p).to_string();
            let owner = segs.next().map(|t| format!("{t}::{last}"));
            std::iter::once(last).chain(owner)
        };
        let mut clocks: std::collections::HashSet<String> =
            self.clock_fns.iter().flat_map(|p| names(p)).collect();
        let mut todo = std::mem::take(&mut self.clock_calls);
        loop {
            let (now, rest): (Vec<_>, Vec<_>) = todo
                .into_iter()
                .partition(|(_, called)| called.iter().any(|c| clocks.contains(c)));
            if now.is_empty() {
                self.clock_calls = rest;
                return;
            }
            for (path, _) in now {
                clocks.extend(names(&path));
                self.clock_fns.push(path);
            }
            todo = rest;
        }
    }

    fn items(
        &mut self,
        items: &[syn::Item],
        imports: &Imports,
        file_items: Option<&std::collections::HashSet<String>>,
        in_test: bool,
    ) {
        let module = imports.module.clone();
        self.reexports.extend(imports.exports());
        self.glob_reexports.extend(imports.glob_exports());
        self.pub_globs.extend(imports.pub_glob_exports());
        // Items of this module resolve to their full path even where nothing imports them.
        let local: std::collections::HashSet<String> = FileIndex::item_names(items)
            .chain(file_items.into_iter().flatten().cloned())
            .map(|id| format!("{module}::{id}"))
            .collect();
        let known = |p: &str| local.contains(p);
        let ty_of = |t: &syn::Type, imports: &Imports, self_ty: Option<&Ty>| {
            ty_with(t, imports, self_ty, &known)
        };
        let ret_ty =
            |sig: &syn::Signature, imports: &Imports, self_ty: Option<&Ty>| match &sig.output {
                syn::ReturnType::Default => None,
                syn::ReturnType::Type(_, t) => ty_with(t, imports, self_ty, &known),
            };
        for item in items {
            match item {
                syn::Item::Struct(s) => {
                    let path = format!("{module}::{}", s.ident);
                    let mut bounds = generic_bounds(&s.generics, imports, &known);
                    // A parameter with no bound here (`struct Sweeper<E>`, bounded on the impl)
                    // is its position: a field is then typed by the owner's arguments.
                    for (i, tp) in s.generics.type_params().enumerate() {
                        bounds
                            .entry(tp.ident.to_string())
                            .or_insert_with(|| Ty::simple(param_slot(i)));
                    }
                    let fields = s
                        .fields
                        .iter()
                        .enumerate()
                        .filter_map(|(i, f)| {
                            let name = f.ident.as_ref().map_or(i.to_string(), |id| id.to_string());
                            ty_of(&f.ty, imports, None)
                                .map(|t| (name, substitute_bounds(t, &bounds)))
                        })
                        .collect();
                    self.structs.push((path, fields));
                }
                syn::Item::Enum(en) => {
                    // The enum is a type of the crate like a struct (its methods, `Self`, a
                    // field of its type resolve through it); its variants carry the fields.
                    self.structs
                        .push((format!("{module}::{}", en.ident), Vec::new()));
                    let bounds = generic_bounds(&en.generics, imports, &known);
                    for v in &en.variants {
                        let fields: Vec<(String, Ty)> = v
                            .fields
                            .iter()
                            .enumerate()
                            .filter_map(|(i, f)| {
                                let name =
                                    f.ident.as_ref().map_or(i.to_string(), |id| id.to_string());
                                ty_of(&f.ty, imports, None)
                                    .map(|t| (name, substitute_bounds(t, &bounds)))
                            })
                            .collect();
                        let path = format!("{module}::{}::{}", en.ident, v.ident);
                        self.variant_names.push(path.clone());
                        if !fields.is_empty() {
                            self.variants.push((path, fields));
                        }
                    }
                }
                syn::Item::Type(t) => {
                    if let Some(ty) = ty_of(&t.ty, imports, None) {
                        let params = t
                            .generics
                            .type_params()
                            .map(|p| p.ident.to_string())
                            .collect();
                        self.aliases
                            .push((format!("{module}::{}", t.ident), params, ty));
                    }
                }
                syn::Item::Fn(f) => {
                    let path = format!("{module}::{}", f.sig.ident);
                    self.cmd_builders.extend(CmdBuilder::of(
                        path.clone(),
                        &f.sig,
                        &f.block,
                        imports,
                    ));
                    self.text_fns.extend(text_tail(&path, &f.sig, &f.block));
                    if clock_tail(&f.block) {
                        self.clock_fns.push(path.clone());
                    } else if let Some(called) = tail_calls(&f.block) {
                        self.clock_calls.push((path.clone(), called));
                    }
                    if waits(&f.block) {
                        self.long_fns.push(path.clone());
                    }
                    self.call_fns
                        .extend(call_tail(&path, &f.sig, &f.block, None));
                    if let Some(ret) = ret_ty(&f.sig, imports, None) {
                        self.fns.push((path, ret));
                    }
                }
                syn::Item::Trait(t) => {
                    let path = format!("{module}::{}", t.ident);
                    // What a method returns, for calls through the trait (`dyn Store`, `T:
                    // Store`): `store.get_conn()?.set(..)` types the connection.
                    for it in &t.items {
                        // `Self` and its associated types are the implementor's: unknown here.
                        if let syn::TraitItem::Fn(f) = it
                            && !names_self(&f.sig.output)
                            && let Some(ret) = ret_ty(&f.sig, imports, None)
                        {
                            self.fns.push((format!("{path}::{}", f.sig.ident), ret));
                        }
                    }
                    // A call through `T: Sub` reaches the methods of `Sub`'s supertraits.
                    for b in &t.supertraits {
                        if let syn::TypeParamBound::Trait(tb) = b
                            && !crate::model::ty::is_marker_trait(&tb.path)
                        {
                            let sup = imports.resolve(&tb.path, None, &known);
                            self.supertraits.push((path.clone(), sup));
                        }
                    }
                    self.traits.push(path);
                }
                // `sql_function!(fn pg_try_advisory_lock(key: BigInt) -> Bool);` (diesel 1-2.1),
                // `define_sql_function! { #[sql_name = "…"] fn try_lock(k: BigInt) -> Bool; }`.
                syn::Item::Macro(m)
                    if m.mac.path.segments.last().is_some_and(|s| {
                        s.ident == "sql_function" || s.ident == "define_sql_function"
                    }) =>
                {
                    let mut tokens = m.mac.tokens.clone();
                    if !m.mac.tokens.to_string().trim_end().ends_with(';') {
                        tokens.extend(quote::quote!(;));
                    }
                    if let Ok(f) = syn::parse2::<syn::ForeignItemFn>(tokens) {
                        self.sql_fns.push(sql_fn_decl(&module, &f));
                    }
                }
                // `#[declare_sql_function] extern "SQL" { fn pg_advisory_unlock(k: BigInt) -> Bool; }`
                // (diesel 2.3).
                syn::Item::ForeignMod(fm)
                    if fm.attrs.iter().any(|a| {
                        a.path()
                            .segments
                            .last()
                            .is_some_and(|s| s.ident == "declare_sql_function")
                    }) =>
                {
                    for it in &fm.items {
                        if let syn::ForeignItem::Fn(f) = it {
                            self.sql_fns.push(sql_fn_decl(&module, f));
                        }
                    }
                }
                // `lazy_static! { static ref LOCK: Script = Script::new(".."); }`: statics.
                syn::Item::Macro(m)
                    if m.mac
                        .path
                        .segments
                        .last()
                        .is_some_and(|s| s.ident == "lazy_static") =>
                {
                    let body = m.mac.tokens.to_string().replace("static ref ", "static ");
                    if let Ok(f) = syn::parse_str::<syn::File>(&body) {
                        let statics: Vec<syn::Item> = f
                            .items
                            .into_iter()
                            .filter(|i| matches!(i, syn::Item::Static(_)))
                            .collect();
                        self.items(&statics, imports, file_items, in_test);
                    }
                }
                syn::Item::Const(c) => {
                    let path = format!("{module}::{}", c.ident);
                    if let Some(t) = ty_of(&c.ty, imports, None) {
                        self.const_types.push((path.clone(), t));
                    }
                    self.consts.push((
                        path,
                        quote::ToTokens::to_token_stream(&c.expr).to_string(),
                        module.clone(),
                    ));
                }
                syn::Item::Static(s) => {
                    let path = format!("{module}::{}", s.ident);
                    if let Some(t) = ty_of(&s.ty, imports, None) {
                        self.const_types.push((path.clone(), t));
                    }
                    self.consts.push((
                        path,
                        quote::ToTokens::to_token_stream(&s.expr).to_string(),
                        module.clone(),
                    ));
                }
                syn::Item::Impl(imp) => {
                    let Some(self_ty) = ty_of(&imp.self_ty, imports, None) else {
                        continue;
                    };
                    // A newtype that derefs to its inner state (`impl Deref for Handler {
                    // type Target = HandlerInner; }`): fields are looked up through it.
                    if let Some((_, trait_path, _)) = &imp.trait_
                        && trait_path
                            .segments
                            .last()
                            .is_some_and(|s| s.ident == "Deref")
                    {
                        for it in &imp.items {
                            if let syn::ImplItem::Type(t) = it
                                && t.ident == "Target"
                                && let Some(target) = ty_of(&t.ty, imports, Some(&self_ty))
                            {
                                self.derefs.push((self_ty.path.clone(), target));
                            }
                        }
                    }
                    if let Some((_, trait_path, _)) = &imp.trait_ {
                        let methods = imp
                            .items
                            .iter()
                            .filter_map(|it| match it {
                                syn::ImplItem::Fn(f) => Some(f.sig.ident.to_string()),
                                _ => None,
                            })
                            .collect();
                        let tr = imports.resolve(trait_path, None, &known);
                        if in_test || crate::sites::test_code::is_cfg_test(&imp.attrs) {
                            self.test_impls.push((tr.clone(), self_ty.path.clone()));
                        }
                        self.impls.push((tr, self_ty.path.clone(), methods));
                    }
                    for it in &imp.items {
                        match it {
                            syn::ImplItem::Fn(f) => {
                                let path = format!("{}::{}", self_ty.path, f.sig.ident);
                                self.text_fns.extend(text_tail(&path, &f.sig, &f.block));
                                self.call_fns.extend(call_tail(
                                    &path,
                                    &f.sig,
                                    &f.block,
                                    Some(&self_ty.path),
                                ));
                                if clock_tail(&f.block) {
                                    self.clock_fns.push(path.clone());
                                } else if let Some(called) = tail_calls(&f.block) {
                                    self.clock_calls.push((path.clone(), called));
                                }
                                if waits(&f.block) {
                                    self.long_fns.push(path.clone());
                                }
                                if let Some(ret) = ret_ty(&f.sig, imports, Some(&self_ty)) {
                                    // Rust calls the inherent method when a trait's has its name.
                                    if imp.trait_.is_some() {
                                        self.trait_fns.push((path, ret));
                                    } else {
                                        self.fns.push((path, ret));
                                    }
                                }
                            }
                            syn::ImplItem::Const(c) => self.consts.push((
                                format!("{}::{}", self_ty.path, c.ident),
                                quote::ToTokens::to_token_stream(&c.expr).to_string(),
                                module.clone(),
                            )),
                            _ => {}
                        }
                    }
                }
                syn::Item::Mod(m) => {
                    if let Some((_, content)) = &m.content {
                        let mut child = imports.child_module(&m.ident.to_string());
                        child.add_items(content);
                        self.modules.push(child.module.clone());
                        let test = in_test || crate::sites::test_code::is_cfg_test(&m.attrs);
                        self.items(content, &child, None, test);
                    }
                }
                _ => {}
            }
        }
    }
}

/// Does a return type mention `Self` (`Self`, `Self::Connection`, `Box<Self>`)?
fn names_self(ret: &syn::ReturnType) -> bool {
    fn in_stream(ts: proc_macro2::TokenStream) -> bool {
        ts.into_iter().any(|tt| match tt {
            proc_macro2::TokenTree::Ident(i) => i == "Self",
            proc_macro2::TokenTree::Group(g) => in_stream(g.stream()),
            _ => false,
        })
    }
    match ret {
        syn::ReturnType::Default => false,
        syn::ReturnType::Type(_, t) => in_stream(quote::ToTokens::to_token_stream(t)),
    }
}

/// Converts a written type into a [`Ty`], resolving names through the imports. References, groups
/// and parentheses are transparent; `impl Trait` / `dyn Trait` become the trait.
pub fn ty_of(t: &syn::Type, imports: &Imports, self_ty: Option<&Ty>) -> Option<Ty> {
    ty_with(t, imports, self_ty, &|_| false)
}

pub fn ty_with(
    t: &syn::Type,
    imports: &Imports,
    self_ty: Option<&Ty>,
    known: &dyn Fn(&str) -> bool,
) -> Option<Ty> {
    ty_depth(t, imports, self_ty, known, 0)
}

/// [`ty_with`], at a depth of generic arguments: past [`MAX_TYPE_DEPTH`] arguments are dropped,
/// so that every later walk of a [`Ty`] (normalising, cloning, dropping) is shallow too.
fn ty_depth(
    t: &syn::Type,
    imports: &Imports,
    self_ty: Option<&Ty>,
    known: &dyn Fn(&str) -> bool,
    depth: usize,
) -> Option<Ty> {
    if depth > MAX_TYPE_DEPTH {
        return None;
    }
    let ty_with =
        |t: &syn::Type, imports: &Imports, self_ty: Option<&Ty>, known: &dyn Fn(&str) -> bool| {
            ty_depth(t, imports, self_ty, known, depth + 1)
        };
    match t {
        syn::Type::Path(p) => {
            if p.qself.is_some() {
                return None;
            }
            let path = imports.resolve(&p.path, self_ty, known);
            if path == "Self" {
                return self_ty.cloned();
            }
            if let Some(st) = self_ty
                && p.path.segments.len() == 1
                && p.path.segments[0].ident == "Self"
            {
                return Some(st.clone());
            }
            let args = p
                .path
                .segments
                .last()
                .map(|seg| match &seg.arguments {
                    syn::PathArguments::AngleBracketed(a) => a
                        .args
                        .iter()
                        .filter_map(|g| match g {
                            syn::GenericArgument::Type(t) => ty_with(t, imports, self_ty, known),
                            _ => None,
                        })
                        .collect(),
                    // `Fn() -> DateTime<Utc>`: what calling it gives, so that a call of a
                    // function value has a type (an injected clock).
                    syn::PathArguments::Parenthesized(a) => {
                        call_output(&a.output, imports, self_ty, known, depth)
                    }
                    _ => Vec::new(),
                })
                .unwrap_or_default();
            Some(Ty { path, args })
        }
        syn::Type::Reference(r) => ty_with(&r.elem, imports, self_ty, known),
        syn::Type::Paren(p) => ty_with(&p.elem, imports, self_ty, known),
        syn::Type::Group(g) => ty_with(&g.elem, imports, self_ty, known),
        syn::Type::ImplTrait(i) => i.bounds.iter().find_map(|b| match b {
            syn::TypeParamBound::Trait(tb) if !super::ty::is_marker_trait(&tb.path) => {
                Some(callable_ty(tb, imports, self_ty, known, depth))
            }
            _ => None,
        }),
        syn::Type::TraitObject(o) => o.bounds.iter().find_map(|b| match b {
            syn::TypeParamBound::Trait(tb) if !super::ty::is_marker_trait(&tb.path) => {
                Some(callable_ty(tb, imports, self_ty, known, depth))
            }
            _ => None,
        }),
        // `(redis::Client, LockManager)`: each element, for a pattern that takes it apart.
        syn::Type::Tuple(t) if !t.elems.is_empty() => Some(Ty {
            path: super::ty::TUPLE.into(),
            args: t
                .elems
                .iter()
                .map(|e| ty_with(e, imports, self_ty, known).unwrap_or_else(|| Ty::simple("_")))
                .collect(),
        }),
        // `fn() -> SystemTime`: a function pointer, by what calling it gives.
        syn::Type::BareFn(f) => Some(Ty {
            path: "fn".into(),
            args: call_output(&f.output, imports, self_ty, known, depth),
        }),
        _ => None,
    }
}

/// A trait bound as a type: its path, and for `Fn() -> T` and kin, what calling it gives.
fn callable_ty(
    tb: &syn::TraitBound,
    imports: &Imports,
    self_ty: Option<&Ty>,
    known: &dyn Fn(&str) -> bool,
    depth: usize,
) -> Ty {
    let path = imports.resolve(&tb.path, self_ty, known);
    let args = match tb.path.segments.last().map(|s| &s.arguments) {
        Some(syn::PathArguments::Parenthesized(a)) => {
            call_output(&a.output, imports, self_ty, known, depth)
        }
        _ => Vec::new(),
    };
    Ty { path, args }
}

/// What calling a function type gives (`-> T`), as its one argument; nothing for `()`.
fn call_output(
    output: &syn::ReturnType,
    imports: &Imports,
    self_ty: Option<&Ty>,
    known: &dyn Fn(&str) -> bool,
    depth: usize,
) -> Vec<Ty> {
    match output {
        syn::ReturnType::Type(_, t) => ty_depth(t, imports, self_ty, known, depth + 1)
            .into_iter()
            .collect(),
        syn::ReturnType::Default => Vec::new(),
    }
}

/// How deeply types are followed into their generic arguments.
const MAX_TYPE_DEPTH: usize = 32;

/// How many nodes one normalized type may have (a real type has a handful).
const MAX_TYPE_NODES: usize = 512;

/// `target` with each of `params` replaced by the argument in its place.
fn substitute(target: &Ty, params: &[String], args: &[Ty], depth: usize) -> Ty {
    if target.args.is_empty()
        && let Some(i) = params.iter().position(|p| *p == target.path)
        && let Some(arg) = args.get(i)
    {
        return arg.clone();
    }
    Ty {
        path: target.path.clone(),
        args: if depth > MAX_TYPE_DEPTH {
            Vec::new()
        } else {
            target
                .args
                .iter()
                .map(|a| substitute(a, params, args, depth + 1))
                .collect()
        },
    }
}

/// One crate's merged index.
#[derive(Debug, Default)]
pub struct CrateIndex {
    pub root: PathBuf,
    structs: HashMap<String, HashMap<String, Ty>>,
    aliases: HashMap<String, (Vec<String>, Ty)>,
    fns: HashMap<String, Ty>,
    consts: HashMap<String, (String, String)>,
    /// Simple name -> canonical paths, for names a file uses without importing (same-module items
    /// declared in another file of the module are rare; this is the fallback).
    simple: HashMap<String, Vec<String>>,
    /// A path through a module's `use` item -> the path it names (`crate::locks::Locks` ->
    /// `crate::locks::manager::Locks`; `crate::prelude::Client` -> `redis::Client`).
    reexports: HashMap<String, String>,
    /// Modules -> the prefixes they glob-import.
    glob_reexports: Vec<(String, String)>,
    /// Modules -> the prefixes they glob-re-export (`pub use`).
    pub_globs: Vec<(String, String)>,
    /// Type path -> the traits it implements here, with the methods each impl defines.
    impls: HashMap<String, Vec<(String, Vec<String>)>>,
    /// (trait, type) of the impls compiled for tests alone.
    test_impls: std::collections::HashSet<(String, String)>,
    const_types: HashMap<String, Ty>,
    traits: std::collections::HashSet<String>,
    /// Supertrait -> the traits declared with it as a bound (`trait Sub: Super`), as written.
    subtraits: HashMap<String, Vec<String>>,
    lua_functions: HashMap<String, (super::lua::Effect, bool)>,
    /// Enum variant path -> its fields (see [`FileIndex::variants`]).
    variants: HashMap<String, HashMap<String, Ty>>,
    variant_names: std::collections::HashSet<String>,
    derefs: HashMap<String, Ty>,
    cmd_builders: HashMap<String, CmdBuilder>,
    text_fns: HashMap<String, String>,
    sql_fns: HashMap<String, String>,
    clock_fns: std::collections::HashSet<String>,
    long_fns: std::collections::HashSet<String>,
    call_fns: HashMap<String, (Vec<String>, String)>,
    deadline_params: HashMap<String, Vec<usize>>,
}

impl CrateIndex {
    pub fn new(root: PathBuf, files: impl IntoIterator<Item = FileIndex>) -> CrateIndex {
        let mut idx = CrateIndex {
            root,
            ..Default::default()
        };
        // A path re-exported twice (feature-gated alternatives) keeps a target that exists.
        let mut reexport_candidates: HashMap<String, Vec<String>> = HashMap::new();
        let mut trait_fns = Vec::new();
        let mut deadline_fns = Vec::new();
        for f in files {
            for (path, fields) in f.structs {
                idx.add_simple(&path);
                idx.structs.insert(path, fields.into_iter().collect());
            }
            // Variants answer field questions only: they are not items a name resolves to.
            idx.variant_names.extend(f.variant_names);
            idx.derefs.extend(f.derefs);
            idx.cmd_builders
                .extend(f.cmd_builders.into_iter().map(|b| (b.path.clone(), b)));
            idx.text_fns.extend(f.text_fns);
            idx.sql_fns.extend(f.sql_fns);
            idx.clock_fns.extend(f.clock_fns);
            idx.long_fns.extend(f.long_fns);
            idx.call_fns.extend(
                f.call_fns
                    .into_iter()
                    .map(|(p, params, text)| (p, (params, text))),
            );
            deadline_fns.extend(f.deadline_fns);
            for (path, fields) in f.variants {
                idx.variants
                    .entry(path)
                    .or_insert_with(|| fields.into_iter().collect());
            }
            for (path, params, ty) in f.aliases {
                idx.add_simple(&path);
                idx.aliases.insert(path, (params, ty));
            }
            for (path, ty) in f.fns {
                idx.fns.insert(path, ty);
            }
            trait_fns.extend(f.trait_fns);
            for (path, src, module) in f.consts {
                idx.add_simple(&path);
                idx.consts.insert(path, (src, module));
            }
            for (path, target) in f.reexports {
                let targets = reexport_candidates.entry(path).or_default();
                if !targets.contains(&target) {
                    targets.push(target);
                }
            }
            idx.glob_reexports.extend(f.glob_reexports);
            idx.pub_globs.extend(f.pub_globs);
            idx.test_impls.extend(f.test_impls);
            for (tr, ty, methods) in f.impls {
                idx.impls.entry(ty).or_default().push((tr, methods));
            }
            idx.const_types.extend(f.const_types);
            for (name, effect, compares) in f.lua_functions {
                idx.lua_functions.entry(name).or_insert((effect, compares));
            }
            for t in f.traits {
                idx.add_simple(&t);
                idx.traits.insert(t);
            }
            for (sub, sup) in f.supertraits {
                idx.subtraits.entry(sup).or_default().push(sub);
            }
        }
        for (path, ty) in trait_fns {
            idx.fns.entry(path).or_insert(ty);
        }
        // Single targets first, so that a choice between alternatives can see them; of several,
        // the first that names something of the crate, else the last (the one a plain map kept).
        let (single, several): (Vec<_>, Vec<_>) = reexport_candidates
            .into_iter()
            .partition(|(_, targets)| targets.len() == 1);
        for (path, mut targets) in single {
            idx.reexports
                .insert(path, targets.pop().expect("one target"));
        }
        let mut several = several;
        several.sort_unstable();
        for (path, targets) in several {
            let chosen = targets
                .iter()
                .find(|t| {
                    let t = idx.settle(t);
                    idx.is_item(&t) || idx.reexports.contains_key(&t)
                })
                .or(targets.last())
                .cloned()
                .expect("at least one target");
            idx.reexports.insert(path, chosen);
        }
        idx.deadline_params = close_deadline_fns(deadline_fns);
        // An impl names its type as its module imports it (`use crate::Database; impl JobQueue
        // for Database` where the root has `pub use database::Database`): keyed by the path the
        // type is defined at, as the walk names a method's owner.
        let impls = std::mem::take(&mut idx.impls);
        for (ty, list) in impls {
            let ty = idx.through_reexports(idx.settle(&ty));
            idx.impls.entry(ty).or_default().extend(list);
        }
        let test_impls = std::mem::take(&mut idx.test_impls);
        idx.test_impls = test_impls
            .into_iter()
            .map(|(tr, ty)| (tr, idx.through_reexports(idx.settle(&ty))))
            .collect();
        idx
    }

    /// The traits whose `impl … for owner` here defines `method`.
    pub fn traits_defining(&self, owner: &str, method: &str) -> Vec<String> {
        let owner = self.through_reexports(self.settle(owner));
        self.impls
            .get(&owner)
            .into_iter()
            .flatten()
            .filter(|(_, ms)| ms.iter().any(|m| m == method))
            .map(|(tr, _)| self.through_reexports(self.settle(tr)))
            .collect()
    }

    /// The traits of this crate that have `tr` as a supertrait, directly or through others
    /// (`trait SchedulerInterface: QueueInterface + ..`): a call through a bound on one of them
    /// reaches `tr`'s methods. Sorted, each once.
    pub fn subtraits(&self, tr: &str) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let mut todo = vec![self.through_reexports(self.settle(tr))];
        while let Some(t) = todo.pop() {
            for (sup, subs) in &self.subtraits {
                if self.through_reexports(self.settle(sup)) != t {
                    continue;
                }
                for sub in subs {
                    let sub = self.through_reexports(self.settle(sub));
                    if !out.contains(&sub) && sub != tr {
                        out.push(sub.clone());
                        todo.push(sub);
                    }
                }
            }
        }
        out.sort();
        out
    }

    /// The types whose `impl Trait for Type` here defines `method`, with the trait, each as
    /// written here.
    /// Test doubles (`#[cfg(test)]` impls) are left out.
    pub fn impls_defining(&self, method: &str) -> Vec<(String, String)> {
        self.impls
            .iter()
            .flat_map(|(ty, list)| {
                list.iter()
                    .filter(|(tr, ms)| {
                        ms.iter().any(|m| m == method)
                            && !self.test_impls.contains(&(tr.clone(), ty.clone()))
                    })
                    .map(move |(tr, _)| (ty.clone(), self.through_reexports(self.settle(tr))))
            })
            .collect()
    }

    /// The declared type of a constant or static.
    pub fn const_type(&self, path: &str) -> Option<Ty> {
        let path = self.through_reexports(self.settle(path));
        self.const_types.get(&path).map(|t| self.normalize(t))
    }

    fn add_simple(&mut self, path: &str) {
        let simple = path.rsplit("::").next().unwrap_or(path).to_string();
        self.simple
            .entry(simple)
            .or_default()
            .push(path.to_string());
    }

    /// Is this canonical path an item of the crate, or one of its modules' re-exports?
    pub fn knows(&self, path: &str) -> bool {
        self.is_item(path) || self.reexports.contains_key(path)
    }

    fn is_item(&self, path: &str) -> bool {
        self.structs.contains_key(path)
            || self.aliases.contains_key(path)
            || self.fns.contains_key(path)
            || self.long_fns.contains(path)
            || self.call_fns.contains_key(path)
            || self.sql_fns.contains_key(path)
            || self.consts.contains_key(path)
            || self.traits.contains(path)
    }

    /// Follows the crate's re-exports to the path they name: `crate::locks::Locks`, where
    /// `locks` says `pub use manager::Locks`, is `crate::locks::manager::Locks`, and
    /// `crate::prelude::Client` after `pub use redis::Client` is `redis::Client`. The longest
    /// re-exported prefix is taken first; a glob re-export is followed only to an item of the
    /// crate (which of several globbed external crates a name comes from cannot be told here).
    pub fn through_reexports(&self, mut path: String) -> String {
        if self.reexports.is_empty() && self.glob_reexports.is_empty() && self.pub_globs.is_empty()
        {
            return path;
        }
        // Bounded: re-exports can form cycles in code that does not compile.
        for _ in 0..8 {
            if self.is_item(&path) {
                break;
            }
            match self.reexport_step(&path) {
                Some(next) if next != path => path = next,
                _ => break,
            }
        }
        path
    }

    fn reexport_step(&self, path: &str) -> Option<String> {
        let mut end = path.len();
        loop {
            if let Some(target) = self.reexports.get(&path[..end]) {
                return Some(format!("{target}{}", &path[end..]));
            }
            match path[..end].rfind("::") {
                Some(i) => end = i,
                None => break,
            }
        }
        self.glob_reexports
            .iter()
            .find_map(|(module, prefix)| {
                let rest = path.strip_prefix(module.as_str())?.strip_prefix("::")?;
                let candidate = format!("{prefix}::{rest}");
                (self.is_item(&candidate) || self.reexports.contains_key(&candidate))
                    .then_some(candidate)
            })
            .or_else(|| self.external_glob(path))
    }

    /// `pub use etcd_client::*;` in a module of the crate (a workspace crate wrapping a client
    /// library): a name the module does not define is the other crate's, when the module
    /// re-exports exactly one other crate so (with two, the name is ambiguous here).
    fn external_glob(&self, path: &str) -> Option<String> {
        let mut found = None;
        for (module, prefix) in &self.pub_globs {
            if prefix.starts_with("crate::") || prefix.starts_with("std::") {
                continue;
            }
            let Some(rest) = path
                .strip_prefix(module.as_str())
                .and_then(|r| r.strip_prefix("::"))
            else {
                continue;
            };
            // Only a name of the module itself (`Client`, `Client::connect`), not of a child.
            if self.is_item(&format!("{module}::{}", rest.split("::").next()?)) {
                return None;
            }
            if found.is_some() {
                return None;
            }
            found = Some(format!("{prefix}::{rest}"));
        }
        found
    }

    /// Expands aliases and settles names that resolution left bare (`Locks` declared in a sibling
    /// file of the same crate) when exactly one item of the crate has that name.
    /// An alias's generic parameters take the arguments it is written with
    /// (`crate::Result<Lease>`, for `type Result<T> = std::result::Result<T, Error>`, is
    /// `std::result::Result<Lease, crate::Error>`).
    pub fn normalize(&self, ty: &Ty) -> Ty {
        let mut budget = MAX_TYPE_NODES;
        self.normalize_depth(ty, 0, &mut budget)
    }

    fn normalize_depth(&self, ty: &Ty, depth: usize, budget: &mut usize) -> Ty {
        // Bounded in depth and in size: aliases may refer to themselves (`type A = Vec<A>;`) in
        // code that does not compile, and an alias that uses a parameter twice doubles its
        // argument at each expansion (diesel's `type Eq<L, R> = Grouped<Eq<L, AsExpr<R, L>>>`):
        // past the budget, a type keeps its path and loses its arguments.
        if *budget == 0 {
            return Ty::simple(ty.path.clone());
        }
        *budget -= 1;
        let mut t = ty.clone();
        if depth > MAX_TYPE_DEPTH {
            return t;
        }
        for _ in 0..8 {
            let path = self.through_reexports(self.settle(&t.path));
            match self.aliases.get(&path) {
                Some((params, target)) => t = substitute(target, params, &t.args, 0),
                None => {
                    t.path = path;
                    break;
                }
            }
        }
        t.args = t
            .args
            .iter()
            .map(|a| self.normalize_depth(a, depth + 1, budget))
            .collect();
        t
    }

    fn settle(&self, path: &str) -> String {
        if path.contains("::") {
            return path.to_string();
        }
        match self.simple.get(path).map(Vec::as_slice) {
            Some([only]) => only.clone(),
            _ => path.to_string(),
        }
    }

    /// The enum whose variant `t` names (`crate::a::Store::Redis` -> `crate::a::Store`).
    pub fn variant_enum(&self, t: &Ty) -> Option<Ty> {
        let (owner, _) = t.path.rsplit_once("::")?;
        let owner = self.normalize(&Ty::simple(owner.to_string()));
        let variant = format!("{}::{}", owner.path, t.path.rsplit("::").next()?);
        (self.variant_names.contains(&variant)).then_some(owner)
    }

    /// Is `t` an enum of this crate (one with a variant indexed)?
    pub fn is_enum(&self, t: &Ty) -> bool {
        let owner = self.normalize(t);
        self.variant_names
            .iter()
            .any(|v| v.rsplit_once("::").is_some_and(|(e, _)| e == owner.path))
    }

    /// The fields of a struct or enum variant of this crate, by canonical path.
    fn fields_of(&self, path: &str) -> Option<&HashMap<String, Ty>> {
        self.structs.get(path).or_else(|| self.variants.get(path))
    }

    /// The types of a struct's fields (none when `owner` is no struct of this crate).
    pub fn field_types(&self, owner: &Ty) -> Vec<Ty> {
        let owner = self.normalize(owner);
        self.fields_of(&owner.path)
            .map(|f| {
                let mut v: Vec<Ty> = f
                    .values()
                    .map(|t| self.normalize(&fill_slots(t.clone(), &owner.args)))
                    .collect();
                v.sort_by(|a, b| a.path.cmp(&b.path));
                v
            })
            .unwrap_or_default()
    }

    /// Is `owner` a struct or enum variant of this crate with fields?
    pub fn has_fields(&self, owner: &Ty) -> bool {
        let owner = self.normalize(owner);
        self.fields_of(&owner.path).is_some_and(|f| !f.is_empty())
    }

    pub fn field(&self, owner: &Ty, field: &str) -> Option<Ty> {
        let mut owner = self.normalize(owner);
        // Through at most a few `Deref` newtypes (`Handler` -> `HandlerInner`).
        for _ in 0..4 {
            let found = self.fields_of(&owner.path).and_then(|f| f.get(field));
            if let Some(t) = found {
                return Some(self.normalize(&fill_slots(t.clone(), &owner.args)));
            }
            owner = self.normalize(self.derefs.get(&owner.path)?.peeled());
        }
        None
    }

    /// A function of the crate's entry in one of the per-function tables: under the path it
    /// settles to through imports and re-exports, or as written.
    fn fn_entry<'s, V>(&self, table: &'s HashMap<String, V>, path: &str) -> Option<&'s V> {
        table
            .get(&self.through_reexports(self.settle(path)))
            .or_else(|| table.get(path))
            // A method of a type re-exported (`crate::utils::Lock::new`, `Lock` defined in
            // `crate::utils::redis`): the type followed, the method kept.
            .or_else(|| {
                let (owner, method) = path.rsplit_once("::")?;
                let owner = self.through_reexports(self.settle(owner));
                table.get(&format!("{owner}::{method}"))
            })
    }

    /// [`Self::fn_entry`] for the per-function sets.
    fn fn_listed(&self, set: &std::collections::HashSet<String>, path: &str) -> bool {
        set.contains(&self.through_reexports(self.settle(path))) || set.contains(path)
    }

    /// The tail source of a function of the crate that answers a built text.
    pub fn text_fn(&self, path: &str) -> Option<&str> {
        self.fn_entry(&self.text_fns, path).map(String::as_str)
    }

    /// The command a function of the crate builds and hands back unrun.
    pub fn cmd_builder(&self, path: &str) -> Option<&CmdBuilder> {
        self.fn_entry(&self.cmd_builders, path)
    }

    /// The SQL function a query-builder function of the crate stands for.
    pub fn sql_fn(&self, path: &str) -> Option<&str> {
        self.fn_entry(&self.sql_fns, path).map(String::as_str)
    }

    /// Does a function of the crate answer a wall-clock reading (see [`FileIndex::clock_fns`])?
    pub fn clock_fn(&self, path: &str) -> bool {
        self.fn_listed(&self.clock_fns, path)
    }

    /// The parameters and call of a function of the crate whose body is one call (see
    /// [`FileIndex::call_fns`]).
    pub fn call_fn(&self, path: &str) -> Option<&(Vec<String>, String)> {
        self.fn_entry(&self.call_fns, path)
    }

    /// Does a function of the crate wait or repeat I/O (see [`FileIndex::long_fns`])?
    pub fn long_fn(&self, path: &str) -> bool {
        self.fn_listed(&self.long_fns, path)
    }

    /// The parameters through which a function of the crate decides an expiry (see
    /// [`FileIndex::deadline_fns`]).
    pub fn deadline_params(&self, path: &str) -> Option<&[usize]> {
        self.fn_entry(&self.deadline_params, path)
            .map(Vec::as_slice)
    }

    pub fn fn_return(&self, path: &str) -> Option<Ty> {
        self.fns
            .get(&self.through_reexports(self.settle(path)))
            .or_else(|| self.fns.get(path))
            .map(|t| self.normalize(t))
    }

    pub fn method_return(&self, owner: &Ty, method: &str) -> Option<Ty> {
        let owner = self.normalize(owner);
        self.fns
            .get(&format!("{}::{method}", owner.path))
            .map(|t| self.normalize(t))
    }

    /// A Redis Function registered by a Lua library of this crate.
    pub fn lua_function(&self, name: &str) -> Option<&(super::lua::Effect, bool)> {
        self.lua_functions.get(name)
    }

    /// A constant's initialiser source and defining module.
    pub fn constant(&self, path: &str) -> Option<&(String, String)> {
        self.consts
            .get(path)
            .or_else(|| self.consts.get(&self.through_reexports(self.settle(path))))
    }
}

/// A crate as its code sees the program: its own index, its own name (how its tests and
/// examples name it), and the views of the analysed crates it depends on, by the names its
/// code uses.
///
/// Invariants: paths of the crate's own items start with `crate::`; paths of a dependency's
/// items start with the dependency's name here (`infra::locks::acquire`), whatever that crate
/// calls itself. A question about a dependency's item is asked of the dependency's view, in its
/// terms (`crate::locks::acquire`), and the answer translated back; so each index stays the
/// crate's own and is shared, unchanged, by every crate that depends on it. The dependency
/// views form a tree without cycles (the builder cuts them), so every question ends.
#[derive(Debug, Default, Clone)]
pub struct CrateView {
    own: Arc<CrateIndex>,
    own_name: Option<String>,
    deps: Vec<(String, Arc<CrateView>)>,
    /// The features the crate's manifest enables on each registry dependency, by package name.
    features: Arc<std::collections::BTreeMap<String, Vec<String>>>,
}

/// `crate::x` as seen from a crate that names it `dep`.
fn reroot(path: &str, name: &str) -> String {
    match path.strip_prefix("crate::") {
        Some(rest) => format!("{name}::{rest}"),
        None if path == "crate" => name.to_string(),
        None => path.to_string(),
    }
}

fn reroot_ty(t: &Ty, name: &str) -> Ty {
    Ty {
        path: reroot(&t.path, name),
        args: t.args.iter().map(|a| reroot_ty(a, name)).collect(),
    }
}

/// The crate's own items, for a pack set seen from inside the library it describes.
impl crate::packs::CrateItems for CrateView {
    fn canonical(&self, path: &str) -> String {
        self.own.through_reexports(path.to_string())
    }

    fn is_struct(&self, path: &str) -> bool {
        self.own.structs.contains_key(path)
    }

    fn is_fn(&self, path: &str) -> bool {
        self.own.fns.contains_key(path)
    }
}

impl CrateView {
    pub fn new(
        own: Arc<CrateIndex>,
        own_name: Option<String>,
        deps: Vec<(String, Arc<CrateView>)>,
        features: Arc<std::collections::BTreeMap<String, Vec<String>>>,
    ) -> CrateView {
        CrateView {
            own,
            own_name,
            deps,
            features,
        }
    }

    /// Does the manifest build `b.dependency` only with backends that take no lock (some of
    /// `b.features`, none of `b.locking`)?
    pub fn lockless_backend(&self, b: &crate::packs::LocklessBackend) -> bool {
        self.features.get(&b.dependency).is_some_and(|on| {
            on.iter().any(|f| b.features.contains(f)) && !on.iter().any(|f| b.locking.contains(f))
        })
    }

    pub fn own(&self) -> Arc<CrateIndex> {
        self.own.clone()
    }

    /// The text of a file named relative to the crate's root (sqlx's `query_file!`), when it is
    /// a regular file of reasonable size.
    pub fn crate_file(&self, rel: &str) -> Option<String> {
        super::lua::read_in_crate(&self.own.root, rel)
    }

    /// The crate's own `mycrate::x` (in its tests and examples) is `crate::x`.
    fn own_path(&self, path: String) -> String {
        if let Some(name) = &self.own_name
            && let Some(rest) = path.strip_prefix(name.as_str())
            && (rest.is_empty() || rest.starts_with("::"))
            && !self.deps.iter().any(|(n, _)| n == name)
        {
            return format!("crate{rest}");
        }
        path
    }

    /// The dependency a path leads into, and the path in that crate's terms.
    fn dep_of(&self, path: &str) -> Option<(&str, &CrateView, String)> {
        self.deps.iter().find_map(|(name, view)| {
            let rest = path.strip_prefix(name.as_str())?;
            (rest.is_empty() || rest.starts_with("::"))
                .then(|| (name.as_str(), &**view, format!("crate{rest}")))
        })
    }

    pub fn knows(&self, path: &str) -> bool {
        let path = self.own_path(path.to_string());
        match self.dep_of(&path) {
            Some((_, view, inner)) => view.knows(&inner),
            None => self.own.knows(&path),
        }
    }

    /// Follows re-exports within the crate and into its dependencies (`pub use infra::locks::*`
    /// in one crate, `pub use imp::acquire` in the next).
    pub fn through_reexports(&self, path: String) -> String {
        let path = self.own_path(path);
        if let Some((name, view, inner)) = self.dep_of(&path) {
            return reroot(&view.through_reexports(inner), name);
        }
        let next = self.own_path(self.own.through_reexports(path));
        match self.dep_of(&next) {
            // An own re-export of a dependency's item.
            Some((name, view, inner)) => reroot(&view.through_reexports(inner), name),
            None => next,
        }
    }

    /// Expands the crate's aliases and re-exports (its index does that), then settles the paths
    /// that lead into a dependency, in that dependency's view. Each node of the type is visited
    /// once: the crate's own expansion is never repeated on what it produced (an alias whose
    /// target contains itself would otherwise grow without end), and the walk stops at the same
    /// depth as the index's.
    pub fn normalize(&self, ty: &Ty) -> Ty {
        let t = Ty {
            path: self.own_path(ty.path.clone()),
            args: ty.args.clone(),
        };
        let t = if self.dep_of(&t.path).is_some() {
            t
        } else {
            self.own.normalize(&t)
        };
        self.settle_deps(&t, 0)
    }

    fn settle_deps(&self, t: &Ty, depth: usize) -> Ty {
        if depth > MAX_TYPE_DEPTH {
            return t.clone();
        }
        let path = self.own_path(t.path.clone());
        let args: Vec<Ty> = t
            .args
            .iter()
            .map(|a| self.settle_deps(a, depth + 1))
            .collect();
        match self.dep_of(&path) {
            Some((name, view, inner)) => {
                let mut out = reroot_ty(&view.normalize(&Ty::simple(inner)), name);
                if out.args.is_empty() {
                    out.args = args;
                }
                out
            }
            None => Ty { path, args },
        }
    }

    pub fn variant_enum(&self, t: &Ty) -> Option<Ty> {
        let t = Ty {
            path: self.own_path(t.path.clone()),
            args: Vec::new(),
        };
        match self.dep_of(&t.path) {
            Some((name, view, inner)) => view
                .variant_enum(&Ty::simple(inner))
                .map(|e| reroot_ty(&e, name)),
            None => self.own.variant_enum(&t).map(|e| self.normalize(&e)),
        }
    }

    /// Is `t` an enum, here or in a dependency?
    pub fn is_enum(&self, t: &Ty) -> bool {
        let t = self.normalize(t);
        match self.dep_of(&t.path) {
            Some((_, view, inner)) => view.is_enum(&Ty::simple(inner)),
            None => self.own.is_enum(&t),
        }
    }

    pub fn has_fields(&self, owner: &Ty) -> bool {
        let owner = self.normalize(owner);
        match self.dep_of(&owner.path) {
            Some((_, view, inner)) => view.has_fields(&Ty::simple(inner)),
            None => self.own.has_fields(&owner),
        }
    }

    /// The types of a struct's fields, in this crate's terms.
    pub fn field_types(&self, owner: &Ty) -> Vec<Ty> {
        let owner = self.normalize(owner);
        match self.dep_of(&owner.path) {
            Some((name, view, inner)) => view
                .field_types(&Ty::simple(inner))
                .into_iter()
                .map(|t| reroot_ty(&t, name))
                .collect(),
            None => self
                .own
                .field_types(&owner)
                .into_iter()
                .map(|t| self.normalize(&t))
                .collect(),
        }
    }

    pub fn field(&self, owner: &Ty, field: &str) -> Option<Ty> {
        let owner = self.normalize(owner);
        match self.dep_of(&owner.path) {
            Some((name, view, inner)) => view
                .field(&Ty::simple(inner), field)
                .map(|t| fill_slots(reroot_ty(&t, name), &owner.args)),
            None => self.own.field(&owner, field).map(|t| self.normalize(&t)),
        }
    }

    /// The index of the crate that owns a function, and the function's path there: questions
    /// whose answers name nothing of that crate (a flag, a text, parameter positions) are
    /// asked of it directly.
    fn owner_index(&self, path: &str) -> (&CrateIndex, String) {
        let path = self.through_reexports(path.to_string());
        match self.dep_of(&path) {
            Some((_, view, inner)) => view.owner_index(&inner),
            None => (&self.own, path),
        }
    }

    pub fn cmd_builder(&self, path: &str) -> Option<&CmdBuilder> {
        let (index, path) = self.owner_index(path);
        index.cmd_builder(&path)
    }

    pub fn text_fn(&self, path: &str) -> Option<&str> {
        let (index, path) = self.owner_index(path);
        index.text_fn(&path)
    }

    pub fn sql_fn(&self, path: &str) -> Option<&str> {
        let (index, path) = self.owner_index(path);
        index.sql_fn(&path)
    }

    pub fn clock_fn(&self, path: &str) -> bool {
        let (index, path) = self.owner_index(path);
        index.clock_fn(&path)
    }

    pub fn call_fn(&self, path: &str) -> Option<&(Vec<String>, String)> {
        let (index, path) = self.owner_index(path);
        index.call_fn(&path)
    }

    pub fn long_fn(&self, path: &str) -> bool {
        let (index, path) = self.owner_index(path);
        index.long_fn(&path)
    }

    pub fn deadline_params(&self, path: &str) -> Option<Vec<usize>> {
        let (index, path) = self.owner_index(path);
        index.deadline_params(&path).map(<[usize]>::to_vec)
    }

    pub fn fn_return(&self, path: &str) -> Option<Ty> {
        let path = self.through_reexports(path.to_string());
        match self.dep_of(&path) {
            Some((name, view, inner)) => view.fn_return(&inner).map(|t| reroot_ty(&t, name)),
            None => self.own.fn_return(&path).map(|t| self.normalize(&t)),
        }
    }

    pub fn method_return(&self, owner: &Ty, method: &str) -> Option<Ty> {
        let owner = self.normalize(owner);
        match self.dep_of(&owner.path) {
            Some((name, view, inner)) => view
                .method_return(&Ty::simple(inner), method)
                .map(|t| reroot_ty(&t, name)),
            None => self
                .own
                .method_return(&owner, method)
                .map(|t| self.normalize(&t)),
        }
    }

    /// The declared type of a constant or static, here or in a dependency.
    pub fn const_type(&self, path: &str) -> Option<Ty> {
        let path = self.through_reexports(path.to_string());
        match self.dep_of(&path) {
            Some((name, view, inner)) => view.const_type(&inner).map(|t| reroot_ty(&t, name)),
            None => self.own.const_type(&path).map(|t| self.normalize(&t)),
        }
    }

    /// The traits whose impl for `owner` in this crate defines `method` (calls through the
    /// trait, on a generic bound, `impl Trait` or `dyn Trait`, may reach that method).
    pub fn traits_defining(&self, owner: &str, method: &str) -> Vec<String> {
        self.own
            .traits_defining(owner, method)
            .into_iter()
            .map(|t| self.through_reexports(t))
            .collect()
    }

    /// The traits of this crate with `tr` among their supertraits (see [`CrateIndex::subtraits`]).
    pub fn subtraits(&self, tr: &str) -> Vec<String> {
        self.own
            .subtraits(tr)
            .into_iter()
            .map(|t| self.through_reexports(t))
            .collect()
    }

    /// The types of this crate whose impl of `tr` defines `method` (every implementation a
    /// call through the trait may reach here).
    pub fn implementors(&self, tr: &str, method: &str) -> Vec<String> {
        let mut out: Vec<String> = self
            .own
            .impls_defining(method)
            .into_iter()
            .filter(|(_, t)| self.through_reexports(t.clone()) == tr)
            .map(|(ty, _)| ty)
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// A path in this crate's terms as the dependency named `name` writes it (`infra::Kv` is
    /// `crate::Kv` to `infra`), when it leads there.
    pub fn in_dep_terms(&self, path: &str) -> Option<(String, String)> {
        let (name, _, inner) = self.dep_of(path)?;
        Some((name.to_string(), inner))
    }

    /// A Redis Function registered by a Lua library of this crate.
    pub fn lua_function(&self, name: &str) -> Option<&(super::lua::Effect, bool)> {
        self.own.lua_function(name)
    }

    /// A constant's initialiser source and defining module (in the defining crate's terms).
    pub fn constant(&self, path: &str) -> Option<&(String, String)> {
        let path = self.through_reexports(path.to_string());
        match self.dep_of(&path) {
            Some((_, view, inner)) => view.constant(&inner),
            None => self.own.constant(&path),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(files: &[(&str, &str)]) -> CrateIndex {
        let indexes = files.iter().map(|(module, src)| {
            let file: syn::File = syn::parse_str(src).expect("test source parses");
            let mut imports = Imports::new(module.to_string());
            imports.add_items(&file.items);
            FileIndex::build(&file, &imports)
        });
        CrateIndex::new(PathBuf::from("/r"), indexes)
    }

    #[test]
    fn parameters_bound_to_an_expiry_placeholder_are_deadline_parameters() {
        let idx = index(&[(
            "crate",
            r#"
            async fn claim_due(pool: &PgPool, worker: &str, now: DateTime<Utc>) {
                sqlx::query("UPDATE jobs SET locked_by = $2, lock_expires_at = $1 + make_interval(secs => $3) WHERE run_at <= $1")
                    .bind(now).bind(worker).bind(30).execute(pool).await;
            }
            async fn due(pool: &PgPool, now: DateTime<Utc>, ttl: i64) {
                sqlx::query("SELECT id FROM jobs WHERE run_at <= $1 AND attempts < $2")
                    .bind(now).bind(ttl).execute(pool).await;
            }
            async fn claim_ten(pool: &PgPool, a: i64, now: DateTime<Utc>) {
                sqlx::query("SELECT id FROM jobs WHERE id = $1 AND expires_at < $10")
                    .bind(a).bind(now).execute(pool).await;
            }
            "#,
        )]);
        assert_eq!(idx.deadline_params("crate::claim_due"), Some(&[2][..]));
        assert_eq!(
            idx.deadline_params("crate::due"),
            None,
            "run_at is no expiry"
        );
        assert_eq!(
            idx.deadline_params("crate::claim_ten"),
            None,
            "`$10` is not `$1`, and `now` is `$2`"
        );
        assert!(expiry_placeholder(
            "WHERE (lock_expires_at IS NULL OR lock_expires_at <= $1)",
            1
        ));
        assert!(!expiry_placeholder("SET locked_by = $3, locked_at = $1", 1));
    }

    #[test]
    fn reexports_are_followed_to_what_they_name() {
        let idx = index(&[
            (
                "crate::locks",
                "mod manager; mod keys; pub use manager::Locks; pub use keys::*; pub use self::manager as m;",
            ),
            (
                "crate::locks::manager",
                "pub struct Locks { pub mgr: u32 } pub fn helper() -> Locks { todo!() }",
            ),
            ("crate::locks::keys", "pub const TTL: u64 = 5;"),
            (
                "crate::prelude",
                "pub use rslock::LockManager as Manager; pub use crate::locks::*;",
            ),
            // Code that does not compile may re-export in a circle; following must still end.
            ("crate::a", "pub use crate::b::X;"),
            ("crate::b", "pub use crate::a::X;"),
        ]);
        let follow = |p: &str| idx.through_reexports(p.to_string());
        assert_eq!(
            follow("crate::locks::Locks"),
            "crate::locks::manager::Locks"
        );
        assert_eq!(
            follow("crate::locks::m::helper"),
            "crate::locks::manager::helper"
        );
        assert_eq!(follow("crate::locks::TTL"), "crate::locks::keys::TTL");
        assert_eq!(follow("crate::prelude::Manager"), "rslock::LockManager");
        assert_eq!(
            follow("crate::prelude::Manager::new"),
            "rslock::LockManager::new"
        );
        // Through two modules: the prelude globs the locks module, which re-exports by name.
        assert_eq!(
            follow("crate::prelude::Locks"),
            "crate::locks::manager::Locks"
        );
        // A glob is followed only to what the crate holds; items are never rewritten.
        assert_eq!(follow("crate::prelude::Unknown"), "crate::prelude::Unknown");
        assert_eq!(
            follow("crate::locks::manager::Locks"),
            "crate::locks::manager::Locks"
        );
        let _ = follow("crate::a::X");
        assert!(idx.knows("crate::locks::Locks"));
        assert_eq!(
            idx.constant("crate::locks::TTL").map(|c| c.0.as_str()),
            Some("5")
        );
        let ty = idx
            .fn_return("crate::locks::m::helper")
            .expect("return type");
        assert_eq!(ty.path, "crate::locks::manager::Locks");
    }
}
