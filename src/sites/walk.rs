//! The function walker: keeps a scope of local variables and their types, knows how each
//! expression's value is used, and asks the matchers whether a call is a lock site.

use std::collections::{HashMap, HashSet};

use syn::visit::Visit;
use syn::{Expr, Pat, Stmt};

use super::failure::{self, Use};
use super::matchers::{self, Matched};
use super::{FileCx, FnInfo, Site};
use crate::model::eval::{Lookup, Value};
use crate::model::index::ty_with;
use crate::model::{Imports, Ty};
use crate::source::Span;

/// Finds every lock site in a parsed file.
pub fn analyze_file(file: &syn::File, cx: &FileCx<'_>) -> Vec<Site> {
    let mut sites = Vec::new();
    // Macro arguments are parsed on the fly and must live as long as the tree they extend.
    let arena = MacroArena::new();
    items(&file.items, cx, cx.imports, &arena, &mut sites);
    sites
}

type MacroArgs = syn::punctuated::Punctuated<Expr, syn::Token![,]>;
type MacroArena = typed_arena::Arena<MacroArgs>;

fn items<'a>(
    list: &'a [syn::Item],
    cx: &FileCx<'_>,
    imports: &Imports,
    arena: &'a MacroArena,
    out: &mut Vec<Site>,
) {
    for item in list {
        match item {
            syn::Item::Fn(f) => {
                let path = fn_path(imports, None, &f.sig.ident.to_string());
                analyze_fn(&f.sig, &f.block, cx, imports, None, path, arena, out);
            }
            syn::Item::Impl(imp) => {
                let known = |p: &str| cx.index.knows(p) || cx.packs.knows(p);
                let self_ty =
                    ty_with(&imp.self_ty, imports, None, &known).map(|t| cx.index.normalize(&t));
                for it in &imp.items {
                    if let syn::ImplItem::Fn(f) = it {
                        let path = fn_path(imports, self_ty.as_ref(), &f.sig.ident.to_string());
                        analyze_fn(
                            &f.sig,
                            &f.block,
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
                for it in &t.items {
                    if let syn::TraitItem::Fn(f) = it
                        && let Some(block) = &f.default
                    {
                        let path = fn_path(
                            imports,
                            Some(&Ty::simple(t.ident.to_string())),
                            &f.sig.ident.to_string(),
                        );
                        analyze_fn(&f.sig, block, cx, imports, None, path, arena, out);
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

#[allow(clippy::too_many_arguments)]
fn analyze_fn<'a>(
    sig: &'a syn::Signature,
    body: &'a syn::Block,
    cx: &FileCx<'_>,
    imports: &Imports,
    self_ty: Option<Ty>,
    path: String,
    arena: &'a MacroArena,
    out: &mut Vec<Site>,
) {
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
    };
    for gp in &sig.generics.params {
        if let syn::GenericParam::Type(tp) = gp {
            w.add_generic(&tp.ident.to_string(), tp.bounds.iter());
        }
    }
    if let Some(wc) = &sig.generics.where_clause {
        for pred in &wc.predicates {
            if let syn::WherePredicate::Type(pt) = pred
                && let syn::Type::Path(p) = &pt.bounded_ty
                && let Some(id) = p.path.get_ident()
            {
                w.add_generic(&id.to_string(), pt.bounds.iter());
            }
        }
    }
    for input in &sig.inputs {
        if let syn::FnArg::Typed(pt) = input {
            let ty = w.ty_of_type(&pt.ty);
            w.bind(&pt.pat, None, ty);
        }
    }
    w.visit_block(body);
}

/// A local variable: its type when known, and its initialiser for value evaluation.
#[derive(Clone)]
struct Local<'a> {
    ty: Option<Ty>,
    init: Option<&'a Expr>,
}

pub(super) struct Walker<'a, 'c> {
    pub(super) cx: &'c FileCx<'c>,
    pub(super) imports: &'c Imports,
    self_ty: Option<Ty>,
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
    out: &'c mut Vec<Site>,
}

impl<'a, 'c> Walker<'a, 'c> {
    fn add_generic<'b>(
        &mut self,
        name: &str,
        bounds: impl Iterator<Item = &'b syn::TypeParamBound>,
    ) {
        for b in bounds {
            if let syn::TypeParamBound::Trait(tb) = b {
                let path = self.resolve(&tb.path);
                self.generics.insert(name.to_string(), Ty::simple(path));
                return;
            }
        }
    }

    pub(super) fn known(&self) -> impl Fn(&str) -> bool + '_ {
        |p: &str| self.cx.index.knows(p) || self.cx.packs.knows(p)
    }

    pub(super) fn resolve(&self, path: &syn::Path) -> String {
        self.imports
            .resolve(path, self.self_ty.as_ref(), &self.known())
    }

    fn ty_of_type(&self, t: &syn::Type) -> Option<Ty> {
        let ty = ty_with(t, self.imports, self.self_ty.as_ref(), &self.known())?;
        if let Some(g) = self.generics.get(&ty.path) {
            return Some(g.clone());
        }
        Some(self.cx.index.normalize(&ty))
    }

    /// The initialiser of a visible local, borrowed from the tree (not from the walker).
    pub(super) fn local_init(&self, name: &str) -> Option<&'a Expr> {
        self.lookup(name).and_then(|l| l.init)
    }

    fn lookup(&self, name: &str) -> Option<&Local<'a>> {
        self.scopes.iter().rev().find_map(|s| s.get(name))
    }

    /// Binds the names a pattern introduces. Every name shadows, even when nothing is known about it.
    fn bind(&mut self, pat: &'a Pat, init: Option<&'a Expr>, ty: Option<Ty>) {
        match pat {
            Pat::Ident(pi) => {
                let local = Local {
                    ty,
                    init: if pi.subpat.is_none() { init } else { None },
                };
                if let Some(scope) = self.scopes.last_mut() {
                    scope.insert(pi.ident.to_string(), local);
                }
            }
            Pat::Type(pt) => {
                let ty = self.ty_of_type(&pt.ty).or(ty);
                self.bind(&pt.pat, init, ty);
            }
            Pat::Reference(r) => self.bind(&r.pat, init, ty),
            Pat::Paren(p) => self.bind(&p.pat, init, ty),
            Pat::TupleStruct(ts)
                if ts.elems.len() == 1
                    && ts.path.segments.last().is_some_and(|s| {
                        matches!(s.ident.to_string().as_str(), "Ok" | "Some" | "Left")
                    }) =>
            {
                let inner = ty.map(|t| t.peeled().clone());
                self.bind(&ts.elems[0], None, inner);
            }
            other => {
                let mut names = Vec::new();
                pattern_idents(other, &mut names);
                if let Some(scope) = self.scopes.last_mut() {
                    for n in names {
                        scope.insert(
                            n,
                            Local {
                                ty: None,
                                init: None,
                            },
                        );
                    }
                }
            }
        }
    }

    /// The type of an expression, as far as annotations, constructors and packs tell.
    pub(super) fn type_of(&self, e: &Expr) -> Option<Ty> {
        self.type_of_depth(e, 0)
    }

    fn type_of_depth(&self, e: &Expr, depth: usize) -> Option<Ty> {
        if depth > 16 {
            return None;
        }
        let rec = |x: &Expr| self.type_of_depth(x, depth + 1);
        let ty = match e {
            Expr::Path(p) if p.qself.is_none() => {
                if let Some(id) = p.path.get_ident() {
                    let name = id.to_string();
                    if name == "self" {
                        return self.self_ty.clone();
                    }
                    if let Some(l) = self.lookup(&name) {
                        return l.ty.clone();
                    }
                }
                // Not a local: a unit struct or an enum variant names its type (`Local`, `Kind::A`).
                let last = p
                    .path
                    .segments
                    .last()
                    .map(|s| s.ident.to_string())
                    .unwrap_or_default();
                if last.starts_with(|c: char| c.is_ascii_uppercase())
                    && last.chars().any(|c| c.is_ascii_lowercase())
                {
                    let path = self.resolve(&p.path);
                    let ty = if p.path.segments.len() > 1
                        && self.cx.packs.type_of_path(&path).is_none()
                    {
                        path.rsplit_once("::")
                            .map_or(path.clone(), |(t, _)| t.to_string())
                    } else {
                        path
                    };
                    return Some(Ty::simple(ty));
                }
                None
            }
            Expr::Field(f) => {
                let base = rec(&f.base)?;
                let name = match &f.member {
                    syn::Member::Named(n) => n.to_string(),
                    syn::Member::Unnamed(i) => i.index.to_string(),
                };
                self.cx.index.field(base.peeled(), &name)
            }
            Expr::Paren(p) => rec(&p.expr),
            Expr::Group(g) => rec(&g.expr),
            Expr::Reference(r) => rec(&r.expr),
            Expr::Try(t) => rec(&t.expr),
            Expr::Await(a) => rec(&a.base),
            Expr::Unary(u) if matches!(u.op, syn::UnOp::Deref(_)) => rec(&u.expr),
            Expr::Struct(s) => Some(Ty::simple(self.resolve(&s.path))),
            Expr::Block(b) => match b.block.stmts.last() {
                Some(Stmt::Expr(x, None)) => rec(x),
                _ => None,
            },
            Expr::MethodCall(m) => {
                let method = m.method.to_string();
                let recv = rec(&m.receiver);
                if let Some(r) = &recv {
                    let peeled = r.peeled();
                    if matches!(
                        method.as_str(),
                        "lock"
                            | "read"
                            | "write"
                            | "blocking_lock"
                            | "try_lock"
                            | "get_mut"
                            | "borrow"
                            | "borrow_mut"
                            | "blocking_read"
                            | "blocking_write"
                            | "get"
                            | "get_or_init"
                    ) && let Some(inner) = peeled.guarded_inner()
                    {
                        return Some(inner.clone());
                    }
                }
                if matches!(
                    method.as_str(),
                    "clone"
                        | "as_ref"
                        | "as_mut"
                        | "borrow"
                        | "borrow_mut"
                        | "deref"
                        | "deref_mut"
                        | "to_owned"
                        | "unwrap"
                        | "expect"
                        | "unwrap_or_default"
                        | "into_inner"
                        | "context"
                        | "with_context"
                        | "map_err"
                ) {
                    return recv;
                }
                if let Some(t) = matchers::pack_return_type(self, m, recv.as_ref()) {
                    return Some(t);
                }
                recv.and_then(|r| self.cx.index.method_return(r.peeled(), &method))
            }
            Expr::Call(c) => {
                let Expr::Path(f) = &*c.func else { return None };
                let path = self.resolve(&f.path);
                let (parent, last) = path.rsplit_once("::").unwrap_or(("", path.as_str()));
                if let Some(ctors) = self.cx.packs.constructors.get(parent)
                    && ctors.iter().any(|c| c == last)
                {
                    let canon = self
                        .cx
                        .packs
                        .type_of_path(parent)
                        .map_or(parent.to_string(), |(_, p)| p.clone());
                    return Some(Ty::simple(canon));
                }
                let parent_last = parent.rsplit("::").next().unwrap_or(parent);
                match (parent_last, last) {
                    ("Arc" | "Rc" | "Box" | "Mutex" | "RwLock" | "RefCell" | "Cell", "new") => {
                        let inner = c.args.first().and_then(rec);
                        return Some(Ty {
                            path: parent.to_string(),
                            args: inner.into_iter().collect(),
                        });
                    }
                    ("", "Some" | "Ok") => return c.args.first().and_then(rec),
                    _ => {}
                }
                if let Some(t) = matchers::pack_fn_return_type(self, &path) {
                    return Some(t);
                }
                self.cx.index.fn_return(&path)
            }
            Expr::Macro(_) | Expr::Lit(_) => None,
            _ => None,
        };
        ty.map(|t| self.cx.index.normalize(&t))
    }

    fn set_use(&mut self, e: &'a Expr, u: Use<'a>) {
        self.pending.push((e as *const Expr, u));
    }

    fn take_use(&mut self, e: &Expr) -> Use<'a> {
        let ptr = e as *const Expr;
        match self.pending.iter().rposition(|(p, _)| *p == ptr) {
            Some(i) => self.pending.swap_remove(i).1,
            None => Use::Other,
        }
    }

    pub(super) fn rest(&self) -> &'a [Stmt] {
        self.rest.last().copied().unwrap_or(&[])
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
                _ => break,
            };
        }
        for i in (0..levels.len()).rev() {
            let core = levels[i];
            if self.done.contains(&(core as *const Expr)) {
                return;
            }
            if let Some(m) = matchers::match_site(self, core, &levels[..i]) {
                self.done.insert(core as *const Expr);
                let outward: Vec<&'a Expr> = levels[..i - m.consumed.min(i)]
                    .iter()
                    .rev()
                    .copied()
                    .collect();
                self.record(m, &outward, u);
                return;
            }
        }
    }

    fn record(&mut self, m: Matched<'a>, outward: &[&'a Expr], u: Use<'a>) {
        if !m.kind.is_acquisition() {
            return;
        }
        let failure = failure::judge(self, m.returns, outward, &u, m.discarded);
        let pack = &self.cx.packs.packs[m.pack].pack;
        let key = m
            .key
            .as_ref()
            .and_then(|k| crate::model::eval::eval_str(k, &*self));
        self.out.push(Site {
            pack: m.pack,
            library: pack.name.clone(),
            api: m.api,
            kind: m.kind,
            span: m.span,
            stmt_line: self.stmt_line,
            function: Some(self.info.clone()),
            key,
            ttl: m.ttl,
            failure,
            fencing: m.fencing,
            release: pack.release,
            consensus: pack.consensus,
        });
    }

    fn visit_macro_args(&mut self, mac: &'a syn::Macro) {
        // Macro bodies are token streams; most that matter (`format!`, `info!`, `assert!`,
        // `tokio::select!` arms aside) are comma-separated expressions.
        if let Ok(args) = mac.parse_body_with(MacroArgs::parse_terminated) {
            let args: &'a MacroArgs = self.arena.alloc(args);
            for a in args.iter() {
                self.set_use(a, Use::Escape);
                self.visit_expr(a);
            }
        }
    }
}

impl Lookup for Walker<'_, '_> {
    fn local(&self, name: &str) -> Option<&Expr> {
        self.lookup(name).and_then(|l| l.init)
    }

    fn constant(&self, path: &syn::Path) -> Option<Value> {
        let canon = self.resolve(path);
        let (src, _module) = self.cx.index.constant(&canon)?;
        let expr: Expr = syn::parse_str(src).ok()?;
        // Constants refer to other constants; locals are out of scope there.
        crate::model::eval::eval(&expr, &ConstEnv(self))
    }

    fn resolve_fn(&self, path: &syn::Path) -> String {
        self.resolve(path)
    }
}

/// Evaluation inside a constant's initialiser: no locals.
struct ConstEnv<'w, 'a, 'c>(&'w Walker<'a, 'c>);

impl Lookup for ConstEnv<'_, '_, '_> {
    fn local(&self, _: &str) -> Option<&Expr> {
        None
    }
    fn constant(&self, path: &syn::Path) -> Option<Value> {
        self.0.constant(path)
    }
    fn resolve_fn(&self, path: &syn::Path) -> String {
        self.0.resolve(path)
    }
}

impl<'a> Visit<'a> for Walker<'a, '_> {
    fn visit_block(&mut self, b: &'a syn::Block) {
        self.scopes.push(HashMap::new());
        let saved_line = self.stmt_line;
        for (i, stmt) in b.stmts.iter().enumerate() {
            self.rest.push(&b.stmts[i + 1..]);
            self.stmt_line = Span::of(stmt).line;
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
                        self.visit_expr(&init.expr);
                        if let Some((_, els)) = &init.diverge {
                            self.visit_expr(els);
                        }
                        ty = self.type_of(&init.expr);
                    }
                    self.bind(&l.pat, l.init.as_ref().map(|i| &*i.expr), ty);
                }
                Stmt::Expr(e, semi) => {
                    self.set_use(
                        e,
                        if semi.is_some() {
                            Use::Discard
                        } else {
                            Use::Escape
                        },
                    );
                    self.visit_expr(e);
                }
                Stmt::Item(syn::Item::Fn(f)) => {
                    let path = format!("{}::{}", self.info.path, f.sig.ident);
                    analyze_fn(
                        &f.sig,
                        &f.block,
                        self.cx,
                        self.imports,
                        None,
                        path,
                        self.arena,
                        self.out,
                    );
                }
                Stmt::Item(_) => {}
                Stmt::Macro(m) => self.visit_macro_args(&m.mac),
            }
            self.rest.pop();
        }
        self.stmt_line = saved_line;
        self.scopes.pop();
    }

    fn visit_expr(&mut self, e: &'a Expr) {
        let u = self.take_use(e);
        let bound = match &u {
            Use::Bind {
                pat,
                has_else: false,
            } => Some(*pat),
            _ => None,
        };
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
        match e {
            Expr::If(i) => {
                self.scopes.push(HashMap::new());
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
                        self.bind(&l.pat, None, ty);
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
                self.visit_block(&i.then_branch);
                self.scopes.pop();
                if let Some((_, els)) = &i.else_branch {
                    self.visit_expr(els);
                }
            }
            Expr::While(w) => {
                self.scopes.push(HashMap::new());
                if let Expr::Let(l) = &*w.cond {
                    self.set_use(&l.expr, Use::Escape);
                    self.visit_expr(&l.expr);
                    let ty = self.type_of(&l.expr);
                    self.bind(&l.pat, None, ty);
                } else {
                    self.set_use(&w.cond, Use::Escape);
                    self.visit_expr(&w.cond);
                }
                self.visit_block(&w.body);
                self.scopes.pop();
            }
            Expr::Match(m) => {
                self.set_use(
                    &m.expr,
                    Use::Match {
                        arms: &m.arms,
                        bound,
                    },
                );
                self.visit_expr(&m.expr);
                let ty = self.type_of(&m.expr);
                for arm in &m.arms {
                    self.scopes.push(HashMap::new());
                    self.bind(&arm.pat, None, ty.clone());
                    if let Some((_, g)) = &arm.guard {
                        self.visit_expr(g);
                    }
                    self.set_use(&arm.body, Use::Escape);
                    self.visit_expr(&arm.body);
                    self.scopes.pop();
                }
            }
            Expr::ForLoop(f) => {
                self.visit_expr(&f.expr);
                self.scopes.push(HashMap::new());
                self.bind(&f.pat, None, None);
                self.visit_block(&f.body);
                self.scopes.pop();
            }
            Expr::Closure(c) => {
                self.scopes.push(HashMap::new());
                for p in &c.inputs {
                    self.bind(p, None, None);
                }
                self.set_use(&c.body, Use::Escape);
                self.visit_expr(&c.body);
                self.scopes.pop();
            }
            Expr::Return(r) => {
                if let Some(x) = &r.expr {
                    self.set_use(x, Use::Escape);
                    self.visit_expr(x);
                }
            }
            Expr::Break(b) => {
                if let Some(x) = &b.expr {
                    self.set_use(x, Use::Escape);
                    self.visit_expr(x);
                }
            }
            Expr::Call(c) => {
                self.visit_expr(&c.func);
                for a in &c.args {
                    self.set_use(a, Use::Escape);
                    self.visit_expr(a);
                }
            }
            Expr::MethodCall(m) => {
                self.visit_expr(&m.receiver);
                for a in &m.args {
                    self.set_use(a, Use::Escape);
                    self.visit_expr(a);
                }
            }
            Expr::Macro(m) => self.visit_macro_args(&m.mac),
            Expr::Assign(a) => {
                self.visit_expr(&a.left);
                self.set_use(&a.right, Use::Escape);
                self.visit_expr(&a.right);
            }
            Expr::Struct(s) => {
                for f in &s.fields {
                    self.set_use(&f.expr, Use::Escape);
                    self.visit_expr(&f.expr);
                }
                if let Some(r) = &s.rest {
                    self.visit_expr(r);
                }
            }
            Expr::Tuple(t) => {
                for x in &t.elems {
                    self.set_use(x, Use::Escape);
                    self.visit_expr(x);
                }
            }
            Expr::Array(t) => {
                for x in &t.elems {
                    self.set_use(x, Use::Escape);
                    self.visit_expr(x);
                }
            }
            _ => syn::visit::visit_expr(self, e),
        }
    }

    // Nested items are analysed as functions of their own (see `visit_block`); the generic visitor
    // must not walk into them with this function's scope.
    fn visit_item(&mut self, _: &'a syn::Item) {}
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
