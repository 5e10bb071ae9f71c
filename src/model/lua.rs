//! Redis server-side Lua, read as far as a lock needs: the `redis.call(..)` commands a script (or
//! a Redis Function) sends, the functions a library registers with `redis.register_function`,
//! and the files `include_str!` brings the text from. No evaluation: what a script does to a key
//! is decided from the commands it may send.

use std::path::Path;

/// The largest file `include_str!` is followed into.
pub const INCLUDE_LIMIT: u64 = 1 << 20;

/// The text of `include_str!(rel)` written in `source`: a regular file, relative to the source
/// file's directory as rustc reads it, at most [`INCLUDE_LIMIT`] bytes.
pub fn read_include(source: &Path, rel: &str) -> Option<String> {
    use std::io::Read;
    let path = source.parent()?.join(rel);
    let meta = std::fs::metadata(&path).ok()?;
    if !meta.is_file() || meta.len() > INCLUDE_LIMIT {
        return None;
    }
    let mut text = String::new();
    std::fs::File::open(&path)
        .ok()?
        .take(INCLUDE_LIMIT)
        .read_to_string(&mut text)
        .ok()?;
    Some(text)
}

/// A file named relative to a crate's root (sqlx's `query_file!`), read as [`read_include`]
/// reads one.
pub fn read_in_crate(crate_root: &Path, rel: &str) -> Option<String> {
    if crate_root.as_os_str().is_empty() {
        return None;
    }
    read_include(&crate_root.join("Cargo.toml"), rel)
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Word(String),
    Str(String),
    Num(f64),
    Punct(char),
}

/// Lua tokens with comments dropped; identifiers lower-cased (the commands are case-free).
fn tokens(lua: &str) -> Vec<Tok> {
    let b: Vec<char> = lua.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    // `[[ … ]]` / `[==[ … ]==]`: the level of `=` signs at `i` (just after `[`), if a long bracket.
    let long_open = |i: usize| -> Option<usize> {
        let mut j = i;
        while b.get(j) == Some(&'=') {
            j += 1;
        }
        (b.get(j) == Some(&'[')).then_some(j - i)
    };
    let long_close = |from: usize, level: usize| -> usize {
        let mut j = from;
        while j < b.len() {
            if b[j] == ']' {
                let mut k = j + 1;
                let mut n = 0;
                while b.get(k) == Some(&'=') {
                    k += 1;
                    n += 1;
                }
                if n == level && b.get(k) == Some(&']') {
                    return k + 1;
                }
            }
            j += 1;
        }
        b.len()
    };
    while i < b.len() {
        let c = b[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '-' && b.get(i + 1) == Some(&'-') {
            if b.get(i + 2) == Some(&'[')
                && let Some(level) = long_open(i + 3)
            {
                i = long_close(i + 4 + level, level);
            } else {
                while i < b.len() && b[i] != '\n' {
                    i += 1;
                }
            }
        } else if c == '"' || c == '\'' {
            let mut s = String::new();
            i += 1;
            while i < b.len() && b[i] != c {
                if b[i] == '\\' && i + 1 < b.len() {
                    i += 1;
                }
                s.push(b[i]);
                i += 1;
            }
            i += 1;
            out.push(Tok::Str(s));
        } else if c == '['
            && let Some(level) = long_open(i + 1)
        {
            let start = i + 2 + level;
            let end = long_close(start, level);
            let body_end = end.saturating_sub(2 + level).max(start);
            out.push(Tok::Str(b[start..body_end].iter().collect()));
            i = end;
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < b.len() && (b[i].is_alphanumeric() || b[i] == '_') {
                i += 1;
            }
            let w: String = b[start..i].iter().collect();
            out.push(Tok::Word(w.to_ascii_lowercase()));
        } else if c.is_ascii_digit() {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == '.') {
                i += 1;
            }
            let n: String = b[start..i].iter().collect();
            out.push(Tok::Num(n.parse().unwrap_or(f64::NAN)));
        } else {
            out.push(Tok::Punct(c));
            i += 1;
        }
    }
    out
}

fn is_word(t: Option<&Tok>, w: &str) -> bool {
    matches!(t, Some(Tok::Word(x)) if x == w)
}

/// The index just past the `end` (or `until`) that closes the block opened at `open`.
fn block_end(toks: &[Tok], open: usize) -> usize {
    let mut depth = 0usize;
    let mut i = open;
    while i < toks.len() {
        match &toks[i] {
            Tok::Word(w) if matches!(w.as_str(), "function" | "if" | "do" | "repeat") => depth += 1,
            Tok::Word(w) if w == "end" || w == "until" => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    toks.len()
}

/// One argument of a `redis.call`, as far as it is known.
#[derive(Debug, Clone, PartialEq)]
pub enum LuaArg {
    Str(String),
    Num(f64),
    /// `KEYS[n]` / `keys[n]` (0-based).
    Key(usize),
    /// `ARGV[n]` / `args[n]` (0-based), also through `tonumber(..)`.
    Arg(usize),
    Other,
}

/// A `redis.call(..)` / `redis.pcall(..)`: the command (lower case) and its arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct LuaCall {
    pub name: String,
    pub args: Vec<LuaArg>,
}

fn arg_of(toks: &[Tok]) -> LuaArg {
    let toks = match toks {
        [Tok::Word(f), Tok::Punct('('), inner @ .., Tok::Punct(')')] if f == "tonumber" => inner,
        t => t,
    };
    match toks {
        [Tok::Str(s)] => LuaArg::Str(s.to_ascii_lowercase()),
        [Tok::Num(n)] => LuaArg::Num(*n),
        [Tok::Word(w), Tok::Punct('['), Tok::Num(n), Tok::Punct(']')] if *n >= 1.0 => {
            let i = *n as usize - 1;
            match w.as_str() {
                "keys" => LuaArg::Key(i),
                "argv" | "args" => LuaArg::Arg(i),
                _ => LuaArg::Other,
            }
        }
        _ => LuaArg::Other,
    }
}

fn calls_in(toks: &[Tok]) -> Vec<LuaCall> {
    let mut out = Vec::new();
    for i in 0..toks.len() {
        if !(is_word(toks.get(i), "redis")
            && toks.get(i + 1) == Some(&Tok::Punct('.'))
            && (is_word(toks.get(i + 2), "call") || is_word(toks.get(i + 2), "pcall"))
            && toks.get(i + 3) == Some(&Tok::Punct('(')))
        {
            continue;
        }
        let mut args: Vec<&[Tok]> = Vec::new();
        let (mut depth, mut start) = (0usize, i + 4);
        let mut j = i + 4;
        while j < toks.len() {
            match toks[j] {
                Tok::Punct('(' | '{' | '[') => depth += 1,
                Tok::Punct(')') if depth == 0 => break,
                Tok::Punct(')' | '}' | ']') => depth = depth.saturating_sub(1),
                Tok::Punct(',') if depth == 0 => {
                    args.push(&toks[start..j]);
                    start = j + 1;
                }
                _ => {}
            }
            j += 1;
        }
        args.push(&toks[start..j.min(toks.len())]);
        let mut args = args.into_iter().map(arg_of);
        let Some(LuaArg::Str(name)) = args.next() else {
            continue;
        };
        out.push(LuaCall {
            name,
            args: args.collect(),
        });
    }
    out
}

#[cfg(test)]
fn calls(lua: &str) -> Vec<LuaCall> {
    calls_in(&tokens(lua))
}

/// The functions a Redis Function library (`#!lua name=lib` loaded with `FUNCTION LOAD`)
/// registers, by name, with what each does to a key (judged on the commands it sends, those of
/// the library's local functions it calls included) and whether it compares with an argument.
/// Functions that are no lock event are left out.
pub fn library_functions(lua: &str) -> Vec<(String, Effect, bool)> {
    let toks = tokens(lua);
    // Named functions: `local function f(..) … end` and `function f(..) … end`.
    let mut named: Vec<(String, std::ops::Range<usize>)> = Vec::new();
    for i in 0..toks.len() {
        if is_word(toks.get(i), "function")
            && let Some(Tok::Word(name)) = toks.get(i + 1)
            && toks.get(i + 2) == Some(&Tok::Punct('('))
        {
            named.push((name.clone(), i..block_end(&toks, i)));
        }
    }
    let body_calls = |range: std::ops::Range<usize>| -> (Vec<LuaCall>, bool, bool) {
        let mut out = Vec::new();
        let mut compares = false;
        let mut absence = false;
        let mut seen = std::collections::HashSet::new();
        let mut todo = vec![range];
        while let Some(r) = todo.pop() {
            if !seen.insert((r.start, r.end)) || seen.len() > 64 {
                continue;
            }
            let body = &toks[r.clone()];
            out.extend(calls_in(body));
            compares |= compares_in(body);
            absence |= tests_absence(body);
            for (k, t) in body.iter().enumerate() {
                if let Tok::Word(w) = t
                    && body.get(k + 1) == Some(&Tok::Punct('('))
                    && let Some((_, callee)) = named.iter().find(|(n, _)| n == w)
                {
                    todo.push(callee.clone());
                }
            }
        }
        (out, compares, absence)
    };
    let mut out = Vec::new();
    for i in 0..toks.len() {
        if !(is_word(toks.get(i), "redis")
            && toks.get(i + 1) == Some(&Tok::Punct('.'))
            && is_word(toks.get(i + 2), "register_function"))
        {
            continue;
        }
        let (name, callback) = match toks.get(i + 3) {
            // redis.register_function('name', callback)
            Some(Tok::Punct('(')) => match (toks.get(i + 4), toks.get(i + 5)) {
                (Some(Tok::Str(n)), Some(Tok::Punct(','))) => (n.clone(), i + 6),
                _ => continue,
            },
            // redis.register_function{function_name='name', callback=f, flags={..}}
            Some(Tok::Punct('{')) => {
                let field = |f: &str| {
                    (i + 4..toks.len().min(i + 64)).find(|&k| {
                        is_word(toks.get(k), f) && toks.get(k + 1) == Some(&Tok::Punct('='))
                    })
                };
                let Some(Tok::Str(n)) = field("function_name").and_then(|k| toks.get(k + 2)) else {
                    continue;
                };
                let Some(cb) = field("callback") else {
                    continue;
                };
                (n.clone(), cb + 2)
            }
            _ => continue,
        };
        let (calls, compares, absence) = match toks.get(callback) {
            Some(Tok::Word(w)) if w == "function" => {
                body_calls(callback..block_end(&toks, callback))
            }
            Some(Tok::Word(w)) => match named.iter().find(|(n, _)| n == w) {
                Some((_, r)) => body_calls(r.clone()),
                None => continue,
            },
            _ => continue,
        };
        if let Some(e) = effect(&calls, compares, absence) {
            out.push((name, e, compares));
        }
    }
    out
}

/// What a script's text does to its key, and whether it compares the key's value with an
/// argument first.
pub fn script_effect(lua: &str) -> Option<(Effect, bool)> {
    let toks = tokens(lua);
    let compares = compares_in(&toks);
    let absence = tests_absence(&toks);
    Some((effect(&calls_in(&toks), compares, absence)?, compares))
}

/// What a script does to its lock key.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Takes the key if nobody holds it, with the expiry its SET carries.
    Acquire(LuaTtl),
    Release,
    Renew,
}

/// The expiry a script's acquisition sets.
#[derive(Debug, Clone, PartialEq)]
pub enum LuaTtl {
    /// Neither EX/PX on the SET nor an EXPIRE after it.
    Missing,
    /// Written in the script, in milliseconds.
    Ms(f64),
    /// From the caller's argument (0-based), times the unit in milliseconds.
    Arg(usize, f64),
    /// EXAT/PXAT: a deadline of unknown length.
    Absolute,
    Unknown,
}

/// What the commands of one script do to a key, and whether it compares the key's value with an
/// argument first (`if redis.call('get', KEYS[1]) == ARGV[1]`).
///
/// A `SET … NX` or `SETNX` acquires. Otherwise a DEL/UNLINK releases, an EXPIRE-family command
/// renews. A plain `SET … EX|PX` after a read of the key (GET/EXISTS) is a check-then-set, atomic
/// inside the script: an acquisition when the read is not a comparison with the caller's value
/// (then it is a renewal), or when the script tests the key's absence (`if not current then
/// SET … EXPIRE … elseif current == ARGV[1] then EXPIRE …`: acquire-or-renew). Anything else is
/// no lock event.
pub fn effect(calls: &[LuaCall], owner_compare: bool, absence: bool) -> Option<Effect> {
    let has = |names: &[&str]| calls.iter().any(|c| names.contains(&c.name.as_str()));
    let flag = |c: &LuaCall, f: &str| c.args.iter().any(|a| *a == LuaArg::Str(f.into()));
    let ttl_of = |c: &LuaCall| -> Option<LuaTtl> {
        for (i, a) in c.args.iter().enumerate() {
            let LuaArg::Str(s) = a else { continue };
            let unit = match s.as_str() {
                "ex" => 1000.0,
                "px" => 1.0,
                "exat" | "pxat" => return Some(LuaTtl::Absolute),
                _ => continue,
            };
            return Some(match c.args.get(i + 1) {
                Some(LuaArg::Num(n)) => LuaTtl::Ms(n * unit),
                Some(LuaArg::Arg(k)) => LuaTtl::Arg(*k, unit),
                _ => LuaTtl::Unknown,
            });
        }
        None
    };
    let expire_ttl = || {
        calls.iter().find_map(|c| {
            let unit = match c.name.as_str() {
                "expire" => 1000.0,
                "pexpire" => 1.0,
                "expireat" | "pexpireat" => return Some(LuaTtl::Absolute),
                _ => return None,
            };
            Some(match c.args.get(1) {
                Some(LuaArg::Num(n)) => LuaTtl::Ms(n * unit),
                Some(LuaArg::Arg(k)) => LuaTtl::Arg(*k, unit),
                _ => LuaTtl::Unknown,
            })
        })
    };
    if let Some(set) = calls.iter().find(|c| c.name == "set" && flag(c, "nx")) {
        return Some(Effect::Acquire(
            ttl_of(set).or_else(expire_ttl).unwrap_or(LuaTtl::Missing),
        ));
    }
    if has(&["setnx"]) {
        return Some(Effect::Acquire(expire_ttl().unwrap_or(LuaTtl::Missing)));
    }
    if absence
        && has(&["get", "exists"])
        && let Some(set) = calls.iter().find(|c| c.name == "set" && !flag(c, "xx"))
    {
        return Some(Effect::Acquire(
            ttl_of(set).or_else(expire_ttl).unwrap_or(LuaTtl::Missing),
        ));
    }
    if has(&["del", "unlink"]) {
        return Some(Effect::Release);
    }
    if has(&["expire", "pexpire", "expireat", "pexpireat"]) {
        return Some(Effect::Renew);
    }
    let checked_set = calls
        .iter()
        .find(|c| c.name == "set" && !flag(c, "xx") && ttl_of(c).is_some());
    if let Some(set) = checked_set
        && has(&["get", "exists"])
    {
        return Some(if owner_compare {
            Effect::Renew
        } else {
            Effect::Acquire(ttl_of(set).unwrap_or(LuaTtl::Unknown))
        });
    }
    if calls.iter().any(|c| c.name == "set" && flag(c, "xx")) {
        return Some(Effect::Renew);
    }
    None
}

/// Does the script test that something is absent (`if not current`, `== false`, `== nil`,
/// `exists(..) == 0`)? Redis answers a GET of a missing key with `false` in Lua. A test whose
/// branch only gives up (`if not current then return {err = ..} end`) makes what follows run
/// on a key that exists: no create.
fn tests_absence(toks: &[Tok]) -> bool {
    (0..toks.len()).any(|k| {
        (is_word(toks.get(k), "not")
            || matches!(
                (toks.get(k), toks.get(k + 1), toks.get(k + 2)),
                (Some(Tok::Punct('=')), Some(Tok::Punct('=')), Some(t))
                    if matches!(t, Tok::Word(w) if w == "false" || w == "nil")
                        || *t == Tok::Num(0.0)
            ) && !matches!(
                toks.get(k.wrapping_sub(1)),
                Some(Tok::Punct('=' | '~' | '<' | '>'))
            ))
            && !gives_up_after(toks, k)
    })
}

/// Is the test at `k` the condition of an `if` whose branch returns at once with something
/// other than a command's reply (an error table, a constant)?
fn gives_up_after(toks: &[Tok], k: usize) -> bool {
    let Some(then) = (k..toks.len().min(k + 24)).find(|&j| is_word(toks.get(j), "then")) else {
        return false;
    };
    is_word(toks.get(then + 1), "return")
        && !(is_word(toks.get(then + 2), "redis") && toks.get(then + 3) == Some(&Tok::Punct('.')))
}

/// Does the script compare a value with one of the caller's arguments (`== ARGV[1]`, or a local
/// bound to one: `local token = args[1] … if holder == token`)?
fn compares_in(toks: &[Tok]) -> bool {
    let is_arg = |k: usize| {
        matches!(toks.get(k), Some(Tok::Word(w)) if w == "argv" || w == "args")
            && toks.get(k + 1) == Some(&Tok::Punct('['))
    };
    // Locals bound to an argument.
    let mut tainted: Vec<&str> = Vec::new();
    for k in 0..toks.len() {
        if let (Some(Tok::Word(name)), Some(Tok::Punct('='))) = (toks.get(k), toks.get(k + 1))
            && toks.get(k + 2) != Some(&Tok::Punct('='))
            && (is_arg(k + 2) || is_word(toks.get(k + 2), "tonumber") && is_arg(k + 4))
        {
            tainted.push(name);
        }
    }
    let operand = |k: usize| {
        is_arg(k) || matches!(toks.get(k), Some(Tok::Word(w)) if tainted.contains(&w.as_str()))
    };
    (0..toks.len()).any(|k| {
        let cmp = matches!(
            (toks.get(k), toks.get(k + 1)),
            (Some(Tok::Punct('=' | '~')), Some(Tok::Punct('=')))
        ) && !matches!(
            toks.get(k.wrapping_sub(1)),
            Some(Tok::Punct('=' | '~' | '<' | '>'))
        );
        if !cmp {
            return false;
        }
        // The operand right of the operator, or the word just left of it (`x.holder == id`).
        operand(k + 2) || k >= 1 && operand(k - 1) || k >= 4 && operand(k - 4)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_nx_px_from_an_argument_is_an_acquisition() {
        let c = calls("return redis.call(\"set\", KEYS[1], ARGV[1], \"NX\", \"PX\", ARGV[2])");
        assert_eq!(
            effect(&c, false, false),
            Some(Effect::Acquire(LuaTtl::Arg(1, 1.0)))
        );
        let c = calls("return redis.call('SET', KEYS[1], ARGV[1], 'NX')");
        assert_eq!(
            effect(&c, false, false),
            Some(Effect::Acquire(LuaTtl::Missing))
        );
        let c = calls(
            "if redis.call('setnx', KEYS[1], ARGV[1]) == 1 then redis.call('expire', KEYS[1], 30) end",
        );
        assert_eq!(
            effect(&c, false, false),
            Some(Effect::Acquire(LuaTtl::Ms(30_000.0)))
        );
    }

    #[test]
    fn absence_guarded_set_acquires_even_beside_a_renewal() {
        let lua = "local current = redis.call('GET', KEYS[1])
            if not current then
                redis.call('SET', KEYS[1], ARGV[1])
                redis.call('EXPIRE', KEYS[1], ARGV[2])
                return 2
            elseif current == ARGV[1] then
                redis.call('EXPIRE', KEYS[1], ARGV[2])
                return 1
            end
            return 0";
        assert_eq!(
            script_effect(lua),
            Some((Effect::Acquire(LuaTtl::Arg(1, 1000.0)), true))
        );
        // The same renewal without the absence test renews.
        let renew = "if redis.call('GET', KEYS[1]) == ARGV[1] then
                return redis.call('EXPIRE', KEYS[1], ARGV[2]) end return 0";
        assert_eq!(script_effect(renew), Some((Effect::Renew, true)));
    }

    #[test]
    fn a_set_that_needs_the_key_is_no_create() {
        // A counter bumped only once it exists: the absent branch gives up.
        let bump = "local current = redis.call('GET', KEYS[1])
            if not current then
              return {err = 'not_initialized'}
            end
            redis.call('SET', KEYS[1], tonumber(current) + 1)
            return current";
        assert_eq!(script_effect(bump), None);
        // An absent branch that returns the SET's own reply still creates.
        let create = "if not redis.call('GET', KEYS[1]) then
              return redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) end return false";
        assert_eq!(
            script_effect(create).map(|(e, _)| e),
            Some(Effect::Acquire(LuaTtl::Arg(1, 1.0)))
        );
    }

    #[test]
    fn compare_and_delete_releases_and_compares() {
        let lua = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";
        assert_eq!(effect(&calls(lua), true, false), Some(Effect::Release));
        assert_eq!(script_effect(lua), Some((Effect::Release, true)));
        assert!(!compares_in(&tokens("return redis.call('get', KEYS[1])")));
        assert_eq!(
            effect(&calls("return redis.call('get', KEYS[1])"), false, false),
            None
        );
    }

    #[test]
    fn library_functions_follow_local_helpers() {
        let lib = r#"#!lua name=locks
-- a comment with redis.call('del', 'x')
local function set_locks(id, resources, ttl)
    for i = 1, #resources do
        if true then redis.call("SET", "lock:" .. resources[i], id, "EX", ttl) end
    end
end
local function acquire(keys, args)
    if redis.call("GET", keys[1]) then return nil end
    set_locks(args[1], {keys[1]}, args[2])
    return args[1]
end
redis.register_function('acquire_lock', acquire)
redis.register_function{function_name='release_lock', callback=function(keys, args)
    local token = args[1]
    if redis.call('get', keys[1]) == token then return redis.call('del', keys[1]) end
    return 0
end, flags={}}
redis.register_function('peek', function(keys, args) return redis.call('get', keys[1]) end)
"#;
        let fns = library_functions(lib);
        assert_eq!(
            fns,
            [
                (
                    "acquire_lock".to_string(),
                    Effect::Acquire(LuaTtl::Unknown),
                    false
                ),
                ("release_lock".to_string(), Effect::Release, true),
            ]
        );
    }

    #[test]
    fn long_strings_and_comments_are_skipped() {
        let lua = "--[[ redis.call('set', KEYS[1], 1, 'NX') ]] local s = [[redis.call('del', k)]] return redis.call('get', KEYS[1])";
        assert_eq!(effect(&calls(lua), false, false), None);
    }
}
