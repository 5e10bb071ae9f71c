//! Fingerprints that survive unrelated edits: a SHA-256 of the rule, the file, the enclosing
//! function and the finding's line text (whitespace folded), plus an occurrence counter for
//! identical lines. No line numbers, so inserting code above a finding keeps its fingerprint; no
//! `DefaultHasher`, whose algorithm may change between Rust releases.

use std::collections::HashMap;

use sha2::{Digest, Sha256};

use super::Finding;

pub fn assign_fingerprints(findings: &mut [Finding]) {
    let mut seen: HashMap<String, usize> = HashMap::new();
    for f in findings.iter_mut() {
        let mut h = Sha256::new();
        for part in [
            f.rule,
            f.path.as_str(),
            f.context.as_str(),
            f.line_text.as_str(),
        ] {
            h.update(part.as_bytes());
            h.update([0u8]);
        }
        let digest = h.finalize();
        let hex: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
        let n = seen.entry(hex.clone()).or_insert(0);
        f.fingerprint = format!("{hex}:{n}");
        *n += 1;
    }
}

/// The line text as fingerprinted: whitespace runs folded, trailing `//` comments kept (they are
/// what a reviewer sees).
pub fn normalize_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
