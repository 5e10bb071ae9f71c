//! The `// lockaudit: …` comment scanner. syn drops plain comments, so this lexes the text itself,
//! skipping string and character literals so that a directive inside a string is not one.

use std::collections::BTreeMap;

use crate::lex;
pub use crate::lex::CommentStyle;
use crate::source::{SourceFile, Span};

/// What a directive says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DirectiveKind {
    Purpose {
        purpose: DeclaredPurpose,
        fenced_by: Option<String>,
    },
    Allow {
        rules: Vec<String>,
        reason: String,
    },
    /// Unparseable or unknown: reported as `invalid-annotation`, classifies and suppresses nothing.
    Invalid {
        message: String,
        help: Option<String>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DeclaredPurpose {
    Efficiency,
    Correctness,
}

#[derive(Debug, Clone)]
pub struct Directive {
    /// Where `lockaudit:` starts, to the end of the directive.
    pub span: Span,
    pub style: CommentStyle,
    pub kind: DirectiveKind,
}

/// Comments and directives of one file, indexed by line.
#[derive(Debug, Default)]
pub struct Directives {
    pub all: Vec<Directive>,
    /// Directive indices by line.
    by_line: BTreeMap<usize, Vec<usize>>,
    /// Lines holding only comments (and whitespace).
    comment_only: std::collections::BTreeSet<usize>,
    /// Lines holding any code token.
    code_lines: std::collections::BTreeSet<usize>,
}

/// Rule names a suppression may name; checked so that a typo is reported, not silently ignored.
pub type RuleExists<'a> = &'a dyn Fn(&str) -> bool;

impl Directives {
    pub fn scan(file: &SourceFile, rule_exists: RuleExists<'_>) -> Directives {
        let mut out = Directives::default();
        let mut comment_lines = std::collections::BTreeSet::new();
        for c in lex_comments(&file.text, &mut out.code_lines) {
            for l in c.start_line..=c.end_line {
                comment_lines.insert(l);
            }
            if let Some(d) = parse_comment(file, &c, rule_exists) {
                out.by_line
                    .entry(d.span.line)
                    .or_default()
                    .push(out.all.len());
                out.all.push(d);
            }
        }
        out.comment_only = comment_lines.difference(&out.code_lines).copied().collect();
        out
    }

    pub fn on_line(&self, line: usize) -> impl Iterator<Item = &Directive> {
        self.by_line
            .get(&line)
            .into_iter()
            .flatten()
            .map(|&i| &self.all[i])
    }

    pub fn is_comment_only(&self, line: usize) -> bool {
        self.comment_only.contains(&line)
    }

    pub fn has_code(&self, line: usize) -> bool {
        self.code_lines.contains(&line)
    }

    /// Directives in the comment block directly above `line`: the run of comment-only lines (and
    /// attribute lines) ending at `line - 1`.
    pub fn block_above(&self, file: &SourceFile, line: usize) -> Vec<&Directive> {
        let mut out = Vec::new();
        let mut l = line;
        while l > 1 {
            l -= 1;
            if self.is_comment_only(l) {
                // `//!` documents the enclosing module, not the next item.
                out.extend(
                    self.on_line(l)
                        .filter(|d| d.style != CommentStyle::InnerDoc),
                );
            } else if file.line(l).trim_start().starts_with("#[") {
                continue;
            } else {
                break;
            }
        }
        out
    }

    /// `//! lockaudit: …` directives before the first line of code: they apply to the whole file.
    pub fn file_level(&self) -> impl Iterator<Item = &Directive> {
        let first_code = self.code_lines.iter().next().copied().unwrap_or(usize::MAX);
        self.all
            .iter()
            .filter(move |d| d.style == CommentStyle::InnerDoc && d.span.line < first_code)
    }
}

struct Comment<'t> {
    start_line: usize,
    end_line: usize,
    /// Byte offset of the comment body (after `//`, `///`, `//!`, `/*`…).
    body_start: usize,
    body: &'t str,
    style: CommentStyle,
}

/// Code between regions: counts its lines, and marks those holding anything but whitespace.
fn code(bytes: &[u8], line: &mut usize, code_lines: &mut std::collections::BTreeSet<usize>) {
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\n' => *line += 1,
            b' ' | b'\t' | b'\r' => {}
            _ => {
                // Marked once; the rest of the line is skipped to its newline.
                code_lines.insert(*line);
                match memchr::memchr(b'\n', &bytes[i..]) {
                    Some(n) => i += n,
                    None => break,
                }
                continue;
            }
        }
        i += 1;
    }
}

/// The file's comments, and the lines that hold code (string lines included), from the lexer.
fn lex_comments<'t>(
    text: &'t str,
    code_lines: &mut std::collections::BTreeSet<usize>,
) -> Vec<Comment<'t>> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut line = 1;
    let mut at = 0;
    for r in lex::regions(text) {
        code(&b[at..r.range.start], &mut line, code_lines);
        let start_line = line;
        line += memchr::memchr_iter(b'\n', &b[r.range.clone()]).count();
        match r.kind {
            lex::Kind::Literal => code_lines.extend(start_line..=line),
            lex::Kind::Comment(style) => out.push(Comment {
                start_line,
                end_line: line,
                body_start: r.body.start,
                body: &text[r.body],
                style,
            }),
        }
        at = r.range.end;
    }
    code(&b[at..], &mut line, code_lines);
    out
}

const PREFIX: &str = "lockaudit:";

fn parse_comment(
    file: &SourceFile,
    c: &Comment<'_>,
    rule_exists: RuleExists<'_>,
) -> Option<Directive> {
    // Only the first line of a comment can hold a directive, and only at its start.
    let first = c.body.lines().next().unwrap_or("");
    let lead = first.len() - first.trim_start().len();
    let trimmed = first.trim_start();
    if !trimmed.starts_with(PREFIX) {
        return None;
    }
    // A directive ends at the end of its comment or at a further `//` (room for test markers).
    let mut body = &trimmed[PREFIX.len()..];
    if let Some(cut) = find_outside_quotes(body, "//") {
        body = &body[..cut];
    }
    let start_off = c.body_start + lead;
    // The directive is on the comment's first line: its column is counted from that line's
    // start, not from the start of the file (which made many directives cost the square).
    let line = c.start_line;
    let line_start = file.text[..start_off].rfind('\n').map_or(0, |i| i + 1);
    let column = file.text[line_start..start_off].chars().count() + 1;
    let end_col = column + PREFIX.chars().count() + body.trim_end().chars().count();
    let span = Span {
        line,
        column,
        end_line: line,
        end_column: end_col,
    };
    Some(Directive {
        span,
        style: c.style,
        kind: parse_directive(body.trim(), rule_exists),
    })
}

fn find_outside_quotes(s: &str, needle: &str) -> Option<usize> {
    let mut in_str = false;
    let mut escaped = false;
    for (i, ch) in s.char_indices() {
        if in_str {
            match ch {
                '\\' if !escaped => escaped = true,
                '"' if !escaped => in_str = false,
                _ => escaped = false,
            }
            continue;
        }
        if ch == '"' {
            in_str = true;
        } else if s[i..].starts_with(needle) {
            return Some(i);
        }
    }
    None
}

const PURPOSES: &[&str] = &["correctness", "efficiency", "allow"];

fn invalid(message: impl Into<String>, help: Option<String>) -> DirectiveKind {
    DirectiveKind::Invalid {
        message: message.into(),
        help,
    }
}

/// Parses the text after `lockaudit:`.
pub fn parse_directive(body: &str, rule_exists: RuleExists<'_>) -> DirectiveKind {
    let mut p = Cursor { s: body, i: 0 };
    let Some(word) = p.word() else {
        return invalid(
            "empty `lockaudit:` directive",
            Some("write `lockaudit: correctness`, `lockaudit: efficiency` or `lockaudit: allow(rule) reason = \"…\"`".into()),
        );
    };
    match word {
        "correctness" | "efficiency" => {
            let purpose = if word == "correctness" {
                DeclaredPurpose::Correctness
            } else {
                DeclaredPurpose::Efficiency
            };
            p.ws();
            if p.done() {
                return DirectiveKind::Purpose {
                    purpose,
                    fenced_by: None,
                };
            }
            match p.key_value() {
                Ok((k, v)) if k == "fenced-by" => {
                    if v.trim().is_empty() {
                        return invalid("`fenced-by` needs a non-empty reason", None);
                    }
                    p.ws();
                    if !p.done() {
                        return invalid(
                            format!("unexpected `{}` after `fenced-by = \"…\"`", p.rest()),
                            None,
                        );
                    }
                    if purpose == DeclaredPurpose::Efficiency {
                        // Harmless, but it says the author misread what fencing is for.
                        return invalid(
                            "`fenced-by` only makes sense on a correctness lock",
                            Some("write `lockaudit: correctness fenced-by = \"…\"`".into()),
                        );
                    }
                    DirectiveKind::Purpose {
                        purpose,
                        fenced_by: Some(v),
                    }
                }
                Ok((k, _)) => invalid(
                    format!("unknown key `{k}`"),
                    Some("the only key a purpose takes is `fenced-by = \"reason\"`".into()),
                ),
                Err(e) => invalid(e, None),
            }
        }
        "allow" => parse_allow(&mut p, rule_exists),
        other => {
            let help = suggest(other, PURPOSES).map(|s| format!("did you mean `{s}`?"));
            invalid(
                format!(
                    "unknown purpose `{other}`: expected `correctness`, `efficiency` or `allow(…)`"
                ),
                help,
            )
        }
    }
}

fn parse_allow(p: &mut Cursor<'_>, rule_exists: RuleExists<'_>) -> DirectiveKind {
    p.ws();
    if !p.eat('(') {
        return invalid(
            "`allow` needs a rule list: `allow(rule-id) reason = \"…\"`",
            None,
        );
    }
    let mut rules = Vec::new();
    loop {
        p.ws();
        let Some(rule) = p.word() else {
            return invalid("expected a rule id inside `allow(…)`", None);
        };
        if !rule_exists(rule) {
            let all = crate::lints::ALL_IDS;
            let help = suggest(rule, all).map(|s| format!("did you mean `{s}`?"));
            return invalid(format!("unknown rule `{rule}` in `allow(…)`"), help);
        }
        rules.push(rule.to_string());
        p.ws();
        if p.eat(',') {
            continue;
        }
        if p.eat(')') {
            break;
        }
        return invalid("expected `,` or `)` in `allow(…)`", None);
    }
    p.ws();
    if p.done() {
        return invalid(
            "a suppression needs a reason: `allow(…) reason = \"why this is safe\"`",
            Some("without a reason this suppresses nothing".into()),
        );
    }
    match p.key_value() {
        Ok((k, v)) if k == "reason" && !v.trim().is_empty() => {
            p.ws();
            if !p.done() {
                return invalid(format!("unexpected `{}` after the reason", p.rest()), None);
            }
            DirectiveKind::Allow { rules, reason: v }
        }
        Ok((k, _)) if k == "reason" => invalid("the suppression's reason is empty", None),
        Ok((k, _)) => invalid(
            format!("unknown key `{k}`: a suppression takes `reason = \"…\"`"),
            None,
        ),
        Err(e) => invalid(e, None),
    }
}

fn suggest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    candidates
        .iter()
        .map(|c| (strsim::damerau_levenshtein(word, c), *c))
        .filter(|(d, c)| *d <= 2.max(c.len() / 4))
        .min()
        .map(|(_, c)| c)
}

struct Cursor<'a> {
    s: &'a str,
    i: usize,
}

impl<'a> Cursor<'a> {
    fn rest(&self) -> &'a str {
        &self.s[self.i..]
    }
    fn done(&self) -> bool {
        self.rest().trim().is_empty()
    }
    fn ws(&mut self) {
        let r = self.rest();
        self.i += r.len() - r.trim_start().len();
    }
    fn eat(&mut self, c: char) -> bool {
        if self.rest().starts_with(c) {
            self.i += c.len_utf8();
            true
        } else {
            false
        }
    }
    /// A word of letters, digits, `-` and `_`.
    fn word(&mut self) -> Option<&'a str> {
        self.ws();
        let r = self.rest();
        let n = r
            .find(|c: char| !(c.is_alphanumeric() || c == '-' || c == '_'))
            .unwrap_or(r.len());
        if n == 0 {
            return None;
        }
        self.i += n;
        Some(&r[..n])
    }
    /// `key = "value"` with `\"` and `\\` escapes.
    fn key_value(&mut self) -> Result<(String, String), String> {
        let key = self
            .word()
            .ok_or_else(|| format!("unexpected `{}`", self.rest().trim()))?
            .to_string();
        self.ws();
        if !self.eat('=') {
            return Err(format!("expected `=` after `{key}`"));
        }
        self.ws();
        if !self.eat('"') {
            return Err(format!("`{key}` takes a quoted string"));
        }
        let mut value = String::new();
        let mut chars = self.rest().char_indices();
        while let Some((j, ch)) = chars.next() {
            match ch {
                '"' => {
                    self.i += j + 1;
                    return Ok((key, value));
                }
                '\\' => {
                    if let Some((_, n)) = chars.next() {
                        value.push(n);
                    }
                }
                _ => value.push(ch),
            }
        }
        Err(format!("unterminated string after `{key} =`"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(r: &str) -> bool {
        r == "long-deadline" || r == "unclassified-lock"
    }

    #[test]
    fn purposes_and_keys() {
        assert_eq!(
            parse_directive("correctness", &rules),
            DirectiveKind::Purpose {
                purpose: DeclaredPurpose::Correctness,
                fenced_by: None
            }
        );
        assert_eq!(
            parse_directive(
                r#"correctness fenced-by = "UPDATE … WHERE version = $v""#,
                &rules
            ),
            DirectiveKind::Purpose {
                purpose: DeclaredPurpose::Correctness,
                fenced_by: Some("UPDATE … WHERE version = $v".into())
            }
        );
        assert!(
            matches!(parse_directive("corectness", &rules), DirectiveKind::Invalid { help: Some(h), .. } if h.contains("correctness"))
        );
        assert!(matches!(
            parse_directive("allow(long-deadline)", &rules),
            DirectiveKind::Invalid { .. }
        ));
        assert!(
            matches!(parse_directive("allow(long-dedline) reason = \"x\"", &rules), DirectiveKind::Invalid { help: Some(h), .. } if h.contains("long-deadline"))
        );
        assert_eq!(
            parse_directive(
                r#"allow(long-deadline, unclassified-lock) reason = "batch job""#,
                &rules
            ),
            DirectiveKind::Allow {
                rules: vec!["long-deadline".into(), "unclassified-lock".into()],
                reason: "batch job".into()
            }
        );
    }

    #[test]
    fn strings_are_not_comments() {
        let text = "let s = \"// lockaudit: correctness\";\nlet r = r#\"// lockaudit: efficiency\"#;\nlet c = '\"'; // lockaudit: efficiency // trailing\n";
        let f = SourceFile::new("x.rs".into(), "x.rs".into(), text.into());
        let d = Directives::scan(&f, &rules);
        assert_eq!(d.all.len(), 1);
        assert_eq!(d.all[0].span.line, 3);
        assert!(matches!(
            d.all[0].kind,
            DirectiveKind::Purpose {
                purpose: DeclaredPurpose::Efficiency,
                ..
            }
        ));
    }

    #[test]
    fn comment_block_above_and_file_level() {
        let text = "//! lockaudit: efficiency\nfn f() {\n    // lockaudit: correctness\n    #[allow(unused)]\n    let x = 1;\n}\n";
        let f = SourceFile::new("x.rs".into(), "x.rs".into(), text.into());
        let d = Directives::scan(&f, &rules);
        assert_eq!(d.file_level().count(), 1);
        assert_eq!(d.block_above(&f, 5).len(), 1);
        assert!(
            d.block_above(&f, 2).is_empty(),
            "`//!` belongs to the module, not to fn f"
        );
    }
}
