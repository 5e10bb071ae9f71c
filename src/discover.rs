//! Discovery: the one parallel walk over the given paths (gitignore-aware, `target/` skipped), each
//! thread collecting into its own list; the lists are merged and sorted at the end.

use std::path::{Component, Path, PathBuf};
use std::sync::Mutex;

use ignore::{WalkBuilder, WalkState};

use crate::diag::{FileError, ToolError};

/// A file to analyse.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Candidate {
    /// Absolute, lexically normalised (symlinks not resolved).
    pub abs: PathBuf,
    /// As shown in reports.
    pub display: String,
}

#[derive(Debug, Default)]
pub struct Discovered {
    pub files: Vec<Candidate>,
    pub errors: Vec<FileError>,
}

/// Removes `.` and resolves `..` lexically, so that display paths do not depend on how a path was typed.
pub fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::with_capacity(p.as_os_str().len());
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// Relative to `cwd` when under it, `/` separators.
pub fn display_path(abs: &Path, cwd: &Path) -> String {
    let shown = abs.strip_prefix(cwd).unwrap_or(abs);
    // Built in place: this runs once per file of the tree.
    let mut joined = String::with_capacity(shown.as_os_str().len() + 1);
    for (i, c) in shown.components().enumerate() {
        if i > 0 {
            joined.push('/');
        }
        joined.push_str(&c.as_os_str().to_string_lossy());
    }
    if abs.is_absolute() && !abs.starts_with(cwd) {
        format!("/{}", joined.trim_start_matches('/'))
    } else {
        joined
    }
}

pub fn discover(paths: &[PathBuf], cwd: &Path, threads: usize) -> Result<Discovered, ToolError> {
    let mut roots = Vec::new();
    let mut out = Discovered::default();
    for (p, (abs, named)) in paths.iter().zip(classify(paths, cwd, threads)) {
        match named {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(ToolError::Io {
                    path: p.clone(),
                    message: "no such file or directory".into(),
                });
            }
            Err(e) => {
                return Err(ToolError::Io {
                    path: p.clone(),
                    message: e.to_string(),
                });
            }
            Ok(Named::BrokenLink) => out.errors.push(FileError {
                path: display_path(&abs, cwd),
                line: None,
                message: broken_link_message(&abs),
            }),
            // A file named on the command line is taken as it is (whatever its extension, as a
            // walk's root would be): no walker per file when a hook passes hundreds of them.
            Ok(Named::File(display)) => out.files.push(Candidate { abs, display }),
            // Reading a FIFO would wait for a writer, a device would never end: neither is a
            // Rust file, and "0 findings" would hide that nothing was analysed.
            Ok(Named::Special(what)) => {
                return Err(ToolError::Io {
                    path: p.clone(),
                    message: format!("is {what}, not a regular file or a directory"),
                });
            }
            Ok(Named::Folder) => roots.push(abs),
        }
    }
    if roots.is_empty() {
        sort(&mut out);
        return Ok(out);
    }
    let mut builder = WalkBuilder::new(&roots[0]);
    for r in &roots[1..] {
        builder.add(r);
    }
    builder
        .follow_links(false)
        .require_git(false)
        .threads(threads)
        .filter_entry(|e| {
            !(e.depth() > 0
                && e.file_type().is_some_and(|t| t.is_dir())
                && e.file_name() == "target")
        });
    let collected: Mutex<Vec<Discovered>> = Mutex::new(Vec::new());
    builder.build_parallel().run(|| {
        // Per-thread state: pushed to the shared list once, when the thread's visitor is dropped.
        let mut mine = Local {
            found: Discovered::default(),
            sink: &collected,
            cwd,
        };
        Box::new(move |entry| {
            mine.visit(entry);
            WalkState::Continue
        })
    });
    for d in collected.into_inner().unwrap_or_default() {
        out.files.extend(d.files);
        out.errors.extend(d.errors);
    }
    sort(&mut out);
    Ok(out)
}

/// What a path named on the command line is.
enum Named {
    /// A file (or a link to one), with its display path.
    File(String),
    /// A folder (or a link to one).
    Folder,
    /// A FIFO, socket or device (or a link to one).
    Special(&'static str),
    BrokenLink,
}

/// Looks at the named paths, in order. A hook may name thousands of files, each needing a stat
/// and its display path, so long lists are split over the worker threads.
fn classify(
    paths: &[PathBuf],
    cwd: &Path,
    threads: usize,
) -> Vec<(PathBuf, std::io::Result<Named>)> {
    let one = |p: &PathBuf| {
        let abs = normalize(&cwd.join(p));
        let named = std::fs::symlink_metadata(&abs).map(|m| {
            let target = if m.file_type().is_symlink() {
                match std::fs::metadata(&abs) {
                    Ok(t) => t.file_type(),
                    Err(_) => return Named::BrokenLink,
                }
            } else {
                m.file_type()
            };
            if target.is_file() {
                Named::File(display_path(&abs, cwd))
            } else if target.is_dir() {
                Named::Folder
            } else {
                Named::Special(crate::read::describe(target).unwrap_or("not a regular file"))
            }
        });
        (abs, named)
    };
    const PER_THREAD: usize = 256;
    if threads < 2 || paths.len() < 2 * PER_THREAD {
        return paths.iter().map(one).collect();
    }
    let chunk = paths.len().div_ceil(threads);
    std::thread::scope(|s| {
        let parts: Vec<_> = paths
            .chunks(chunk)
            .map(|c| s.spawn(move || c.iter().map(one).collect::<Vec<_>>()))
            .collect();
        parts
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    })
}

/// By the path's bytes: a total, deterministic order, and much cheaper than comparing paths
/// component by component. A file named twice (or also found by a walk) is kept once.
fn sort(out: &mut Discovered) {
    out.files.sort_unstable_by(|a, b| {
        (a.abs.as_os_str().as_encoded_bytes())
            .cmp(b.abs.as_os_str().as_encoded_bytes())
            .then_with(|| a.display.cmp(&b.display))
    });
    out.files.dedup();
    out.errors.sort();
}

struct Local<'s> {
    found: Discovered,
    sink: &'s Mutex<Vec<Discovered>>,
    cwd: &'s Path,
}

impl Local<'_> {
    fn visit(&mut self, entry: Result<ignore::DirEntry, ignore::Error>) {
        match entry {
            Ok(e) => {
                let path = e.path();
                let Some(ft) = e.file_type() else { return };
                let explicit = e.depth() == 0;
                let is_rs = path.extension().is_some_and(|x| x == "rs");
                if !is_rs && (!explicit || ft.is_dir()) {
                    return;
                }
                let display = display_path(path, self.cwd);
                if ft.is_symlink() {
                    match std::fs::metadata(path) {
                        Err(_) => {
                            self.found.errors.push(FileError {
                                path: display,
                                line: None,
                                message: broken_link_message(path),
                            });
                            return;
                        }
                        Ok(m) if m.is_dir() => return,
                        Ok(m) if !m.is_file() => {
                            self.special(display, m.file_type());
                            return;
                        }
                        Ok(_) => {}
                    }
                } else if ft.is_dir() {
                    return;
                } else if !ft.is_file() {
                    self.special(display, ft);
                    return;
                }
                self.found.files.push(Candidate {
                    abs: path.to_path_buf(),
                    display,
                });
            }
            Err(err) => {
                let path = walk_error_path(&err)
                    .map(|p| display_path(p, self.cwd))
                    .unwrap_or_default();
                self.found.errors.push(FileError {
                    path,
                    line: None,
                    message: format!("cannot read: {}", strip_path(&err.to_string())),
                });
            }
        }
    }
}

impl Local<'_> {
    /// A `.rs` that is a FIFO, socket or device: never read (it could block or never end), and
    /// said so.
    fn special(&mut self, display: String, ft: std::fs::FileType) {
        let what = crate::read::describe(ft).unwrap_or("not a regular file");
        self.found.errors.push(FileError {
            path: display,
            line: None,
            message: format!("is {what}, not a regular file; not read"),
        });
    }
}

impl Drop for Local<'_> {
    fn drop(&mut self) {
        let found = std::mem::take(&mut self.found);
        if let Ok(mut all) = self.sink.lock() {
            all.push(found);
        }
    }
}

fn broken_link_message(p: &Path) -> String {
    if let Err(e) = std::fs::metadata(p)
        && crate::read::is_loop(&e)
    {
        return "symbolic link loop: the link leads back to itself".into();
    }
    match std::fs::read_link(p) {
        Ok(target) => format!(
            "broken symbolic link: its target `{}` does not exist",
            target.display()
        ),
        Err(_) => "broken symbolic link".into(),
    }
}

fn walk_error_path(e: &ignore::Error) -> Option<&Path> {
    match e {
        ignore::Error::WithPath { path, .. } => Some(path),
        ignore::Error::WithDepth { err, .. } | ignore::Error::WithLineNumber { err, .. } => {
            walk_error_path(err)
        }
        _ => None,
    }
}

/// ignore's messages lead with the path, which we print separately.
fn strip_path(msg: &str) -> String {
    msg.rsplit(": ").next().unwrap_or(msg).to_string()
}
