//! A source file's text and the conversions between spans, lines and columns.

use std::path::PathBuf;

/// One Rust file as read from disk.
#[derive(Debug)]
pub struct SourceFile {
    /// The path as discovered (used to read the file and find its config).
    pub path: PathBuf,
    /// The path shown in reports: relative to the current directory when under it, `/` separators.
    pub display: String,
    pub text: String,
    line_starts: Vec<usize>,
}

impl SourceFile {
    pub fn new(path: PathBuf, display: String, text: String) -> Self {
        let mut line_starts = vec![0];
        line_starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        SourceFile {
            path,
            display,
            text,
            line_starts,
        }
    }

    pub fn line_count(&self) -> usize {
        self.line_starts.len()
    }

    /// The text of a 1-based line, without its line break.
    pub fn line(&self, line: usize) -> &str {
        let Some(&start) = self.line_starts.get(line.wrapping_sub(1)) else {
            return "";
        };
        let end = self
            .line_starts
            .get(line)
            .map_or(self.text.len(), |&e| e - 1);
        self.text[start..end.max(start)].trim_end_matches('\r')
    }

    /// Byte offset of a 1-based line and 1-based character column (clamped to the text).
    pub fn offset(&self, line: usize, column: usize) -> usize {
        let Some(&start) = self.line_starts.get(line.wrapping_sub(1)) else {
            return self.text.len();
        };
        let text = self.line(line);
        let in_line = text
            .char_indices()
            .nth(column.saturating_sub(1))
            .map_or(text.len(), |(i, _)| i);
        start + in_line
    }

    /// Converts a 1-based character column on `line` into a 1-based UTF-16 column (SARIF's unit).
    pub fn utf16_column(&self, line: usize, column: usize) -> usize {
        self.line(line)
            .chars()
            .take(column.saturating_sub(1))
            .map(char::len_utf16)
            .sum::<usize>()
            + 1
    }
}

/// A position range: 1-based lines, 1-based character columns, end exclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, serde::Serialize)]
pub struct Span {
    pub line: usize,
    pub column: usize,
    pub end_line: usize,
    pub end_column: usize,
}

impl Span {
    /// From a proc-macro2 span (lines 1-based, columns 0-based characters). Lines count from
    /// the start of the file, also in a piece of it parsed on its own (see [`LineBase`]).
    pub fn from_pm2(span: proc_macro2::Span) -> Span {
        let (s, e) = (span.start(), span.end());
        let base = LINE_BASE.get();
        Span {
            line: s.line + base,
            column: s.column + 1,
            end_line: e.line + base,
            end_column: e.column + 1,
        }
    }

    /// The span of a syntax node. This re-tokenizes the node; prefer a token's span where one
    /// will do.
    pub fn of(tokens: &impl syn::spanned::Spanned) -> Span {
        Span::from_pm2(tokens.span())
    }

    /// A block's span, from its braces alone.
    pub fn of_block(b: &syn::Block) -> Span {
        Span::from_pm2(b.brace_token.span.join())
    }

    /// Spans from `a`'s start to `b`'s end.
    pub fn join(a: Span, b: Span) -> Span {
        Span {
            line: a.line,
            column: a.column,
            end_line: b.end_line,
            end_column: b.end_column,
        }
    }
}

thread_local! {
    static LINE_BASE: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// While alive, spans on this thread are of a piece of a file that starts after `lines` lines:
/// a large file is parsed piece by piece (its syntax tree takes about 120 times its text).
pub struct LineBase(usize);

impl LineBase {
    pub fn set(lines: usize) -> LineBase {
        LineBase(LINE_BASE.replace(lines))
    }
}

impl Drop for LineBase {
    fn drop(&mut self) {
        LINE_BASE.set(self.0);
    }
}
