//! The editor's open documents. Each open buffer is put in the read overlay (`read::set_overlay`),
//! so the engine analyses the text as the editor holds it, saved or not; closing a document
//! hands the path back to the file on disk.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use lsp_types::{Position, Url};

pub struct Doc {
    pub uri: Url,
    pub version: i32,
    pub text: Arc<str>,
}

#[derive(Default)]
pub struct Documents {
    open: HashMap<PathBuf, Doc>,
}

impl Documents {
    /// Opens or replaces a document.
    pub fn set(&mut self, path: PathBuf, uri: Url, version: i32, text: String) {
        let text: Arc<str> = Arc::from(text);
        crate::read::set_overlay(path.clone(), Some(text.clone()));
        self.open.insert(path, Doc { uri, version, text });
    }

    /// Whether the editor's text of `path` differs from the file on disk.
    pub fn differs_from_disk(&self, path: &Path) -> bool {
        self.open
            .get(path)
            .is_some_and(|d| std::fs::read_to_string(path).ok().as_deref() != Some(&*d.text))
    }

    /// Closes a document; returns whether the editor's text differed from the file on disk
    /// (then what is on disk must be analysed again).
    pub fn close(&mut self, path: &Path) -> bool {
        crate::read::set_overlay(path.to_path_buf(), None);
        match self.open.remove(path) {
            Some(doc) => std::fs::read_to_string(path).ok().as_deref() != Some(&*doc.text),
            None => false,
        }
    }

    /// Whether any open document differs from its file.
    pub fn any_unsaved(&self) -> bool {
        self.open.keys().any(|p| self.differs_from_disk(p))
    }

    pub fn get(&self, path: &Path) -> Option<&Doc> {
        self.open.get(path)
    }

    /// The text as the editor holds it, or as it is on disk.
    pub fn text(&self, path: &Path) -> Option<Arc<str>> {
        match self.open.get(path) {
            Some(d) => Some(d.text.clone()),
            None => crate::read::text(path, crate::read::Kind::Source)
                .ok()
                .map(Arc::from),
        }
    }
}

/// The path a `file:` URI names, as discovery names files: with symbolic links resolved when the
/// file exists (the workspace root is resolved the same way), so that both agree.
pub fn path_of(uri: &Url) -> Option<PathBuf> {
    let p = uri.to_file_path().ok()?;
    Some(canonical(&p))
}

/// `p` with symbolic links resolved; for a path that does not exist (yet), its folder resolved.
pub fn canonical(p: &Path) -> PathBuf {
    if let Ok(c) = p.canonicalize() {
        return c;
    }
    match (p.parent(), p.file_name()) {
        (Some(dir), Some(name)) => dir
            .canonicalize()
            .map_or_else(|_| p.to_path_buf(), |d| d.join(name)),
        _ => p.to_path_buf(),
    }
}

/// Line starts of a text, to turn byte offsets into LSP positions (UTF-16 columns, the
/// protocol's default).
pub struct Lines<'t> {
    text: &'t str,
    starts: Vec<usize>,
}

impl<'t> Lines<'t> {
    pub fn new(text: &'t str) -> Lines<'t> {
        let mut starts = vec![0];
        starts.extend(memchr::memchr_iter(b'\n', text.as_bytes()).map(|i| i + 1));
        Lines { text, starts }
    }

    /// The position of a byte offset (clamped to the text, and back to a character boundary).
    pub fn position(&self, offset: usize) -> Position {
        let mut offset = offset.min(self.text.len());
        while !self.text.is_char_boundary(offset) {
            offset -= 1;
        }
        let line = self.starts.partition_point(|&s| s <= offset) - 1;
        let col = self.text[self.starts[line]..offset].encode_utf16().count();
        Position::new(line as u32, col as u32)
    }

    /// The text of a 0-based line, without its line ending.
    pub fn line(&self, line: usize) -> &'t str {
        let Some(&start) = self.starts.get(line) else {
            return "";
        };
        let end = self
            .starts
            .get(line + 1)
            .copied()
            .unwrap_or(self.text.len());
        self.text[start..end].trim_end_matches(['\n', '\r'])
    }

    /// The indentation of a 0-based line.
    pub fn indent(&self, line: usize) -> &'t str {
        let l = self.line(line);
        &l[..l.len() - l.trim_start_matches([' ', '\t']).len()]
    }

    /// The line ending the text uses.
    pub fn eol(&self) -> &'static str {
        if self.text.contains("\r\n") {
            "\r\n"
        } else {
            "\n"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_count_utf16_units() {
        let text = "ab\n\u{1F512}x = 1;\r\n  y\n";
        let l = Lines::new(text);
        assert_eq!(l.position(0), Position::new(0, 0));
        assert_eq!(l.position(3), Position::new(1, 0));
        // The lock emoji is 4 bytes and 2 UTF-16 units.
        assert_eq!(l.position(3 + 4), Position::new(1, 2));
        assert_eq!(l.position(3 + 5), Position::new(1, 3));
        assert_eq!(l.line(1), "\u{1F512}x = 1;");
        assert_eq!(l.indent(2), "  ");
        assert_eq!(l.eol(), "\r\n");
        assert_eq!(l.position(10_000), Position::new(3, 0));
    }
}
