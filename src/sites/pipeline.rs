//! Lock commands inside a Redis pipeline: their reply comes back when the pipeline runs, which
//! may be further down the chain, in a later statement through the local that holds the
//! pipeline, or in the caller of a helper that built it. A reply decoded as `()` (`let () = …`,
//! `let _: () = …`, `query_async::<()>`) or dropped by `exec` loses the nil that says `SET … NX`
//! did not take the lock.

use syn::{Expr, Pat, Stmt};

use super::Failure;
use super::failure::Use;
use super::walk::Walker;

/// How a lock command's pipeline is run, for its reply: further out in the same chain, or later
/// through the local `local` (the pipeline built over statements, or passed to a helper).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct PipeRun {
    pub local: Option<String>,
}

/// How a wrapper's lock command reaches its caller inside a pipeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PipeVia {
    /// The function returns the pipeline; the caller runs it.
    Returned,
    /// The function adds the command to the pipeline passed as argument #i (receiver not
    /// counted); the caller runs that.
    Arg(usize),
}

/// Whether the reply of a lock command is looked at, from where its pipeline runs.
pub(super) fn judge<'a>(
    w: &Walker<'a, '_>,
    run: &PipeRun,
    outward: &[&'a Expr],
    u: &Use<'a>,
) -> Failure {
    if let Some(i) = outward.iter().position(|e| run_method(e).is_some()) {
        return decoded(outward[i], &outward[i + 1..], u);
    }
    // Bound to a local (`let p = lock_pipe(k);`) or built over statements: run later.
    let local = match u {
        Use::Bind { pat, .. } => single_name(pat),
        _ => None,
    }
    .or_else(|| run.local.clone());
    let Some(local) = local else {
        return Failure::Handled;
    };
    // The run may follow the block that adds the command (`for k in keys { pipe.cmd("SET")…; }`
    // then `pipe.query_async::<()>(..)`).
    for s in w.rests().flatten() {
        let (e, u) = match s {
            Stmt::Local(l) => match &l.init {
                Some(init) => (
                    &*init.expr,
                    Use::Bind {
                        pat: &l.pat,
                        has_else: init.diverge.is_some(),
                    },
                ),
                None => continue,
            },
            Stmt::Expr(e, Some(_)) => (e, Use::Discard),
            Stmt::Expr(e, None) => (e, Use::Escape),
            _ => continue,
        };
        let mut levels = Vec::new();
        let mut cur = e;
        loop {
            levels.push(cur);
            cur = match cur {
                Expr::MethodCall(m) => &m.receiver,
                Expr::Await(a) => &a.base,
                Expr::Try(t) => &t.expr,
                Expr::Paren(p) => &p.expr,
                Expr::Reference(r) => &r.expr,
                _ => break,
            };
        }
        let rooted = matches!(cur, Expr::Path(p) if p.path.is_ident(&local));
        if !rooted {
            continue;
        }
        // Outermost first, as `outward` is.
        if let Some(i) = levels.iter().rposition(|e| run_method(e).is_some()) {
            let after: Vec<&Expr> = levels[..i].iter().rev().copied().collect();
            return decoded(levels[i], &after, &u);
        }
    }
    Failure::Handled
}

/// `query`, `query_async`, `exec`, `exec_async` (redis-rs `Pipeline`).
fn run_method(e: &Expr) -> Option<&syn::ExprMethodCall> {
    match e {
        Expr::MethodCall(m)
            if matches!(
                m.method.to_string().as_str(),
                "query" | "query_async" | "exec" | "exec_async"
            ) =>
        {
            Some(m)
        }
        _ => None,
    }
}

/// The run call, the levels after it (innermost first), and how their value is used.
fn decoded(run: &Expr, after: &[&Expr], u: &Use<'_>) -> Failure {
    let Some(m) = run_method(run) else {
        return Failure::Handled;
    };
    let name = m.method.to_string();
    if name.starts_with("exec") {
        return ignored(format!("`{name}` drops the pipeline's replies"));
    }
    let unit_turbofish = m.turbofish.as_ref().is_some_and(|t| {
        t.args.len() == 1
            && matches!(t.args.first(), Some(syn::GenericArgument::Type(ty)) if is_unit(ty))
    });
    if unit_turbofish {
        return ignored(format!(
            "`{name}::<()>` decodes the pipeline's replies as `()`"
        ));
    }
    // Only awaiting and propagating stand between the run and the binding.
    if !after
        .iter()
        .all(|e| matches!(e, Expr::Await(_) | Expr::Try(_) | Expr::Paren(_)))
    {
        return Failure::Handled;
    }
    match u {
        Use::Bind { pat, .. } if unit_pattern(pat) => {
            ignored("the pipeline's replies are decoded as `()`".to_string())
        }
        _ => Failure::Handled,
    }
}

fn ignored(how: String) -> Failure {
    Failure::Ignored {
        reason: format!(
            "{how}, so the nil that says `SET … NX` did not take the lock is never seen and the work runs either way"
        ),
    }
}

fn is_unit(t: &syn::Type) -> bool {
    matches!(t, syn::Type::Tuple(tt) if tt.elems.is_empty())
}

/// `()`, `_: ()`, `x: ()`.
fn unit_pattern(p: &Pat) -> bool {
    match p {
        Pat::Tuple(t) => t.elems.is_empty(),
        Pat::Type(pt) => is_unit(&pt.ty) || unit_pattern(&pt.pat),
        Pat::Paren(pp) => unit_pattern(&pp.pat),
        _ => false,
    }
}

fn single_name(p: &Pat) -> Option<String> {
    match p {
        Pat::Ident(i) => Some(i.ident.to_string()),
        Pat::Type(t) => single_name(&t.pat),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_patterns_are_recognised() {
        let unit = |s: &str| {
            let stmt: syn::Stmt = syn::parse_str(&format!("let {s} = x;")).unwrap();
            let syn::Stmt::Local(l) = stmt else {
                unreachable!()
            };
            unit_pattern(&l.pat)
        };
        assert!(unit("()"));
        assert!(unit("_: ()"));
        assert!(unit("r: ()"));
        assert!(!unit("(set,): (Option<String>,)"));
        assert!(!unit("_"));
    }

    #[test]
    fn exec_and_unit_turbofish_drop_the_reply() {
        let e: Expr = syn::parse_str("p.exec_async(con)").unwrap();
        assert!(matches!(
            decoded(&e, &[], &Use::Other),
            Failure::Ignored { .. }
        ));
        let e: Expr = syn::parse_str("p.query_async::<()>(con)").unwrap();
        assert!(matches!(
            decoded(&e, &[], &Use::Other),
            Failure::Ignored { .. }
        ));
        let e: Expr = syn::parse_str("p.query_async::<(Option<String>,)>(con)").unwrap();
        assert_eq!(decoded(&e, &[], &Use::Other), Failure::Handled);
    }
}
