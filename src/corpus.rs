//! A synthetic corpus for scale tests and the benchmark: crates whose files mix plain code with
//! lock use spread across files (a struct holding a lock manager in one file, its use in another,
//! wrappers, constants), deterministic for a seed.

use std::fmt::Write;
use std::path::Path;

/// A small deterministic generator (SplitMix64): reproducible corpora without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

fn plain(rng: &mut Rng, i: usize) -> String {
    let mut s = String::from("use std::collections::HashMap;\nuse std::sync::Mutex;\n\n");
    for f in 0..(5 + rng.below(20)) {
        let _ = writeln!(
            s,
            "/// Helper {f}.\npub fn f{i}_{f}(m: &Mutex<HashMap<u64, u64>>, x: u64) -> u64 {{\n    let mut g = m.lock().unwrap();\n    let v = g.entry(x).or_insert({f});\n    *v += x.wrapping_mul({});\n    for k in 0..x % 7 {{\n        *v ^= k;\n    }}\n    *v\n}}\n",
            rng.below(1000)
        );
    }
    s
}

/// Writes `crates` crates of `files` files each under `dir`, returning the number of files.
pub fn generate(dir: &Path, crates: usize, files: usize, seed: u64) -> std::io::Result<usize> {
    let mut rng = Rng(seed);
    let mut written = 0;
    for c in 0..crates {
        let root = dir.join(format!("crate{c}"));
        std::fs::create_dir_all(root.join("src"))?;
        std::fs::write(
            root.join("Cargo.toml"),
            format!("[package]\nname = \"crate{c}\"\nversion = \"0.0.0\"\n"),
        )?;
        let mut lib = String::from("pub mod state;\npub mod locks;\npub mod jobs;\n");
        // Shared state and helpers that other files use without naming the lock crate.
        std::fs::write(
            root.join("src/state.rs"),
            "use std::sync::Arc;\nuse rslock::LockManager;\n\npub const LOCK_TTL_MS: u64 = 90_000;\n\npub struct State {\n    pub locks: Arc<LockManager>,\n}\n",
        )?;
        std::fs::write(
            root.join("src/locks.rs"),
            "use std::time::Duration;\nuse crate::state::{State, LOCK_TTL_MS};\n\nimpl State {\n    pub async fn acquire(&self, key: &str) -> Result<rslock::Lock, rslock::LockError> {\n        self.locks.lock(key, Duration::from_millis(LOCK_TTL_MS)).await\n    }\n}\n",
        )?;
        let mut jobs = String::from("use crate::state::State;\n\n");
        for j in 0..(2 + rng.below(4)) {
            let purpose = [
                "// lockaudit: correctness\n",
                "// lockaudit: efficiency\n",
                "",
            ][rng.below(3) as usize];
            let _ = writeln!(
                jobs,
                "{purpose}pub async fn job{j}(s: &State) -> Result<(), rslock::LockError> {{\n    let l = s.acquire(\"job{j}\").await?;\n    for i in 0..10 {{\n        let _ = i;\n    }}\n    s.locks.unlock(&l).await;\n    Ok(())\n}}\n"
            );
        }
        std::fs::write(root.join("src/jobs.rs"), jobs)?;
        written += 4;
        for i in 0..files.saturating_sub(3) {
            let _ = writeln!(lib, "pub mod m{i};");
            let text = if rng.below(20) == 0 {
                format!(
                    "use redis::Commands;\n\npub fn take(con: &mut redis::Connection) -> redis::RedisResult<bool> {{\n    let ok: bool = con.set_nx(\"lock:m{i}\", 1)?;\n    Ok(ok)\n}}\n\n{}",
                    plain(&mut rng, i)
                )
            } else {
                plain(&mut rng, i)
            };
            std::fs::write(root.join(format!("src/m{i}.rs")), text)?;
            written += 1;
        }
        std::fs::write(root.join("src/lib.rs"), lib)?;
    }
    Ok(written)
}
