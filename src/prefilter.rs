//! The prefilter: which files can matter, decided from their text before anything is parsed.
//!
//! A file can only hold a lock site if it names something a rule pack knows (a lock crate, one of
//! its types, an advisory-lock SQL function, a command builder), carries a `lockaudit:` directive,
//! or names a type, alias, function or constant of its crate that leads to one (a struct with a
//! `LockManager` field, a helper returning one, a wrapper, the `const TTL` a site reads). The first
//! set is found by one multi-pattern scan; the rest by a closure over what the parsed files declare
//! and use. A word counts only where it can matter ([`Where`]): a crate's name in a doc comment or a
//! string names no crate. `--no-prefilter` parses everything, and the tests hold the two to the same
//! findings.

use std::collections::HashSet;

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};

use crate::lex;
use crate::model::FileIndex;
use crate::model::imports::first_segment;
use crate::packs::PackSet;

/// Where in a file a word counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Where {
    /// In code: a crate, type or function name. `[mini-redis]` in a doc comment names no crate.
    Code,
    /// In code or in a literal: an SQL function travels inside a string.
    CodeOrLiteral,
    /// In a literal only: an SQL function in the other letter case than its pack writes it
    /// (`get_lock` in SQL text; in code, `release_lock()` is a common method name).
    Literal,
    /// Anywhere, comments included: `lockaudit:` directives.
    Anywhere,
}

/// Whole-identifier matching of many words at once, each counted only where it can matter.
pub struct Words {
    /// Overlapping matches, for the exact check of boundaries and places.
    ac: Option<AhoCorasick>,
    /// Leftmost matches, which the crate accelerates (SIMD prefilters): most files contain none
    /// of the words at all and are rejected by this alone.
    quick: Option<AhoCorasick>,
    /// By pattern index.
    wheres: Vec<Where>,
    /// The pattern set could not be built: every text counts as a match (safe, only slower).
    all: bool,
}

fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

impl Words {
    /// Words with where each counts; a word given twice counts in the wider of its places.
    pub fn classed(words: impl IntoIterator<Item = (String, Where)>) -> Words {
        Words::build(words, false)
    }

    /// Code-only words for scanning a few texts (the closure's candidates): built without the
    /// accelerated search and its DFA, which take longer to build than those few scans take.
    pub fn for_few_texts(words: impl IntoIterator<Item = String>) -> Words {
        Words::build(words.into_iter().map(|w| (w, Where::Code)), true)
    }

    fn build(words: impl IntoIterator<Item = (String, Where)>, few: bool) -> Words {
        let mut words: Vec<(String, Where)> =
            words.into_iter().filter(|(w, _)| !w.is_empty()).collect();
        words.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        words.dedup_by(|later, first| later.0 == first.0);
        let patterns = || words.iter().map(|(w, _)| w);
        // Building can only fail for absurd pattern sets; then every file counts as a match.
        let built = (!words.is_empty()).then(|| {
            AhoCorasick::builder()
                .kind(few.then_some(AhoCorasickKind::NoncontiguousNFA))
                .build(patterns())
        });
        let quick = (!words.is_empty() && !few).then(|| {
            AhoCorasick::builder()
                .match_kind(MatchKind::LeftmostFirst)
                .build(patterns())
        });
        Words {
            all: matches!(built, Some(Err(_))),
            ac: built.and_then(Result::ok),
            quick: quick.and_then(Result::ok),
            wheres: words.into_iter().map(|(_, w)| w).collect(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.ac.is_none() && !self.all
    }

    /// Does `text` contain one of the words, not as part of a longer identifier, in a place where
    /// it counts? Patterns that end in a non-identifier character (`lockaudit:`) need no boundary
    /// there. The file is lexed only when a word is found, which is rare.
    pub fn any_in(&self, text: &str) -> bool {
        let Some(ac) = &self.ac else {
            return self.all;
        };
        if self.quick.as_ref().is_some_and(|q| !q.is_match(text)) {
            return false;
        }
        let b = text.as_bytes();
        let mut regions: Option<Vec<lex::Region>> = None;
        ac.find_overlapping_iter(text).any(|m| {
            let (s, e) = (m.start(), m.end());
            let before_ok = s == 0 || !is_ident_byte(b[s - 1]) || !is_ident_byte(b[s]);
            let after_ok = e == b.len() || !is_ident_byte(b[e]) || !is_ident_byte(b[e - 1]);
            if !(before_ok && after_ok) {
                return false;
            }
            let place = self.wheres[m.pattern().as_usize()];
            if place == Where::Anywhere {
                return true;
            }
            let regions = regions.get_or_insert_with(|| lex::regions(text));
            match lex::region_at(regions, s).map(|r| r.kind) {
                None => place != Where::Literal,
                Some(lex::Kind::Literal) => matches!(place, Where::CodeOrLiteral | Where::Literal),
                Some(lex::Kind::Comment(_)) => false,
            }
        })
    }
}

/// What makes a file worth parsing for these packs.
pub fn pack_triggers(packs: &PackSet) -> Vec<(String, Where)> {
    let mut out = vec![("lockaudit".to_string(), Where::Anywhere)];
    let mut paths: Vec<&str> = Vec::new();
    for pack in &packs.packs {
        // An HTTP pack (Consul over reqwest) is about URLs, not about its client crate: a file
        // that sends such a request writes a piece of the URL (`/v1/kv/`, `acquire=`) in a
        // literal, while every file using reqwest or http would be far too many.
        if !pack.calls.is_empty() && pack.calls.iter().all(|c| c.url_arg.is_some()) {
            out.extend(
                pack.calls
                    .iter()
                    .flat_map(|c| c.url_contains.iter())
                    .map(|f| (f.clone(), Where::Literal)),
            );
            continue;
        }
        for t in &pack.types {
            paths.push(&t.path);
            paths.extend(t.aliases.iter().map(String::as_str));
        }
        for c in &pack.calls {
            paths.extend(c.function.as_deref());
            if let Some(crate::packs::OneOrMany::One(r)) = &c.receiver {
                paths.push(r);
            }
            if let Some(crate::packs::OneOrMany::Many(rs)) = &c.receiver {
                paths.extend(rs.iter().map(String::as_str));
            }
            paths.extend(c.in_scope.iter().map(String::as_str));
        }
        paths.extend(pack.pack.command_builders.iter().map(String::as_str));
        // SQL is case-insensitive: `GET_LOCK` is also written `get_lock`, in SQL text. As the
        // pack writes it, the name also counts in code (diesel's `define_sql_function!`).
        out.extend(pack.sql.iter().flat_map(|s| {
            let other = if s.function.bytes().any(|b| b.is_ascii_lowercase()) {
                s.function.to_ascii_uppercase()
            } else {
                s.function.to_ascii_lowercase()
            };
            [
                (s.function.clone(), Where::CodeOrLiteral),
                (other, Where::Literal),
            ]
        }));
        // … or by a query builder's statement (`diesel::update`), found through its crate.
        paths.extend(
            pack.lease_table
                .iter()
                .flat_map(|l| l.statement_builders.iter().map(String::as_str)),
        );
        // A lease row is written in SQL text naming its holder column (`locked_by`).
        out.extend(
            pack.lease_table
                .iter()
                .flat_map(|l| l.triggers.iter())
                .map(|t| (t.clone(), Where::Literal)),
        );
        out.extend(
            pack.pack
                .sql_calls
                .iter()
                .filter(|c| c.ends_with('!'))
                .map(|c| (c.clone(), Where::Code)),
        );
    }
    // A file reaches a library's items only through its crate name (imports, qualified paths,
    // globs) or through items of its own crate, which the closure adds. Last segments alone
    // (`Client`, `Lock`) would match nearly every file. Crate-local paths (`[[lock]]` wrappers)
    // are known by their last segment.
    // A crate is named as a path (`http::Request`, `use http::…`), imported whole (`use http;`,
    // `use http as h;`) or declared (`extern crate http;`): never as a bare word, which for
    // crates named `http` or `redis` is also a common field or variable name.
    for p in paths {
        let first = first_segment(p);
        if first == "crate" {
            out.push((p.rsplit("::").next().unwrap_or(p).to_string(), Where::Code));
            continue;
        }
        out.extend(
            [
                format!("{first}::"),
                format!("use {first}"),
                format!("extern crate {first}"),
            ]
            .map(|w| (w, Where::Code)),
        );
    }
    // The crate's own items are never triggers by themselves (`crate`, `self`).
    out.retain(|(w, _)| !matches!(w.as_str(), "crate" | "self" | "super"));
    out
}

/// Names of the crate's items that lead to a pack type: structs with such fields, aliases of
/// such types, functions and methods returning them (and the types owning those methods).
pub fn interesting_names<'a>(
    files: impl Iterator<Item = &'a FileIndex> + Clone,
    packs: &PackSet,
) -> HashSet<String> {
    let last = |p: &str| p.rsplit("::").next().unwrap_or(p).to_string();
    let mut names: HashSet<String> = packs.types.keys().map(|p| last(p)).collect();
    loop {
        let before = names.len();
        let hits = |t: &crate::model::Ty, names: &HashSet<String>| {
            let mut stack = vec![t];
            while let Some(t) = stack.pop() {
                if names.contains(t.last_segment()) {
                    return true;
                }
                stack.extend(t.args.iter());
            }
            false
        };
        for f in files.clone() {
            for (path, fields) in &f.structs {
                if fields.iter().any(|(_, t)| hits(t, &names)) {
                    names.insert(last(path));
                }
            }
            // A function that builds a command for its caller to run (`acquire_cmd(k).query(c)`).
            for b in &f.cmd_builders {
                names.insert(last(&b.path));
            }
            // An SQL function declared for the query builder under a name of the program's
            // (`define_sql_function! { #[sql_name = "pg_try_advisory_lock"] fn try_lock(..) }`).
            for (path, _) in &f.sql_fns {
                names.insert(last(path));
            }
            // A variant that carries one makes its enum carry it too (`Store::Redis(client)`).
            for (path, fields) in &f.variants {
                if fields.iter().any(|(_, t)| hits(t, &names))
                    && let Some((owner, _)) = path.rsplit_once("::")
                {
                    names.insert(last(path));
                    names.insert(last(owner));
                }
            }
            for (path, _, t) in &f.aliases {
                if hits(t, &names) {
                    names.insert(last(path));
                }
            }
            for (path, t) in &f.fns {
                if hits(t, &names) {
                    names.insert(last(path));
                    if let Some((owner, _)) = path.rsplit_once("::") {
                        names.insert(last(owner));
                    }
                }
            }
            // `pub use redis::Client as Store`: `Store` names what `Client` names.
            for (path, target) in &f.reexports {
                if names.contains(&last(target)) {
                    names.insert(last(path));
                }
            }
        }
        if names.len() == before {
            return names;
        }
    }
}

/// `SCREAMING_CASE` identifiers in a text's code: the constants it may read; `CamelCase` ones
/// written with generic arguments (`Result<Lease>`): the generic aliases it may use, whose
/// definitions (`type Result<T> = std::result::Result<T, Error>;`) decide what the arguments
/// become, wherever in the crate they are; and functions called without arguments, not as
/// methods unless named for time (`unix_now()`, `time::now_ms()`, `self.clock.now()`), kept as
/// `name()`: the program's clocks, whose files name nothing lock-related yet decide whether a
/// deadline reads the wall clock.
pub fn constant_like(text: &str) -> HashSet<String> {
    let b = text.as_bytes();
    let mut out = HashSet::new();
    for range in lex::code_ranges(text, &lex::regions(text)) {
        let mut i = range.start;
        while i < range.end {
            if b[i].is_ascii_uppercase() && (i == 0 || !is_ident_byte(b[i - 1])) {
                let s = i;
                while i < range.end && is_ident_byte(b[i]) {
                    i += 1;
                }
                let w = &text[s..i];
                let constant = w.len() > 1
                    && w.bytes()
                        .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == b'_');
                let generic = b.get(i) == Some(&b'<') && w.bytes().any(|c| c.is_ascii_lowercase());
                if constant || generic {
                    out.insert(w.to_string());
                }
            } else if b[i].is_ascii_lowercase() && (i == 0 || !is_ident_byte(b[i - 1])) {
                let s = i;
                while i < range.end && is_ident_byte(b[i]) {
                    i += 1;
                }
                let method = s > 0 && b[s - 1] == b'.';
                // A method only when its name says time (`self.clock.now()` on an injected
                // clock trait implemented in another file): `.clone()` and `.len()` are many.
                let timely = |n: &str| {
                    ["now", "time", "clock", "epoch"]
                        .iter()
                        .any(|w| n.contains(w))
                };
                if (!method || timely(&text[s..i])) && text[i..range.end].starts_with("()") {
                    out.insert(format!("{}()", &text[s..i]));
                }
            } else {
                i += 1;
            }
        }
    }
    out
}

/// Patterns that find the definitions of these constants and aliases: `const NAME`,
/// `static NAME`, `type Name`.
pub fn constant_definitions(names: &HashSet<String>) -> Words {
    Words::for_few_texts(names.iter().filter(|n| !n.ends_with("()")).flat_map(|n| {
        [
            format!("const {n}"),
            format!("static {n}"),
            format!("type {n}"),
        ]
    }))
}

/// The files that define one of these argument-less functions (`fn unix_now`) and read the wall
/// clock: a deadline computed from such a helper reads it too, though the helper's file names
/// nothing lock-related.
pub struct ClockHelpers(Words);

impl ClockHelpers {
    pub fn new(names: &HashSet<String>) -> ClockHelpers {
        ClockHelpers(Words::for_few_texts(
            names
                .iter()
                .filter_map(|n| n.strip_suffix("()"))
                .map(|n| format!("fn {n}")),
        ))
    }

    /// A text approximation, checked on the parse: the clocks `sites::walk::clocks` knows.
    pub fn defined_in(&self, text: &str) -> bool {
        const CLOCKS: [&str; 6] = [
            "SystemTime",
            "Utc",
            "Local::now",
            "OffsetDateTime",
            "Timestamp::now",
            "Zoned::now",
        ];
        CLOCKS.iter().any(|c| text.contains(c)) && self.0.any_in(text)
    }
}

/// Does this file route names of its crate elsewhere: `pub use keys::*;`, `pub use keys::X;` (and
/// `pub(crate)` forms), or, in a module root, a glob import its child modules see? Such a file
/// names no lock word, yet decides where a path used by a file that does leads (the constant
/// `locks::IMPORT_TTL` is `locks::keys::IMPORT_TTL`), so the closure brings it in.
pub struct Routes {
    anywhere: Words,
    module_root: Words,
}

impl Routes {
    pub fn new() -> Routes {
        let words = |ws: &[&str]| Words::for_few_texts(ws.iter().map(|w| w.to_string()));
        Routes {
            anywhere: words(&["pub use", "pub(crate) use", "pub(super) use", "pub(in"]),
            module_root: words(&["::*", "::{"]),
        }
    }

    pub fn in_file(&self, path: &std::path::Path, text: &str) -> bool {
        let root = path
            .file_name()
            .is_some_and(|n| n == "mod.rs" || n == "lib.rs" || n == "main.rs");
        self.anywhere.any_in(text) || root && self.module_root.any_in(text)
    }
}

impl Default for Routes {
    fn default() -> Self {
        Routes::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_identifiers_only() {
        let w = Words::classed([
            ("LockManager".to_string(), Where::Code),
            ("lockaudit:".to_string(), Where::Anywhere),
            ("redis".to_string(), Where::Code),
        ]);
        assert!(w.any_in("use rslock::LockManager;"));
        assert!(!w.any_in("struct MyLockManagerFactory;"));
        assert!(w.any_in("// lockaudit: efficiency"));
        assert!(!w.any_in("let redisson = 1;"));
        assert!(w.any_in("redis::cmd(\"SET\")"));
    }

    #[test]
    fn words_count_only_where_they_can_matter() {
        let w = Words::classed([
            ("redis".to_string(), Where::Code),
            ("pg_advisory_lock".to_string(), Where::CodeOrLiteral),
            ("lockaudit".to_string(), Where::Anywhere),
        ]);
        // A crate named in a doc comment, a comment or a string is not a use of it.
        assert!(!w.any_in("/// see [mini-redis]\nfn f() {}"));
        assert!(!w.any_in("/* redis */ fn f() { let s = \"redis\"; }"));
        assert!(w.any_in("/// see [mini-redis]\nuse redis::Client;"));
        // SQL functions travel in strings, not in comments.
        assert!(w.any_in("q(\"SELECT pg_advisory_lock($1)\")"));
        assert!(w.any_in("q(r#\"SELECT pg_advisory_lock($1)\"#)"));
        assert!(!w.any_in("// pg_advisory_lock would block here"));
        // Directives live in comments.
        assert!(w.any_in("// lockaudit: efficiency\nfn f() {}"));
        // A word given in two places counts in the wider one.
        let both = Words::classed([
            ("redis".to_string(), Where::Code),
            ("redis".to_string(), Where::Anywhere),
        ]);
        assert!(both.any_in("// redis"));
    }

    #[test]
    fn constants() {
        let c = constant_like(
            "let t = Duration::from_millis(LOCK_TTL_MS * 2); const X: u8 = A; MyType",
        );
        assert!(c.contains("LOCK_TTL_MS"));
        assert!(
            !c.contains("A"),
            "single letters are generics more often than constants"
        );
        assert!(!c.contains("MyType"));
        let defs = constant_definitions(&c);
        assert!(defs.any_in("pub const LOCK_TTL_MS: u64 = 30_000;"));
        assert!(!defs.any_in("pub const LOCK_TTL_MS_MAX: u64 = 30_000;"));
    }

    #[test]
    fn clock_helpers() {
        let c = constant_like(
            "let exp = time::unix_now() + ttl; let n = self.now(); let l = v.len(); let x = helper(a); // stamp()",
        );
        assert!(c.contains("unix_now()"));
        assert!(c.contains("now()"), "a method named for time is a clock's");
        assert!(!c.contains("len()"), "a method named for something else");
        assert!(!c.contains("helper()"), "called with an argument");
        assert!(!c.contains("stamp()"), "in a comment");
        let helpers = ClockHelpers::new(&c);
        assert!(helpers.defined_in(
            "pub fn unix_now() -> u64 { SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() }"
        ));
        assert!(
            !helpers.defined_in("pub fn unix_now() -> u64 { Instant::now().elapsed().as_secs() }"),
            "reads no wall clock"
        );
        assert!(!helpers.defined_in("let t = SystemTime::now(); unix_now()"));
        assert!(
            !constant_definitions(&c).any_in("pub fn unix_now() -> u64 { 0 }"),
            "a function is no constant"
        );
    }
}
