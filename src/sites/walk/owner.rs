//! What the rules' fixes need from the walk: which local holds the value an acquisition wrote
//! (the owner token), whether it is still that binding where the lock is released or renewed,
//! and the `EXPIRE` statement that directly follows a `SETNX`.

use super::*;

/// An acquisition that wrote a local's value (the owner token).
pub(super) struct OwnerNote {
    /// The site's index in the file's sites.
    site: usize,
    name: String,
    serial: usize,
    /// How a fix passes it on (`&token`, or `token` for a reference parameter).
    text: String,
    /// The bindings the key expression reads, by name and serial: a key rebound since names
    /// another key.
    key_bindings: Vec<(String, Option<usize>)>,
}

impl<'a, 'c> Walker<'a, 'c> {
    pub(super) fn next_serial(&mut self) -> usize {
        self.serials += 1;
        self.serials
    }

    /// The parameter `name`'s declared type, while the name still is that parameter.
    pub(super) fn param_type(&self, name: &str) -> Option<&'a syn::Type> {
        let local = self.lookup(name)?;
        // Parameters are bound first, before any statement.
        if local.serial > self.param_serials {
            return None;
        }
        self.sig.inputs.iter().find_map(|i| match i {
            syn::FnArg::Typed(pt) => match &*pt.pat {
                Pat::Ident(pi) if pi.ident == name => Some(&*pt.ty),
                _ => None,
            },
            syn::FnArg::Receiver(_) => None,
        })
    }

    /// A path as the imports resolve it, before re-exports and pack aliases are looked through.
    pub(super) fn imports_path(&self, p: &syn::Path) -> String {
        self.imports
            .resolve(p, self.self_ty.as_ref(), &self.known())
    }

    /// Is `r` a `&mut` parameter of a concrete Redis connection type (one a script can be
    /// invoked on as it is)?
    pub(super) fn conn_param(&self, r: &Expr) -> Option<command::ConnParam> {
        let name = r.as_ident()?;
        let Some(syn::Type::Reference(rt)) = self.param_type(&name) else {
            return None;
        };
        rt.mutability?;
        let t = self.ty_of_type(&rt.elem)?;
        let last = t.last_segment();
        let concrete = t.path.starts_with("redis::")
            && (last.ends_with("Connection") || last == "ConnectionManager");
        let written = match &*rt.elem {
            syn::Type::Path(p) => self.imports_path(&p.path),
            _ => return None,
        };
        concrete.then(|| command::ConnParam {
            is_async: t.path.contains("::aio::")
                || t.path.contains("cluster_async")
                || last == "ConnectionManager",
            krate: command::root_of(&written),
        })
    }

    /// An acquisition's `SET key value …`: when the value is a local, remember which binding.
    pub(super) fn note_owner(&mut self, c: &Command) {
        if !matches!(c.name.as_str(), "SET" | "SETNX") {
            return;
        }
        let Some(value) = c.args.get(1) else { return };
        let Ok(e) = syn::parse_str::<Expr>(&value.text) else {
            return;
        };
        let (name, text) = match &e {
            Expr::Reference(r) if r.mutability.is_none() => match r.expr.as_ident() {
                Some(n) => (n.clone(), format!("&{n}")),
                None => return,
            },
            // A reference parameter is `Copy`: naming it again moves nothing.
            _ => match e.as_ident() {
                Some(n)
                    if matches!(
                        self.param_type(&n),
                        Some(syn::Type::Reference(r)) if r.mutability.is_none()
                    ) =>
                {
                    (n.clone(), n)
                }
                _ => return,
            },
        };
        let Some(serial) = self.lookup(&name).map(|l| l.serial) else {
            return;
        };
        let Some(key_bindings) = self.bindings_of(&c.args[0].text) else {
            return;
        };
        self.owners.push(OwnerNote {
            site: self.out.sites.len(),
            name,
            serial,
            text,
            key_bindings,
        });
    }

    /// For a release or renewal by key: the owner token the earlier acquisitions of the same
    /// key in this function wrote, when they all wrote the same binding and it is still the one
    /// in scope here. An acquisition of the key whose value is not such a local (a literal, a
    /// wrapper) leaves the owner unknown.
    pub(super) fn owner_for(&self, c: &Command, at: Span, key: Option<&str>) -> Option<String> {
        if !matches!(c.name.as_str(), "DEL" | "UNLINK" | "EXPIRE" | "PEXPIRE") {
            return None;
        }
        let written = same_text(&c.args.first()?.text);
        let mut found: Option<(&String, usize, &String)> = None;
        for (i, s) in self.out.sites.iter().enumerate().skip(self.first_site) {
            let here = s
                .function
                .as_ref()
                .is_some_and(|f| f.path == self.info.path);
            if !here || region::start_of(s.span) >= region::start_of(at) {
                continue;
            }
            let same_key = s
                .command
                .as_ref()
                .and_then(|a| a.args.first())
                .is_some_and(|a| same_text(&a.text) == written)
                || key.is_some() && (s.key.as_deref() == key || s.key_expr.as_deref() == key);
            if !same_key {
                continue;
            }
            let o = self.owners.iter().find(|o| o.site == i)?;
            if self.bindings_of(&c.args[0].text).as_ref() != Some(&o.key_bindings) {
                return None;
            }
            match found {
                None => found = Some((&o.name, o.serial, &o.text)),
                Some((n, se, _)) if *n == o.name && se == o.serial => {}
                Some(_) => return None,
            }
        }
        let (name, serial, text) = found?;
        (self.lookup(name).map(|l| l.serial) == Some(serial)).then(|| text.clone())
    }

    /// The bindings an expression's text reads, sorted, each with its serial (`None`: not a
    /// local, e.g. a constant or a function).
    fn bindings_of(&self, text: &str) -> Option<Vec<(String, Option<usize>)>> {
        let e = syn::parse_str::<Expr>(text).ok()?;
        let mut names: Vec<String> = idents_in(&e).into_iter().collect();
        names.sort();
        Some(
            names
                .into_iter()
                .map(|n| {
                    let serial = self.lookup(&n).map(|l| l.serial);
                    (n, serial)
                })
                .collect(),
        )
    }

    /// `let ok: bool = con.set_nx(k, v)…;` directly followed by an `EXPIRE`/`PEXPIRE` of the
    /// same key on the same connection whose reply is thrown away, alone on its lines.
    pub(super) fn expire_after(&self, c: &Command, u: &Use<'a>) -> Option<ExpireAfter> {
        if c.name != "SETNX" || c.args.len() != 2 {
            return None;
        }
        let Use::Bind {
            pat: Pat::Type(pt),
            has_else: false,
        } = u
        else {
            return None;
        };
        if !matches!(&*pt.ty, syn::Type::Path(p) if p.path.is_ident("bool")) {
            return None;
        }
        let stmt = self.rest().first()?;
        let e = match stmt {
            Stmt::Local(l) => {
                let wild = match &l.pat {
                    Pat::Wild(_) => true,
                    Pat::Type(t) => matches!(&*t.pat, Pat::Wild(_)),
                    _ => false,
                };
                match &l.init {
                    Some(init) if wild && init.diverge.is_none() => &*init.expr,
                    _ => return None,
                }
            }
            Stmt::Expr(e, Some(_)) => e,
            _ => return None,
        };
        let expire = command::of_expr(
            self.cx.source,
            e,
            &command::Env {
                conn_param: &|r| self.conn_param(r),
                resolve: &|p| self.imports_path(p),
            },
        )?;
        let same = matches!(expire.name.as_str(), "EXPIRE" | "PEXPIRE")
            && expire.args.len() == 2
            && expire.is_async == c.is_async
            && same_text(&expire.args[0].text) == same_text(&c.args[0].text)
            && expire.builder.is_some() == c.builder.is_some()
            && expire.receiver == c.receiver
            && expire.conn.as_deref().map(same_text) == c.conn.as_deref().map(same_text);
        let span = super::super::span::of_stmt(stmt);
        let src = self.cx.source;
        let alone = src
            .line(span.line)
            .chars()
            .take(span.column - 1)
            .all(char::is_whitespace)
            && src
                .line(span.end_line)
                .chars()
                .skip(span.end_column - 1)
                .all(char::is_whitespace);
        (same && alone).then_some(ExpireAfter {
            command: expire,
            lines: (span.line, span.end_line),
        })
    }
}

/// Text compared without its spacing or a leading `&` (`&key` and `key` are the same key).
fn same_text(s: &str) -> String {
    let t: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    t.trim_start_matches('&').to_string()
}

trait AsIdent {
    fn as_ident(&self) -> Option<String>;
}

impl AsIdent for Expr {
    /// A plain local or parameter name (not `self`).
    fn as_ident(&self) -> Option<String> {
        match self {
            Expr::Path(p) if p.qself.is_none() => p
                .path
                .get_ident()
                .map(ToString::to_string)
                .filter(|n| n != "self"),
            Expr::Paren(p) => p.expr.as_ident(),
            _ => None,
        }
    }
}
