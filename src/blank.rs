//! Function bodies blanked out of a text before it is parsed, where nothing in them can matter.
//!
//! Parsing is most of what the analysis costs, and most of a file's text is in function bodies
//! that call nothing a pack or a wrapper knows: such a body yields no site, event, clock or
//! wrapper (every one of those starts at a call whose method, function or macro name a pack
//! lists, see [`call_words`]). The analysis parses the file with those bodies' insides replaced
//! by whitespace of the same width, so that every other token keeps its line, column and byte
//! offset, and the walker finds an empty block where it would have found nothing.
//!
//! The scan only looks at item-level functions (in the file, in `mod`, `impl` and `trait` blocks)
//! and errs towards keeping: a brace it cannot place (in a macro, a constant, a generic argument)
//! is left alone with everything inside it.

use std::ops::Range;

use aho_corasick::AhoCorasick;

use crate::lex;
use crate::packs::PackSet;

/// The insides (between the braces) of the item-level function bodies of `text`, in order.
pub fn fn_bodies(text: &str) -> Vec<Range<usize>> {
    let b = text.as_bytes();
    let regions = lex::regions(text);
    let mut next_region = 0;
    let mut out = Vec::new();
    // Per open container (the file, `mod`/`impl`/`trait` blocks): what the current item's header
    // has shown so far.
    let mut header = Header::default();
    let mut i = 0;
    // The last byte of code before `i` that is not whitespace.
    let mut prev: u8 = 0;
    while i < b.len() {
        if let Some(r) = regions.get(next_region)
            && r.range.start <= i
        {
            i = r.range.end.max(i + 1);
            next_region += 1;
            if matches!(r.kind, lex::Kind::Literal) {
                header.pending_fn = false;
                prev = b'"';
            }
            continue;
        }
        let c = b[i];
        if c.is_ascii_alphabetic() || c == b'_' || c >= 0x80 {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] >= 0x80) {
                i += 1;
            }
            let word = &b[start..i];
            if header.pending_fn {
                header.is_fn = true;
                header.pending_fn = false;
            }
            match word {
                b"fn" => header.pending_fn = true,
                b"mod" | b"impl" | b"trait" => header.container = true,
                b"const" | b"static" | b"type" | b"let" => header.value = true,
                _ => {}
            }
            prev = b'a';
            continue;
        }
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        header.pending_fn = false;
        match c {
            b'(' | b'[' => {
                i = matching(b, &regions, &mut next_region, i);
                prev = b')';
                continue;
            }
            b'!' if prev == b'a' => header.macro_call = true,
            b';' => header = Header::default(),
            // The end of a container.
            b'}' => header = Header::default(),
            b'{' => {
                if header.container && !header.value && !header.macro_call && !header.is_fn {
                    header = Header::default();
                    i += 1;
                    prev = b'{';
                    continue;
                }
                let end = matching(b, &regions, &mut next_region, i);
                if header.is_fn && !header.macro_call && !matches!(prev, b'<' | b',') {
                    // A `{ N }` generic argument is followed by `>` or `,`; a body is not.
                    let after = b[end.min(b.len())..]
                        .iter()
                        .find(|c| !c.is_ascii_whitespace())
                        .copied();
                    if end <= b.len() && b[end - 1] == b'}' && !matches!(after, Some(b'>' | b',')) {
                        out.push(i + 1..end - 1);
                    }
                }
                header = Header::default();
                i = end;
                prev = b'}';
                continue;
            }
            _ => {}
        }
        prev = c;
        i += 1;
    }
    out
}

#[derive(Default)]
struct Header {
    /// `fn` was the last word: a function if a name follows (`fn(u8)` is a pointer type).
    pending_fn: bool,
    is_fn: bool,
    /// `mod`, `impl` or `trait`.
    container: bool,
    /// `const`, `static`, `type`: a value or type whose braces are not items.
    value: bool,
    /// `name!`: a macro's braces hold tokens, not items.
    macro_call: bool,
}

/// The offset just past the bracket that closes the one at `open` (the text's end when none
/// does), skipping comments and literals.
fn matching(b: &[u8], regions: &[lex::Region], next_region: &mut usize, open: usize) -> usize {
    let mut depth = 0usize;
    let mut i = open;
    while i < b.len() {
        if let Some(r) = regions.get(*next_region)
            && r.range.start <= i
        {
            i = r.range.end.max(i + 1);
            *next_region += 1;
            continue;
        }
        match b[i] {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    b.len()
}

/// `text` with the insides of the `bodies` that `keep` refuses replaced by whitespace of the same
/// width: every byte outside them keeps its offset, line and column. `None` when nothing is
/// blanked. A body holding a four-byte character is kept (no whitespace character is four bytes
/// long, and one of fewer would move the columns after it).
pub fn blank(text: &str, bodies: &[Range<usize>], keep: impl Fn(&str) -> bool) -> Option<String> {
    let mut out: Option<Vec<u8>> = None;
    for r in bodies {
        let inside = &text[r.clone()];
        if inside.bytes().all(|c| c.is_ascii_whitespace()) || keep(inside) {
            continue;
        }
        if inside.bytes().any(|c| c >= 0xF0) {
            continue;
        }
        let buf = out.get_or_insert_with(|| text.as_bytes().to_vec());
        let dst = &mut buf[r.clone()];
        let src = inside.as_bytes();
        let mut k = 0;
        while k < src.len() {
            match src[k] {
                b'\n' | b'\r' => k += 1,
                c if c < 0x80 => {
                    dst[k] = b' ';
                    k += 1;
                }
                // NEL (U+0085) and LEFT-TO-RIGHT MARK (U+200E): whitespace to Rust's lexer and
                // to proc-macro2's, neither a line break, one column each.
                c if c >= 0xE0 => {
                    dst[k..k + 3].copy_from_slice("\u{200e}".as_bytes());
                    k += 3;
                }
                _ => {
                    dst[k..k + 2].copy_from_slice("\u{85}".as_bytes());
                    k += 2;
                }
            }
        }
    }
    // Whole characters were replaced by whole characters.
    out.map(|v| String::from_utf8(v).expect("blanking keeps UTF-8"))
}

/// What a function body must name to be parsed for the analysis: whole identifiers, either
/// alone or in pairs.
#[derive(Debug, Default, Clone)]
pub struct Words {
    /// Any one of these: a method's name, a function's (`cmd`, `query`, a wrapper's).
    pub single: Vec<String>,
    /// A type's associated function (`Script::new`): both its name and the type's, or `Self`,
    /// or a stand-in (a type alias, which may name the type).
    pub pairs: Vec<(String, String)>,
    /// Names that may stand for any type of a pair.
    pub stand_ins: Vec<String>,
}

/// The identifiers every function body that can yield a site, an event or a wrapper names: those
/// a pack calls by (methods, functions, macros, command, script and pipeline builders, SQL calls,
/// wrappers) and those the matchers know by themselves. The matchers compare whole identifiers
/// (a method's name, the resolved path of a called function), so a body naming none of them,
/// nor a name one of them is imported or re-exported as (see [`aliases`]), gives them nothing
/// to match.
pub fn call_words(packs: &PackSet) -> Words {
    let mut w = Words::default();
    let mut path = |p: &str| {
        let mut segs = p.rsplit("::");
        let name = segs.next().unwrap_or(p).to_string();
        match segs.next() {
            // `Type::function` is called as `Type::function` (or through `Self` or an alias):
            // an associated function cannot be imported alone.
            Some(ty) if ty.starts_with(|c: char| c.is_ascii_uppercase()) => {
                w.pairs.push((name, ty.to_string()))
            }
            _ => w.single.push(name),
        }
    };
    packs.functions.keys().for_each(|p| path(p));
    packs.command_builders.keys().for_each(|p| path(p));
    packs.pipeline_builders.keys().for_each(|p| path(p));
    packs.script_builders.keys().for_each(|p| path(p));
    packs.macro_types.keys().for_each(|p| path(p));
    for p in &packs.packs {
        for d in &p.calls {
            d.function.iter().for_each(|f| path(f));
        }
    }
    let last = |p: &String| p.rsplit("::").next().unwrap_or(p).to_string();
    w.single.extend(packs.methods.keys().map(last));
    w.single.extend(packs.sql_calls.keys().map(last));
    w.single.extend(packs.sql_receiver_calls.iter().map(last));
    for p in &packs.packs {
        for d in &p.calls {
            w.single.extend(d.method.iter().map(last));
        }
    }
    // Named by the matchers themselves: a command run from a local or in a pipeline
    // (`cmd.query(&mut c)`, `pipe.cmd("SET")`); a script runs by `invoke*` (a prefix, below).
    w.single.extend(
        ["cmd", "query", "query_async", "exec", "exec_async"]
            .iter()
            .map(|s| s.to_string()),
    );
    w.single.retain(|x| !x.is_empty());
    w.single.sort();
    w.single.dedup();
    w.pairs.sort();
    w.pairs.dedup();
    w
}

/// From these indexes: the identifiers a `use … as name` gives another name (every module's
/// imports are in its file's `reexports`), which count alone; and the type aliases' names, which
/// may stand for a pair's type.
pub fn aliases<'a>(
    indexes: impl Iterator<Item = &'a crate::model::FileIndex>,
) -> (Vec<String>, Vec<String>) {
    let last = |p: &str| p.rsplit("::").next().unwrap_or(p).to_string();
    let (mut renames, mut types) = (Vec::new(), Vec::new());
    for fi in indexes {
        renames.extend(
            fi.reexports
                .iter()
                .filter(|(made, canonical)| last(made) != last(canonical))
                .map(|(made, _)| last(made)),
        );
        types.extend(fi.aliases.iter().map(|(path, _, _)| last(path)));
    }
    for v in [&mut renames, &mut types] {
        v.sort();
        v.dedup();
    }
    (renames, types)
}

/// The prefix of a script's run method (`invoke`, `invoke_async`).
const PREFIX_WORDS: [&str; 1] = ["invoke"];

/// What a pattern of [`Keep`] is.
#[derive(Clone, Copy, PartialEq)]
enum Role {
    Single,
    /// A prefix alone is enough.
    Prefix,
    /// The function of pair `n`.
    PairFn(usize),
    /// The type of pair `n`.
    PairType(usize),
    /// `Self` or a type alias.
    AnyType,
}

/// [`Words`], compiled: one scan of a body tells whether it names them.
pub struct Keep {
    ac: Option<AhoCorasick>,
    /// By pattern (a word may have several roles).
    roles: Vec<Vec<Role>>,
    pairs: usize,
}

impl Keep {
    pub fn new(words: &Words) -> Keep {
        let mut index: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
        let mut patterns: Vec<String> = Vec::new();
        let mut roles: Vec<Vec<Role>> = Vec::new();
        let mut add = |w: &str, role: Role| {
            let k = *index.entry(w.to_string()).or_insert_with(|| {
                patterns.push(w.to_string());
                roles.push(Vec::new());
                patterns.len() - 1
            });
            roles[k].push(role);
        };
        for w in &words.single {
            add(w, Role::Single);
        }
        for w in PREFIX_WORDS {
            add(w, Role::Prefix);
        }
        for (n, (f, t)) in words.pairs.iter().enumerate() {
            add(f, Role::PairFn(n));
            add(t, Role::PairType(n));
        }
        for w in words.stand_ins.iter().map(String::as_str).chain(["Self"]) {
            add(w, Role::AnyType);
        }
        Keep {
            // Should building fail, every body is kept (safe, only slower).
            ac: AhoCorasick::new(&patterns).ok(),
            roles,
            pairs: words.pairs.len(),
        }
    }

    /// Does `text` name the words (as identifiers, or in comments or literals)?
    pub fn any_in(&self, text: &str) -> bool {
        let Some(ac) = &self.ac else { return true };
        let b = text.as_bytes();
        let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80;
        let (mut fns, mut types) = (vec![false; self.pairs], vec![false; self.pairs]);
        let mut any_type = false;
        for m in ac.find_overlapping_iter(text) {
            if m.start().checked_sub(1).is_some_and(|i| ident(b[i])) {
                continue;
            }
            let whole = !b.get(m.end()).is_some_and(|&c| ident(c));
            for &role in &self.roles[m.pattern().as_usize()] {
                match role {
                    Role::Prefix => return true,
                    _ if !whole => {}
                    Role::Single => return true,
                    Role::PairFn(n) => fns[n] = true,
                    Role::PairType(n) => types[n] = true,
                    Role::AnyType => any_type = true,
                }
            }
        }
        (0..self.pairs).any(|n| fns[n] && (types[n] || any_type))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bodies(text: &str) -> Vec<&str> {
        fn_bodies(text).into_iter().map(|r| &text[r]).collect()
    }

    #[test]
    fn item_level_bodies_only() {
        let t = "fn a() { x() }\nimpl S { fn b(&self) -> u8 { 1 } const C: u8 = { 2 }; }\n\
                 mod m { trait T { fn c() { y() } fn d(); } }\n\
                 const X: fn() = { fn e() { z() } e };\nm! { fn f() { w() } }\n\
                 struct P { f: fn(u8) }\nfn g() -> Foo<{ N }> { v() }";
        assert_eq!(
            bodies(t),
            vec![" x() ", " 1 ", " y() "],
            "`g`'s generic argument is not taken for its body, and nothing after it is guessed"
        );
    }

    #[test]
    fn comments_and_literals_hide_braces() {
        let t = "fn a() { \"}\"; /* } */ '}'; }\nfn b() { c() }";
        assert_eq!(bodies(t), vec![" \"}\"; /* } */ '}'; ", " c() "]);
        let t = "impl S {\n    /// fn x() {\n    fn d() { e() }\n}";
        assert_eq!(bodies(t), vec![" e() "]);
    }

    #[test]
    fn blanking_keeps_every_position() {
        let t = "fn a() {\n  é(); \"—\"\n}\nfn b() { lock() }";
        let r = fn_bodies(t);
        let out = blank(t, &r, |s| s.contains("lock")).unwrap();
        assert_eq!(out.len(), t.len());
        assert_eq!(out.lines().count(), t.lines().count());
        let f = syn::parse_file(&out).unwrap();
        let syn::Item::Fn(b) = &f.items[1] else {
            panic!()
        };
        let at = proc_macro2::Span::start(&b.sig.ident.span());
        assert_eq!((at.line, at.column), (4, 3));
        assert!(
            blank(
                "fn a() { \"😀\" }",
                &fn_bodies("fn a() { \"😀\" }"),
                |_| false
            )
            .is_none()
        );
    }
}

#[cfg(test)]
mod stats {
    /// `BLANK_STATS=DIR cargo test --lib blank::stats -- --nocapture`: how much of DIR's function
    /// bodies the builtin packs let the analysis blank (for measuring, not a check).
    #[test]
    fn stats() {
        let Ok(dir) = std::env::var("BLANK_STATS") else {
            return;
        };
        let packs =
            crate::packs::PackSet::new(crate::packs::builtin().expect("packs")).expect("set");
        let keep = super::Keep::new(&super::call_words(&packs));
        let words = super::call_words(&packs);
        let (mut total, mut bodies, mut blanked) = (0usize, 0usize, 0usize);
        let mut firsts = std::collections::HashMap::new();
        let out = std::process::Command::new("find")
            .args([&dir, "-name", "*.rs"])
            .output()
            .expect("find");
        for p in String::from_utf8_lossy(&out.stdout).lines() {
            let Ok(t) = std::fs::read_to_string(p) else {
                continue;
            };
            total += t.len();
            for r in super::fn_bodies(&t) {
                bodies += r.len();
                if !keep.any_in(&t[r.clone()]) {
                    blanked += r.len();
                } else {
                    let b = &t[r.clone()];
                    for w in &words.single {
                        let one = super::Words {
                            single: vec![w.clone()],
                            ..Default::default()
                        };
                        if super::Keep::new(&one).any_in(b) {
                            *firsts.entry(w.clone()).or_insert(0usize) += r.len();
                        }
                    }
                }
            }
        }
        println!("text {total} bodies {bodies} blanked {blanked}");
        let mut v: Vec<_> = firsts.into_iter().collect();
        v.sort_by_key(|x| std::cmp::Reverse(x.1));
        println!("{:?}", &v[..v.len().min(40)]);
    }
}
