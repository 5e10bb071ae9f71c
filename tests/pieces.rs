//! Large files are parsed piece by piece (whole top-level items, their lines counted from the
//! file's start), so that memory follows the largest piece, not the file. Cutting every file
//! after every item must give exactly the findings, sites, lines and columns of whole files.
//! Cut files are never blanked (`src/blank.rs`), so this also holds the blanked analysis of whole
//! files to the answer of the whole text.

use std::process::Command;

fn check(piece_bytes: Option<&str>, path: &str) -> String {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_lockaudit"));
    cmd.args(["check", "--no-cache", "--format", "json", path]);
    if let Some(b) = piece_bytes {
        cmd.env("LOCKAUDIT_PIECE_BYTES", b);
    }
    let out = cmd.output().expect("runs");
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

#[test]
fn files_cut_after_every_item_give_the_answer_of_whole_files() {
    let whole = check(None, "fixtures");
    let cut = check(Some("1"), "fixtures");
    assert!(whole.contains("\"findings\""));
    assert_eq!(cut, whole);
}

#[test]
fn a_file_larger_than_a_piece_is_analysed_like_a_small_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut text = String::from(
        "//! A generated file.\nuse rslock::LockManager;\nuse std::time::Duration;\n\n",
    );
    for i in 0..4000 {
        text.push_str(&format!(
            "/// Job {i}.\n#[allow(dead_code)]\npub async fn job{i}(mgr: &LockManager) -> Result<(), rslock::LockError> {{\n    let l = mgr.lock(b\"job{i}\", Duration::from_secs({})).await?;\n    mgr.unlock(&l).await;\n    Ok(())\n}}\nconst T{i}: u64 = {i};\n",
            30 + i % 60
        ));
    }
    let path = dir.path().join("big.rs");
    std::fs::write(&path, &text).expect("write");
    assert!(text.len() > 256 << 10, "larger than a piece");
    let path = path.to_string_lossy().into_owned();
    let pieces = check(None, &path);
    let whole = check(Some("100000000"), &path);
    assert_eq!(pieces, whole);
    // TTLs of 61 to 89 s: 29 of every 60 jobs, 9 of the last 40.
    assert_eq!(
        pieces.matches("\"rule\": \"long-deadline\"").count(),
        66 * 29 + 9
    );
}
