//! The typing environment of one function: what a name, a path or an expression is, from
//! locals and their initialisers, parameters, generics with their bounds, `self`, fields, items
//! of the program (through the crate's view of the workspace) and the packs' declared types; and
//! the evaluation environment constants and keys are computed in. Site detection asks it; it
//! records nothing.

use super::*;

impl<'a, 'c> Walker<'a, 'c> {
    pub(super) fn add_generic<'b>(
        &mut self,
        name: &str,
        bounds: impl Iterator<Item = &'b syn::TypeParamBound>,
    ) {
        for b in bounds {
            if let syn::TypeParamBound::Trait(tb) = b
                && !crate::model::ty::is_marker_trait(&tb.path)
            {
                let path = self.resolve(&tb.path);
                self.generics.insert(name.to_string(), Ty::simple(path));
                return;
            }
        }
    }

    pub(in crate::sites) fn known(&self) -> impl Fn(&str) -> bool + '_ {
        |p: &str| self.cx.index.knows(p) || self.cx.packs.knows(p)
    }

    pub(in crate::sites) fn resolve(&self, path: &syn::Path) -> String {
        let resolved = self
            .imports
            .resolve(path, self.self_ty.as_ref(), &self.known());
        self.cx
            .packs
            .unalias(self.cx.index.through_reexports(resolved))
    }

    pub(super) fn ty_of_type(&self, t: &syn::Type) -> Option<Ty> {
        // A generic parameter by its name, before imports: after `use diesel::prelude::*`, an
        // undeclared `F` would otherwise be taken for the glob's.
        if let syn::Type::Path(p) = t
            && p.qself.is_none()
            && let Some(id) = p.path.get_ident()
            && let Some(g) = self.generics.get(&id.to_string())
        {
            return Some(g.clone());
        }
        let ty = ty_with(t, self.imports, self.self_ty.as_ref(), &self.known())?;
        if let Some(g) = self.generics.get(&ty.path) {
            return Some(g.clone());
        }
        Some(self.unalias(self.cx.index.normalize(&ty)))
    }

    /// What a `for` loop over `e` binds: the element of a sequence or set (`for node in
    /// &self.cluster`, `cluster: Vec<I>` with `I: Instance`), also through `.iter()`.
    pub(super) fn element_type(&self, e: &Expr) -> Option<Ty> {
        let mut e = e;
        // A map's `values()` yields its values (`for store in self.stores.values()`).
        let mut values = false;
        while let Expr::MethodCall(m) = e
            && m.args.is_empty()
            && matches!(
                m.method.to_string().as_str(),
                "iter" | "iter_mut" | "into_iter" | "values" | "values_mut" | "into_values"
            )
        {
            values |= m.method.to_string().contains("values");
            e = &m.receiver;
        }
        let t = self.type_of(e)?;
        let t = t.peeled();
        match t.last_segment() {
            "Vec" | "VecDeque" | "HashSet" | "BTreeSet" | "IndexSet" | "SmallVec"
            | "LinkedList"
                if !values =>
            {
                t.args.first().cloned()
            }
            "HashMap" | "BTreeMap" | "IndexMap" | "DashMap" if values => t.args.get(1).cloned(),
            _ => None,
        }
    }

    /// A type as its library names it (`deadpool_redis::redis::Client` is `redis::Client`).
    pub(super) fn unalias(&self, mut ty: Ty) -> Ty {
        ty.path = self.cx.packs.unalias(std::mem::take(&mut ty.path));
        ty.args = ty.args.into_iter().map(|a| self.unalias(a)).collect();
        ty
    }

    /// The initialiser of a visible local, borrowed from the tree (not from the walker).
    pub(in crate::sites) fn local_init(&self, name: &str) -> Option<&'a Expr> {
        self.lookup(name).and_then(|l| l.init)
    }

    /// Is `name` a parameter of the function, not shadowed by a local with a value?
    pub(in crate::sites) fn is_param(&self, name: &str) -> bool {
        self.params.contains(name) && self.lookup(name).is_none_or(|l| l.init.is_none())
    }

    /// The position of parameter `name` (receiver not counted); `self` has none.
    pub(in crate::sites) fn param_position(&self, name: &str) -> Option<usize> {
        if name == "self" || !self.params.contains(name) {
            return None;
        }
        super::param_index(self.sig, name)
    }

    pub(super) fn lookup(&self, name: &str) -> Option<&Local<'a>> {
        self.scopes.iter().rev().find_map(|s| s.get(name))
    }

    /// The script keys later statements added to a local (`invoke.key(k);`).
    pub(in crate::sites) fn builder_keys(&self, name: &str) -> &[&'a Expr] {
        self.lookup(name).map_or(&[], |l| l.keys.as_slice())
    }

    /// A local bound to a builder, with the arguments later statements added to it.
    pub(in crate::sites) fn builder(&self, name: &str) -> Option<(&'a Expr, &[&'a Expr])> {
        self.lookup(name)
            .and_then(|l| Some((l.init?, l.args.as_slice())))
    }

    /// `let patch = Patch::Merge(&patch);` reads the earlier `patch`: the initialiser is kept
    /// with that one's initialiser in its place, so that values are followed through shadowing.
    /// Small initialisers only (a chain of rebindings would otherwise grow without bound).
    fn unshadowed(&self, name: &str, init: &'a Expr) -> &'a Expr {
        const MAX_NODES: usize = 512;
        let Some(prev) = self.lookup(name).and_then(|l| l.init) else {
            return init;
        };
        if !super::idents_in(init).contains(name)
            || expr_size(prev, MAX_NODES) >= MAX_NODES
            || expr_size(init, MAX_NODES) >= MAX_NODES
        {
            return init;
        }
        struct Subst<'p> {
            name: &'p str,
            with: &'p Expr,
        }
        impl syn::visit_mut::VisitMut for Subst<'_> {
            fn visit_expr_mut(&mut self, e: &mut Expr) {
                if let Expr::Path(p) = e
                    && p.qself.is_none()
                    && p.path.is_ident(self.name)
                {
                    *e = Expr::Paren(syn::ExprParen {
                        attrs: Vec::new(),
                        paren_token: Default::default(),
                        expr: Box::new(self.with.clone()),
                    });
                    return;
                }
                // A closure's parameter of the same name is another variable.
                if matches!(e, Expr::Closure(_)) {
                    return;
                }
                syn::visit_mut::visit_expr_mut(self, e);
            }
        }
        let mut copy = init.clone();
        syn::visit_mut::VisitMut::visit_expr_mut(&mut Subst { name, with: prev }, &mut copy);
        self.keep(copy)
    }

    pub(super) fn bind_types(&mut self, pat: &'a Pat, init: Option<&'a Expr>, ty: Option<Ty>) {
        match pat {
            Pat::Ident(pi) => {
                let name = pi.ident.to_string();
                let init = if pi.subpat.is_none() {
                    init.map(|e| self.unshadowed(&name, e))
                } else {
                    None
                };
                let local = Local {
                    ty,
                    init,
                    args: Vec::new(),
                    keys: Vec::new(),
                    serial: self.next_serial(),
                };
                if let Some(scope) = self.scopes.last_mut() {
                    scope.insert(name, local);
                }
            }
            Pat::Type(pt) => {
                let ty = self.ty_of_type(&pt.ty).or(ty);
                self.bind_types(&pt.pat, init, ty);
            }
            Pat::Reference(r) => self.bind_types(&r.pat, init, ty),
            Pat::Paren(p) => self.bind_types(&p.pat, init, ty),
            Pat::TupleStruct(ts)
                if ts.elems.len() == 1
                    && ts.path.segments.last().is_some_and(|s| {
                        matches!(s.ident.to_string().as_str(), "Ok" | "Some" | "Left")
                    }) =>
            {
                let inner = ty.map(|t| t.peeled().clone());
                self.bind_types(&ts.elems[0], None, inner);
            }
            // A newtype taken apart by its own constructor: `State(state): State<AppState>`,
            // `Json(body): Json<Req>`, `Wrapper(inner): Wrapper<T>` bind the one argument.
            Pat::TupleStruct(ts)
                if ts.elems.len() == 1
                    && ty.as_ref().is_some_and(|t| {
                        t.args.len() == 1
                            && ts
                                .path
                                .segments
                                .last()
                                .is_some_and(|s| s.ident == t.last_segment())
                    }) =>
            {
                let inner = ty.and_then(|t| t.args.into_iter().next());
                self.bind_types(&ts.elems[0], None, inner);
            }
            // An enum variant or a struct taken apart by its path (`Store::Redis(s)`,
            // `Self::Etcd(client)`, `Locker(inner)`, `Conn { pool, .. }`): each name gets the
            // field's type, from the index.
            Pat::TupleStruct(ts) => {
                let owner = self.pattern_owner(&ts.path, ty.as_ref());
                for (i, el) in ts.elems.iter().enumerate() {
                    // After a `..` the positions are no longer the fields'.
                    if matches!(el, Pat::Rest(_)) {
                        for rest in ts.elems.iter().skip(i + 1) {
                            self.bind_types(rest, None, None);
                        }
                        break;
                    }
                    let t = owner
                        .as_ref()
                        .and_then(|o| self.field_of(o, &i.to_string()));
                    self.bind_types(el, None, t);
                }
            }
            // A tuple taken apart (`let (client, locks) = &self.pair;`, `Some((_, locks))`):
            // each name gets its element's type, and its element when the value is written out.
            Pat::Tuple(pt) => {
                let elems = ty
                    .filter(|t| t.path == crate::model::ty::TUPLE && t.args.len() == pt.elems.len())
                    .map(|t| t.args);
                let inits = match init.map(super::super::summary::peel_key) {
                    Some(Expr::Tuple(t)) if t.elems.len() == pt.elems.len() => {
                        Some(t.elems.iter().collect::<Vec<_>>())
                    }
                    _ => None,
                };
                for (i, el) in pt.elems.iter().enumerate() {
                    if matches!(el, Pat::Rest(_)) {
                        for rest in pt.elems.iter().skip(i + 1) {
                            self.bind_types(rest, None, None);
                        }
                        break;
                    }
                    let init = inits.as_ref().map(|v| v[i]);
                    let t = elems
                        .as_ref()
                        .map(|e| e[i].clone())
                        .filter(|t| t.path != "_")
                        .or_else(|| init.and_then(|e| self.type_of(e)));
                    self.bind_types(el, init, t);
                }
            }
            Pat::Struct(ps) => {
                let owner = self.pattern_owner(&ps.path, ty.as_ref());
                for fp in &ps.fields {
                    let name = match &fp.member {
                        syn::Member::Named(n) => n.to_string(),
                        syn::Member::Unnamed(i) => i.index.to_string(),
                    };
                    let t = owner.as_ref().and_then(|o| self.field_of(o, &name));
                    self.bind_types(&fp.pat, None, t);
                }
            }
            other => {
                let mut names = Vec::new();
                pattern_idents(other, &mut names);
                for n in names {
                    let serial = self.next_serial();
                    if let Some(scope) = self.scopes.last_mut() {
                        scope.insert(
                            n,
                            Local {
                                ty: None,
                                init: None,
                                args: Vec::new(),
                                keys: Vec::new(),
                                serial,
                            },
                        );
                    }
                }
            }
        }
    }

    /// The struct or enum variant a pattern's path names: resolved through the imports
    /// (`Self::A` through the impl's type), or, for a bare variant name, under the matched
    /// value's type (`A(x)` matched against a `Store`).
    fn pattern_owner(&self, path: &syn::Path, matched: Option<&Ty>) -> Option<Ty> {
        let as_type = |p: syn::Path| {
            self.ty_of_type(&syn::Type::Path(syn::TypePath {
                qself: None,
                path: p,
            }))
        };
        // A struct by its own path (`Locker(inner)`, `Conn { pool, .. }`).
        if let Some(t) = as_type(path.clone())
            && self.cx.index.has_fields(&t)
        {
            return Some(t);
        }
        let last = path.segments.last()?.ident.to_string();
        // A variant under its enum's path (`Store::Redis(s)`, `Self::Etcd(c)`).
        if path.segments.len() > 1 {
            let parent = syn::Path {
                leading_colon: path.leading_colon,
                segments: path
                    .segments
                    .iter()
                    .take(path.segments.len() - 1)
                    .cloned()
                    .collect(),
            };
            if let Some(e) = as_type(parent) {
                let under = Ty::simple(format!("{}::{last}", e.path));
                if self.cx.index.has_fields(&under) {
                    return Some(under);
                }
            }
        }
        // A bare variant name matched against a value of the enum's type.
        let enum_ty = matched?.peeled();
        let under = Ty::simple(format!("{}::{last}", enum_ty.path));
        self.cx.index.has_fields(&under).then_some(under)
    }

    /// A field's type; the function's generic parameters in it stand for their bounds
    /// (`impl<E: Kv + 'static> Sweeper<E>`: `self.engine` is an `Arc` of a `Kv`).
    fn field_of(&self, owner: &Ty, field: &str) -> Option<Ty> {
        let t = self.cx.index.field(owner, field)?;
        Some(crate::model::index::substitute_bounds(t, &self.generics))
    }

    /// The type of an expression, as far as annotations, constructors and packs tell.
    pub(in crate::sites) fn type_of(&self, e: &Expr) -> Option<Ty> {
        self.type_of_depth(e, 0)
    }

    pub(super) fn type_of_depth(&self, e: &Expr, depth: usize) -> Option<Ty> {
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
                // A constant or static names its declared type (`WRITE.try_lock(..)`,
                // `LOCKS.lock(..)` on a `static LOCKS: LazyLock<Manager>`).
                if let Some(t) = self.cx.index.const_type(&self.resolve(&p.path)) {
                    return Some(t);
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
                self.field_of(base.peeled(), &name)
            }
            Expr::Paren(p) => rec(&p.expr),
            Expr::Group(g) => rec(&g.expr),
            Expr::Reference(r) => rec(&r.expr),
            Expr::Try(t) => rec(&t.expr),
            Expr::Await(a) => rec(&a.base),
            Expr::Unary(u) if matches!(u.op, syn::UnOp::Deref(_)) => rec(&u.expr),
            // A variant built (`LockAction::Hold { .. }`) is a value of its enum.
            Expr::Struct(s) => {
                let t = Ty::simple(self.resolve(&s.path));
                Some(self.cx.index.variant_enum(&t).unwrap_or(t))
            }
            Expr::Block(b) => match b.block.stmts.last() {
                Some(Stmt::Expr(x, None)) => rec(x),
                _ => None,
            },
            // `match builder.build().await { Ok(m) => m, Err(e) => return }`: the success arm
            // hands on what the scrutinee held.
            Expr::Match(m) => m
                .arms
                .iter()
                .any(|a| unwrapped_by(&a.pat).is_some_and(|n| plain_name(&a.body) == Some(n)))
                .then(|| rec(&m.expr))
                .flatten(),
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
                        | "unwrap_or"
                        | "unwrap_or_default"
                        | "unwrap_or_else"
                        | "into_inner"
                        | "context"
                        | "with_context"
                        | "map_err"
                        | "ok_or"
                        | "ok_or_else"
                        | "change_context"
                        | "attach_printable"
                        | "wrap_err"
                        | "wrap_err_with"
                ) {
                    return recv;
                }
                if let Some(t) = matchers::pack_return_type(self, m, recv.as_ref()) {
                    return Some(t);
                }
                if let Some(t) = recv
                    .as_ref()
                    .and_then(|r| self.cx.index.method_return(r.peeled(), &method))
                {
                    return Some(t);
                }
                self.built_by(m)
            }
            Expr::Call(c) => {
                // A function value called (`(self.now)()` on a `now: Arc<dyn Fn() -> T>`) gives
                // what its type says calling it gives.
                let Expr::Path(f) = &*c.func else {
                    let callee = rec(&c.func)?;
                    let callee = callee.peeled();
                    return matches!(callee.last_segment(), "Fn" | "FnMut" | "FnOnce" | "fn")
                        .then(|| callee.args.first().cloned())
                        .flatten()
                        .map(|t| self.cx.index.normalize(&t));
                };
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
                    // A turbofish on the type names its arguments (`Api::<Lease>::namespaced`).
                    let args = f
                        .path
                        .segments
                        .iter()
                        .rev()
                        .nth(1)
                        .map(|seg| match &seg.arguments {
                            syn::PathArguments::AngleBracketed(a) => a
                                .args
                                .iter()
                                .filter_map(|g| match g {
                                    syn::GenericArgument::Type(t) => self.ty_of_type(t),
                                    _ => None,
                                })
                                .collect(),
                            _ => Vec::new(),
                        })
                        .unwrap_or_default();
                    return Some(Ty { path: canon, args });
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
                    // `Arc::clone(&mgr)` is the same manager.
                    ("Arc" | "Rc", "clone") => return c.args.first().and_then(rec),
                    _ => {}
                }
                if let Some(t) = matchers::pack_fn_return_type(self, &path) {
                    return Some(t);
                }
                // A handle a library type's associated function gives out
                // (`TardisFuns::cache()`), as its `methods` list it.
                let canon_parent = self
                    .cx
                    .packs
                    .type_of_path(parent)
                    .map_or(parent.to_string(), |(_, p)| p.clone());
                if let Some(ret) = self
                    .cx
                    .packs
                    .method_returns
                    .get(&(canon_parent, last.to_string()))
                {
                    return Some(Ty::simple(ret.clone()));
                }
                // A described library's own type built by its `new`/`default`
                // (`ResignOptions::new()`): the library's value, for what it is handed.
                if matches!(last, "new" | "default") && self.cx.packs.is_library_type(parent) {
                    return Some(Ty::simple(parent));
                }
                // A tuple variant built (`Store::Redis(client)`) is a value of its enum.
                if let Some(t) = self.cx.index.variant_enum(&Ty::simple(path.clone())) {
                    return Some(t);
                }
                self.cx.index.fn_return(&path)
            }
            Expr::Macro(m) => matchers::pack_macro_type(self, m),
            _ => None,
        };
        // A signature or field of the program may name a library through a crate that
        // re-exports it (`-> Result<deadpool_redis::redis::aio::MultiplexedConnection>`).
        ty.map(|t| self.unalias(self.cx.index.normalize(&t)))
    }

    /// Does the function return a future (`impl Future`, `BoxFuture`, `Pin<Box<dyn Future>>`)?
    pub(super) fn returns_future(&self) -> bool {
        self.ret.as_ref().is_some_and(|t| {
            matches!(
                t.peeled().last_segment(),
                "Future" | "BoxFuture" | "LocalBoxFuture" | "IntoFuture"
            )
        })
    }

    /// `Client::builder().url(u).build().await?` is a `Client`: a builder chain that ends in a
    /// finishing call gives the type whose `builder()` started it, when that type is a lock
    /// type or an item of the program (not every builder builds its own type; those that do
    /// not are left unknown).
    pub(super) fn built_by(&self, m: &syn::ExprMethodCall) -> Option<Ty> {
        // An options value of a described library, set up by methods that hand it back and
        // finished by one its pack names (`PgPoolOptions::new().max_connections(5)
        // .connect_with(opts).await?` is a `PgPool`).
        if let Some(t) = self.finished_options(m) {
            return Some(t);
        }
        if !matches!(
            m.method.to_string().as_str(),
            "build" | "connect" | "finish" | "open" | "create" | "build_async" | "connect_lazy"
        ) {
            return None;
        }
        let mut cur = &*m.receiver;
        loop {
            match cur {
                Expr::MethodCall(inner) => cur = &inner.receiver,
                Expr::Await(a) => cur = &a.base,
                Expr::Try(t) => cur = &t.expr,
                Expr::Call(c) => {
                    let Expr::Path(f) = &*c.func else { return None };
                    let path = self.resolve(&f.path);
                    let (parent, last) = path.rsplit_once("::")?;
                    // `Client::builder()…` or `ClientBuilder::new(..)…`: both build a `Client`.
                    let parent = if last.ends_with("builder") {
                        parent.to_string()
                    } else {
                        match parent.strip_suffix("Builder") {
                            Some(built) if !built.ends_with("::") && !built.is_empty() => {
                                built.to_string()
                            }
                            _ => return None,
                        }
                    };
                    let parent = parent.as_str();
                    let ty = match self.cx.packs.type_of_path(parent) {
                        Some((_, canon)) => canon.clone(),
                        None if self.cx.index.knows(parent) => parent.to_string(),
                        None => return None,
                    };
                    return Some(Ty::simple(ty));
                }
                _ => return None,
            }
        }
    }
}

impl Walker<'_, '_> {
    /// See [`Walker::built_by`]: the type the pack says `m` finishes the chain's root into,
    /// when the root is a library type's `new`/`default`.
    fn finished_options(&self, m: &syn::ExprMethodCall) -> Option<Ty> {
        let mut cur = &*m.receiver;
        let root = loop {
            match cur {
                Expr::MethodCall(inner) => cur = &inner.receiver,
                Expr::Paren(p) => cur = &p.expr,
                Expr::Call(c) => break c,
                _ => return None,
            }
        };
        let Expr::Path(f) = &*root.func else {
            return None;
        };
        let path = self.resolve(&f.path);
        let (parent, last) = path.rsplit_once("::")?;
        if !matches!(last, "new" | "default") {
            return None;
        }
        let (_, canon) = self.cx.packs.type_of_path(parent)?;
        self.cx
            .packs
            .method_returns
            .get(&(canon.clone(), m.method.to_string()))
            .map(|t| Ty::simple(t.clone()))
    }
}

impl Lookup for Walker<'_, '_> {
    fn local(&self, name: &str) -> Option<&Expr> {
        self.lookup(name).and_then(|l| l.init)
    }

    fn inlined(&self, call: &syn::ExprCall) -> Option<&Expr> {
        super::super::ttl::inline_call(self, call)
    }

    fn constant(&self, path: &syn::Path) -> Option<Value> {
        ConstEnv {
            w: self,
            visiting: std::cell::RefCell::new(Vec::new()),
            texts: false,
        }
        .constant(path)
    }

    fn resolve_fn(&self, path: &syn::Path) -> String {
        self.resolve(path)
    }

    fn include(&self, rel: &str) -> Option<String> {
        crate::model::lua::read_include(&self.cx.source.path, rel)
    }

    fn assigned_fields(&self, name: &str) -> Vec<(String, &Expr)> {
        match self.body {
            Some(body) => assigned_fields(body, name)
                .into_iter()
                .map(|(f, v, _)| (f, v))
                .collect(),
            None => Vec::new(),
        }
    }

    fn field(&self, base: &Expr, member: &syn::Member) -> Option<Value> {
        self.field_value(base, member, false)
    }
}

impl Walker<'_, '_> {
    /// The value a struct field was initialised with. `texts`: also one a text-building
    /// function of the program answers (`campaign: self.campaign_sql()`), read where text is
    /// looked for (SQL), not where a value's identity matters (a key).
    pub(in crate::sites) fn field_value(
        &self,
        base: &Expr,
        member: &syn::Member,
        texts: bool,
    ) -> Option<Value> {
        let ty = self.type_of(base)?;
        let syn::Member::Named(name) = member else {
            return None;
        };
        let inits = self
            .out
            .field_inits
            .get(ty.peeled().last_segment(), &name.to_string())?;
        // Initialisers read the constructor's locals, which are out of scope here.
        inits.iter().find_map(|src| {
            let e: Expr = syn::parse_str(src).ok()?;
            let env = ConstEnv {
                w: self,
                visiting: std::cell::RefCell::new(Vec::new()),
                texts,
            };
            crate::model::eval::eval(&e, &env)
        })
    }
}

/// How many constants one value may be computed through (`A = B * 2`, `B = C + 1`, …).
const MAX_CONST_CHAIN: usize = 32;

/// Evaluation inside a constant's initialiser: no locals. It remembers the constants being
/// evaluated: one defined through itself (`const A: u64 = B; const B: u64 = A;`, which does not
/// compile but is met while editing) is unknown, never an endless recursion.
struct ConstEnv<'w, 'a, 'c> {
    w: &'w Walker<'a, 'c>,
    visiting: std::cell::RefCell<Vec<String>>,
    /// Read calls of the program's text-building functions (see `Walker::field_value`).
    texts: bool,
}

impl Lookup for ConstEnv<'_, '_, '_> {
    fn local(&self, _: &str) -> Option<&Expr> {
        None
    }
    fn constant(&self, path: &syn::Path) -> Option<Value> {
        let canon = self.w.resolve(path);
        let (src, _module) = self.w.cx.index.constant(&canon)?;
        {
            let mut visiting = self.visiting.borrow_mut();
            if visiting.len() >= MAX_CONST_CHAIN || visiting.contains(&canon) {
                return None;
            }
            visiting.push(canon);
        }
        let value = syn::parse_str::<Expr>(src)
            .ok()
            .and_then(|expr| crate::model::eval::eval(&expr, self));
        self.visiting.borrow_mut().pop();
        value
    }
    fn resolve_fn(&self, path: &syn::Path) -> String {
        self.w.resolve(path)
    }
    // Only calls by path: no receiver has a type here (`Factory::campaign_sql(self)`, the form a
    // field initialiser `self.campaign_sql()` is kept in).
    fn text_fn(&self, call: &Expr) -> Option<Expr> {
        match call {
            Expr::Call(_) if self.texts => super::super::matchers::text_fn_tail(self.w, call),
            _ => None,
        }
    }
}

/// The number of expression nodes in `e`, counted up to `limit`.
fn expr_size(e: &Expr, limit: usize) -> usize {
    struct Count {
        n: usize,
        limit: usize,
    }
    impl<'v> syn::visit::Visit<'v> for Count {
        fn visit_expr(&mut self, e: &'v Expr) {
            self.n += 1;
            if self.n < self.limit {
                syn::visit::visit_expr(self, e);
            }
        }
    }
    let mut c = Count { n: 0, limit };
    syn::visit::Visit::visit_expr(&mut c, e);
    c.n
}

impl Walker<'_, '_> {
    /// The parameter under which the function writes `field` (normalised, see
    /// `fields::normalize`) into `name`, when every write of it is inside `if <param> { … }`.
    pub(in crate::sites) fn field_gate(&self, name: &str, field: &str) -> Option<String> {
        let want = crate::sites::fields::normalize(field);
        let mut gates = assigned_fields(self.body?, name)
            .into_iter()
            .filter(|(f, _, _)| crate::sites::fields::normalize(f) == want)
            .map(|(_, _, gate)| gate);
        let first = gates.next()??;
        (gates.all(|g| g.as_deref() == Some(first.as_str())) && self.is_param(&first))
            .then_some(first)
    }
}

/// The fields assigned in `body` to `name` or to what borrows from it (`if let Some(ref mut s)
/// = name.spec`, `let s = name.spec.as_mut().unwrap()`), in order: (field, value, the plain
/// name the innermost enclosing `if` tests, if any).
fn assigned_fields<'b>(
    body: &'b syn::Block,
    name: &str,
) -> Vec<(String, &'b Expr, Option<String>)> {
    use syn::visit::Visit;
    struct Assigned<'b> {
        roots: HashSet<String>,
        out: Vec<(String, &'b Expr, Option<String>)>,
        /// The enclosing `if`s' conditions, when each is a plain name (`if steal`).
        conds: Vec<Option<String>>,
    }
    fn root(e: &Expr) -> Option<String> {
        match e {
            Expr::Path(p) => p.path.get_ident().map(|i| i.to_string()),
            Expr::Field(f) => root(&f.base),
            Expr::MethodCall(m) => root(&m.receiver),
            Expr::Reference(r) => root(&r.expr),
            Expr::Paren(p) => root(&p.expr),
            Expr::Unary(u) => root(&u.expr),
            Expr::Try(t) => root(&t.expr),
            _ => None,
        }
    }
    impl Assigned<'_> {
        fn lend(&mut self, pat: &Pat, from: &Expr) {
            if root(from).is_some_and(|r| self.roots.contains(&r)) {
                let mut names = Vec::new();
                super::pattern_idents(pat, &mut names);
                self.roots.extend(names);
            }
        }
    }
    impl<'b> Visit<'b> for Assigned<'b> {
        fn visit_local(&mut self, l: &'b syn::Local) {
            if let Some(init) = &l.init {
                self.lend(&l.pat, &init.expr);
            }
            syn::visit::visit_local(self, l);
        }
        fn visit_expr_let(&mut self, l: &'b syn::ExprLet) {
            self.lend(&l.pat, &l.expr);
            syn::visit::visit_expr_let(self, l);
        }
        fn visit_expr_assign(&mut self, a: &'b syn::ExprAssign) {
            if let Expr::Field(f) = &*a.left
                && let syn::Member::Named(field) = &f.member
                && root(&f.base).is_some_and(|r| self.roots.contains(&r))
            {
                self.out.push((
                    field.to_string(),
                    &a.right,
                    self.conds.last().cloned().flatten(),
                ));
            }
            syn::visit::visit_expr_assign(self, a);
        }
        fn visit_expr_if(&mut self, i: &'b syn::ExprIf) {
            self.visit_expr(&i.cond);
            self.conds.push(plain_name(&i.cond));
            self.visit_block(&i.then_branch);
            self.conds.pop();
            self.conds.push(None);
            if let Some((_, e)) = &i.else_branch {
                self.visit_expr(e);
            }
            self.conds.pop();
        }
        fn visit_item(&mut self, _: &'b syn::Item) {}
    }
    let mut v = Assigned {
        roots: HashSet::from([name.to_string()]),
        out: Vec::new(),
        conds: Vec::new(),
    };
    v.visit_block(body);
    v.out
}

/// The name `Ok(x)` or `Some(x)` binds.
fn unwrapped_by(p: &syn::Pat) -> Option<String> {
    let syn::Pat::TupleStruct(t) = p else {
        return None;
    };
    let last = t.path.segments.last()?.ident.to_string();
    if !matches!(last.as_str(), "Ok" | "Some") || t.elems.len() != 1 {
        return None;
    }
    match &t.elems[0] {
        syn::Pat::Ident(i) if i.subpat.is_none() => Some(i.ident.to_string()),
        _ => None,
    }
}

fn plain_name(e: &Expr) -> Option<String> {
    match e {
        Expr::Path(p) if p.qself.is_none() => p.path.get_ident().map(|i| i.to_string()),
        _ => None,
    }
}
