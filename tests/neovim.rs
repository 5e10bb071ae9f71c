//! `lockaudit server` in a real editor: headless Neovim with its built-in LSP client opens a
//! copy of a fixture, waits for diagnostics, hovers, applies the "classify" code action and
//! writes the buffer (tests/neovim/test-init.lua). This side checks what Neovim saw and the file
//! on disk. Neovim comes from Debian's packages (scripts/services installs it); without it the
//! test says it was skipped.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const LIB: &str = r#"use std::time::Duration;

use rslock::LockManager;

pub async fn charge(mgr: &LockManager) -> Result<(), rslock::LockError> {
    let lock = mgr.lock("invoice-1", Duration::from_secs(30)).await?;
    do_work().await;
    mgr.unlock(&lock).await;
    Ok(())
}

async fn do_work() {}
"#;

#[test]
fn neovim_shows_diagnostics_and_applies_a_classification() {
    if Command::new("nvim")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_err()
    {
        // Written to the stream itself, not through the test harness's capture, so that the
        // skip shows in the run's output.
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED neovim_shows_diagnostics_and_applies_a_classification: `nvim` is not installed (scripts/services installs it)"
        );
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().canonicalize().expect("canonical");
    std::fs::create_dir_all(root.join("src")).expect("mkdir");
    std::fs::write(
        root.join("Cargo.toml"),
        "[package]\nname = \"billing\"\nversion = \"0.1.0\"\n",
    )
    .expect("write");
    let lib = root.join("src/lib.rs");
    std::fs::write(&lib, LIB).expect("write");
    let out = root.join("seen.json");
    let init = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/neovim/test-init.lua");
    let state = tempfile::tempdir().expect("tempdir");
    let mut child = Command::new("nvim")
        .args(["--headless", "-n", "-i", "NONE", "-u"])
        .arg(&init)
        .current_dir(&root)
        // Neovim's own state and logs stay out of the user's folders.
        .env("XDG_CONFIG_HOME", state.path())
        .env("XDG_DATA_HOME", state.path())
        .env("XDG_STATE_HOME", state.path())
        .env("XDG_CACHE_HOME", state.path())
        .env("LOCKAUDIT_BIN", env!("CARGO_BIN_EXE_lockaudit"))
        .env("LOCKAUDIT_ROOT", &root)
        .env("LOCKAUDIT_FILE", &lib)
        .env("LOCKAUDIT_OUT", &out)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start nvim");
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("nvim did not finish in time");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let seen: Value = serde_json::from_str(
        &std::fs::read_to_string(&out)
            .unwrap_or_else(|e| panic!("nvim wrote no results ({status}): {e}")),
    )
    .expect("json");
    assert_eq!(seen["ok"], true, "{seen:#}");
    eprintln!("neovim {} saw: {seen}", seen["version"]);

    let initial = seen["initial"].as_array().expect("initial diagnostics");
    let unclassified = initial
        .iter()
        .find(|d| d["code"] == "unclassified-lock")
        .unwrap_or_else(|| panic!("{seen:#}"));
    assert_eq!(unclassified["source"], "lockaudit");
    assert_eq!(unclassified["lnum"], 5, "{seen:#}");
    let hover = seen["hover"].as_str().unwrap_or_else(|| panic!("{seen:#}"));
    assert!(
        hover.contains("`rslock`") && hover.contains("key: `invoice-1`"),
        "{hover}"
    );
    assert!(
        seen["chosen"]
            .as_str()
            .is_some_and(|t| t.starts_with("Classify this lock as efficiency")),
        "{seen:#}"
    );
    let after = seen["after"].as_array().expect("diagnostics after");
    assert!(
        !after.iter().any(|d| d["code"] == "unclassified-lock"),
        "{seen:#}"
    );

    // Neovim wrote the classification where `lockaudit annotate` would.
    let written = std::fs::read_to_string(&lib).expect("read");
    assert_eq!(
        written,
        LIB.replace(
            "    let lock =",
            "    // lockaudit: efficiency\n    let lock ="
        )
    );
    // And `check` agrees there is nothing unclassified left.
    let check = Command::new(env!("CARGO_BIN_EXE_lockaudit"))
        .args(["check", "--no-cache", "--format", "concise", "."])
        .current_dir(&root)
        .output()
        .expect("check");
    let text = String::from_utf8_lossy(&check.stdout);
    assert!(!text.contains("unclassified-lock"), "{text}");
}
