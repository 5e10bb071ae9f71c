//! Statement spans without re-tokenizing the statement. `Span::of` turns a node back into tokens
//! to find its ends, which costs the size of the node; taken for every statement of every block,
//! nested blocks made that quadratic in their depth (3,000 nested blocks: 37 s). These descend to
//! the first and the last token instead.

use proc_macro2::Span as Pm2;
use syn::spanned::Spanned;
use syn::{Expr, Stmt};

use crate::source::Span;

/// The span of a statement, as `Span::of` gives it.
pub(super) fn of_stmt(stmt: &Stmt) -> Span {
    let (first, last) = match stmt {
        Stmt::Local(l) => (
            l.attrs
                .first()
                .map_or(l.let_token.span, |a| a.pound_token.span),
            l.semi_token.span,
        ),
        Stmt::Expr(e, semi) => (first(e), semi.map_or_else(|| last(e), |s| s.span)),
        Stmt::Macro(m) => (
            m.attrs
                .first()
                .map_or_else(|| m.mac.path.span(), |a| a.pound_token.span),
            m.semi_token
                .map_or_else(|| m.mac.delimiter.span().close(), |s| s.span),
        ),
        Stmt::Item(syn::Item::Fn(f)) => (
            f.attrs.first().map_or_else(
                || match f.vis {
                    syn::Visibility::Inherited => f.sig.span(),
                    ref v => v.span(),
                },
                |a| a.pound_token.span,
            ),
            f.block.brace_token.span.close(),
        ),
        Stmt::Item(i) => return Span::of(i),
    };
    Span::join(Span::from_pm2(first), Span::from_pm2(last))
}

fn attrs(e: &Expr) -> &[syn::Attribute] {
    match e {
        Expr::If(x) => &x.attrs,
        Expr::Match(x) => &x.attrs,
        Expr::Block(x) => &x.attrs,
        Expr::Call(x) => &x.attrs,
        Expr::MethodCall(x) => &x.attrs,
        Expr::Macro(x) => &x.attrs,
        Expr::Unsafe(x) => &x.attrs,
        Expr::Loop(x) => &x.attrs,
        Expr::While(x) => &x.attrs,
        Expr::ForLoop(x) => &x.attrs,
        Expr::Async(x) => &x.attrs,
        Expr::Assign(x) => &x.attrs,
        Expr::Closure(x) => &x.attrs,
        _ => &[],
    }
}

/// The span of an expression's first token.
fn first(mut e: &Expr) -> Pm2 {
    loop {
        if let Some(a) = attrs(e).first() {
            return a.pound_token.span;
        }
        e = match e {
            Expr::MethodCall(m) => &m.receiver,
            Expr::Field(f) => &f.base,
            Expr::Try(t) => &t.expr,
            Expr::Await(a) => &a.base,
            Expr::Binary(b) => &b.left,
            Expr::Cast(c) => &c.expr,
            Expr::Index(i) => &i.expr,
            Expr::Assign(a) => &a.left,
            Expr::Call(c) => &c.func,
            Expr::Range(r) => match &r.start {
                Some(s) => s,
                None => return r.limits.span(),
            },
            Expr::If(i) => return i.if_token.span,
            Expr::Match(m) => return m.match_token.span,
            Expr::Block(b) => {
                return b
                    .label
                    .as_ref()
                    .map_or(b.block.brace_token.span.open(), |l| l.name.span());
            }
            Expr::Loop(l) => {
                return l
                    .label
                    .as_ref()
                    .map_or(l.loop_token.span, |l| l.name.span());
            }
            Expr::While(w) => {
                return w
                    .label
                    .as_ref()
                    .map_or(w.while_token.span, |l| l.name.span());
            }
            Expr::ForLoop(f) => {
                return f.label.as_ref().map_or(f.for_token.span, |l| l.name.span());
            }
            Expr::Unsafe(u) => return u.unsafe_token.span,
            Expr::Async(a) => return a.async_token.span,
            Expr::Paren(p) => return p.paren_token.span.open(),
            Expr::Tuple(t) => return t.paren_token.span.open(),
            Expr::Array(a) => return a.bracket_token.span.open(),
            Expr::Return(r) => return r.return_token.span,
            Expr::Let(l) => return l.let_token.span,
            Expr::Reference(r) => return r.and_token.span,
            Expr::Unary(u) => return u.op.span(),
            Expr::Macro(m) => return m.mac.path.span(),
            Expr::Closure(c) => {
                return c
                    .lifetimes
                    .as_ref()
                    .map(|l| l.for_token.span)
                    .or(c.constness.map(|t| t.span))
                    .or(c.movability.map(|t| t.span))
                    .or(c.asyncness.map(|t| t.span))
                    .or(c.capture.map(|t| t.span))
                    .unwrap_or(c.or1_token.span);
            }
            other => return other.span(),
        };
    }
}

/// The span of an expression's last token.
fn last(mut e: &Expr) -> Pm2 {
    loop {
        e = match e {
            Expr::If(i) => match &i.else_branch {
                Some((_, els)) => els,
                None => return i.then_branch.brace_token.span.close(),
            },
            Expr::Match(m) => return m.brace_token.span.close(),
            Expr::Block(b) => return b.block.brace_token.span.close(),
            Expr::Loop(l) => return l.body.brace_token.span.close(),
            Expr::While(w) => return w.body.brace_token.span.close(),
            Expr::ForLoop(f) => return f.body.brace_token.span.close(),
            Expr::Unsafe(u) => return u.block.brace_token.span.close(),
            Expr::Async(a) => return a.block.brace_token.span.close(),
            Expr::MethodCall(m) => return m.paren_token.span.close(),
            Expr::Call(c) => return c.paren_token.span.close(),
            Expr::Macro(m) => return m.mac.delimiter.span().close(),
            Expr::Paren(p) => return p.paren_token.span.close(),
            Expr::Tuple(t) => return t.paren_token.span.close(),
            Expr::Array(a) => return a.bracket_token.span.close(),
            Expr::Index(i) => return i.bracket_token.span.close(),
            Expr::Struct(s) => return s.brace_token.span.close(),
            Expr::Try(t) => return t.question_token.span,
            Expr::Await(a) => return a.await_token.span,
            Expr::Field(f) => return f.member.span(),
            Expr::Binary(b) => &b.right,
            Expr::Assign(a) => &a.right,
            Expr::Unary(u) => &u.expr,
            Expr::Reference(r) => &r.expr,
            Expr::Closure(c) => &c.body,
            Expr::Let(l) => &l.expr,
            Expr::Return(r) => match &r.expr {
                Some(x) => x,
                None => return r.return_token.span,
            },
            Expr::Range(r) => match &r.end {
                Some(x) => x,
                None => return r.limits.span(),
            },
            Expr::Cast(c) => return c.ty.span(),
            other => return other.span(),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agrees_with_retokenizing() {
        let body = "{ let a = 1; #[allow(x)] let b = 2; f(a).g()?.h.await; if a { x } else if b { y } else { z } \
            loop { break; } 'l: for i in xs { } while c { } match m { _ => () } \
            let c = || async move { 1 }; move |x| x + 1; a = b + c * d; &mut x; !y; -z; (a, b); [1, 2]; \
            x[0]; S { a }; m!(x); m! { y } vec![1]; return; return 5; a..; ..b; x as u8; unsafe { } \
            async { }; { inner } fn nested() {} pub fn p() {} #[inline] fn q() {} struct S; \
            println!(\"{}\", 1); v.iter().map(|x| { x }).count() }";
        let block: syn::Block = syn::parse_str(body).expect("parses");
        for stmt in &block.stmts {
            assert_eq!(
                of_stmt(stmt),
                Span::of(stmt),
                "{}",
                quote::ToTokens::to_token_stream(stmt)
            );
        }
    }
}
