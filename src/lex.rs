//! Tells code from comments and literals in Rust source without parsing it. Two users: the
//! `lockaudit:` directive scanner (syn drops comments) and the prefilter, which must not take a
//! crate's name in a doc comment (`[mini-redis]`) or in a string for a use of that crate.
//!
//! Where the text is ambiguous the lexer errs towards code: `'a` is a lifetime unless a quote
//! closes it as a character, so a misread never hides code from the prefilter.

use std::ops::Range;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommentStyle {
    /// `//` or `/* */`
    Plain,
    /// `///` or `/** */`
    OuterDoc,
    /// `//!` or `/*! */`
    InnerDoc,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Comment(CommentStyle),
    /// A string, byte string, raw string or character literal.
    Literal,
}

/// A stretch of text that is not code. Everything between regions is code (or whitespace).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Region {
    pub kind: Kind,
    /// The whole region, delimiters and prefixes included.
    pub range: Range<usize>,
    /// A comment's text without its `//`, `///`, `/*` … `*/` markers; a literal's whole range.
    pub body: Range<usize>,
}

/// The comments and literals of a text, in order and not overlapping.
pub fn regions(text: &str) -> Vec<Region> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        match c {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                let end = memchr::memchr(b'\n', &b[i..]).map_or(b.len(), |e| i + e);
                let (style, skip) = if b[i..].starts_with(b"///") && !b[i..].starts_with(b"////") {
                    (CommentStyle::OuterDoc, 3)
                } else if b[i..].starts_with(b"//!") {
                    (CommentStyle::InnerDoc, 3)
                } else {
                    (CommentStyle::Plain, 2)
                };
                out.push(Region {
                    kind: Kind::Comment(style),
                    range: i..end,
                    body: (i + skip).min(end)..end,
                });
                i = end;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let start = i;
                let style = if b[i..].starts_with(b"/**") && !b[i..].starts_with(b"/**/") {
                    CommentStyle::OuterDoc
                } else if b[i..].starts_with(b"/*!") {
                    CommentStyle::InnerDoc
                } else {
                    CommentStyle::Plain
                };
                let body_start = i + if style == CommentStyle::Plain { 2 } else { 3 };
                let mut depth = 1;
                i += 2;
                while i < b.len() && depth > 0 {
                    if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                        depth += 1;
                        i += 2;
                    } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                        depth -= 1;
                        i += 2;
                    } else {
                        i += 1;
                    }
                }
                let i_end = i.min(b.len());
                let body_end = if depth == 0 { i_end - 2 } else { i_end };
                out.push(Region {
                    kind: Kind::Comment(style),
                    range: start..i_end,
                    body: body_start.min(body_end)..body_end,
                });
                i = i_end;
            }
            b'"' => i = literal(&mut out, i, skip_string(b, i + 1)),
            b'r' | b'b' | b'c' if is_raw_string_start(b, i) => {
                i = literal(&mut out, i, skip_raw_string(b, i))
            }
            b'\'' => {
                let end = skip_char_or_lifetime(b, i);
                i = if end > i + 1 {
                    literal(&mut out, i, end)
                } else {
                    end
                };
            }
            _ if c.is_ascii_alphanumeric() || c == b'_' => {
                // Identifiers are skipped whole so that `br` inside `abr"` is not a prefix.
                let start = i;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
                // `b"…"` / `c"…"` / `b'…'`: a one-letter prefix followed by a quote.
                if i - start == 1 && matches!(b[start], b'b' | b'c') && b.get(i) == Some(&b'"') {
                    i = literal(&mut out, start, skip_string(b, i + 1));
                } else if i - start == 1 && b[start] == b'b' && b.get(i) == Some(&b'\'') {
                    let end = skip_char_or_lifetime(b, i);
                    if end > i + 1 {
                        i = literal(&mut out, start, end);
                    }
                }
            }
            _ => i += 1,
        }
    }
    out
}

fn literal(out: &mut Vec<Region>, start: usize, end: usize) -> usize {
    out.push(Region {
        kind: Kind::Literal,
        range: start..end,
        body: start..end,
    });
    end
}

/// The region holding byte `offset`, if it is not code.
pub fn region_at(regions: &[Region], offset: usize) -> Option<&Region> {
    let i = regions.partition_point(|r| r.range.end <= offset);
    regions.get(i).filter(|r| r.range.start <= offset)
}

/// The code between the regions, as byte ranges.
pub fn code_ranges(text: &str, regions: &[Region]) -> Vec<Range<usize>> {
    let mut out = Vec::with_capacity(regions.len() + 1);
    let mut at = 0;
    for r in regions {
        if r.range.start > at {
            out.push(at..r.range.start);
        }
        at = r.range.end;
    }
    if at < text.len() {
        out.push(at..text.len());
    }
    out
}

/// After the opening quote: the offset just past the closing one.
fn skip_string(b: &[u8], mut i: usize) -> usize {
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    b.len()
}

fn is_raw_string_start(b: &[u8], i: usize) -> bool {
    if i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_') {
        return false;
    }
    let mut j = i;
    if b[j] == b'b' || b[j] == b'c' {
        j += 1;
    }
    if b.get(j) != Some(&b'r') {
        return false;
    }
    j += 1;
    while b.get(j) == Some(&b'#') {
        j += 1;
    }
    b.get(j) == Some(&b'"')
}

fn skip_raw_string(b: &[u8], mut i: usize) -> usize {
    while b[i] != b'r' {
        i += 1;
    }
    i += 1;
    let mut hashes = 0;
    while b.get(i) == Some(&b'#') {
        hashes += 1;
        i += 1;
    }
    i += 1; // the opening quote
    while i < b.len() {
        if b[i] == b'"'
            && b[i + 1..]
                .iter()
                .take(hashes)
                .filter(|&&h| h == b'#')
                .count()
                == hashes
        {
            return i + 1 + hashes;
        }
        i += 1;
    }
    b.len()
}

/// `'a'`, `'\n'`, `'\u{1F600}'` are characters (the offset past them); `'a` is a lifetime or a
/// label (the offset past the quote).
fn skip_char_or_lifetime(b: &[u8], i: usize) -> usize {
    let rest = &b[i + 1..];
    if rest.first() == Some(&b'\\') {
        // The escaped character, then the closing quote within the longest escape (`\u{10FFFF}`).
        return rest
            .iter()
            .skip(2)
            .take(10)
            .position(|&c| c == b'\'')
            .map_or(i + 1, |p| i + 1 + 2 + p + 1);
    }
    // One (possibly multi-byte) character followed by a quote.
    let width = rest.first().map_or(1, |&c| {
        if c < 0x80 {
            1
        } else {
            c.leading_ones() as usize
        }
    });
    if rest.get(width) == Some(&b'\'') {
        return i + 1 + width + 1;
    }
    i + 1
}

/// The deepest [`nesting`] a file may have to be parsed and analysed. The worker stack
/// (`engine::WORKER_STACK`) holds several times this in the worst construct measured (nested
/// generic types: about 25 KB of stack per level in a debug build, 4 KB in a release build), and
/// hand-written code stays far below it (a 700-link method chain, a 400-branch `else if`).
pub const MAX_NESTING: usize = 3000;

/// Why a file is refused before parsing: its nesting past [`MAX_NESTING`], at a byte offset.
pub fn too_deep(text: &str) -> Option<(usize, String)> {
    let n = nesting_until(text, MAX_NESTING);
    (n.depth > MAX_NESTING).then(|| {
        (
            n.offset,
            format!(
                "nesting too deep to analyse (more than {MAX_NESTING} levels of brackets, operators or chained calls)"
            ),
        )
    })
}

/// How deeply a text nests, as counted by [`nesting`], and where it is deepest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Nesting {
    pub depth: usize,
    /// Byte offset of the token where the depth is reached.
    pub offset: usize,
}

/// An upper bound of how deeply the syntax tree of `text` nests, from its tokens alone, in one
/// linear pass: the parser and every walk of the tree recurse once per level, so a file past a
/// limit is refused before it is parsed (a stack overflow aborts the whole process).
///
/// Brackets nest; within one bracket pair every token of a statement or list element counts as a
/// level too, because operators, method chains (`.arg(x)` 100,000 times), casts, generic
/// arguments (`Option<Option<…>>`, which no bracket encloses), closures without braces and
/// `else if` chains nest the tree without any bracket. A statement ends at `;`, an element at a
/// `,` outside `<…>`, a block-like item or statement at its `}` when a word other than `else`
/// follows.
pub fn nesting(text: &str) -> Nesting {
    nesting_until(text, usize::MAX)
}

/// [`nesting`], stopping where the depth first passes `limit`.
fn nesting_until(text: &str, limit: usize) -> Nesting {
    let b = text.as_bytes();
    let mut stack = vec![Level {
        base: 0,
        count: 0,
        angles: 0,
    }];
    let mut best = Nesting::default();
    let mut after_brace = false;
    let regions = regions(text);
    let mut next_region = regions.iter().peekable();
    let mut i = 0;
    while i < b.len() && best.depth <= limit {
        if let Some(r) = next_region.peek()
            && r.range.start <= i
        {
            i = r.range.end.max(i + 1);
            if next_region
                .next()
                .is_some_and(|r| matches!(r.kind, Kind::Comment(_)))
            {
                continue;
            }
            // A literal is one token.
            token(&mut stack, &mut best, &mut after_brace, false, i);
            continue;
        }
        let c = b[i];
        let start = i;
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80 {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] >= 0x80) {
                i += 1;
            }
            // After a block, a new word starts the next item or statement; `else` and `as`
            // continue the expression, and so does an operator (`{ a } + { b }`).
            let starts_next = !matches!(&b[start..i], b"else" | b"as");
            token(&mut stack, &mut best, &mut after_brace, starts_next, start);
            continue;
        }
        i += 1;
        match c {
            b'(' | b'[' | b'{' => {
                token(&mut stack, &mut best, &mut after_brace, false, start);
                let top = stack.last().map_or(0, |l| l.base + l.count);
                stack.push(Level {
                    base: top,
                    count: 0,
                    angles: 0,
                });
            }
            b')' | b']' | b'}' => {
                if stack.len() > 1 {
                    stack.pop();
                }
                after_brace = c == b'}';
            }
            _ => {
                token(&mut stack, &mut best, &mut after_brace, false, start);
                let prev = start.checked_sub(1).map(|p| b[p]);
                let next = b.get(i).copied();
                if let Some(top) = stack.last_mut() {
                    match c {
                        b';' => {
                            top.count = 0;
                            top.angles = 0;
                        }
                        b',' if top.angles == 0 => top.count = 0,
                        b'<' if next != Some(b'=') => top.angles += 1,
                        b'>' if !matches!(prev, Some(b'-' | b'=')) && next != Some(b'=') => {
                            top.angles = top.angles.saturating_sub(1)
                        }
                        _ => {}
                    }
                }
            }
        }
    }
    best
}

/// A file cut into pieces of whole top-level items, each at least `target` bytes (the last may
/// be smaller), cut only at the start of a line, so that each piece parses on its own with its
/// lines counted from the piece's first line. The flag says whether a piece may hold `use`,
/// `extern crate` or `mod` items (which resolution needs from every piece). A file that cannot
/// be cut, or is smaller than `target`, is one piece.
pub fn pieces(text: &str, target: usize) -> Vec<(Range<usize>, bool)> {
    // No cut can be made in a text shorter than one piece: spared the scan (most files).
    if text.len() < target {
        return vec![(0..text.len(), true)];
    }
    let b = text.as_bytes();
    let regions = regions(text);
    let mut next_region = regions.iter().peekable();
    let mut out: Vec<(Range<usize>, bool)> = Vec::new();
    let mut piece_start = 0;
    let mut imports = false;
    let mut depth = 0usize;
    // Just past the last token of a complete top-level item, if the last token ended one.
    let mut ended: Option<usize> = None;
    // A `}` back at depth 0: the item ends there unless what follows continues it.
    let mut brace_end: Option<usize> = None;
    let mut i = 0;
    while i < b.len() {
        if let Some(r) = next_region.peek()
            && r.range.start <= i
        {
            let r = next_region.next().expect("peeked");
            i = r.range.end.max(i + 1);
            if r.kind == Kind::Literal {
                brace_end = None;
                ended = None;
            }
            continue;
        }
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let start = i;
        let word = c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80;
        if word {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] >= 0x80) {
                i += 1;
            }
        } else {
            i += 1;
        }
        if depth == 0 {
            if let Some(end) = brace_end.take()
                && (word && !matches!(&b[start..i], b"else" | b"as") || c == b'#')
            {
                ended = Some(end);
            }
            // A new item begins: cut at the first line start after the last one's end.
            if let Some(end) = ended.take()
                && (word || c == b'#')
                && start - piece_start >= target
                && let Some(nl) = memchr::memchr(b'\n', &b[end..start])
            {
                let cut = end + nl + 1;
                out.push((piece_start..cut, imports));
                piece_start = cut;
                imports = false;
            }
            if word && matches!(&b[start..i], b"use" | b"extern" | b"mod") {
                imports = true;
            }
        }
        match c {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 && c == b'}' {
                    brace_end = Some(i);
                }
            }
            b';' if depth == 0 => ended = Some(i),
            _ => {}
        }
    }
    out.push((piece_start..b.len(), imports));
    out
}

/// One bracket level of [`nesting`].
struct Level {
    /// Depth of the bracket that opened this level.
    base: usize,
    /// Tokens of the current statement or element at this level.
    count: usize,
    /// Unclosed `<` at this level: a `,` inside them is not between siblings.
    angles: usize,
}

/// One token at the current level of [`nesting`].
fn token(
    stack: &mut [Level],
    best: &mut Nesting,
    after_brace: &mut bool,
    starts_next: bool,
    offset: usize,
) {
    let Some(top) = stack.last_mut() else { return };
    if std::mem::take(after_brace) && starts_next {
        top.count = 0;
        top.angles = 0;
    }
    top.count += 1;
    let depth = top.base + top.count;
    if depth > best.depth {
        *best = Nesting { depth, offset };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<(Kind, &str)> {
        regions(text)
            .into_iter()
            .map(|r| (r.kind, &text[r.range]))
            .collect()
    }

    #[test]
    fn comments_literals_and_code() {
        let text = "/// [mini-redis]\nfn f<'a>(x: &'a str) -> char { let s = \"// no\"; let r = r#\"a\"b\"#; /* x /* y */ z */ 'c' }\n//! inner\n";
        assert_eq!(
            kinds(text),
            vec![
                (Kind::Comment(CommentStyle::OuterDoc), "/// [mini-redis]"),
                (Kind::Literal, "\"// no\""),
                (Kind::Literal, "r#\"a\"b\"#"),
                (Kind::Comment(CommentStyle::Plain), "/* x /* y */ z */"),
                (Kind::Literal, "'c'"),
                (Kind::Comment(CommentStyle::InnerDoc), "//! inner"),
            ]
        );
        let rs = regions(text);
        let code: String = code_ranges(text, &rs)
            .into_iter()
            .map(|r| &text[r])
            .collect();
        assert!(code.contains("fn f<'a>(x: &'a str)"), "{code}");
        assert!(!code.contains("mini-redis"));
        assert!(region_at(&rs, text.find("mini").unwrap()).is_some());
        assert!(region_at(&rs, text.find("fn f").unwrap()).is_none());
    }

    #[test]
    fn prefixes_escapes_and_unterminated_input() {
        assert_eq!(
            kinds("b\"x\\\"y\" br\"z\" c\"w\" b'\\'' abr\"q\""),
            vec![
                (Kind::Literal, "b\"x\\\"y\""),
                (Kind::Literal, "br\"z\""),
                (Kind::Literal, "c\"w\""),
                (Kind::Literal, "b'\\''"),
                (Kind::Literal, "\"q\""),
            ]
        );
        // Unterminated input ends its region at the end of the text, without panicking.
        for t in ["\"abc", "r#\"abc", "/* abc", "'\\", "b'", "/*", "r", "'\\'"] {
            let rs = regions(t);
            assert!(
                rs.iter()
                    .all(|r| r.range.end <= t.len() && r.body.end <= t.len())
            );
        }
        // A quote that no character literal closes is code (a lifetime, a label).
        assert_eq!(kinds("'\\ x"), vec![]);
    }
}
