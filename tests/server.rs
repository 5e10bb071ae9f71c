//! `lockaudit server` at the protocol level: the real binary, spoken to over standard input and
//! output as an editor speaks to it.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

#[path = "lsp_client/mod.rs"]
mod lsp_client;
use lsp_client::{Client, codes, uri};

pub const LIB: &str = r#"use std::time::Duration;

use rslock::LockManager;

pub async fn charge(mgr: &LockManager) -> Result<(), rslock::LockError> {
    let lock = mgr.lock("invoice-1", Duration::from_secs(30)).await?;
    do_work().await;
    mgr.unlock(&lock).await;
    Ok(())
}

async fn do_work() {}
"#;

/// A crate with one unclassified lock site, in a temporary folder (symbolic links resolved, as
/// the server names files).
fn workspace() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().canonicalize().expect("canonical");
    std::fs::create_dir_all(root.join("src")).expect("mkdir");
    std::fs::write(
        root.join("Cargo.toml"),
        "[package]\nname = \"billing\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .expect("write");
    std::fs::write(root.join("src/lib.rs"), LIB).expect("write");
    (dir, root)
}

fn exe() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_lockaudit"))
}

fn open(c: &mut Client, path: &Path, text: &str) -> String {
    let u = uri(path);
    c.notify(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": u, "languageId": "rust", "version": 1, "text": text}}),
    );
    u
}

fn change(c: &mut Client, u: &str, version: i64, text: &str) {
    c.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": u, "version": version}, "contentChanges": [{"text": text}]}),
    );
}

fn edits_of(action: &Value, u: &str) -> Vec<Value> {
    action["edit"]["changes"][u]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Applies LSP text edits that insert at the start of lines (what the server's actions do).
fn apply_insertions(text: &str, edits: &[Value]) -> String {
    let mut lines: Vec<String> = text.split_inclusive('\n').map(str::to_string).collect();
    let mut edits = edits.to_vec();
    edits.sort_by_key(|e| std::cmp::Reverse(e["range"]["start"]["line"].as_u64()));
    for e in edits {
        assert_eq!(e["range"]["start"], e["range"]["end"], "an insertion: {e}");
        assert_eq!(e["range"]["start"]["character"], 0, "{e}");
        let line = e["range"]["start"]["line"].as_u64().expect("line") as usize;
        lines.insert(line, e["newText"].as_str().expect("text").to_string());
    }
    lines.concat()
}

#[test]
fn diagnostics_hover_actions_and_edits_over_the_protocol() {
    let (_dir, root) = workspace();
    let lib = root.join("src/lib.rs");
    let mut c = Client::start(exe(), &root, &root);
    let u = open(&mut c, &lib, LIB);

    // Published for the workspace, then for the opened document (with its version).
    let diags = c.diagnostics(&u, Some(1));
    assert_eq!(codes(&diags), ["unclassified-lock"], "{diags:?}");
    let d = &diags[0];
    assert_eq!(d["source"], "lockaudit");
    assert_eq!(d["range"]["start"]["line"], 5, "{d}");
    assert!(
        d["codeDescription"]["href"]
            .as_str()
            .is_some_and(|h| h.starts_with("file://") && h.ends_with("/unclassified-lock.md")),
        "{d}"
    );
    let doc = d["codeDescription"]["href"].as_str().expect("href");
    let doc_path = PathBuf::from(doc.trim_start_matches("file://"));
    let page = std::fs::read_to_string(&doc_path).expect("the linked page exists");
    assert!(page.contains("## What it does"), "{page}");

    // Hover on the acquisition's line.
    let hover = c.request(
        "textDocument/hover",
        json!({"textDocument": {"uri": u}, "position": {"line": 5, "character": 20}}),
    );
    let md = hover["contents"]["value"].as_str().expect("markdown");
    for want in [
        "`rslock`",
        "LockManager::lock",
        "key: `invoice-1`",
        "TTL: 30s",
        "purpose: unclassified",
        "fencing: none",
        "release: explicit",
        "backend: redis",
        "`unclassified-lock`",
    ] {
        assert!(md.contains(want), "hover lacks {want:?}:\n{md}");
    }
    // Nothing on a line without a site.
    let none = c.request(
        "textDocument/hover",
        json!({"textDocument": {"uri": u}, "position": {"line": 11, "character": 3}}),
    );
    assert!(none.is_null(), "{none}");

    // Code actions at the finding.
    let actions = c.request(
        "textDocument/codeAction",
        json!({
            "textDocument": {"uri": u},
            "range": {"start": {"line": 5, "character": 0}, "end": {"line": 5, "character": 0}},
            "context": {"diagnostics": diags},
        }),
    );
    let actions = actions.as_array().expect("actions").clone();
    let titled = |prefix: &str| {
        actions
            .iter()
            .find(|a| a["title"].as_str().is_some_and(|t| t.starts_with(prefix)))
            .unwrap_or_else(|| panic!("no action {prefix:?} in {actions:?}"))
            .clone()
    };
    let classify = titled("Classify this lock as correctness");
    let edits = edits_of(&classify, &u);
    let classified = apply_insertions(LIB, &edits);
    assert!(
        classified.contains("    // lockaudit: correctness\n    let lock = mgr.lock("),
        "{classified}"
    );
    let suppress = titled("Suppress `unclassified-lock`");
    let suppressed = apply_insertions(LIB, &edits_of(&suppress, &u));
    assert!(
        suppressed.contains(
            "    // lockaudit: allow(unclassified-lock) reason = \"\"\n    let lock = mgr.lock("
        ),
        "{suppressed}"
    );
    let docs = titled("Open the documentation of `unclassified-lock`");
    assert_eq!(docs["command"]["command"], "lockaudit.openRuleDoc");
    assert_eq!(docs["command"]["arguments"][0], doc);
    // The command asks the editor to show the page.
    let r = c.request(
        "workspace/executeCommand",
        json!({"command": "lockaudit.openRuleDoc", "arguments": [doc]}),
    );
    assert!(r.is_null(), "{r}");
    let show = c.wait("window/showDocument", |m| {
        m["method"] == "window/showDocument"
    });
    assert_eq!(show["params"]["uri"], doc);
    // Answer it as an editor would.
    c.respond(&show["id"], json!({"success": true}));

    // The classification, typed but not saved: analysed as the editor holds it. A correctness
    // lock from a library without fencing tokens now draws the correctness rules instead.
    change(&mut c, &u, 2, &classified);
    let diags = c.diagnostics(&u, Some(2));
    let got = codes(&diags);
    assert!(!got.contains(&"unclassified-lock".to_string()), "{got:?}");
    assert!(
        got.contains(&"unfenced-correctness-lock".to_string()),
        "{got:?}"
    );
    // The file on disk is untouched by the analysis of the buffer.
    assert_eq!(std::fs::read_to_string(&lib).expect("read"), LIB);
    let hover = c.request(
        "textDocument/hover",
        json!({"textDocument": {"uri": u}, "position": {"line": 6, "character": 20}}),
    );
    let md = hover["contents"]["value"].as_str().expect("markdown");
    assert!(
        md.contains("purpose: correctness (from a `// lockaudit:` annotation"),
        "{md}"
    );

    // A syntax error in the buffer is a diagnostic on its line, not a crash.
    change(&mut c, &u, 3, &classified.replace("Ok(())\n}", "Ok(()\n}"));
    let diags = c.diagnostics(&u, Some(3));
    assert!(
        diags.iter().any(|d| d["message"]
            .as_str()
            .is_some_and(|m| m.contains("cannot parse"))),
        "{diags:?}"
    );

    // Closing the document goes back to the file on disk.
    change(
        &mut c,
        &u,
        4,
        &suppressed.replace("reason = \"\"", "reason = \"one worker\""),
    );
    let diags = c.diagnostics(&u, Some(4));
    assert!(codes(&diags).is_empty(), "{diags:?}");
    c.notify("textDocument/didClose", json!({"textDocument": {"uri": u}}));
    let diags = c.diagnostics(&u, None);
    assert_eq!(codes(&diags), ["unclassified-lock"], "{diags:?}");

    assert!(c.shutdown().success());
}

#[test]
fn only_the_edited_crate_is_analysed_again() {
    // Two independent crates: an edit in one leaves the other's diagnostics alone.
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().canonicalize().expect("canonical");
    for name in ["a", "b"] {
        let c = root.join(name);
        std::fs::create_dir_all(c.join("src")).expect("mkdir");
        std::fs::write(
            c.join("Cargo.toml"),
            format!("[package]\nname = \"{name}\"\nversion = \"0.1.0\"\n"),
        )
        .expect("write");
        std::fs::write(c.join("src/lib.rs"), LIB).expect("write");
    }
    let mut c = Client::start(exe(), &root, &root);
    let (ua, ub) = (
        uri(&root.join("a/src/lib.rs")),
        uri(&root.join("b/src/lib.rs")),
    );
    // The whole workspace is published after initialize, opened or not.
    assert_eq!(codes(&c.diagnostics(&ub, None)), ["unclassified-lock"]);
    assert_eq!(codes(&c.diagnostics(&ua, None)), ["unclassified-lock"]);
    open(&mut c, &root.join("a/src/lib.rs"), LIB);
    c.diagnostics(&ua, Some(1));
    let fixed = LIB.replace("    let lock", "    // lockaudit: efficiency\n    let lock");
    change(&mut c, &ua, 2, &fixed);
    assert!(codes(&c.diagnostics(&ua, Some(2))).is_empty());
    // Saved: still analysed only for crate a; b is not published again.
    std::fs::write(root.join("a/src/lib.rs"), &fixed).expect("write");
    c.notify("textDocument/didSave", json!({"textDocument": {"uri": ua}}));
    let log = c.wait("a log line of the analysis", |m| {
        m["method"] == "window/logMessage"
            && m["params"]["message"]
                .as_str()
                .is_some_and(|s| s.contains("edited file"))
    });
    // Crate a alone, of the two.
    assert!(
        log["params"]["message"]
            .as_str()
            .is_some_and(|s| s.contains("analysed 1 crate folder(s) for 1 edited file")),
        "{log}"
    );
    let r = c.request(
        "textDocument/hover",
        json!({"textDocument": {"uri": ub}, "position": {"line": 5, "character": 20}}),
    );
    assert!(
        r["contents"]["value"]
            .as_str()
            .is_some_and(|v| v.contains("unclassified"))
    );
    assert!(
        !c.seen
            .iter()
            .any(|m| m["method"] == "textDocument/publishDiagnostics" && m["params"]["uri"] == ub),
        "{:?}",
        c.seen
    );
    assert!(c.shutdown().success());
}

#[test]
fn the_server_reports_what_check_reports() {
    // A fixture with many rules at work, as a crate: the diagnostics are check's findings.
    let (_dir, root) = workspace();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/libs/rslock.rs");
    let text = std::fs::read_to_string(&fixture).expect("fixture");
    let lib = root.join("src/lib.rs");
    std::fs::write(&lib, &text).expect("write");
    let check = std::process::Command::new(exe())
        .args([
            "check",
            "--no-cache",
            "--format",
            "json",
            "--fail-on",
            "never",
            ".",
        ])
        .current_dir(&root)
        .output()
        .expect("check");
    let report: Value = serde_json::from_slice(&check.stdout).expect("json");
    let mut want: Vec<(u64, u64, String)> = report["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["suppressed"] == false && f["path"] == "src/lib.rs")
        .map(|f| {
            (
                f["line"].as_u64().expect("line") - 1,
                f["column"].as_u64().expect("column") - 1,
                f["rule"].as_str().expect("rule").to_string(),
            )
        })
        .collect();
    want.sort();
    assert!(want.len() > 5, "{want:?}");

    let mut c = Client::start(exe(), &root, &root);
    let u = open(&mut c, &lib, &text);
    let diags = c.diagnostics(&u, Some(1));
    let mut got: Vec<(u64, u64, String)> = diags
        .iter()
        .map(|d| {
            (
                d["range"]["start"]["line"].as_u64().expect("line"),
                d["range"]["start"]["character"]
                    .as_u64()
                    .expect("character"),
                d["code"].as_str().expect("code").to_string(),
            )
        })
        .collect();
    got.sort();
    assert_eq!(got, want);
    // Levels are severities: warnings are 2, errors 1.
    for d in &diags {
        let sev = d["severity"].as_u64().expect("severity");
        assert!((1..=3).contains(&sev), "{d}");
    }
    assert!(c.shutdown().success());
}

#[test]
fn a_broken_configuration_is_shown_on_its_file() {
    let (_dir, root) = workspace();
    let config = root.join("lockaudit.toml");
    std::fs::write(&config, "[rules]\nno-such-rule = \"warning\"\n").expect("write");
    let mut c = Client::start(exe(), &root, &root);
    let diags = c.diagnostics(&uri(&config), None);
    assert_eq!(diags.len(), 1, "{diags:?}");
    assert_eq!(diags[0]["severity"], 1, "{diags:?}");
    assert_eq!(diags[0]["range"]["start"]["line"], 1, "{diags:?}");
    // Fixed in the editor (unsaved): the error goes, the findings come.
    let u = open(&mut c, &config, "[rules]\n");
    assert!(c.diagnostics(&u, Some(1)).is_empty());
    let lib = uri(&root.join("src/lib.rs"));
    assert_eq!(codes(&c.diagnostics(&lib, None)), ["unclassified-lock"]);
    assert!(c.shutdown().success());
}

#[test]
fn changes_on_disk_are_watched_when_the_editor_offers() {
    let (_dir, root) = workspace();
    let mut c = Client::start_with(
        exe(),
        &root,
        &root,
        json!({"workspace": {"didChangeWatchedFiles": {"dynamicRegistration": true}}}),
    );
    let reg = c.wait("client/registerCapability", |m| {
        m["method"] == "client/registerCapability"
    });
    let r = &reg["params"]["registrations"][0];
    assert_eq!(r["method"], "workspace/didChangeWatchedFiles");
    let globs: Vec<&str> = r["registerOptions"]["watchers"]
        .as_array()
        .expect("watchers")
        .iter()
        .filter_map(|w| w["globPattern"].as_str())
        .collect();
    assert!(globs.contains(&"**/*.rs"), "{globs:?}");
    c.respond(&reg["id"], Value::Null);
    let lib = root.join("src/lib.rs");
    let u = uri(&lib);
    assert_eq!(codes(&c.diagnostics(&u, None)), ["unclassified-lock"]);
    // Classified by another program (not open in the editor): the editor reports the change.
    std::fs::write(
        &lib,
        LIB.replace("    let lock", "    // lockaudit: efficiency\n    let lock"),
    )
    .expect("write");
    c.notify(
        "workspace/didChangeWatchedFiles",
        json!({"changes": [{"uri": u, "type": 2}]}),
    );
    assert!(codes(&c.diagnostics(&u, None)).is_empty());
    assert!(c.shutdown().success());
}

#[test]
fn the_file_system_root_is_not_analysed() {
    // An editor started from `/` with no folder open: answered at once, nothing walked.
    let mut c = Client::start(exe(), Path::new("/"), Path::new("/"));
    let log = c.wait("the log line", |m| m["method"] == "window/logMessage");
    assert!(
        log["params"]["message"]
            .as_str()
            .is_some_and(|s| s.contains("open a folder")),
        "{log}"
    );
    let r = c.request(
        "textDocument/hover",
        json!({"textDocument": {"uri": "file:///nowhere.rs"}, "position": {"line": 0, "character": 0}}),
    );
    assert!(r.is_null());
    assert!(
        !c.seen
            .iter()
            .any(|m| m["method"] == "textDocument/publishDiagnostics"),
        "{:?}",
        c.seen
    );
    assert!(c.shutdown().success());
    // Nothing was written there either.
    assert!(!Path::new("/.lockaudit_cache").exists());
}

#[test]
fn changes_in_quick_succession_are_analysed_once() {
    let (_dir, root) = workspace();
    let lib = root.join("src/lib.rs");
    let mut c = Client::start(exe(), &root, &root);
    let u = open(&mut c, &lib, LIB);
    c.diagnostics(&u, Some(1));
    // Ten keystrokes, well within the debounce of each other; the last one classifies the lock.
    let texts: Vec<String> = (2..=11)
        .map(|v| {
            if v == 11 {
                LIB.replace("    let lock", "    // lockaudit: efficiency\n    let lock")
            } else {
                format!("{LIB}// typing {v}\n")
            }
        })
        .collect();
    let batch: Vec<(&str, Value)> = texts
        .iter()
        .enumerate()
        .map(|(k, t)| {
            (
                "textDocument/didChange",
                json!({"textDocument": {"uri": u, "version": k + 2}, "contentChanges": [{"text": t}]}),
            )
        })
        .collect();
    c.notify_all(&batch);
    let last = c.diagnostics(&u, Some(11));
    assert!(codes(&last).is_empty(), "{last:?}");
    // Analysed as one edit (a server analysing each change would publish ten times).
    let publishes = c
        .seen
        .iter()
        .filter(|m| m["method"] == "textDocument/publishDiagnostics" && m["params"]["uri"] == u)
        .count();
    assert!(publishes < 3, "{:?}", c.seen);
    assert!(c.shutdown().success());
}

#[test]
fn a_file_outside_the_workspace_is_not_analysed() {
    let (_dir, root) = workspace();
    let (_other, elsewhere) = workspace();
    let mut c = Client::start(exe(), &root, &root);
    let lib = uri(&root.join("src/lib.rs"));
    assert_eq!(codes(&c.diagnostics(&lib, None)), ["unclassified-lock"]);
    let outside = elsewhere.join("src/lib.rs");
    let u = open(&mut c, &outside, LIB);
    // Opened: published (empty, it is not analysed), and no analysis ran for it.
    assert!(c.diagnostics(&u, Some(1)).is_empty());
    change(&mut c, &u, 2, &format!("{LIB}// more\n"));
    assert!(c.diagnostics(&u, Some(2)).is_empty());
    let r = c.request(
        "textDocument/hover",
        json!({"textDocument": {"uri": u}, "position": {"line": 5, "character": 20}}),
    );
    assert!(r.is_null(), "{r}");
    let log = c.wait("the log of the edit", |m| {
        m["method"] == "window/logMessage"
            && m["params"]["message"]
                .as_str()
                .is_some_and(|s| s.contains("edited file"))
    });
    assert!(
        log["params"]["message"]
            .as_str()
            .is_some_and(|s| s.contains("analysed nothing in the workspace for 1 edited file")),
        "{log}"
    );
    // The start's analysis of the whole workspace is the only one.
    let whole = c
        .seen
        .iter()
        .filter(|m| {
            m["method"] == "window/logMessage"
                && m["params"]["message"]
                    .as_str()
                    .is_some_and(|s| s.contains("analysed the workspace"))
        })
        .count();
    assert_eq!(whole, 1, "{:?}", c.seen);
    assert!(c.shutdown().success());
}
