//! A Redis command as written: its name, its arguments' text, the connection it runs on and
//! where the call starts and ends in the file. Rules build mechanical fixes from it. Only plain
//! shapes are read (`con.del(k)`, `redis::cmd("DEL").arg(k).query_async(con)`); anything else
//! has no `Command`, and so no fix.

use syn::Expr;

use crate::source::{SourceFile, Span};

/// One argument: its text as written and where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arg {
    pub text: String,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    /// Upper case: `DEL`, `SETNX`, `EXPIRE`, …
    pub name: String,
    /// `redis::cmd` as written, for a raw command; `None` for a typed method (`con.del(k)`).
    pub builder: Option<String>,
    /// The method's receiver as written.
    pub receiver: Option<String>,
    /// The command's arguments, key first.
    pub args: Vec<Arg>,
    /// The connection as `invoke`/`query` take it: a raw command's `query(..)` argument, or a
    /// method's receiver when it is a `&mut` parameter of a concrete Redis connection type.
    pub conn: Option<String>,
    pub is_async: bool,
    /// How the code names the redis crate's root (`redis::`, `deadpool_redis::redis::`), for
    /// the paths a fix writes; `None` when it does not show it.
    pub krate: Option<String>,
    /// The call, from its first token to the end of the method call, or of the `query(..)` that
    /// runs a raw command (`.await` and `?` are outside).
    pub span: Span,
}

/// Typed methods read, with the command each sends.
const METHODS: &[(&str, &str)] = &[
    ("del", "DEL"),
    ("unlink", "UNLINK"),
    ("expire", "EXPIRE"),
    ("pexpire", "PEXPIRE"),
    ("set_nx", "SETNX"),
    ("set_options", "SET"),
];

/// The text of a span.
pub(super) fn text(src: &SourceFile, s: Span) -> String {
    let (a, b) = (
        src.offset(s.line, s.column),
        src.offset(s.end_line, s.end_column),
    );
    src.text.get(a..b.max(a)).unwrap_or("").to_string()
}

/// Arguments a fix can repeat: not arrays or tuples that `arg` flattens into several.
fn plain(e: &Expr) -> bool {
    match e {
        Expr::Array(_) | Expr::Tuple(_) | Expr::Range(_) => false,
        Expr::Reference(r) => plain(&r.expr),
        Expr::Paren(p) => plain(&p.expr),
        _ => true,
    }
}

/// A method receiver that is a `&mut` parameter of a concrete Redis connection type.
pub(super) struct ConnParam {
    /// An async connection (`redis::aio::…`, `cluster_async`, `ConnectionManager`).
    pub is_async: bool,
    /// The crate root as the parameter's type names it (`redis::`), when it is a path.
    pub krate: Option<String>,
}

/// The crate root a path names (`deadpool_redis::redis::cmd` -> `deadpool_redis::redis::`).
pub(super) fn root_of(path: &str) -> Option<String> {
    let segs: Vec<&str> = path.split("::").collect();
    let at = segs[..segs.len().saturating_sub(1)]
        .iter()
        .rposition(|s| *s == "redis")?;
    Some(format!("{}::", segs[..=at].join("::")))
}

/// What reading a command asks of the walker.
pub(super) struct Env<'e> {
    /// Is a method receiver a `&mut` connection parameter?
    pub conn_param: &'e dyn Fn(&Expr) -> Option<ConnParam>,
    /// A path as the file's imports resolve it (re-exports kept: `deadpool_redis::redis::…`).
    pub resolve: &'e dyn Fn(&syn::Path) -> String,
}

/// Reads `core` (the call a pack matched) with its enclosing chain levels, innermost first.
pub(super) fn read(
    src: &SourceFile,
    core: &Expr,
    outer: &[&Expr],
    env: &Env<'_>,
) -> Option<Command> {
    // The crate as the file imports it: a method call compiles only with its trait in scope.
    let by_import = |name: &str| {
        let path = syn::parse_str::<syn::Path>(name).ok()?;
        root_of(&(env.resolve)(&path))
    };
    let arg = |e: &Expr| {
        let span = Span::of(e);
        Arg {
            text: text(src, span),
            span,
        }
    };
    match core {
        Expr::MethodCall(m) => {
            let name = METHODS.iter().find(|(n, _)| m.method == n)?.1;
            if m.turbofish.is_some() || !m.args.iter().all(plain) {
                return None;
            }
            let receiver = text(src, Span::of(&*m.receiver));
            let is_async = matches!(outer.first(), Some(Expr::Await(_)));
            // A script runs on the connection only when it is the kind the call was made on.
            let param = (env.conn_param)(&m.receiver).filter(|p| p.is_async == is_async);
            Some(Command {
                name: name.to_string(),
                builder: None,
                conn: param.as_ref().map(|_| receiver.clone()),
                krate: param.and_then(|p| p.krate).or_else(|| {
                    by_import(if is_async {
                        "AsyncCommands"
                    } else {
                        "Commands"
                    })
                }),
                receiver: Some(receiver),
                args: m.args.iter().map(arg).collect(),
                is_async,
                span: Span::of(core),
            })
        }
        Expr::Call(c) => {
            let Expr::Path(f) = &*c.func else { return None };
            if f.path.segments.last()?.ident != "cmd" || c.args.len() != 1 {
                return None;
            }
            let Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(name),
                ..
            }) = &c.args[0]
            else {
                return None;
            };
            let mut args = Vec::new();
            for level in outer {
                let Expr::MethodCall(m) = level else {
                    return None;
                };
                if m.method == "arg" && m.args.len() == 1 && plain(&m.args[0]) {
                    args.push(arg(&m.args[0]));
                    continue;
                }
                let is_async = m.method == "query_async";
                if !is_async && m.method != "query" || m.args.len() != 1 || m.turbofish.is_some() {
                    return None;
                }
                let (start, end) = (Span::of(core), Span::of(*level));
                let builder = text(src, Span::of(&f.path));
                return Some(Command {
                    name: name.value().to_ascii_uppercase(),
                    krate: root_of(&builder).or_else(|| root_of(&(env.resolve)(&f.path))),
                    builder: Some(builder),
                    receiver: None,
                    args,
                    conn: Some(text(src, Span::of(&m.args[0]))),
                    is_async,
                    span: Span::join(start, end),
                });
            }
            None
        }
        _ => None,
    }
}

/// Reads the command a whole statement expression runs (`con.expire(k, 30).await?`).
pub(super) fn of_expr(src: &SourceFile, e: &Expr, env: &Env<'_>) -> Option<Command> {
    let mut levels: Vec<&Expr> = Vec::new();
    let mut cur = e;
    loop {
        levels.push(cur);
        cur = match cur {
            Expr::MethodCall(m) => &m.receiver,
            Expr::Await(a) => &a.base,
            Expr::Try(t) => &t.expr,
            _ => break,
        };
        if levels.len() > 64 {
            return None;
        }
    }
    // Innermost first: the core is the first level a command is read from.
    for i in (0..levels.len()).rev() {
        let outer: Vec<&Expr> = levels[..i].iter().rev().copied().collect();
        if let Some(c) = read(src, levels[i], &outer, env) {
            // Nothing but `.await` and `?` may follow: anything else would use the reply.
            let consumed = usize::from(c.builder.is_some()) * (c.args.len() + 1);
            return outer[consumed.min(outer.len())..]
                .iter()
                .all(|l| matches!(l, Expr::Await(_) | Expr::Try(_)))
                .then_some(c);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::root_of;

    #[test]
    fn the_crate_root_is_the_last_whole_redis_segment() {
        assert_eq!(root_of("redis::cmd").as_deref(), Some("redis::"));
        assert_eq!(
            root_of("deadpool_redis::redis::aio::MultiplexedConnection").as_deref(),
            Some("deadpool_redis::redis::")
        );
        assert_eq!(root_of("::redis::Commands").as_deref(), Some("::redis::"));
        // A crate whose name merely ends in `redis` is not the redis crate.
        assert_eq!(root_of("deadpool_redis::Connection"), None);
        assert_eq!(root_of("cmd"), None);
        assert_eq!(root_of("redis"), None);
    }
}
