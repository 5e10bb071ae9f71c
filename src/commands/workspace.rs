//! `--manifest-path`: a Cargo manifest turned into the source folders of its packages, without
//! running cargo. A workspace's `members` globs (minus `exclude`) are expanded on disk; the root
//! package is included when the manifest has one. Only each package's `src/`, `tests/`,
//! `benches/`, `examples/` and `build.rs` are analysed, so `target/`, `vendor/` and fixture
//! folders of the packages are not.

use std::path::{Path, PathBuf};

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

use crate::diag::{ToolError, toml_error_at};

/// Folders deeper than this under the workspace root are not searched for members.
const MAX_DEPTH: usize = 8;

pub fn source_paths(manifest: &Path) -> Result<Vec<PathBuf>, ToolError> {
    let io = |message: String| ToolError::Io {
        path: manifest.to_path_buf(),
        message,
    };
    let text = crate::read::text(manifest, crate::read::Kind::Manifest)
        .map_err(|e| io(format!("cannot read: {e}")))?;
    let doc: toml::Table = toml::from_str(&text).map_err(|e| {
        let (line, column, message) = toml_error_at(&text, &e);
        ToolError::Config {
            path: manifest.to_path_buf(),
            line,
            column,
            message,
        }
    })?;
    let root = match manifest.parent() {
        Some(p) if p.as_os_str().is_empty() => PathBuf::from("."),
        Some(p) => p.to_path_buf(),
        None => PathBuf::from("."),
    };
    let mut packages = Vec::new();
    if doc.contains_key("package") {
        packages.push(root.clone());
    }
    if let Some(ws) = doc.get("workspace").and_then(|w| w.as_table()) {
        let list = |key: &str| -> Result<Vec<String>, ToolError> {
            match ws.get(key) {
                None => Ok(Vec::new()),
                Some(toml::Value::Array(a)) => a
                    .iter()
                    .map(|v| {
                        v.as_str().map(str::to_string).ok_or_else(|| {
                            io(format!("[workspace] {key}: every entry must be a string"))
                        })
                    })
                    .collect(),
                Some(_) => Err(io(format!("[workspace] {key} must be an array of strings"))),
            }
        };
        let member_list = list("members")?;
        if member_list.iter().any(|m| m.trim_end_matches('/') == ".")
            && root.join("Cargo.toml").is_file()
            && !packages.contains(&root)
        {
            packages.push(root.clone());
        }
        // Descend no deeper than the deepest pattern needs (`**`: any depth, up to a limit).
        let depth = member_list
            .iter()
            .map(|m| {
                if m.contains("**") {
                    MAX_DEPTH
                } else {
                    m.trim_matches('/').split('/').count()
                }
            })
            .max()
            .unwrap_or(0)
            .min(MAX_DEPTH);
        let members = globs(&member_list).map_err(|e| io(format!("[workspace] members: {e}")))?;
        let exclude =
            globs(&list("exclude")?).map_err(|e| io(format!("[workspace] exclude: {e}")))?;
        let mut found = Vec::new();
        collect(&root, &root, depth, &members, &exclude, &mut found);
        found.sort();
        for d in found {
            if !packages.contains(&d) {
                packages.push(d);
            }
        }
    }
    if packages.is_empty() {
        return Err(io(
            "neither [package] nor [workspace] members with a Cargo.toml".into(),
        ));
    }
    let mut paths = Vec::new();
    for p in packages {
        for sub in ["src", "tests", "benches", "examples", "build.rs"] {
            let candidate = p.join(sub);
            if candidate.exists() {
                paths.push(candidate);
            }
        }
    }
    if paths.is_empty() {
        return Err(io(
            "its packages have no src/, tests/, benches/, examples/ or build.rs".into(),
        ));
    }
    Ok(paths)
}

fn globs(patterns: &[String]) -> Result<GlobSet, globset::Error> {
    let mut b = GlobSetBuilder::new();
    for p in patterns {
        let p = p.trim_end_matches('/');
        let p = p.strip_prefix("./").unwrap_or(p);
        b.add(GlobBuilder::new(p).literal_separator(true).build()?);
    }
    b.build()
}

/// Folders under `root` (relative path matched) that match `members`, not `exclude`, and hold a
/// Cargo.toml. `target/` and hidden folders are not entered.
fn collect(
    root: &Path,
    dir: &Path,
    levels_left: usize,
    members: &GlobSet,
    exclude: &GlobSet,
    out: &mut Vec<PathBuf>,
) {
    if levels_left == 0 {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect();
    dirs.sort();
    for d in dirs {
        let name = d
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if name.starts_with('.') || name == "target" || name == "node_modules" {
            continue;
        }
        let rel = d
            .strip_prefix(root)
            .unwrap_or(&d)
            .components()
            .map(|c| c.as_os_str().to_string_lossy())
            .collect::<Vec<_>>()
            .join("/");
        if members.is_match(&rel) && !exclude.is_match(&rel) && d.join("Cargo.toml").is_file() {
            out.push(d.clone());
        }
        collect(root, &d, levels_left - 1, members, exclude, out);
    }
}
