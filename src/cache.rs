//! The cache: one entry per crate, keyed by everything its results depend on (the tool's
//! version and a hash of its source, the configurations in force, the rule selection, and the
//! path and content hash of every file of the crate). Results depend on the whole crate (its
//! index, its wrappers), so a change anywhere in a crate recomputes that crate; an unchanged tree
//! is served from here without parsing anything. Entries are JSON files under the cache
//! directory, each behind a line holding the checksum of the JSON: an entry damaged on disk is
//! recomputed, never served, even when what is left is still valid JSON.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use xxhash_rust::xxh3::Xxh3;

use crate::diag::FileError;
use crate::lints::{self, Level};
use crate::report::{Finding, Fix, SiteRecord};

/// A file's results as stored.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CachedFile {
    pub display: String,
    pub sites: Vec<SiteRecord>,
    pub findings: Vec<CachedFinding>,
    pub suppressed: usize,
}

/// A finding with the fields reports do not print but fingerprints and SARIF need.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CachedFinding {
    pub rule: String,
    pub severity: Level,
    pub path: String,
    pub line: usize,
    pub column: usize,
    pub end_line: usize,
    pub end_column: usize,
    pub message: String,
    pub help: String,
    pub suppressed: bool,
    pub suppression_reason: Option<String>,
    pub line_text: String,
    pub context: String,
    pub utf16: (usize, usize),
    pub fix: Option<Fix>,
}

impl CachedFinding {
    pub fn from_finding(f: &Finding) -> CachedFinding {
        CachedFinding {
            rule: f.rule.to_string(),
            severity: f.severity,
            path: f.path.clone(),
            line: f.line,
            column: f.column,
            end_line: f.end_line,
            end_column: f.end_column,
            message: f.message.clone(),
            help: f.help.clone(),
            suppressed: f.suppressed,
            suppression_reason: f.suppression_reason.clone(),
            line_text: f.line_text.clone(),
            context: f.context.clone(),
            utf16: f.utf16,
            fix: f.fix.clone(),
        }
    }

    /// `None` when the rule no longer exists (a stale entry from another version is never read,
    /// the version is in the key; this is belt and braces).
    pub fn into_finding(self) -> Option<Finding> {
        let rule = lints::by_id(&self.rule)?.id;
        Some(Finding {
            rule,
            severity: self.severity,
            path: self.path,
            line: self.line,
            column: self.column,
            end_line: self.end_line,
            end_column: self.end_column,
            message: self.message,
            help: self.help,
            fingerprint: String::new(),
            suppressed: self.suppressed,
            suppression_reason: self.suppression_reason,
            line_text: self.line_text,
            context: self.context,
            utf16: self.utf16,
            fix: self.fix,
        })
    }
}

/// One crate's results.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Entry {
    pub files: Vec<CachedFile>,
    pub errors: Vec<FileError>,
}

/// Builds a cache key from its parts, in order.
pub struct Key(Xxh3);

impl Key {
    pub fn new() -> Key {
        let mut h = Xxh3::new();
        h.update(env!("CARGO_PKG_VERSION").as_bytes());
        h.update(env!("LOCKAUDIT_SOURCE_HASH").as_bytes());
        h.update(b"\0lockaudit-cache-v2\0");
        Key(h)
    }

    pub fn part(&mut self, bytes: &[u8]) -> &mut Key {
        self.0.update(&(bytes.len() as u64).to_le_bytes());
        self.0.update(bytes);
        self
    }

    pub fn finish(&self) -> String {
        format!("{:032x}", self.0.digest128())
    }
}

impl Default for Key {
    fn default() -> Self {
        Key::new()
    }
}

pub fn content_hash(bytes: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(bytes)
}

/// A short, stable tag for a crate's root. Entry names begin with it, so that a run can tell a
/// crate the cache has seen before from a new one before reading any of its files.
pub fn crate_tag(root: &Path) -> String {
    format!(
        "{:016x}",
        xxhash_rust::xxh3::xxh3_64(root.as_os_str().as_encoded_bytes())
    )
}

/// The JSON of an entry whose checksum line matches it.
fn verified(bytes: &[u8]) -> Option<&[u8]> {
    let newline = bytes.iter().position(|&b| b == b'\n')?;
    let (line, json) = (&bytes[..newline], &bytes[newline + 1..]);
    let sum = u64::from_str_radix(std::str::from_utf8(line).ok()?, 16).ok()?;
    (line.len() == 16 && sum == content_hash(json)).then_some(json)
}

pub struct Cache {
    dir: PathBuf,
    /// Per crate tag, the names of its entries when the run began.
    entries: HashMap<String, Vec<String>>,
}

/// How many entries a crate keeps (the newest): enough for a few configurations or rule
/// selections used in turn (an editor's and CI's) without each evicting the other, while a crate
/// that keeps changing does not grow the cache without bound.
const ENTRIES_PER_CRATE: usize = 4;

impl Cache {
    /// Opens (creating) the cache directory; `None` when it cannot be used, which only costs speed.
    pub fn open(dir: &Path) -> Option<Cache> {
        let dir = dir.join(format!("v{}", env!("CARGO_PKG_VERSION")));
        std::fs::create_dir_all(&dir).ok()?;
        // Keep the cache out of version control, as ruff does.
        let ignore = dir.parent().unwrap_or(&dir).join(".gitignore");
        if !ignore.exists() {
            let _ = std::fs::write(ignore, "# Automatically created by lockaudit.\n*\n");
        }
        let mut entries: HashMap<String, Vec<String>> = HashMap::new();
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let Ok(name) = e.file_name().into_string() else {
                continue;
            };
            if let Some((tag, _)) = name.strip_suffix(".json").and_then(|n| n.split_once('-')) {
                entries.entry(tag.to_string()).or_default().push(name);
            }
        }
        Some(Cache { dir, entries })
    }

    /// Whether the cache held an entry for this crate (any version of its files) when it opened.
    pub fn has_seen(&self, root: &Path) -> bool {
        self.entries.contains_key(&crate_tag(root))
    }

    fn path(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{key}.json"))
    }

    pub fn get(&self, key: &str) -> Option<Entry> {
        let bytes = crate::read::bytes(&self.path(key), crate::read::Kind::CacheEntry).ok()?;
        serde_json::from_slice(verified(&bytes)?).ok()
    }

    /// Best effort: a cache that cannot be written is a slower next run, not an error. Written
    /// to a temporary file and renamed, so that a concurrent run never reads half an entry.
    pub fn put(&self, key: &str, entry: &Entry) {
        let Ok(json) = serde_json::to_vec(entry) else {
            return;
        };
        let mut bytes = format!("{:016x}\n", content_hash(&json)).into_bytes();
        bytes.extend_from_slice(&json);
        let tmp = self.dir.join(format!("{key}.{}.tmp", std::process::id()));
        if std::fs::write(&tmp, bytes).is_err() || std::fs::rename(&tmp, self.path(key)).is_err() {
            let _ = std::fs::remove_file(&tmp);
            return;
        }
        self.evict(key);
    }

    /// Removes the oldest entries of the crate `key` belongs to, beyond the newest few. An entry
    /// another run is about to read may go: that run recomputes the crate (never a wrong answer).
    fn evict(&self, key: &str) {
        let Some(older) = key
            .split_once('-')
            .and_then(|(tag, _)| self.entries.get(tag))
        else {
            return;
        };
        let written = format!("{key}.json");
        let mut older: Vec<(std::time::SystemTime, &String)> = older
            .iter()
            .filter(|name| **name != written)
            .filter_map(|name| {
                let modified = std::fs::metadata(self.dir.join(name))
                    .ok()?
                    .modified()
                    .ok()?;
                Some((modified, name))
            })
            .collect();
        let keep = ENTRIES_PER_CRATE.saturating_sub(1);
        if older.len() <= keep {
            return;
        }
        older.sort();
        for (_, name) in &older[..older.len() - keep] {
            let _ = std::fs::remove_file(self.dir.join(name));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_damaged_entry_is_not_served_even_when_it_is_valid_json() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = Cache::open(dir.path()).expect("opens");
        let entry = Entry {
            files: Vec::new(),
            errors: vec![FileError {
                path: "a.rs".into(),
                line: Some(3),
                message: "cannot parse".into(),
            }],
        };
        let key = format!("{}-k", crate_tag(Path::new("/x")));
        cache.put(&key, &entry);
        assert_eq!(cache.get(&key).expect("served").errors, entry.errors);
        let path = cache.path(&key);
        let text = std::fs::read_to_string(&path).expect("read");
        // Still JSON, another message: the checksum no longer matches.
        std::fs::write(&path, text.replace("cannot parse", "cannot parsf")).expect("write");
        assert!(cache.get(&key).is_none());
        // The checksum line alone does not make a JSON file an entry either.
        std::fs::write(&path, text.lines().nth(1).expect("json")).expect("write");
        assert!(cache.get(&key).is_none());
    }
}
