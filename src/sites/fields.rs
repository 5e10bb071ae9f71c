//! The fields an object argument sets: a `json!({…})` literal or a struct expression, followed
//! through locals, references, one-argument wrappers (`Patch::Merge(&p)`, `Some(x)`) and the
//! branches of `if`/`match`. Packs read them with `fields-arg` + `when-fields` to tell a write
//! that takes a lock (`holderIdentity` set) from one that renews or clears it.
//!
//! Invariant: `read` answers `None` when any part of the value could not be read; a `Some` set
//! lists every field the value can set, at any depth, so "absent" means "not written". A local
//! whose value cannot be read (one read from the server) counts by the fields the function
//! assigns to it: those are what the write changes.

use std::collections::BTreeMap;

use proc_macro2::{TokenStream, TokenTree};
use syn::Expr;

use crate::model::eval::Lookup;

/// How deep `read` follows locals and nested values.
const MAX_DEPTH: usize = 16;

/// What a written field holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    /// Some value (not known to be empty).
    Set,
    /// `""`, `null`, `None`, `Default::default()`: the field is cleared.
    Cleared,
    /// Copied from the same field of an object read before (`acquire_time:
    /// existing.spec.as_ref().and_then(|s| s.acquire_time.clone())`): left as it was.
    Kept,
}

/// Written fields by normalised name (see `normalize`). A field set in one branch and cleared
/// in another is `Set`: the write can take the lock.
pub type Fields = BTreeMap<String, Written>;

/// `holderIdentity`, `holder_identity` and `HolderIdentity` are one field.
pub fn normalize(name: &str) -> String {
    name.chars()
        .filter(|c| *c != '_' && *c != '-')
        .flat_map(char::to_lowercase)
        .collect()
}

/// Does a `when-fields` entry hold? `name` wants the field set, `name=` wants it cleared,
/// `name^` wants it kept as read (a holder writing its Lease back with the `acquireTime` it
/// had renews it); `a|b` is either (a lock document's owner may be `lockId` or `owner`).
pub fn holds(fields: &Fields, wanted: &str) -> bool {
    wanted.split('|').any(|one| {
        let (name, want) = if let Some(n) = one.strip_suffix('=') {
            (n, Written::Cleared)
        } else if let Some(n) = one.strip_suffix('^') {
            (n, Written::Kept)
        } else {
            (one, Written::Set)
        };
        fields.get(&normalize(name)) == Some(&want)
    })
}

/// Is the value the same field of another object (`x.acquire_time`, through `as_ref`,
/// `and_then(|s| s.acquire_time.clone())` and the like)? Not of `self`: `self.holder_identity`
/// is the program's own value, written fresh.
fn copies_field(e: &Expr, field: &str) -> bool {
    fn has(ts: TokenStream, field: &str) -> bool {
        // The last two tokens: `<owner> .` before a field name.
        let (mut owner_is_self, mut dot) = (false, false);
        let mut prev_self = false;
        for tt in ts {
            match &tt {
                TokenTree::Punct(p) if p.as_char() == '.' => {
                    owner_is_self = prev_self;
                    dot = true;
                    prev_self = false;
                    continue;
                }
                TokenTree::Ident(i) if dot && !owner_is_self && i == field => return true,
                TokenTree::Group(g) if has(g.stream(), field) => return true,
                _ => {}
            }
            prev_self = matches!(&tt, TokenTree::Ident(i) if i == "self");
            dot = false;
        }
        false
    }
    has(quote::ToTokens::to_token_stream(e), field)
}

/// The fields `e` sets, or `None` when it cannot be read.
pub fn read(e: &Expr, env: &dyn Lookup) -> Option<Fields> {
    let mut out = Fields::new();
    expr(e, env, 0, &mut out)?;
    Some(out)
}

/// The parameter an argument is, when it is one (`patch`, `&patch`, `patch.clone()`): the value
/// is the caller's, so the call's kind is decided where the function is called. `is_param`: a
/// parameter not rebound to a value.
pub fn parameter<'e>(e: &'e Expr, is_param: &dyn Fn(&str) -> bool) -> Option<&'e syn::Ident> {
    match e {
        Expr::Reference(r) => parameter(&r.expr, is_param),
        Expr::Paren(p) => parameter(&p.expr, is_param),
        Expr::MethodCall(m) if m.args.is_empty() && is_passthrough(&m.method) => {
            parameter(&m.receiver, is_param)
        }
        Expr::Path(p) => {
            let id = p.path.get_ident()?;
            is_param(&id.to_string()).then_some(id)
        }
        _ => None,
    }
}

fn is_passthrough(method: &syn::Ident) -> bool {
    matches!(
        method.to_string().as_str(),
        "clone" | "into" | "to_owned" | "as_ref" | "borrow"
    )
}

fn merge(out: &mut Fields, name: String, w: Written) {
    let slot = out.entry(name).or_insert(w);
    if w == Written::Set {
        *slot = Written::Set;
    }
}

fn expr(e: &Expr, env: &dyn Lookup, depth: usize, out: &mut Fields) -> Option<()> {
    if depth > MAX_DEPTH {
        return None;
    }
    let next = |x: &Expr, out: &mut Fields| expr(x, env, depth + 1, out);
    match e {
        Expr::Reference(r) => next(&r.expr, out),
        Expr::Paren(p) => next(&p.expr, out),
        Expr::Group(g) => next(&g.expr, out),
        Expr::Try(t) => next(&t.expr, out),
        Expr::MethodCall(m) if m.args.is_empty() && is_passthrough(&m.method) => {
            next(&m.receiver, out)
        }
        // `serde_json::from_value(json!(…)).expect("valid")`
        Expr::MethodCall(m) if m.method == "unwrap" || m.method == "expect" => {
            next(&m.receiver, out)
        }
        // The program's helper that builds the object (`spec: Some(lock_spec(me, now))`).
        Expr::Call(c) if let Some(built) = env.inlined(c) => next(built, out),
        // `Patch::Merge(&p)`, `Some(x)`, `serde_json::to_value(x)`: the value inside.
        Expr::Call(c) if c.args.len() == 1 => next(&c.args[0], out),
        Expr::Path(p) => {
            let name = p.path.get_ident()?.to_string();
            let mut own = Fields::new();
            if let Some(init) = env.local(&name)
                && next(init, &mut own).is_some()
            {
                for (k, w) in own {
                    merge(out, k, w);
                }
                return Some(());
            }
            // A value read from the server and changed before it is written back
            // (`let mut l = api.get(..)?; l.spec.renew_time = ..; api.replace(.., &l)`): what the
            // function assigns is what the write changes.
            let assigned = env.assigned_fields(&name);
            if assigned.is_empty() {
                return None;
            }
            for (field, v) in assigned {
                merge(out, normalize(&field), value(v));
                // As in a struct expression: what a nested value sets is written too
                // (`l.spec = Some(LeaseSpec { holder_identity: .. })`).
                let mut inner = Fields::new();
                if next(v, &mut inner).is_some() {
                    for (k, w) in inner {
                        merge(out, k, w);
                    }
                }
            }
            Some(())
        }
        Expr::Struct(s) => {
            for f in &s.fields {
                let syn::Member::Named(id) = &f.member else {
                    continue;
                };
                let written = written(&f.expr, &id.to_string());
                merge(out, normalize(&id.to_string()), written);
                // What a nested value sets is written too (`spec: Some(LeaseSpec { … })`); one
                // that cannot be read leaves the rest known.
                let mut inner = Fields::new();
                if next(&f.expr, &mut inner).is_some() {
                    for (k, w) in inner {
                        merge(out, k, w);
                    }
                }
            }
            Some(())
        }
        // `json!({…})`, and bson's `doc! {…}`, written the same way.
        Expr::Macro(m)
            if m.mac
                .path
                .segments
                .last()
                .is_some_and(|s| s.ident == "json" || s.ident == "doc") =>
        {
            json(m.mac.tokens.clone(), depth, out)
        }
        // An update pipeline (`vec![set_stage]`, `[a, b]`): what any stage writes.
        Expr::Macro(m) if m.mac.path.segments.last()?.ident == "vec" => {
            let items = m
                .mac
                .parse_body_with(
                    syn::punctuated::Punctuated::<Expr, syn::Token![,]>::parse_terminated,
                )
                .ok()?;
            for x in &items {
                next(x, out)?;
            }
            Some(())
        }
        Expr::Array(a) => {
            for x in &a.elems {
                next(x, out)?;
            }
            Some(())
        }
        Expr::If(i) => {
            block(&i.then_branch, env, depth, out)?;
            match &i.else_branch {
                Some((_, e)) => next(e, out),
                None => Some(()),
            }
        }
        Expr::Match(m) => {
            for arm in &m.arms {
                next(&arm.body, out)?;
            }
            Some(())
        }
        Expr::Block(b) => block(&b.block, env, depth, out),
        // A branch that leaves gives no value.
        Expr::Return(_) | Expr::Break(_) | Expr::Continue(_) => Some(()),
        _ => None,
    }
}

/// What a struct field's value writes: kept when it copies the field read before, `Set` when
/// any branch of an `if`/`match` sets it (`acquire_time: if takeover { Some(now) } else {
/// prev.acquire_time.clone() }` takes the lease over in one branch).
fn written(e: &Expr, field: &str) -> Written {
    let tail = |b: &syn::Block| match b.stmts.last() {
        Some(syn::Stmt::Expr(x, None)) => Some(written(x, field)),
        _ => None,
    };
    let branches: Option<Vec<Written>> = match e {
        Expr::If(i) => i
            .else_branch
            .as_ref()
            .and_then(|(_, els)| Some(vec![tail(&i.then_branch)?, written(els, field)])),
        Expr::Block(b) => tail(&b.block).map(|w| vec![w]),
        Expr::Match(m) => Some(m.arms.iter().map(|a| written(&a.body, field)).collect()),
        _ => None,
    };
    match branches {
        Some(ws) if !ws.is_empty() => {
            if ws.contains(&Written::Set) {
                Written::Set
            } else if ws.iter().all(|w| *w == Written::Cleared) {
                Written::Cleared
            } else {
                Written::Kept
            }
        }
        _ if copies_field(e, field) => Written::Kept,
        _ => value(e),
    }
}

fn block(b: &syn::Block, env: &dyn Lookup, depth: usize, out: &mut Fields) -> Option<()> {
    match b.stmts.last() {
        Some(syn::Stmt::Expr(e, None)) => expr(e, env, depth + 1, out),
        Some(syn::Stmt::Expr(Expr::Return(_), _)) => Some(()),
        // A block without a value, or whose value comes from statements this does not follow.
        _ => None,
    }
}

/// `""`, `None`, `Default::default()`, `String::new()` clear a field, also inside `Some(..)` and
/// through a conversion (`Some(String::new())`, `"".to_string()`, `String::from("")`).
fn value(e: &Expr) -> Written {
    match e {
        Expr::Call(c)
            if c.args.len() == 1
                && matches!(&*c.func, Expr::Path(p) if p.path.segments.last().is_some_and(|s| s.ident == "Some" || s.ident == "from")) =>
        {
            value(&c.args[0])
        }
        Expr::MethodCall(m)
            if m.args.is_empty()
                && matches!(
                    m.method.to_string().as_str(),
                    "to_string" | "to_owned" | "into"
                ) =>
        {
            value(&m.receiver)
        }
        Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Str(s),
            ..
        }) if s.value().is_empty() => Written::Cleared,
        Expr::Path(p) if p.path.segments.last().is_some_and(|s| s.ident == "None") => {
            Written::Cleared
        }
        Expr::Call(c) if c.args.is_empty() => match &*c.func {
            Expr::Path(p)
                if p.path
                    .segments
                    .last()
                    .is_some_and(|s| s.ident == "default" || s.ident == "new") =>
            {
                Written::Cleared
            }
            _ => Written::Set,
        },
        _ => Written::Set,
    }
}

/// The keys of a `json!` object, at any depth: `"key": value` pairs in braces.
fn json(tokens: TokenStream, depth: usize, out: &mut Fields) -> Option<()> {
    if depth > MAX_DEPTH {
        return None;
    }
    let toks: Vec<TokenTree> = tokens.into_iter().collect();
    // The macro's body is one object: `json!({ … })`.
    if let [TokenTree::Group(g)] = toks.as_slice() {
        return json(g.stream(), depth + 1, out);
    }
    let mut i = 0;
    while i < toks.len() {
        // A value runs to the next `,` at this level.
        let end = toks[i..]
            .iter()
            .position(|t| matches!(t, TokenTree::Punct(p) if p.as_char() == ','))
            .map_or(toks.len(), |p| i + p);
        let item = &toks[i..end];
        if let [TokenTree::Literal(key), TokenTree::Punct(colon), rest @ ..] = item
            && colon.as_char() == ':'
            && let Ok(syn::Lit::Str(key)) = syn::parse_str::<syn::Lit>(&key.to_string())
        {
            merge(out, normalize(&key.value()), json_value(rest));
            for t in rest {
                if let TokenTree::Group(g) = t
                    && g.delimiter() == proc_macro2::Delimiter::Brace
                {
                    json(g.stream(), depth + 1, out)?;
                }
            }
        }
        i = end + 1;
    }
    Some(())
}

fn json_value(tokens: &[TokenTree]) -> Written {
    match tokens {
        [TokenTree::Literal(l)] if l.to_string() == "\"\"" => Written::Cleared,
        [TokenTree::Ident(id)] if id == "null" || id == "None" => Written::Cleared,
        // `Option::<()>::None`
        [.., TokenTree::Ident(id)] if id == "None" => Written::Cleared,
        _ => Written::Set,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct NoLocals;
    impl Lookup for NoLocals {
        fn local(&self, _: &str) -> Option<&Expr> {
            None
        }
        fn constant(&self, _: &syn::Path) -> Option<crate::model::eval::Value> {
            None
        }
        fn resolve_fn(&self, p: &syn::Path) -> String {
            quote::ToTokens::to_token_stream(p).to_string()
        }
    }

    fn fields(src: &str) -> Option<Fields> {
        read(&syn::parse_str(src).unwrap(), &NoLocals)
    }

    #[test]
    fn json_keys_at_any_depth_with_cleared_values() {
        let f = fields(
            r#"Patch::Merge(&json!({"kind": "Lease", "spec": {"holderIdentity": "", "renewTime": now(), "acquireTime": Option::<()>::None}}))"#,
        )
        .unwrap();
        assert!(holds(&f, "holderIdentity="));
        assert!(!holds(&f, "holderIdentity"));
        assert!(holds(&f, "renew_time"));
        assert!(holds(&f, "acquireTime="));
        assert!(!holds(&f, "leaseTransitions"));
    }

    #[test]
    fn struct_literals_nested_in_constructors() {
        let f = fields(
            "Lease { metadata: ObjectMeta { name: Some(n), ..Default::default() }, spec: Some(LeaseSpec { holder_identity: Some(id.clone()), ..Default::default() }) }",
        )
        .unwrap();
        assert!(holds(&f, "holderIdentity"));
        let empty = fields("Lease { metadata: meta, spec: Default::default() }").unwrap();
        assert!(!holds(&empty, "holderIdentity"));
        assert!(holds(&empty, "spec="));
    }

    #[test]
    fn fields_kept_from_the_object_read() {
        let f = fields(
            "LeaseSpec { holder_identity: Some(self.holder_identity.clone()), acquire_time: existing.spec.as_ref().and_then(|s| s.acquire_time.clone()), renew_time: Some(now) }",
        )
        .unwrap();
        // Our own identity is written, the acquire time kept as read.
        assert!(holds(&f, "holderIdentity"));
        assert!(holds(&f, "acquireTime^"));
        assert!(!holds(&f, "acquireTime"));
        let fresh = fields("LeaseSpec { acquire_time: Some(now.clone()) }").unwrap();
        assert!(!holds(&fresh, "acquireTime^"));
    }

    #[test]
    fn bson_documents_in_a_pipeline_and_alternatives() {
        let f = fields(
            r#"vec![doc! { "$set": { "lockId": { "$cond": [&expired, &id, "$lockId"] }, "expiresAt": at } }]"#,
        )
        .unwrap();
        assert!(holds(&f, "lockId"));
        assert!(holds(&f, "owner|lock_id"));
        assert!(holds(&f, "expires_at"));
        assert!(!holds(&f, "owner|holder"));
        assert_eq!(fields("vec![stage, other]"), None);
    }

    #[test]
    fn branches_union_and_unknown_parts() {
        let f = fields(
            r#"if a { Patch::Strategic(json!({"leaseTransitions": 1})) } else if b { Patch::Strategic(json!({"holderIdentity": me})) } else { return Ok(()) }"#,
        )
        .unwrap();
        assert!(holds(&f, "holderIdentity"));
        assert_eq!(fields("Patch::Merge(&patch)"), None);
        assert_eq!(fields("make_patch(a, b)"), None);
    }
}
