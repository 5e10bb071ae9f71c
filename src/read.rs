//! Every file lockaudit reads goes through here: it must be a regular file (after following
//! symbolic links) and no larger than the limit for its kind. A FIFO would block the run forever
//! and a link to `/dev/zero` would fill memory, so both are refused before a byte is read.
//!
//! Files are opened non-blocking (opening a FIFO for reading would otherwise wait for a writer)
//! and checked on the open handle, so a file swapped for a FIFO between discovery and reading is
//! refused too.
//!
//! An overlay (path -> text) stands in for files on disk: `lockaudit server` puts an editor's
//! unsaved buffers there, so that every reader (sources, configs, manifests) sees what the
//! editor holds.

use std::collections::HashMap;
use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

/// What a file is for; each kind has its own size limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A Rust source file.
    Source,
    /// `lockaudit.toml` or `--config`.
    Config,
    /// A `Cargo.toml`.
    Manifest,
    /// A rule pack named by a config.
    Pack,
    /// `--baseline`.
    Baseline,
    /// A cache entry.
    CacheEntry,
}

const MIB: u64 = 1 << 20;

impl Kind {
    /// The largest file of this kind that is read. Generous for what people write (the largest
    /// generated Rust files in the wild are a few MiB; a config with 20,000 `[[classify]]`
    /// entries is about 1 MiB), small enough that memory stays bounded whatever the tree holds.
    pub fn limit(self) -> u64 {
        match self {
            Kind::Source => 64 * MIB,
            Kind::Config | Kind::Pack => 16 * MIB,
            Kind::Manifest => 4 * MIB,
            Kind::Baseline => 256 * MIB,
            Kind::CacheEntry => 256 * MIB,
        }
    }

    fn noun(self) -> &'static str {
        match self {
            Kind::Source => "source file",
            Kind::Config => "config file",
            Kind::Manifest => "Cargo manifest",
            Kind::Pack => "rule pack",
            Kind::Baseline => "baseline",
            Kind::CacheEntry => "cache entry",
        }
    }
}

/// Why a file was not read.
#[derive(Debug)]
pub enum ReadError {
    NotFound,
    /// A symbolic link that leads back to itself (or too many links deep).
    LinkLoop,
    /// A symbolic link whose target does not exist.
    DanglingLink(Option<std::path::PathBuf>),
    /// A directory, FIFO, socket or device.
    NotRegular(&'static str),
    TooLarge {
        size: u64,
        kind: Kind,
    },
    /// Not UTF-8 where text was asked for: 1-based line and column of the first bad byte.
    NotUtf8 {
        line: usize,
        column: usize,
    },
    Io(std::io::Error),
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::NotFound => f.write_str("no such file"),
            ReadError::LinkLoop => {
                f.write_str("symbolic link loop (the link leads back to itself)")
            }
            ReadError::DanglingLink(Some(t)) => write!(
                f,
                "broken symbolic link: its target `{}` does not exist",
                t.display()
            ),
            ReadError::DanglingLink(None) => f.write_str("broken symbolic link"),
            ReadError::NotRegular(what) => write!(f, "is {what}, not a regular file"),
            ReadError::TooLarge { size, kind } => write!(
                f,
                "too large: {} MiB, the limit for a {} is {} MiB",
                size.div_ceil(MIB),
                kind.noun(),
                kind.limit() / MIB
            ),
            ReadError::NotUtf8 { line, column } => write!(
                f,
                "not valid UTF-8: invalid byte at line {line}, column {column}"
            ),
            ReadError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl ReadError {
    /// Whether nothing is there at all (not even a broken link).
    pub fn is_not_found(&self) -> bool {
        matches!(self, ReadError::NotFound)
    }

    fn from_io(e: std::io::Error, path: &Path) -> ReadError {
        if is_loop(&e) {
            return ReadError::LinkLoop;
        }
        if e.kind() == std::io::ErrorKind::NotFound {
            // A link that exists but leads nowhere is worth saying so.
            if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
                return ReadError::DanglingLink(std::fs::read_link(path).ok());
            }
            return ReadError::NotFound;
        }
        ReadError::Io(e)
    }
}

/// Whether an I/O error is ELOOP (too many levels of symbolic links).
pub fn is_loop(e: &std::io::Error) -> bool {
    #[cfg(unix)]
    {
        e.raw_os_error() == Some(libc::ELOOP)
    }
    #[cfg(not(unix))]
    {
        let _ = e;
        false
    }
}

/// What a file type is, in words, when it is not a regular file.
pub fn describe(ft: std::fs::FileType) -> Option<&'static str> {
    if ft.is_file() {
        return None;
    }
    if ft.is_dir() {
        return Some("a directory");
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if ft.is_fifo() {
            return Some("a FIFO (named pipe)");
        }
        if ft.is_socket() {
            return Some("a socket");
        }
        if ft.is_char_device() || ft.is_block_device() {
            return Some("a device");
        }
    }
    Some("not a regular file")
}

fn open(path: &Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // Opening a FIFO for reading blocks until a writer comes; non-blocking it returns at
        // once and the type check below refuses it. Regular files read the same either way.
        options.custom_flags(libc::O_NONBLOCK);
    }
    options.open(path)
}

static OVERLAY: RwLock<Option<HashMap<PathBuf, Arc<str>>>> = RwLock::new(None);
/// Whether the overlay holds anything: reads without an overlay take no lock.
static OVERLAID: AtomicBool = AtomicBool::new(false);

/// Makes `text` what reading `path` (absolute, as discovery names it) gives, or, with `None`,
/// the file on disk again.
pub fn set_overlay(path: PathBuf, text: Option<Arc<str>>) {
    let mut o = OVERLAY.write().unwrap_or_else(|e| e.into_inner());
    let map = o.get_or_insert_with(HashMap::new);
    match text {
        Some(t) => map.insert(path, t),
        None => map.remove(&path),
    };
    OVERLAID.store(!map.is_empty(), Ordering::Release);
}

/// The overlay's text for `path`, if any.
pub fn overlay(path: &Path) -> Option<Arc<str>> {
    if !OVERLAID.load(Ordering::Acquire) {
        return None;
    }
    let o = OVERLAY.read().unwrap_or_else(|e| e.into_inner());
    o.as_ref()?.get(path).cloned()
}

/// Reads the file into `buf` (cleared first).
pub fn into(path: &Path, kind: Kind, buf: &mut Vec<u8>) -> Result<(), ReadError> {
    buf.clear();
    if let Some(text) = overlay(path) {
        if text.len() as u64 > kind.limit() {
            return Err(ReadError::TooLarge {
                size: text.len() as u64,
                kind,
            });
        }
        buf.extend_from_slice(text.as_bytes());
        return Ok(());
    }
    // Sources come from discovery, which has seen their type; anything else is looked at before
    // it is opened, as opening some devices has effects of its own.
    if kind != Kind::Source {
        let m = std::fs::metadata(path).map_err(|e| ReadError::from_io(e, path))?;
        if let Some(what) = describe(m.file_type()) {
            return Err(ReadError::NotRegular(what));
        }
    }
    let file = open(path).map_err(|e| ReadError::from_io(e, path))?;
    let m = file.metadata().map_err(ReadError::Io)?;
    if let Some(what) = describe(m.file_type()) {
        return Err(ReadError::NotRegular(what));
    }
    let limit = kind.limit();
    if m.len() > limit {
        return Err(ReadError::TooLarge {
            size: m.len(),
            kind,
        });
    }
    buf.reserve(usize::try_from(m.len()).unwrap_or(0));
    // A file that grows while it is read is still cut at the limit.
    file.take(limit + 1)
        .read_to_end(buf)
        .map_err(ReadError::Io)?;
    if buf.len() as u64 > limit {
        return Err(ReadError::TooLarge {
            size: buf.len() as u64,
            kind,
        });
    }
    Ok(())
}

/// The file's bytes.
pub fn bytes(path: &Path, kind: Kind) -> Result<Vec<u8>, ReadError> {
    let mut buf = Vec::new();
    into(path, kind, &mut buf)?;
    Ok(buf)
}

/// The file's text (UTF-8).
pub fn text(path: &Path, kind: Kind) -> Result<String, ReadError> {
    String::from_utf8(bytes(path, kind)?).map_err(|e| {
        let bytes = e.as_bytes();
        utf8_error(bytes, e.utf8_error())
    })
}

/// Where bytes stop being UTF-8.
pub fn utf8_error(bytes: &[u8], e: std::str::Utf8Error) -> ReadError {
    let prefix = String::from_utf8_lossy(&bytes[..e.valid_up_to()]);
    let (line, column) = crate::diag::line_col(&prefix, prefix.len());
    ReadError::NotUtf8 { line, column }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regular_files_are_read_and_others_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let f = dir.path().join("a.toml");
        std::fs::write(&f, "x = 1\n").expect("write");
        assert_eq!(text(&f, Kind::Config).expect("reads"), "x = 1\n");
        assert!(matches!(
            text(dir.path(), Kind::Config),
            Err(ReadError::NotRegular("a directory"))
        ));
        assert!(text(&dir.path().join("none"), Kind::Config).is_err_and(|e| e.is_not_found()));
        #[cfg(unix)]
        {
            let zero = dir.path().join("zero");
            std::os::unix::fs::symlink("/dev/zero", &zero).expect("link");
            assert!(matches!(
                bytes(&zero, Kind::Manifest),
                Err(ReadError::NotRegular("a device"))
            ));
            // Sources skip the first look; the open handle is still checked.
            assert!(matches!(
                bytes(&zero, Kind::Source),
                Err(ReadError::NotRegular("a device"))
            ));
            let (a, b) = (dir.path().join("l1"), dir.path().join("l2"));
            std::os::unix::fs::symlink(&b, &a).expect("link");
            std::os::unix::fs::symlink(&a, &b).expect("link");
            assert!(matches!(bytes(&a, Kind::Config), Err(ReadError::LinkLoop)));
            assert!(matches!(bytes(&a, Kind::Source), Err(ReadError::LinkLoop)));
            let dangling = dir.path().join("dangling");
            std::os::unix::fs::symlink("/nonexistent/x", &dangling).expect("link");
            let e = bytes(&dangling, Kind::Config).expect_err("dangling");
            assert!(e.to_string().contains("/nonexistent/x"), "{e}");
        }
    }

    #[test]
    fn fifos_are_refused_without_blocking() {
        #[cfg(unix)]
        {
            let dir = tempfile::tempdir().expect("tempdir");
            let fifo = dir.path().join("p");
            let c = std::ffi::CString::new(fifo.to_str().expect("utf-8").as_bytes()).expect("c");
            // SAFETY: a valid NUL-terminated path.
            assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
            for kind in [Kind::Source, Kind::Config, Kind::CacheEntry] {
                assert!(matches!(
                    bytes(&fifo, kind),
                    Err(ReadError::NotRegular("a FIFO (named pipe)"))
                ));
            }
        }
    }

    #[test]
    fn files_over_the_limit_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let f = dir.path().join("big");
        let file = std::fs::File::create(&f).expect("create");
        // Sparse: no disk used.
        file.set_len(Kind::Manifest.limit() + 1).expect("set_len");
        let e = bytes(&f, Kind::Manifest).expect_err("too large");
        assert!(
            e.to_string()
                .contains("limit for a Cargo manifest is 4 MiB"),
            "{e}"
        );
        file.set_len(Kind::Manifest.limit()).expect("set_len");
        assert_eq!(
            bytes(&f, Kind::Manifest).expect("at the limit").len() as u64,
            Kind::Manifest.limit()
        );
    }

    #[test]
    fn the_overlay_stands_in_for_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let f = dir.path().join("a.rs");
        std::fs::write(&f, "on disk").expect("write");
        set_overlay(f.clone(), Some(Arc::from("in the editor")));
        assert_eq!(text(&f, Kind::Source).expect("reads"), "in the editor");
        // Another file is read from disk as before.
        let g = dir.path().join("b.rs");
        std::fs::write(&g, "b").expect("write");
        assert_eq!(text(&g, Kind::Source).expect("reads"), "b");
        set_overlay(f.clone(), None);
        assert_eq!(text(&f, Kind::Source).expect("reads"), "on disk");
    }

    #[test]
    fn text_says_where_utf8_stops() {
        let dir = tempfile::tempdir().expect("tempdir");
        let f = dir.path().join("bad");
        std::fs::write(&f, b"ok\nab\xff").expect("write");
        let e = text(&f, Kind::Config).expect_err("not utf-8");
        assert_eq!(
            e.to_string(),
            "not valid UTF-8: invalid byte at line 2, column 3"
        );
    }
}
