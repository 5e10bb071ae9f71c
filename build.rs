//! Embeds every `rules/*.toml` pack into the binary (sorted, for reproducible builds) and lifts the
//! rule docs out of `src/lints/`.
use std::{env, fs, path::PathBuf};

fn main() {
    packs();
    rule_docs();
    source_hash();
}

/// A hash of the analyzer's own source: the cache key carries it, so that a build that analyses
/// differently never reads results another build wrote under the same version number.
fn source_hash() {
    use std::hash::{Hash, Hasher};
    let root =
        PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let src = root.join("src");
    println!("cargo:rerun-if-changed={}", src.display());
    let mut files = Vec::new();
    let mut todo = vec![src];
    while let Some(dir) = todo.pop() {
        for e in fs::read_dir(&dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                files.push(p);
            }
        }
    }
    files.sort();
    let mut h = std::hash::DefaultHasher::new();
    for p in &files {
        p.strip_prefix(&root).unwrap_or(p).hash(&mut h);
        fs::read(p).unwrap_or_default().hash(&mut h);
    }
    println!("cargo:rustc-env=LOCKAUDIT_SOURCE_HASH={:016x}", h.finish());
}

fn packs() {
    let root =
        PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let rules = root.join("rules");
    println!("cargo:rerun-if-changed={}", rules.display());
    let mut packs: Vec<PathBuf> = fs::read_dir(&rules)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "toml"))
                .collect()
        })
        .unwrap_or_default();
    packs.sort();
    let mut out = String::from("&[\n");
    for p in &packs {
        println!("cargo:rerun-if-changed={}", p.display());
        let name = p
            .file_name()
            .and_then(|n| n.to_str())
            .expect("pack file names are UTF-8");
        out.push_str(&format!(
            "    (\"rules/{name}\", include_str!({:?})),\n",
            p.display().to_string()
        ));
    }
    out.push(']');
    let dest =
        PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("builtin_packs.rs");
    fs::write(dest, out).expect("OUT_DIR is writable");
}

/// Each rule's doc comment (in `src/lints/<rule>.rs`, above its `pub struct`) is the single source
/// for `lockaudit explain`, the SARIF rule help and `docs/rules/`. Rust has no runtime access to doc
/// comments, so they are lifted out here.
fn rule_docs() {
    let root =
        PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let dir = root.join("src/lints");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.retain(|p| p.extension().is_some_and(|x| x == "rs") && !p.ends_with("mod.rs"));
    files.sort();
    let mut out = String::from("&[\n");
    for p in &files {
        println!("cargo:rerun-if-changed={}", p.display());
        let text = fs::read_to_string(p).expect("rule files are readable");
        let mut doc: Vec<&str> = Vec::new();
        let mut found = None;
        for line in text.lines() {
            let t = line.trim_start();
            if let Some(d) = t.strip_prefix("///") {
                doc.push(d.strip_prefix(' ').unwrap_or(d));
            } else if t.starts_with("pub struct") {
                found = Some(doc.join("\n"));
                break;
            } else if !t.starts_with("#[") {
                doc.clear();
            }
        }
        let doc = found.unwrap_or_else(|| {
            panic!(
                "{}: a rule needs a doc comment above its `pub struct`",
                p.display()
            )
        });
        let stem = p
            .file_stem()
            .and_then(|s| s.to_str())
            .expect("rule file names are UTF-8");
        out.push_str(&format!("    ({:?}, {:?}),\n", stem.replace('_', "-"), doc));
    }
    out.push(']');
    let dest = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("rule_docs.rs");
    fs::write(dest, out).expect("OUT_DIR is writable");
}
