//! Tool errors (exit code 2) and per-file problems (reported, run continues).

use std::path::PathBuf;

/// An error that stops the run: bad config, bad rule pack, no such path.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    #[error("{path}:{line}:{column}: {message}", path = .path.display())]
    Config {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{path}:{line}:{column}: invalid rule pack: {message}", path = .path.display())]
    Pack {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{path}: {message}", path = .path.display())]
    Io { path: PathBuf, message: String },
    #[error("{0}")]
    Usage(String),
}

/// Where a TOML error is (1-based line and column) and what it says, for messages that name the
/// file, the place and the key.
pub fn toml_error_at(text: &str, err: &toml::de::Error) -> (usize, usize, String) {
    let (line, column) = err.span().map_or((1, 1), |span| line_col(text, span.start));
    (line, column, err.message().trim().to_string())
}

/// 1-based line and column (in characters) of a byte offset.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text[..floor_char_boundary(text, offset)];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[line_start..].chars().count() + 1)
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// A file that could not be analysed. Listed in every output format; does not by itself fail the run.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct FileError {
    pub path: String,
    pub line: Option<usize>,
    pub message: String,
}
