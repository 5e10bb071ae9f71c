//! `check` of a generated crate: fixture pieces (lock calls, wrappers, re-exports, aliases,
//! constants in other modules, test modules) chosen and mutated by the input, plus files made of
//! the input's raw bytes. Asserts: no panic (an abort or stack overflow is a crash too), the JSON
//! report is valid JSON, and the prefilter changes neither the sites nor the findings.
#![no_main]

use std::path::PathBuf;

use libfuzzer_sys::fuzz_target;
use lockaudit::cli::Format;
use lockaudit::settings::CheckSettings;
use lockaudit::{engine, report};

/// Pieces of real-looking code; `{K}`, `{T}` and `{N}` are replaced by bytes of the input.
const PIECES: &[&str] = &[
    "use rslock::LockManager;\nuse std::time::Duration;\n",
    "pub async fn run(mgr: &LockManager) -> Result<(), rslock::LockError> {\n    let l = mgr.lock(\"{K}\", Duration::from_secs({N})).await?;\n    mgr.unlock(&l).await;\n    Ok(())\n}\n",
    "pub const TTL: Duration = Duration::from_secs({N});\npub const KEY: &str = \"{K}\";\n",
    "pub async fn with_const(mgr: &LockManager) { let _l = mgr.lock(crate::keys::KEY, crate::keys::TTL).await; }\n",
    "pub mod keys;\npub use keys::*;\n",
    "pub type Result<T> = std::result::Result<T, Error>;\npub struct Error;\n",
    "pub async fn take(mgr: &LockManager, key: &str) -> rslock::Lock {\n    mgr.lock(key, Duration::from_secs({N})).await.unwrap()\n}\npub async fn caller(mgr: &LockManager) { let _ = take(mgr, \"{K}\").await; }\n",
    "// lockaudit: {T}\n",
    "//! lockaudit: correctness\n",
    "#[cfg(test)]\nmod tests {\n    use super::*;\n    #[tokio::test]\n    async fn t() { let mgr: LockManager = todo!(); let _ = mgr.lock(b\"{K}\", Duration::from_secs({N})).await; }\n}\n",
    "pub async fn pg(pool: &sqlx::PgPool) { sqlx::query(\"SELECT pg_advisory_lock({N})\").execute(pool).await.ok(); }\n",
    "pub async fn redis(con: &mut redis::aio::MultiplexedConnection) { let _: () = redis::cmd(\"SET\").arg(\"{K}\").arg(\"1\").arg(\"NX\").arg(\"PX\").arg({N}).query_async(con).await.unwrap(); }\n",
    "// lockaudit: allow({T}) reason = \"{K}\"\n",
    "impl Drop for Error { fn drop(&mut self) {} }\n",
    "pub fn {T}() {}\n",
];

const WORDS: &[&str] = &[
    "efficiency",
    "correctness",
    "long-deadline",
    "unreleased-lock",
    "x",
    "",
];

/// Takes bytes off the front of the input.
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn byte(&mut self) -> u8 {
        let Some((&b, rest)) = self.0.split_first() else {
            return 0;
        };
        self.0 = rest;
        b
    }

    fn take(&mut self, n: usize) -> &[u8] {
        let n = n.min(self.0.len());
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        a
    }
}

fn piece(b: &mut Bytes) -> String {
    let p = PIECES[usize::from(b.byte()) % PIECES.len()];
    let n = usize::from(b.byte() % 12);
    let key: String = String::from_utf8_lossy(b.take(n))
        .chars()
        .filter(|c| !matches!(c, '"' | '\\'))
        .collect();
    p.replace("{K}", &key)
        .replace("{N}", &(u32::from(b.byte()) * 37).to_string())
        .replace("{T}", WORDS[usize::from(b.byte()) % WORDS.len()])
}

/// A crate: `src/lib.rs`, `src/keys.rs` and up to two more modules, each a few pieces, some
/// with raw input bytes spliced in.
fn write_crate(data: &[u8], root: &std::path::Path) {
    let mut b = Bytes(data);
    std::fs::create_dir_all(root.join("src")).expect("mkdir");
    std::fs::write(
        root.join("Cargo.toml"),
        "[package]\nname = \"fuzzed\"\nversion = \"0.0.0\"\n",
    )
    .expect("write");
    let names = ["lib.rs", "keys.rs", "jobs.rs", "util.rs"];
    let files = 1 + usize::from(b.byte() % 4);
    for name in &names[..files] {
        let mut text: Vec<u8> = Vec::new();
        if *name == "lib.rs" {
            text.extend_from_slice(b"pub mod keys;\npub mod jobs;\npub mod util;\n");
        }
        for _ in 0..1 + b.byte() % 6 {
            let flag = b.byte();
            if flag % 5 == 0 {
                // Raw bytes: broken syntax, bad UTF-8, anything.
                let n = usize::from(b.byte());
                text.extend_from_slice(b.take(n));
                text.push(b'\n');
            } else {
                text.extend_from_slice(piece(&mut b).as_bytes());
            }
        }
        std::fs::write(root.join("src").join(name), text).expect("write");
    }
}

fn run(root: &std::path::Path, prefilter: bool) -> serde_json::Value {
    let settings = CheckSettings {
        paths: vec![PathBuf::from(root)],
        format: Format::Json,
        threads: 1,
        prefilter,
        cache_dir: None,
        ..Default::default()
    };
    let outcome = engine::check(&settings).expect("a generated crate is never a tool error");
    let text = report::json::render(&outcome.report);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

fuzz_target!(|data: &[u8]| {
    let dir = tempfile::tempdir().expect("tempdir");
    write_crate(data, dir.path());
    let with = run(dir.path(), true);
    let without = run(dir.path(), false);
    assert_eq!(with["sites"], without["sites"], "the prefilter changed the sites");
    assert_eq!(
        with["findings"], without["findings"],
        "the prefilter changed the findings"
    );
});
