//! Literal evaluation: strings (also through `const`, `concat!`, `format!` with literal parts, raw
//! strings) and numbers and durations (`30_000`, `Duration::from_secs(30)`, `TTL * 2`, `as` casts),
//! following locals and the crate's constants.

use syn::Expr;

/// A value known at analysis time.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Int(i128),
    Float(f64),
    Str(String),
    Bool(bool),
    /// Milliseconds.
    Duration(f64),
    /// `None`: an optional argument left out.
    None,
}

impl Value {
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Int(i) => Some(*i as f64),
            Value::Float(f) => Some(*f),
            _ => None,
        }
    }
}

/// Where names in an expression are looked up.
pub trait Lookup {
    /// The initialiser of a local variable visible at this point.
    fn local(&self, name: &str) -> Option<&Expr>;
    /// A crate constant's value by the path written in code.
    fn constant(&self, path: &syn::Path) -> Option<Value>;
    /// Canonical path of a function path written in code (for `Duration::from_secs` and friends).
    fn resolve_fn(&self, path: &syn::Path) -> String;
    /// The value a struct field was initialised with (`self.lock_sql` set to a `format!` in `new`).
    fn field(&self, _base: &Expr, _member: &syn::Member) -> Option<Value> {
        None
    }
    /// The text of `include_str!(rel)` written in the file being read.
    fn include(&self, _rel: &str) -> Option<String> {
        None
    }
    /// The tail of the program's own function that a call runs and that builds a text
    /// (`self.campaign_sql()` answering `format!("SELECT pg_try_advisory_lock({})", id)`).
    fn text_fn(&self, _call: &Expr) -> Option<Expr> {
        None
    }
    /// The fields assigned to a local (or to what it lends, `if let Some(ref mut s) = l.spec`)
    /// anywhere in the function: (field name, value written).
    fn assigned_fields(&self, _name: &str) -> Vec<(String, &Expr)> {
        Vec::new()
    }
    /// A call of the program's function whose body is one call or struct expression
    /// (`lock_spec(me, now)` answering `LeaseSpec { holder_identity: Some(holder.into()), .. }`),
    /// read with the call's arguments in place of its parameters.
    fn inlined(&self, _call: &syn::ExprCall) -> Option<&Expr> {
        None
    }
}

const MAX_DEPTH: usize = 24;

pub fn eval(expr: &Expr, env: &dyn Lookup) -> Option<Value> {
    eval_depth(expr, env, 0)
}

pub fn eval_str(expr: &Expr, env: &dyn Lookup) -> Option<String> {
    match eval(expr, env)? {
        Value::Str(s) => Some(s),
        _ => None,
    }
}

fn eval_depth(expr: &Expr, env: &dyn Lookup, depth: usize) -> Option<Value> {
    if depth > MAX_DEPTH {
        return None;
    }
    let ev = |e: &Expr| eval_depth(e, env, depth + 1);
    match expr {
        Expr::Lit(l) => lit(&l.lit),
        Expr::Paren(p) => ev(&p.expr),
        Expr::Group(g) => ev(&g.expr),
        Expr::Reference(r) => ev(&r.expr),
        Expr::Cast(c) => match (ev(&c.expr)?, int_type(&c.ty)) {
            // As Rust casts: floats saturate, integers wrap to the target's width.
            (Value::Float(f), Some(t)) => Some(Value::Int(wrap_int(f as i128, t))),
            (Value::Int(i), Some(t)) => Some(Value::Int(wrap_int(i, t))),
            (v, _) => Some(v),
        },
        Expr::Unary(u) => match (&u.op, ev(&u.expr)?) {
            (syn::UnOp::Neg(_), Value::Int(i)) => Some(Value::Int(-i)),
            (syn::UnOp::Neg(_), Value::Float(f)) => Some(Value::Float(-f)),
            (syn::UnOp::Not(_), Value::Bool(b)) => Some(Value::Bool(!b)),
            (syn::UnOp::Deref(_), v) => Some(v),
            _ => None,
        },
        Expr::Binary(b) => binary(&b.op, ev(&b.left)?, ev(&b.right)?),
        Expr::Path(p) => {
            if p.path.segments.len() == 1 && p.qself.is_none() {
                let name = p.path.segments[0].ident.to_string();
                if name == "None" {
                    return Some(Value::None);
                }
                if let Some(init) = env.local(&name) {
                    return ev(init);
                }
            }
            env.constant(&p.path)
                .or_else(|| builtin_constant(&env.resolve_fn(&p.path)))
        }
        Expr::Call(c) => {
            let Expr::Path(f) = &*c.func else { return None };
            let path = env.resolve_fn(&f.path);
            let last = path.rsplit("::").next().unwrap_or(&path);
            let args: Vec<Option<Value>> = c.args.iter().map(ev).collect();
            let num = |i: usize| args.get(i).cloned().flatten().and_then(|v| v.as_f64());
            if last == "Some"
                || last == "Ok"
                || last == "from"
                || last == "new" && !is_duration_type(&path)
            {
                return args.first().cloned().flatten();
            }
            if !is_duration_type(&path) {
                return called_text(expr, env, depth);
            }
            let ms = match last {
                "from_secs" | "from_secs_f64" | "from_secs_f32" | "seconds" | "seconds_f64"
                | "seconds_f32" => num(0)? * 1000.0,
                "from_millis" | "milliseconds" => num(0)?,
                "from_micros" | "microseconds" => num(0)? / 1000.0,
                "from_nanos" | "nanoseconds" => num(0)? / 1_000_000.0,
                "from_mins" | "minutes" => num(0)? * 60_000.0,
                "from_hours" | "hours" => num(0)? * 3_600_000.0,
                "from_days" | "days" => num(0)? * 86_400_000.0,
                "new" => num(0)? * 1000.0 + num(1).unwrap_or(0.0) / 1_000_000.0,
                _ => return None,
            };
            Some(Value::Duration(ms))
        }
        Expr::MethodCall(m) => {
            let recv = ev(&m.receiver);
            let method = m.method.to_string();
            match (method.as_str(), recv) {
                ("as_millis", Some(Value::Duration(ms))) => Some(Value::Int(ms as i128)),
                ("as_secs", Some(Value::Duration(ms))) => Some(Value::Int((ms / 1000.0) as i128)),
                ("as_secs_f64" | "as_secs_f32", Some(Value::Duration(ms))) => {
                    Some(Value::Float(ms / 1000.0))
                }
                (
                    "into" | "clone" | "to_owned" | "to_string" | "try_into" | "unwrap" | "expect"
                    | "as_str" | "as_bytes" | "into_sql_str",
                    Some(v),
                ) => Some(v),
                ("saturating_mul" | "checked_mul" | "wrapping_mul", Some(v)) => binary(
                    &syn::BinOp::Mul(Default::default()),
                    v,
                    ev(m.args.first()?)?,
                ),
                _ => called_text(expr, env, depth),
            }
        }
        Expr::Macro(m) => eval_macro(&m.mac, env, depth),
        Expr::Field(f) => env.field(&f.base, &f.member),
        Expr::Block(b) if b.block.stmts.len() == 1 => match &b.block.stmts[0] {
            syn::Stmt::Expr(e, None) => ev(e),
            _ => None,
        },
        _ => None,
    }
}

/// The text a call of the program's own text-building function answers, read from its tail in
/// the callee's scope: none of the caller's locals or fields (its `self.lock_id` is unknown and
/// becomes a placeholder; the function names and keywords around it are what is looked for).
fn called_text(call: &Expr, env: &dyn Lookup, depth: usize) -> Option<Value> {
    struct Callee<'e>(&'e dyn Lookup);
    impl Lookup for Callee<'_> {
        fn local(&self, _: &str) -> Option<&Expr> {
            None
        }
        fn constant(&self, path: &syn::Path) -> Option<Value> {
            self.0.constant(path)
        }
        fn resolve_fn(&self, path: &syn::Path) -> String {
            self.0.resolve_fn(path)
        }
        fn include(&self, rel: &str) -> Option<String> {
            self.0.include(rel)
        }
        // Only calls by path: a method's receiver would be typed in the caller's scope.
        fn text_fn(&self, call: &Expr) -> Option<Expr> {
            matches!(call, Expr::Call(_))
                .then(|| self.0.text_fn(call))
                .flatten()
        }
    }
    let tail = env.text_fn(call)?;
    match eval_depth(&tail, &Callee(env), depth + 1)? {
        v @ Value::Str(_) => Some(v),
        _ => None,
    }
}

/// `concat!` of literals and `format!` whose arguments are known (only positional `{}` and inline
/// `{name}` of known locals).
fn eval_macro(mac: &syn::Macro, env: &dyn Lookup, depth: usize) -> Option<Value> {
    let name = mac.path.segments.last()?.ident.to_string();
    if name == "include_str" {
        let rel: syn::LitStr = mac.parse_body().ok()?;
        return env.include(&rel.value()).map(Value::Str);
    }
    let args = mac
        .parse_body_with(syn::punctuated::Punctuated::<Expr, syn::Token![,]>::parse_terminated)
        .ok()?;
    // `format!("{t}", t = TABLE)`: named arguments, by name.
    let named: Vec<(String, &Expr)> = args
        .iter()
        .filter_map(|a| match a {
            Expr::Assign(x) => match &*x.left {
                Expr::Path(p) => Some((p.path.get_ident()?.to_string(), &*x.right)),
                _ => None,
            },
            _ => None,
        })
        .collect();
    let mut args = args.iter();
    match name.as_str() {
        "concat" => {
            let mut out = String::new();
            for a in args {
                match eval_depth(a, env, depth + 1)? {
                    Value::Str(s) => out.push_str(&s),
                    Value::Int(i) => out.push_str(&i.to_string()),
                    Value::Float(f) => out.push_str(&f.to_string()),
                    Value::Bool(b) => out.push_str(&b.to_string()),
                    _ => return None,
                }
            }
            Some(Value::Str(out))
        }
        "format" | "formatcp" => {
            let Value::Str(fmt) = eval_depth(args.next()?, env, depth + 1)? else {
                return None;
            };
            // Only the literal text matters for what we look for (SQL function names, command
            // names); unknown placeholders become `?` rather than failing the whole string.
            let mut out = String::new();
            for piece in format_pieces(&fmt) {
                let val = match piece {
                    FormatPiece::Text(t) => {
                        out.push_str(t);
                        continue;
                    }
                    // A named argument (it wins over a local of the same name), a local, or an
                    // item in scope (`{LEASE_TABLE}`, a const).
                    FormatPiece::Named(name) => match named.iter().find(|(n, _)| n == name) {
                        Some((_, e)) => eval_depth(e, env, depth + 1),
                        None => match env.local(name) {
                            Some(e) => eval_depth(e, env, depth + 1),
                            None => syn::parse_str::<syn::Ident>(name).ok().and_then(|id| {
                                let path = Expr::Path(syn::ExprPath {
                                    attrs: Vec::new(),
                                    qself: None,
                                    path: id.into(),
                                });
                                eval_depth(&path, env, depth + 1)
                            }),
                        },
                    },
                    FormatPiece::Next => args.next().and_then(|a| eval_depth(a, env, depth + 1)),
                };
                match val {
                    Some(Value::Str(s)) => out.push_str(&s),
                    Some(Value::Int(n)) => out.push_str(&n.to_string()),
                    _ => out.push('?'),
                }
            }
            Some(Value::Str(out))
        }
        "stringify" => Some(Value::Str(mac.tokens.to_string())),
        _ => None,
    }
}

/// A piece of a `format!` string.
#[derive(Debug, PartialEq)]
pub enum FormatPiece<'a> {
    Text(&'a str),
    /// `{}`, `{0}`, `{:x}`: the next argument.
    Next,
    /// `{name}`, `{name:?}`: the local `name`, captured inline.
    Named(&'a str),
}

/// Splits a `format!` string into text and placeholders (`{{` and `}}` are text). Never fails:
/// an unclosed `{` at the end is a placeholder, a lone `}` is text.
pub fn format_pieces(fmt: &str) -> Vec<FormatPiece<'_>> {
    let mut out = Vec::new();
    let mut rest = fmt;
    while let Some(i) = rest.find(['{', '}']) {
        if i > 0 {
            out.push(FormatPiece::Text(&rest[..i]));
        }
        let tail = &rest[i..];
        if tail.starts_with("{{") || tail.starts_with("}}") {
            out.push(FormatPiece::Text(&tail[..1]));
            rest = &tail[2..];
        } else if tail.starts_with('{') {
            let end = tail.find('}').unwrap_or(tail.len() - 1);
            let spec = &tail[1..end.max(1)];
            let name = spec.split(':').next().unwrap_or("").trim();
            let captured = !name.is_empty()
                && name.chars().all(|c| c.is_alphanumeric() || c == '_')
                && !name.starts_with(|c: char| c.is_ascii_digit());
            out.push(if captured {
                FormatPiece::Named(name)
            } else {
                FormatPiece::Next
            });
            rest = &tail[end + 1..];
        } else {
            out.push(FormatPiece::Text("}"));
            rest = &tail[1..];
        }
    }
    if !rest.is_empty() {
        out.push(FormatPiece::Text(rest));
    }
    out
}

fn lit(l: &syn::Lit) -> Option<Value> {
    match l {
        syn::Lit::Str(s) => Some(Value::Str(s.value())),
        syn::Lit::ByteStr(s) => Some(Value::Str(String::from_utf8_lossy(&s.value()).into_owned())),
        syn::Lit::CStr(s) => Some(Value::Str(s.value().to_string_lossy().into_owned())),
        syn::Lit::Int(i) => i.base10_parse::<i128>().ok().map(Value::Int),
        syn::Lit::Float(f) => f.base10_parse::<f64>().ok().map(Value::Float),
        syn::Lit::Bool(b) => Some(Value::Bool(b.value)),
        _ => None,
    }
}

fn binary(op: &syn::BinOp, l: Value, r: Value) -> Option<Value> {
    use syn::BinOp::*;
    match (l, r) {
        (Value::Int(a), Value::Int(b)) => Some(Value::Int(match op {
            Add(_) => a.checked_add(b)?,
            Sub(_) => a.checked_sub(b)?,
            Mul(_) => a.checked_mul(b)?,
            Div(_) => a.checked_div(b)?,
            Rem(_) => a.checked_rem(b)?,
            Shl(_) => a.checked_shl(u32::try_from(b).ok()?)?,
            _ => return None,
        })),
        (Value::Duration(a), Value::Duration(b)) => match op {
            Add(_) => Some(Value::Duration(a + b)),
            Sub(_) => Some(Value::Duration(a - b)),
            _ => None,
        },
        (Value::Duration(d), n) | (n, Value::Duration(d)) => {
            let n = n.as_f64()?;
            match op {
                Mul(_) => Some(Value::Duration(d * n)),
                Div(_) if n != 0.0 => Some(Value::Duration(d / n)),
                _ => None,
            }
        }
        (a, b) => {
            let (a, b) = (a.as_f64()?, b.as_f64()?);
            Some(Value::Float(match op {
                Add(_) => a + b,
                Sub(_) => a - b,
                Mul(_) => a * b,
                Div(_) if b != 0.0 => a / b,
                _ => return None,
            }))
        }
    }
}

/// The primitive integer type an `as` cast names: (bits, signed).
fn int_type(ty: &syn::Type) -> Option<(u32, bool)> {
    let syn::Type::Path(p) = ty else { return None };
    int_type_named(&p.path.get_ident()?.to_string())
}

fn int_type_named(name: &str) -> Option<(u32, bool)> {
    let signed = name.starts_with('i');
    if !signed && !name.starts_with('u') {
        return None;
    }
    let bits = match &name[1..] {
        "8" => 8,
        "16" => 16,
        "32" => 32,
        "64" | "size" => 64,
        "128" => 128,
        _ => return None,
    };
    Some((bits, signed))
}

/// `v` as an integer of this width: wrapped as `as` does (`-5i64 as u64` is 2^64 - 5).
fn wrap_int(v: i128, (bits, signed): (u32, bool)) -> i128 {
    if bits >= 128 {
        // u128 values past i128::MAX are beyond what a TTL can mean; keep them as large.
        return if signed { v } else { v.max(0) };
    }
    let modulus = 1i128 << bits;
    let low = v.rem_euclid(modulus);
    if signed && low >= modulus / 2 {
        low - modulus
    } else {
        low
    }
}

/// The standard library's constants a TTL is written with: `u64::MAX`, `Duration::MAX`.
fn builtin_constant(path: &str) -> Option<Value> {
    let (ty, name) = path.rsplit_once("::")?;
    let ty_last = ty.rsplit("::").next().unwrap_or(ty);
    if is_duration_type(path) {
        return match name {
            // u64::MAX seconds and 999,999,999 nanoseconds.
            "MAX" => Some(Value::Duration(u64::MAX as f64 * 1000.0 + 999.999_999)),
            "ZERO" => Some(Value::Duration(0.0)),
            "SECOND" => Some(Value::Duration(1000.0)),
            "MILLISECOND" => Some(Value::Duration(1.0)),
            _ => None,
        };
    }
    match (ty_last, name) {
        ("f64", "MAX") => return Some(Value::Float(f64::MAX)),
        ("f32", "MAX") => return Some(Value::Float(f32::MAX as f64)),
        _ => {}
    }
    let (bits, signed) = int_type_named(ty_last)?;
    let max = if bits >= 128 {
        i128::MAX
    } else if signed {
        (1i128 << (bits - 1)) - 1
    } else {
        (1i128 << bits) - 1
    };
    match name {
        "MAX" => Some(Value::Int(max)),
        "MIN" if signed => Some(Value::Int(-max - 1)),
        "MIN" => Some(Value::Int(0)),
        _ => None,
    }
}

/// `Duration::from_secs`, `std::time::Duration::from_millis`, `chrono::Duration::seconds`,
/// `time::Duration::seconds`, `tokio::time::Duration::…`.
fn is_duration_type(fn_path: &str) -> bool {
    let ty = fn_path.rsplit_once("::").map_or("", |(t, _)| t);
    ty == "Duration"
        || ty.ends_with("::Duration")
        || ty == "TimeDelta"
        || ty.ends_with("::TimeDelta")
}

#[cfg(test)]
mod tests {
    #[test]
    fn format_strings_split_into_text_and_placeholders() {
        use FormatPiece::*;
        assert_eq!(
            format_pieces("SELECT {}({key}) {{x}} {0:?}"),
            vec![
                Text("SELECT "),
                Next,
                Text("("),
                Named("key"),
                Text(") "),
                Text("{"),
                Text("x"),
                Text("}"),
                Text(" "),
                Next
            ]
        );
        // Strings that do not compile still split, without a panic.
        assert_eq!(format_pieces("a{"), vec![Text("a"), Next]);
        assert_eq!(format_pieces("}{"), vec![Text("}"), Next]);
    }

    use super::*;

    struct Env;
    impl Lookup for Env {
        fn local(&self, _: &str) -> Option<&Expr> {
            None
        }
        fn constant(&self, p: &syn::Path) -> Option<Value> {
            p.is_ident("BASE").then_some(Value::Int(1000))
        }
        fn resolve_fn(&self, p: &syn::Path) -> String {
            p.segments
                .iter()
                .map(|s| s.ident.to_string())
                .collect::<Vec<_>>()
                .join("::")
        }
    }

    fn ev(src: &str) -> Option<Value> {
        eval(
            &syn::parse_str::<Expr>(src).expect("expression parses"),
            &Env,
        )
    }

    #[test]
    fn numbers_and_durations() {
        assert_eq!(ev("30_000"), Some(Value::Int(30_000)));
        assert_eq!(ev("BASE * 90"), Some(Value::Int(90_000)));
        assert_eq!(
            ev("Duration::from_secs(90)"),
            Some(Value::Duration(90_000.0))
        );
        assert_eq!(
            ev("std::time::Duration::from_millis(BASE * 2)"),
            Some(Value::Duration(2000.0))
        );
        assert_eq!(
            ev("Duration::from_secs(2) * 3"),
            Some(Value::Duration(6000.0))
        );
        assert_eq!(
            ev("Duration::from_secs(30).as_millis() as usize"),
            Some(Value::Int(30_000))
        );
        assert_eq!(
            ev("chrono::Duration::minutes(2)"),
            Some(Value::Duration(120_000.0))
        );
        assert_eq!(
            ev("Some(Duration::from_secs(5))"),
            Some(Value::Duration(5000.0))
        );
        assert_eq!(ev("unknown(3)"), None);
    }

    #[test]
    fn limits_and_wrapping_casts() {
        let max = u64::MAX as f64;
        assert_eq!(ev("u64::MAX"), Some(Value::Int(u64::MAX as i128)));
        assert_eq!(ev("i32::MIN"), Some(Value::Int(i32::MIN as i128)));
        assert_eq!(
            ev("Duration::from_secs(u64::MAX)"),
            Some(Value::Duration(max * 1000.0))
        );
        assert_eq!(ev("-5i64 as u64"), Some(Value::Int((u64::MAX - 4) as i128)));
        assert_eq!(ev("65_546u32 as u16"), Some(Value::Int(10)));
        assert_eq!(ev("-1i64 as i8"), Some(Value::Int(-1)));
        assert_eq!(ev("300 as i8"), Some(Value::Int(44)));
        assert!(matches!(ev("std::time::Duration::MAX"), Some(Value::Duration(ms)) if ms > max));
        assert_eq!(ev("10 / 0"), None);
    }

    #[test]
    fn strings() {
        assert_eq!(
            ev(r##"r#"SELECT pg_advisory_lock($1)"#"##),
            Some(Value::Str("SELECT pg_advisory_lock($1)".into()))
        );
        assert_eq!(
            ev(r#"concat!("SELECT ", "pg_try_advisory_lock(", 42, ")")"#),
            Some(Value::Str("SELECT pg_try_advisory_lock(42)".into()))
        );
        assert_eq!(
            ev(r#"format!("SELECT pg_advisory_lock({})", id)"#),
            Some(Value::Str("SELECT pg_advisory_lock(?)".into()))
        );
        // Inline names that are no locals: an item in scope, or a named argument.
        assert_eq!(
            ev(r#"format!("UPDATE t SET n = {BASE}, m = {m}, k = {k}", m = BASE + 1)"#),
            Some(Value::Str("UPDATE t SET n = 1000, m = 1001, k = ?".into()))
        );
    }
}
