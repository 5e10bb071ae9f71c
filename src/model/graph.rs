//! The crate graph: which analysed crate may name which, read from `Cargo.toml` files without
//! running cargo.
//!
//! Invariants: nodes are the crate roots the run analyses (folders holding a `Cargo.toml`);
//! an edge `a -> (name, b)` means code in `a` reaches `b`'s items as `name::…` (the dependency's
//! key in `a`'s manifest, or its `[lib] name` for `a` itself, `-` turned into `_`). Only edges
//! between analysed crates exist: a registry dependency is a library the packs describe, not
//! part of the program. Edges come from `path` dependencies (normal, dev, build and
//! target-specific), `workspace = true` dependencies through `[workspace.dependencies]`, and
//! a version-only dependency whose name is another member of the same workspace (monorepos
//! patch those to the member). Manifests that cannot be read or parsed give a crate with no
//! edges; the run reports nothing about them here (discovery and configuration do).

use std::collections::{BTreeMap, HashMap};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

/// A manifest larger than this is not a hand-written Cargo.toml; it is left unread.
const MANIFEST_LIMIT: u64 = 4 << 20;

#[derive(Debug, Default)]
pub struct CrateGraph {
    /// Per crate root: its own library name (how its tests, benches and examples name it).
    names: HashMap<Arc<Path>, String>,
    /// Per crate root: the analysed crates it depends on, by the name its code uses.
    deps: HashMap<Arc<Path>, Vec<(String, Arc<Path>)>>,
    /// Per crate root: the analysed crates that depend on it.
    dependents: HashMap<Arc<Path>, Vec<Arc<Path>>>,
    /// Per crate root: the features its manifest enables on each dependency, by package name
    /// (its own entries and, for `workspace = true`, the workspace's), sorted. A dependency
    /// listed without features has an empty list: what it gets from defaults or from feature
    /// unification elsewhere is not known here.
    features: HashMap<Arc<Path>, Arc<BTreeMap<String, Vec<String>>>>,
}

/// What one manifest says, before dependencies are matched to crate roots.
#[derive(Debug, Default)]
struct Manifest {
    package: Option<String>,
    lib: Option<String>,
    /// (name in code, how to find it)
    deps: Vec<(String, DepSource)>,
    /// (package, features written at the entry, `workspace = true`)
    features: Vec<(String, Vec<String>, bool)>,
}

#[derive(Debug, Clone)]
enum DepSource {
    Path(PathBuf),
    /// `workspace = true`: the workspace's `[workspace.dependencies]` entry of this package.
    Workspace(String),
    /// A version only: a member of the same workspace by this package name, if there is one.
    Package(String),
}

impl CrateGraph {
    /// Builds the graph over `roots` (absolute crate roots), reading each `Cargo.toml` once.
    pub fn build(roots: &[Arc<Path>]) -> CrateGraph {
        let mut graph = CrateGraph::default();
        let by_dir: HashMap<PathBuf, Arc<Path>> =
            roots.iter().map(|r| (normalize(r), r.clone())).collect();
        let manifests: Vec<(Arc<Path>, Manifest)> = roots
            .iter()
            .filter_map(|r| {
                let table = read_table(&r.join("Cargo.toml"))?;
                Some((r.clone(), Manifest::from_table(&table)))
            })
            .collect();
        let mut workspaces: HashMap<PathBuf, Option<Workspace>> = HashMap::new();
        for (root, m) in &manifests {
            if let Some(lib) = m.lib_name() {
                graph.names.insert(root.clone(), lib);
            }
        }
        for (root, m) in &manifests {
            let ws = workspace_of(root, &mut workspaces);
            let mut features: BTreeMap<String, Vec<String>> = BTreeMap::new();
            for (package, own, inherited) in &m.features {
                // `dep = { workspace = true }` is the workspace's entry under that key, which may
                // itself rename a package.
                let shared = ws
                    .filter(|_| *inherited)
                    .and_then(|w| w.features.get(package));
                let name = shared.map_or(package, |(p, _)| p);
                let list = features.entry(name.clone()).or_default();
                list.extend(own.iter().cloned());
                list.extend(shared.into_iter().flat_map(|(_, f)| f.iter().cloned()));
            }
            for list in features.values_mut() {
                list.sort();
                list.dedup();
            }
            graph.features.insert(root.clone(), Arc::new(features));
            let mut edges = Vec::new();
            for (name, source) in &m.deps {
                let target = match source {
                    DepSource::Path(p) => by_dir.get(&normalize(&root.join(p))).cloned(),
                    DepSource::Workspace(package) => ws
                        .and_then(|w| w.deps.get(package))
                        .and_then(|p| by_dir.get(p).cloned())
                        .or_else(|| ws.and_then(|w| member_named(&manifests, w, package))),
                    DepSource::Package(package) => {
                        ws.and_then(|w| member_named(&manifests, w, package))
                    }
                };
                if let Some(t) = target
                    && t != *root
                    && !edges.iter().any(|(n, _): &(String, Arc<Path>)| n == name)
                {
                    edges.push((name.clone(), t));
                }
            }
            edges.sort();
            for (_, t) in &edges {
                let d = graph.dependents.entry(t.clone()).or_default();
                if !d.contains(root) {
                    d.push(root.clone());
                }
            }
            graph.deps.insert(root.clone(), edges);
        }
        for d in graph.dependents.values_mut() {
            d.sort();
        }
        graph
    }

    /// The name a crate's own tests and examples use for it.
    pub fn own_name(&self, root: &Path) -> Option<&str> {
        self.names.get(root).map(String::as_str)
    }

    /// The features the crate's manifest enables on each dependency, by package name.
    pub fn features(&self, root: &Path) -> Arc<BTreeMap<String, Vec<String>>> {
        self.features.get(root).cloned().unwrap_or_default()
    }

    pub fn deps(&self, root: &Path) -> &[(String, Arc<Path>)] {
        self.deps.get(root).map(Vec::as_slice).unwrap_or_default()
    }

    pub fn dependents(&self, root: &Path) -> &[Arc<Path>] {
        self.dependents
            .get(root)
            .map(Vec::as_slice)
            .unwrap_or_default()
    }

    /// Groups crate roots into connected parts: crates that can see each other's items are
    /// analysed, and cached, together. Each part is sorted; parts are ordered by their first root.
    pub fn components(&self, roots: &[Arc<Path>]) -> Vec<Vec<Arc<Path>>> {
        let index: HashMap<&Path, usize> =
            roots.iter().enumerate().map(|(i, r)| (&**r, i)).collect();
        let mut parent: Vec<usize> = (0..roots.len()).collect();
        fn find(parent: &mut [usize], mut i: usize) -> usize {
            while parent[i] != i {
                parent[i] = parent[parent[i]];
                i = parent[i];
            }
            i
        }
        for (i, r) in roots.iter().enumerate() {
            for (_, d) in self.deps(r) {
                if let Some(&j) = index.get(&**d) {
                    let (a, b) = (find(&mut parent, i), find(&mut parent, j));
                    parent[a.max(b)] = a.min(b);
                }
            }
        }
        let mut parts: BTreeMap<usize, Vec<Arc<Path>>> = BTreeMap::new();
        for (i, r) in roots.iter().enumerate() {
            let p = find(&mut parent, i);
            parts.entry(p).or_default().push(r.clone());
        }
        let mut out: Vec<Vec<Arc<Path>>> = parts.into_values().collect();
        for p in &mut out {
            p.sort();
        }
        out.sort();
        out
    }
}

impl Manifest {
    fn from_table(t: &toml::Table) -> Manifest {
        let package = t
            .get("package")
            .and_then(|p| p.get("name"))
            .and_then(|n| n.as_str())
            .map(str::to_string);
        let lib = t
            .get("lib")
            .and_then(|l| l.get("name"))
            .and_then(|n| n.as_str())
            .map(str::to_string);
        let mut deps = Vec::new();
        let mut features = Vec::new();
        let mut tables: Vec<&toml::Table> =
            ["dependencies", "dev-dependencies", "build-dependencies"]
                .iter()
                .filter_map(|k| t.get(*k).and_then(|v| v.as_table()))
                .collect();
        if let Some(targets) = t.get("target").and_then(|v| v.as_table()) {
            for cfg in targets.values().filter_map(|v| v.as_table()) {
                tables.extend(
                    ["dependencies", "dev-dependencies", "build-dependencies"]
                        .iter()
                        .filter_map(|k| cfg.get(*k).and_then(|v| v.as_table())),
                );
            }
        }
        for table in tables {
            for (key, spec) in table {
                let name = key.replace('-', "_");
                let package = spec
                    .get("package")
                    .and_then(|p| p.as_str())
                    .unwrap_or(key)
                    .to_string();
                let inherited = spec
                    .get("workspace")
                    .and_then(|w| w.as_bool())
                    .unwrap_or(false);
                features.push((package.clone(), feature_list(spec), inherited));
                let source = if let Some(p) = spec.get("path").and_then(|p| p.as_str()) {
                    DepSource::Path(PathBuf::from(p))
                } else if inherited {
                    DepSource::Workspace(key.clone())
                } else {
                    DepSource::Package(package)
                };
                deps.push((name, source));
            }
        }
        Manifest {
            package,
            lib,
            deps,
            features,
        }
    }

    fn lib_name(&self) -> Option<String> {
        self.lib
            .clone()
            .or_else(|| self.package.clone())
            .map(|n| n.replace('-', "_"))
    }
}

/// `features = [..]` of a dependency entry (none for `dep = "1"`).
fn feature_list(spec: &toml::Value) -> Vec<String> {
    spec.get("features")
        .and_then(|f| f.as_array())
        .into_iter()
        .flatten()
        .filter_map(|f| f.as_str().map(str::to_string))
        .collect()
}

/// A workspace root's `[workspace.dependencies]`: paths by key (resolved, normalized) and the
/// features each entry enables, by package name.
#[derive(Debug)]
struct Workspace {
    root: PathBuf,
    deps: HashMap<String, PathBuf>,
    /// By key: (package, features).
    features: HashMap<String, (String, Vec<String>)>,
}

/// The nearest manifest at or above `root` with a `[workspace]` table.
fn workspace_of<'w>(
    root: &Path,
    memo: &'w mut HashMap<PathBuf, Option<Workspace>>,
) -> Option<&'w Workspace> {
    let mut found = None;
    for d in root.ancestors() {
        if let Some(w) = memo.get(d) {
            if w.is_some() {
                found = Some(d.to_path_buf());
                break;
            }
            continue;
        }
        let ws = read_table(&d.join("Cargo.toml")).and_then(|t| {
            let w = t.get("workspace")?.as_table()?;
            let table = w.get("dependencies").and_then(|v| v.as_table());
            let entries = || table.into_iter().flatten();
            let deps = entries()
                .filter_map(|(k, spec)| {
                    let p = spec.get("path")?.as_str()?;
                    Some((k.clone(), normalize(&d.join(p))))
                })
                .collect();
            let features = entries()
                .map(|(k, spec)| {
                    let package = spec.get("package").and_then(|p| p.as_str()).unwrap_or(k);
                    (k.clone(), (package.to_string(), feature_list(spec)))
                })
                .collect();
            Some(Workspace {
                root: d.to_path_buf(),
                deps,
                features,
            })
        });
        let is_ws = ws.is_some();
        memo.insert(d.to_path_buf(), ws);
        if is_ws {
            found = Some(d.to_path_buf());
            break;
        }
    }
    found.and_then(|d| memo.get(&d)?.as_ref())
}

/// The analysed crate under the workspace's root whose package is `package`.
fn member_named(
    manifests: &[(Arc<Path>, Manifest)],
    ws: &Workspace,
    package: &str,
) -> Option<Arc<Path>> {
    manifests
        .iter()
        .find(|(r, m)| m.package.as_deref() == Some(package) && r.starts_with(&ws.root))
        .map(|(r, _)| r.clone())
}

fn read_table(path: &Path) -> Option<toml::Table> {
    use std::io::Read;
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() || meta.len() > MANIFEST_LIMIT {
        return None;
    }
    let mut text = String::new();
    std::fs::File::open(path)
        .ok()?
        .take(MANIFEST_LIMIT)
        .read_to_string(&mut text)
        .ok()?;
    toml::from_str(&text).ok()
}

/// `a/b/../c` is `a/c`: paths in manifests are joined lexically, as cargo does.
fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, rel: &str, text: &str) {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    #[test]
    fn edges_from_paths_renames_workspace_deps_and_member_names() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        write(
            d,
            "Cargo.toml",
            "[workspace]\nmembers = [\"crates/*\"]\n[workspace.dependencies]\ninfra = { path = \"crates/infra\" }\n",
        );
        write(
            d,
            "crates/infra/Cargo.toml",
            "[package]\nname = \"infra-core\"\n[lib]\nname = \"infra\"\n",
        );
        write(
            d,
            "crates/api/Cargo.toml",
            "[package]\nname = \"api\"\n[dependencies]\ninfra = { workspace = true }\nlocks = { path = \"../infra\", package = \"infra-core\" }\nredis = \"0.27\"\n",
        );
        write(
            d,
            "crates/jobs/Cargo.toml",
            "[package]\nname = \"jobs\"\n[dev-dependencies]\napi = \"0.1\"\n[target.'cfg(unix)'.dependencies]\ninfra-core = { path = \"../infra\" }\n",
        );
        let root = |r: &str| -> Arc<Path> { Arc::from(d.join(r).as_path()) };
        let roots = vec![
            root("crates/api"),
            root("crates/infra"),
            root("crates/jobs"),
        ];
        let g = CrateGraph::build(&roots);
        let names =
            |r: &str| -> Vec<String> { g.deps(&root(r)).iter().map(|(n, _)| n.clone()).collect() };
        assert_eq!(names("crates/api"), ["infra", "locks"]);
        assert_eq!(names("crates/jobs"), ["api", "infra_core"]);
        assert!(names("crates/infra").is_empty());
        assert_eq!(g.own_name(&root("crates/infra")), Some("infra"));
        assert_eq!(g.dependents(&root("crates/infra")).len(), 2);
        assert_eq!(g.components(&roots).len(), 1);
    }

    #[test]
    fn dependency_features_merge_own_and_workspace_entries() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        write(
            d,
            "Cargo.toml",
            "[workspace]\nmembers = [\"a\", \"b\"]\n[workspace.dependencies]\ndb = { package = \"sqlx\", version = \"0.8\", features = [\"postgres\"] }\n",
        );
        write(
            d,
            "a/Cargo.toml",
            "[package]\nname = \"a\"\n[dependencies]\ndb = { workspace = true, features = [\"migrate\"] }\n[dev-dependencies]\nsqlx = { version = \"0.8\", features = [\"sqlite\"] }\n",
        );
        write(
            d,
            "b/Cargo.toml",
            "[package]\nname = \"b\"\n[dependencies]\nsqlx = \"0.8\"\n",
        );
        let roots: Vec<Arc<Path>> = ["a", "b"]
            .iter()
            .map(|r| Arc::from(d.join(r).as_path()))
            .collect();
        let g = CrateGraph::build(&roots);
        // The renamed workspace entry is sqlx; a dev-dependency's features unify with it.
        assert_eq!(
            g.features(&roots[0]).get("sqlx").map(Vec::as_slice),
            Some(&["migrate", "postgres", "sqlite"].map(String::from)[..])
        );
        assert_eq!(
            g.features(&roots[1]).get("sqlx").map(Vec::len),
            Some(0),
            "listed without features"
        );
    }

    #[test]
    fn unrelated_crates_and_unreadable_manifests_stay_apart() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        write(
            d,
            "a/Cargo.toml",
            "[package]\nname = \"a\"\n[dependencies]\nb = \"1\"\n",
        );
        write(d, "b/Cargo.toml", "[package]\nname = \"b\"\n");
        write(d, "c/Cargo.toml", "not [valid toml");
        let roots: Vec<Arc<Path>> = ["a", "b", "c"]
            .iter()
            .map(|r| Arc::from(d.join(r).as_path()))
            .collect();
        let g = CrateGraph::build(&roots);
        // No workspace: a version-only dependency is the registry's crate, not the folder.
        assert!(g.deps(&roots[0]).is_empty());
        assert_eq!(g.components(&roots).len(), 3);
        assert_eq!(g.own_name(&roots[2]), None);
    }
}
