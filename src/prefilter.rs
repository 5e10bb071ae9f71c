//! The prefilter: which files can matter, decided from their text before anything is parsed.
//!
//! A file can only hold a lock site if it names something a rule pack knows (a lock crate, one of
//! its types, an advisory-lock SQL function, a command builder), carries a `lockaudit:` directive,
//! or names a type, alias, function or constant of its crate that leads to one (a struct with a
//! `LockManager` field, a helper returning one, a wrapper, the `const TTL` a site reads). The first
//! set is found by one multi-pattern scan; the rest by a closure over what the parsed files declare
//! and use. `--no-prefilter` parses everything, and the tests hold the two to the same findings.

use std::collections::HashSet;

use aho_corasick::AhoCorasick;

use crate::model::FileIndex;
use crate::model::imports::first_segment;
use crate::packs::PackSet;

/// Whole-identifier matching of many words at once.
pub struct Words {
    ac: Option<AhoCorasick>,
}

fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

impl Words {
    pub fn new(words: impl IntoIterator<Item = String>) -> Words {
        let mut words: Vec<String> = words.into_iter().filter(|w| !w.is_empty()).collect();
        words.sort();
        words.dedup();
        // Building can only fail for absurd pattern sets; then every file counts as a match.
        Words {
            ac: if words.is_empty() {
                None
            } else {
                AhoCorasick::new(&words).ok()
            },
        }
    }

    pub fn is_empty(&self) -> bool {
        self.ac.is_none()
    }

    /// Does `text` contain one of the words, not as part of a longer identifier? Patterns that
    /// end in a non-identifier character (`lockaudit:`) need no boundary there.
    pub fn any_in(&self, text: &str) -> bool {
        let Some(ac) = &self.ac else { return false };
        let b = text.as_bytes();
        ac.find_overlapping_iter(text).any(|m| {
            let before_ok =
                m.start() == 0 || !is_ident_byte(b[m.start() - 1]) || !is_ident_byte(b[m.start()]);
            let last = b[m.end() - 1];
            let after_ok = m.end() == b.len() || !is_ident_byte(b[m.end()]) || !is_ident_byte(last);
            before_ok && after_ok
        })
    }
}

/// What makes a file worth parsing for these packs.
pub fn pack_triggers(packs: &PackSet) -> Vec<String> {
    let mut out = vec!["lockaudit".to_string()];
    let mut paths: Vec<&str> = Vec::new();
    for pack in &packs.packs {
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
        out.extend(pack.sql.iter().map(|s| s.function.clone()));
        out.extend(
            pack.pack
                .sql_calls
                .iter()
                .filter(|c| c.ends_with('!'))
                .cloned(),
        );
    }
    // A file reaches a library's items only through its crate name (imports, qualified paths,
    // globs) or through items of its own crate, which the closure adds. Last segments alone
    // (`Client`, `Lock`) would match nearly every file. Crate-local paths (`[[lock]]` wrappers)
    // are known by their last segment.
    for p in paths {
        let first = first_segment(p);
        if first == "crate" {
            out.push(p.rsplit("::").next().unwrap_or(p).to_string());
        } else {
            out.push(first.to_string());
        }
    }
    // The crate's own items are never triggers by themselves (`crate`, `self`).
    out.retain(|w| !matches!(w.as_str(), "crate" | "self" | "super"));
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
            for (path, t) in &f.aliases {
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
        }
        if names.len() == before {
            return names;
        }
    }
}

/// `SCREAMING_CASE` identifiers in a text: the constants it may read.
pub fn constant_like(text: &str) -> HashSet<String> {
    let b = text.as_bytes();
    let mut out = HashSet::new();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_uppercase() && (i == 0 || !is_ident_byte(b[i - 1])) {
            let s = i;
            while i < b.len() && is_ident_byte(b[i]) {
                i += 1;
            }
            let w = &text[s..i];
            if w.len() > 1
                && w.bytes()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == b'_')
            {
                out.insert(w.to_string());
            }
        } else {
            i += 1;
        }
    }
    out
}

/// Patterns that find the definitions of these constants: `const NAME`, `static NAME`.
pub fn constant_definitions(names: &HashSet<String>) -> Words {
    Words::new(
        names
            .iter()
            .flat_map(|n| [format!("const {n}"), format!("static {n}")]),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_identifiers_only() {
        let w = Words::new([
            "LockManager".to_string(),
            "lockaudit:".to_string(),
            "redis".to_string(),
        ]);
        assert!(w.any_in("use rslock::LockManager;"));
        assert!(!w.any_in("struct MyLockManagerFactory;"));
        assert!(w.any_in("// lockaudit: efficiency"));
        assert!(!w.any_in("let redisson = 1;"));
        assert!(w.any_in("redis::cmd(\"SET\")"));
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
}
