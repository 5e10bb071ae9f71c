//! `check --fix` and `check --diff` from the command line: what is written, what is printed,
//! and the exit status.

mod common;
use common::{json, lockaudit, stderr, stdout};

const RELEASE: &str = r#"//! lockaudit: efficiency
use redis::AsyncCommands;

pub async fn run(con: &mut redis::aio::MultiplexedConnection, token: &str) -> redis::RedisResult<()> {
    let got: Option<String> = redis::cmd("SET").arg("lock:job").arg(token).arg("NX").arg("PX").arg(30_000).query_async(con).await?;
    if got.is_none() {
        return Ok(());
    }
    work().await;
    let _: () = con.del("lock:job").await?;
    Ok(())
}

async fn work() {}
"#;

const SCRIPT_CALL: &str = r##"redis::Script::new(r#"if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"#).key("lock:job").arg(token).invoke_async(con)"##;

/// No fix: every holder writes "1".
const UNFIXABLE: &str = r#"//! lockaudit: efficiency
use redis::AsyncCommands;

pub async fn run(con: &mut redis::aio::MultiplexedConnection) -> redis::RedisResult<()> {
    let got: Option<String> = redis::cmd("SET").arg("lock:other").arg("1").arg("NX").arg("PX").arg(30_000).query_async(con).await?;
    if got.is_none() {
        return Ok(());
    }
    let _: () = con.del("lock:other").await?;
    Ok(())
}
"#;

#[test]
fn diff_prints_the_fix_and_writes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("lock.rs");
    std::fs::write(&file, RELEASE).expect("write");
    let o = lockaudit(dir.path(), &["check", "--no-cache", "--diff", "."]);
    let out = stdout(&o);
    assert!(out.starts_with("--- a/lock.rs\n+++ b/lock.rs\n"), "{out}");
    assert!(
        out.contains("\n-    let _: () = con.del(\"lock:job\").await?;\n"),
        "{out}"
    );
    assert!(
        out.contains(&format!("\n+    let _: () = {SCRIPT_CALL}.await?;\n")),
        "{out}"
    );
    assert!(
        stderr(&o).contains("1 fix(es) would be applied in 1 file(s)"),
        "{}",
        stderr(&o)
    );
    // Nothing was fixed: the finding is still there.
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(std::fs::read_to_string(&file).expect("read"), RELEASE);
}

#[test]
fn fix_rewrites_the_file_and_the_exit_status_is_what_remains() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("lock.rs");
    std::fs::write(&file, RELEASE).expect("write");
    let o = lockaudit(
        dir.path(),
        &["check", "--no-cache", "--fix", "--format", "concise", "."],
    );
    assert!(
        stderr(&o).contains("applied 1 fix(es) in 1 file(s)"),
        "{}",
        stderr(&o)
    );
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(
        stdout(&o).contains("0 findings in 1 file"),
        "{}",
        stdout(&o)
    );
    let fixed = std::fs::read_to_string(&file).expect("read");
    assert_eq!(
        fixed,
        RELEASE.replace("con.del(\"lock:job\")", SCRIPT_CALL),
        "only the call changed"
    );
    // A second run has nothing left to fix.
    let again = lockaudit(dir.path(), &["check", "--no-cache", "--fix", "."]);
    assert_eq!(again.status.code(), Some(0));
    assert!(stderr(&again).contains("applied 0 fix(es) in 0 file(s)"));
    assert_eq!(std::fs::read_to_string(&file).expect("read"), fixed);

    // With a finding no fix can remove, the status says so and the report names it.
    std::fs::write(dir.path().join("other.rs"), UNFIXABLE).expect("write");
    std::fs::write(&file, RELEASE).expect("write");
    let o = lockaudit(
        dir.path(),
        &["check", "--no-cache", "--fix", "--format", "json", "."],
    );
    assert_eq!(o.status.code(), Some(1));
    let findings = json(&o)["findings"].as_array().expect("findings").clone();
    let left: Vec<(&str, &str)> = findings
        .iter()
        .map(|f| {
            (
                f["path"].as_str().unwrap_or(""),
                f["rule"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(left, vec![("other.rs", "unchecked-release")]);
    assert!(findings[0].get("fix").is_none());
    assert_eq!(
        std::fs::read_to_string(dir.path().join("other.rs")).expect("read"),
        UNFIXABLE
    );
}

#[test]
fn reports_carry_the_fix() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("lock.rs"), RELEASE).expect("write");
    let o = lockaudit(
        dir.path(),
        &["check", "--no-cache", "--format", "json", "."],
    );
    let f = &json(&o)["findings"][0];
    assert_eq!(f["rule"], "unchecked-release");
    let edit = &f["fix"]["edits"][0];
    let line = RELEASE.lines().nth(9).expect("line 10");
    let start = RELEASE.find("con.del(").expect("call");
    assert_eq!(edit["start"], start);
    assert_eq!(edit["end"], start + "con.del(\"lock:job\")".len());
    assert_eq!(
        (edit["start_line"].clone(), edit["end_line"].clone()),
        (10.into(), 10.into())
    );
    assert_eq!(edit["start_column"], line.find("con.del").expect("col"));
    assert_eq!(edit["replacement"], SCRIPT_CALL);

    let o = lockaudit(
        dir.path(),
        &["check", "--no-cache", "--format", "sarif", "."],
    );
    let sarif = json(&o);
    let fix = &sarif["runs"][0]["results"][0]["fixes"][0];
    assert_eq!(
        fix["description"]["text"],
        "release with compare-and-delete on `token`"
    );
    let change = &fix["artifactChanges"][0];
    assert_eq!(change["artifactLocation"]["uri"], "lock.rs");
    let r = &change["replacements"][0];
    // SARIF columns are 1-based.
    let col = line.find("con.del").expect("col") + 1;
    assert_eq!(r["deletedRegion"]["startLine"], 10);
    assert_eq!(r["deletedRegion"]["startColumn"], col);
    assert_eq!(
        r["deletedRegion"]["endColumn"],
        col + "con.del(\"lock:job\")".len()
    );
    assert_eq!(r["insertedContent"]["text"], SCRIPT_CALL);
}

#[test]
fn fix_and_diff_do_not_combine() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("lock.rs"), RELEASE).expect("write");
    let o = lockaudit(dir.path(), &["check", "--fix", "--diff", "."]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("cannot be used with"), "{}", stderr(&o));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("lock.rs")).expect("read"),
        RELEASE
    );
}
