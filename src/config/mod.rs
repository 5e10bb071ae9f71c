//! `lockaudit.toml`: schema, discovery (nearest file walking up from each analysed file, or
//! `--config`), and validation with messages that name the file, the line and the key.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use globset::{GlobBuilder, GlobMatcher};
use serde::Deserialize;

use crate::diag::{ToolError, line_col, toml_error_at};
use crate::directives::DeclaredPurpose;
use crate::lints::{self, Level};
use crate::packs::{Pack, PackSet};

pub const FILE_NAME: &str = "lockaudit.toml";

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawConfig {
    #[serde(default)]
    default_purpose: Option<String>,
    /// Extra rule packs, relative to this file.
    #[serde(default)]
    packs: Vec<String>,
    #[serde(default)]
    classify: Vec<RawClassify>,
    #[serde(default)]
    rules: BTreeMap<String, toml::Table>,
    /// Globs (relative to this file) of files not to analyse.
    #[serde(default)]
    exclude: Vec<String>,
    /// The team's own lock wrappers: `[[call]]` entries plus `library`, the pack they wrap.
    #[serde(default)]
    lock: Vec<toml::Table>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawClassify {
    path: Option<String>,
    function: Option<String>,
    key: Option<String>,
    purpose: String,
    fenced_by: Option<String>,
}

/// What a site's purpose is when nothing in the code says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DefaultPurpose {
    Unclassified,
    Declared(DeclaredPurpose),
}

#[derive(Debug)]
pub struct ClassifyRule {
    pub path: Option<GlobMatcher>,
    pub function: Option<GlobMatcher>,
    pub key: Option<GlobMatcher>,
    pub purpose: DeclaredPurpose,
    pub fenced_by: Option<String>,
}

/// Validated settings of one rule.
#[derive(Debug, Clone)]
pub struct RuleOptions {
    pub levels: HashMap<&'static str, Level>,
    /// `long-deadline`: the longest TTL accepted, in milliseconds.
    pub max_ttl_ms: u64,
    /// `unrenewed-long-operation`: calls (`path` or `Type::method` globs) that take long.
    pub long_calls: globset::GlobSet,
}

impl Default for RuleOptions {
    fn default() -> Self {
        RuleOptions {
            levels: lints::RULES
                .iter()
                .map(|r| (r.id, r.default_level))
                .collect(),
            max_ttl_ms: 60_000,
            long_calls: globset::GlobSet::empty(),
        }
    }
}

/// A loaded, validated configuration.
#[derive(Debug)]
pub struct Config {
    /// The file it came from (`None`: built-in defaults).
    pub path: Option<PathBuf>,
    /// Globs are relative to this folder.
    pub base: PathBuf,
    pub default_purpose: DefaultPurpose,
    pub classify: Vec<ClassifyRule>,
    pub rules: RuleOptions,
    pub exclude: Vec<GlobMatcher>,
    pub packs: Arc<PackSet>,
    /// A hash of the config text and the extra packs it loads, for the cache key.
    pub digest: u64,
}

impl Config {
    pub fn defaults(base: PathBuf, builtin: &[Pack]) -> Result<Config, ToolError> {
        Ok(Config {
            path: None,
            base,
            default_purpose: DefaultPurpose::Unclassified,
            classify: Vec::new(),
            rules: RuleOptions::default(),
            exclude: Vec::new(),
            packs: Arc::new(PackSet::new(builtin.to_vec())?),
            digest: 0,
        })
    }

    pub fn load(path: &Path, builtin: &[Pack]) -> Result<Config, ToolError> {
        let text = std::fs::read_to_string(path).map_err(|e| ToolError::Io {
            path: path.to_path_buf(),
            message: format!("cannot read config: {e}"),
        })?;
        Config::parse(path, &text, builtin)
    }

    pub fn parse(path: &Path, text: &str, builtin: &[Pack]) -> Result<Config, ToolError> {
        let err = |needle: &str, message: String| {
            let (line, column) = text.find(needle).map_or((1, 1), |o| line_col(text, o));
            ToolError::Config {
                path: path.to_path_buf(),
                line,
                column,
                message,
            }
        };
        let raw: RawConfig = parse_toml(path, text)?;
        let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
        let default_purpose = match raw.default_purpose.as_deref() {
            None | Some("unclassified") => DefaultPurpose::Unclassified,
            Some("efficiency") => DefaultPurpose::Declared(DeclaredPurpose::Efficiency),
            Some("correctness") => DefaultPurpose::Declared(DeclaredPurpose::Correctness),
            Some(other) => {
                return Err(err(
                    "default-purpose",
                    format!(
                        "`default-purpose` is `{other}`; expected \"unclassified\", \"efficiency\" or \"correctness\""
                    ),
                ));
            }
        };
        let mut classify = Vec::new();
        for (i, c) in raw.classify.iter().enumerate() {
            // Found only for an error: for every entry, it cost the square of their number.
            let cerr = |message: String| ToolError::Config {
                path: path.to_path_buf(),
                line: nth_table_line(text, "[[classify]]", i),
                column: 1,
                message,
            };
            let purpose = match c.purpose.as_str() {
                "efficiency" => DeclaredPurpose::Efficiency,
                "correctness" => DeclaredPurpose::Correctness,
                other => {
                    return Err(cerr(format!(
                        "[[classify]] #{}: `purpose` is `{other}`; expected \"efficiency\" or \"correctness\"",
                        i + 1
                    )));
                }
            };
            if c.path.is_none() && c.function.is_none() && c.key.is_none() {
                return Err(cerr(format!(
                    "[[classify]] #{} matches nothing: give `path`, `function` or `key`",
                    i + 1
                )));
            }
            let glob = |g: &Option<String>,
                        key: &str,
                        sep: bool|
             -> Result<Option<GlobMatcher>, ToolError> {
                g.as_ref()
                    .map(|g| {
                        GlobBuilder::new(g)
                            .literal_separator(sep)
                            .build()
                            .map(|g| g.compile_matcher())
                            .map_err(|e| {
                                cerr(format!(
                                    "[[classify]] #{}: bad `{key}` glob `{g}`: {e}",
                                    i + 1
                                ))
                            })
                    })
                    .transpose()
            };
            classify.push(ClassifyRule {
                path: glob(&c.path, "path", true)?,
                function: glob(&c.function, "function", false)?,
                key: glob(&c.key, "key", false)?,
                purpose,
                fenced_by: c.fenced_by.clone(),
            });
        }
        let mut rules = RuleOptions::default();
        for (id, table) in &raw.rules {
            let Some(rule) = lints::by_id(id) else {
                let help = lints::suggest(id)
                    .map(|s| format!(" (did you mean `{s}`?)"))
                    .unwrap_or_default();
                return Err(err(
                    &format!("[rules.{id}]"),
                    format!("unknown rule `{id}` in [rules]{help}"),
                ));
            };
            for (key, value) in table {
                let here = format!("[rules.{id}]");
                match (key.as_str(), value) {
                    ("level", toml::Value::String(s)) => {
                        let level = Level::parse(s).ok_or_else(|| {
                            err(&here, format!("[rules.{id}] level is `{s}`; expected \"error\", \"warning\", \"note\" or \"off\""))
                        })?;
                        rules.levels.insert(rule.id, level);
                    }
                    ("long-calls", toml::Value::Array(items))
                        if rule.id == "unrenewed-long-operation" =>
                    {
                        let mut set = globset::GlobSetBuilder::new();
                        for item in items {
                            let toml::Value::String(g) = item else {
                                return Err(err(
                                    &here,
                                    format!(
                                        "[rules.{id}] long-calls: every entry is a string glob, found `{item}`"
                                    ),
                                ));
                            };
                            let glob = GlobBuilder::new(g).build().map_err(|e| {
                                err(
                                    &here,
                                    format!("[rules.{id}] long-calls: bad glob `{g}`: {e}"),
                                )
                            })?;
                            set.add(glob);
                        }
                        rules.long_calls = set
                            .build()
                            .map_err(|e| err(&here, format!("[rules.{id}] long-calls: {e}")))?;
                    }
                    ("max-ttl", toml::Value::String(s)) if rule.id == "long-deadline" => {
                        let d = humantime::parse_duration(s)
                            .map_err(|e| err(&here, format!("[rules.long-deadline] max-ttl `{s}`: {e} (write e.g. \"60s\" or \"2m\")")))?;
                        rules.max_ttl_ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
                    }
                    (k, _) => {
                        let known = match rule.id {
                            "long-deadline" => "`level` and `max-ttl`",
                            "unrenewed-long-operation" => "`level` and `long-calls`",
                            _ => "`level`",
                        };
                        return Err(err(
                            &here,
                            format!(
                                "[rules.{id}]: unknown or mistyped key `{k}`; this rule takes {known}"
                            ),
                        ));
                    }
                }
            }
        }
        let mut digest_input = text.to_string();
        let mut packs = builtin.to_vec();
        for p in &raw.packs {
            let pack_path = base.join(p);
            let text = std::fs::read_to_string(&pack_path).map_err(|e| {
                err(
                    p,
                    format!("cannot read rule pack `{}`: {e}", pack_path.display()),
                )
            })?;
            digest_input.push_str(&text);
            packs.push(Pack::parse(&pack_path, &text)?);
        }
        for (i, table) in raw.lock.iter().enumerate() {
            let at = nth_table_line(text, "[[lock]]", i);
            let lerr = |message: String| ToolError::Config {
                path: path.to_path_buf(),
                line: at,
                column: 1,
                message,
            };
            let mut table = table.clone();
            let library = match table.remove("library") {
                Some(toml::Value::String(l)) => l,
                _ => {
                    return Err(lerr(format!(
                        "[[lock]] #{}: `library` (the rule pack it wraps, e.g. \"rslock\") is required",
                        i + 1
                    )));
                }
            };
            let mut call: crate::packs::CallDef =
                toml::Value::Table(table)
                    .try_into()
                    .map_err(|e: toml::de::Error| {
                        lerr(format!("[[lock]] #{}: {}", i + 1, e.message().trim()))
                    })?;
            if call.function.is_none() && (call.method.is_none() || call.receiver.is_none()) {
                return Err(lerr(format!(
                    "[[lock]] #{}: give `function`, or `receiver` and `method`",
                    i + 1
                )));
            }
            call.via = Some(match (&call.function, &call.receiver, &call.method) {
                (Some(f), _, _) => f.clone(),
                (None, Some(r), Some(m)) => format!("{}::{m}", r.to_vec().join("|")),
                _ => String::new(),
            });
            let Some(pack) = packs.iter_mut().find(|p| p.pack.name == library) else {
                let names: Vec<&str> = packs.iter().map(|p| p.pack.name.as_str()).collect();
                return Err(lerr(format!(
                    "[[lock]] #{}: no rule pack named `{library}` (known: {})",
                    i + 1,
                    names.join(", ")
                )));
            };
            pack.calls.push(call);
        }
        let exclude = raw
            .exclude
            .iter()
            .map(|g| {
                GlobBuilder::new(g)
                    .literal_separator(true)
                    .build()
                    .map(|g| g.compile_matcher())
                    .map_err(|e| err(g, format!("bad `exclude` glob `{g}`: {e}")))
            })
            .collect::<Result<_, _>>()?;
        let digest = xxhash_rust::xxh3::xxh3_64(digest_input.as_bytes());
        Ok(Config {
            path: Some(path.to_path_buf()),
            base,
            default_purpose,
            classify,
            rules,
            exclude,
            digest,
            packs: Arc::new(PackSet::new(packs)?),
        })
    }

    /// The `[package.metadata.lockaudit]` (or else `[workspace.metadata.lockaudit]`) table of a
    /// Cargo manifest, same schema as lockaudit.toml. `None`: the manifest has neither.
    pub fn from_manifest(path: &Path, builtin: &[Pack]) -> Result<Option<Config>, ToolError> {
        let text = std::fs::read_to_string(path).map_err(|e| ToolError::Io {
            path: path.to_path_buf(),
            message: format!("cannot read: {e}"),
        })?;
        // Most manifests say nothing about lockaudit; do not fail on ones that are not ours to check.
        if !text.contains("lockaudit") {
            return Ok(None);
        }
        let doc: toml::Table = parse_toml(path, &text)?;
        let section = |top: &'static str| {
            doc.get(top)
                .and_then(|t| t.get("metadata"))
                .and_then(|m| m.get("lockaudit"))
                .map(|l| (top, l.clone()))
        };
        let Some((top, value)) = section("package").or_else(|| section("workspace")) else {
            return Ok(None);
        };
        let header = format!("{top}.metadata.lockaudit");
        let (line, column) = text.find(&header).map_or((1, 1), |o| line_col(&text, o));
        let wrong = |message: String| ToolError::Config {
            path: path.to_path_buf(),
            line,
            column,
            message: format!("[{header}]: {message}"),
        };
        let toml::Value::Table(table) = value else {
            return Err(wrong("must be a table".into()));
        };
        // Parsed as the text of a lockaudit.toml; errors point at the section, as the re-written
        // text's lines are not the manifest's.
        let body = toml::to_string(&table).map_err(|e| wrong(e.to_string()))?;
        Config::parse(path, &body, builtin)
            .map(Some)
            .map_err(|e| match e {
                ToolError::Config { message, .. } => wrong(message),
                other => other,
            })
    }

    /// A path relative to the config's folder, with `/` separators, for globs.
    pub fn relative(&self, file: &Path) -> String {
        let rel = file.strip_prefix(&self.base).unwrap_or(file);
        rel.components()
            .map(|c| c.as_os_str().to_string_lossy())
            .collect::<Vec<_>>()
            .join("/")
    }

    pub fn excludes(&self, file: &Path) -> bool {
        if self.exclude.is_empty() {
            return false;
        }
        let rel = self.relative(file);
        self.exclude.iter().any(|g| g.is_match(&rel))
    }
}

/// Deserialises a config text; a TOML error names the file, line and column.
fn parse_toml<T: serde::de::DeserializeOwned>(path: &Path, text: &str) -> Result<T, ToolError> {
    toml::from_str(text).map_err(|e| {
        let (line, column, message) = toml_error_at(text, &e);
        ToolError::Config {
            path: path.to_path_buf(),
            line,
            column,
            message,
        }
    })
}

fn nth_table_line(text: &str, header: &str, n: usize) -> usize {
    text.match_indices(header)
        .nth(n)
        .map_or(1, |(o, _)| line_col(text, o).0)
}

/// Finds and caches configurations: one per folder holding a `lockaudit.toml`.
pub struct Configs {
    builtin: Vec<Pack>,
    forced: Option<Arc<Config>>,
    by_file: HashMap<PathBuf, Arc<Config>>,
    by_dir: HashMap<PathBuf, Arc<Config>>,
    defaults: Option<Arc<Config>>,
    /// What each folder looked at holds; crate roots are found through it too, so that each
    /// folder is probed once per run.
    folders: HashMap<PathBuf, Folder>,
}

/// What one folder holds that configuration and crate boundaries depend on.
#[derive(Clone, Copy)]
struct Folder {
    config: bool,
    manifest: Manifest,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Manifest {
    Absent,
    /// A Cargo.toml without a lockaudit section (most never mention lockaudit at all).
    Plain,
    /// A Cargo.toml that may hold a lockaudit section (or could not be read: loading it says why).
    Mentions,
}

impl Folder {
    fn probe(d: &Path) -> Folder {
        let manifest = match std::fs::read_to_string(d.join("Cargo.toml")) {
            Ok(text) if !text.contains("lockaudit") => Manifest::Plain,
            Ok(_) => Manifest::Mentions,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Manifest::Absent,
            // A folder named Cargo.toml is no manifest; other errors are reported on loading.
            Err(_) if d.join("Cargo.toml").is_dir() => Manifest::Absent,
            Err(_) => Manifest::Mentions,
        };
        Folder {
            config: d.join(FILE_NAME).is_file(),
            manifest,
        }
    }
}

impl Configs {
    pub fn new(builtin: Vec<Pack>, forced: Option<&Path>) -> Result<Configs, ToolError> {
        let forced = match forced {
            Some(p) => {
                if !p.is_file() {
                    return Err(ToolError::Io {
                        path: p.to_path_buf(),
                        message: "no such config file".into(),
                    });
                }
                Some(Arc::new(Config::load(p, &builtin)?))
            }
            None => None,
        };
        Ok(Configs {
            builtin,
            forced,
            by_file: HashMap::new(),
            by_dir: HashMap::new(),
            defaults: None,
            folders: HashMap::new(),
        })
    }

    fn folder(&mut self, d: &Path) -> Folder {
        if let Some(f) = self.folders.get(d) {
            return *f;
        }
        let f = Folder::probe(d);
        self.folders.insert(d.to_path_buf(), f);
        f
    }

    /// Whether `d` holds a Cargo manifest, i.e. is a crate's (or workspace's) root.
    pub fn has_manifest(&mut self, d: &Path) -> bool {
        self.folder(d).manifest != Manifest::Absent
    }

    /// The configuration in force for files in `dir` (absolute).
    pub fn for_dir(&mut self, dir: &Path) -> Result<Arc<Config>, ToolError> {
        if let Some(f) = &self.forced {
            return Ok(f.clone());
        }
        // Nearest folder first; in one folder, lockaudit.toml before Cargo.toml metadata. Every
        // folder passed on the way up is remembered, so that each is looked at once per run.
        let mut passed: Vec<&Path> = Vec::new();
        let mut found = None;
        for d in dir.ancestors() {
            if let Some(c) = self.by_dir.get(d) {
                found = Some(c.clone());
                break;
            }
            passed.push(d);
            if let Some(c) = self.own_config(d)? {
                found = Some(c);
                break;
            }
        }
        let cfg = match found {
            Some(c) => c,
            None => match &self.defaults {
                Some(d) => d.clone(),
                None => {
                    let d = Arc::new(Config::defaults(PathBuf::from("."), &self.builtin)?);
                    self.defaults = Some(d.clone());
                    d
                }
            },
        };
        for d in passed {
            self.by_dir.insert(d.to_path_buf(), cfg.clone());
        }
        Ok(cfg)
    }

    /// The configuration a folder itself holds, if any.
    fn own_config(&mut self, d: &Path) -> Result<Option<Arc<Config>>, ToolError> {
        let folder = self.folder(d);
        if folder.config {
            let file = d.join(FILE_NAME);
            if let Some(c) = self.by_file.get(&file) {
                return Ok(Some(c.clone()));
            }
            let c = Arc::new(Config::load(&file, &self.builtin)?);
            self.by_file.insert(file, c.clone());
            return Ok(Some(c));
        }
        if folder.manifest != Manifest::Mentions {
            return Ok(None);
        }
        let manifest = d.join("Cargo.toml");
        if let Some(c) = self.by_file.get(&manifest) {
            return Ok(Some(c.clone()));
        }
        match Config::from_manifest(&manifest, &self.builtin)? {
            Some(c) => {
                let c = Arc::new(c);
                self.by_file.insert(manifest, c.clone());
                Ok(Some(c))
            }
            None => {
                self.folders.insert(
                    d.to_path_buf(),
                    Folder {
                        manifest: Manifest::Plain,
                        ..folder
                    },
                );
                Ok(None)
            }
        }
    }

    /// Every distinct configuration handed out, for `--verbose` and for the prefilter.
    pub fn loaded(&self) -> Vec<Arc<Config>> {
        let mut v: Vec<Arc<Config>> = self.by_file.values().cloned().collect();
        v.extend(self.forced.clone());
        v.extend(self.defaults.clone());
        v
    }
}
