//! Lease rows: a lock kept as a row of an ordinary table, read from the SQL text that claims,
//! renews or gives it up.
//!
//! A claim writes a holder and an expiry in one statement, guarded by the expiry having passed:
//! `UPDATE jobs SET locked_by = $1, lock_expires_at = now() + … WHERE lock_expires_at <= now()`,
//! `INSERT INTO leases (name, holder, expires_at) … ON CONFLICT (name) DO UPDATE SET … WHERE
//! leases.expires_at < $2`. A renewal moves the expiry of the row this holder holds (`SET
//! expires_at = … WHERE holder = $1`); a release deletes it or clears its holder under the same
//! test. Which columns are holders and expiries is the pack's vocabulary (`[lease-table]`).
//!
//! Precision first: a statement counts only when both kinds of column are written together (a
//! claim) or the holder is tested (a renewal or release). An update of an expiry alone (a
//! session's, a cache entry's) is no lease.

use crate::packs::{CallKind, LeaseTable};

/// What a statement does to a lease row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LeaseOp {
    Claim,
    Renew,
    Release,
}

/// Reads one SQL statement. `None`: not a lease statement.
pub(crate) fn lease_op(text: &str, vocab: &LeaseTable) -> Option<LeaseOp> {
    let sql = normalize(text);
    let words: Vec<&str> = sql
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .collect();
    let has = |w: &str| words.contains(&w);
    let holder = |c: &str| vocab.holder_columns.iter().any(|h| c.contains(h.as_str()));
    let expiry =
        |c: &str| !holder(c) && vocab.expiry_columns.iter().any(|e| c.contains(e.as_str()));
    let conditions = conditions(&sql);
    let tests = |pred: &dyn Fn(&str) -> bool| {
        conditions.iter().any(|cond| {
            cond.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .any(|w| !w.is_empty() && pred(w))
        })
    };
    if has("delete") && has("from") {
        return (tests(&holder) && table_is_lease(&sql, "from", vocab)).then_some(LeaseOp::Release);
    }
    let assigned = assignments(&sql);
    if assigned.is_empty() {
        return None;
    }
    let set = |pred: &dyn Fn(&str) -> bool, cleared: bool| {
        assigned
            .iter()
            .any(|(c, v)| pred(c) && (is_null(v) == cleared))
    };
    // A row with this holder put into a lock table: taken unless the key's row exists (the
    // unique key answers, through `ON CONFLICT DO NOTHING`'s rows or the insert's error).
    if has("insert") && set(&holder, false) && table_is_lease(&sql, "into", vocab) {
        return Some(LeaseOp::Claim);
    }
    if set(&holder, false) && set(&expiry, false) {
        // Written together, and guarded by the old lease having run out (or by the row being
        // free, or by skipping rows another claimer holds): a claim.
        let guarded = tests(&expiry) || tests(&holder) || sql.contains("skip locked");
        return (guarded || sql.contains("on conflict") || sql.contains("on duplicate key"))
            .then_some(LeaseOp::Claim);
    }
    if set(&holder, true) && tests(&holder) {
        return Some(LeaseOp::Release);
    }
    if set(&expiry, false) && !set(&holder, false) && tests(&holder) {
        return Some(LeaseOp::Renew);
    }
    None
}

impl LeaseOp {
    pub(crate) fn kind(self) -> CallKind {
        match self {
            LeaseOp::Claim => CallKind::TryAcquire,
            LeaseOp::Renew => CallKind::Renew,
            LeaseOp::Release => CallKind::Release,
        }
    }
}

/// Lower case, comments and string literals blanked, whitespace folded.
fn normalize(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                // A literal: its text is data, not SQL.
                for d in chars.by_ref() {
                    if d == '\'' {
                        break;
                    }
                }
                out.push_str("''");
            }
            '-' if chars.peek() == Some(&'-') => {
                for d in chars.by_ref() {
                    if d == '\n' {
                        break;
                    }
                }
                out.push(' ');
            }
            c if c.is_whitespace() => {
                if !out.ends_with(' ') {
                    out.push(' ');
                }
            }
            c => out.push(c.to_ascii_lowercase()),
        }
    }
    out
}

const CLAUSE_ENDS: &[&str] = &[
    " where ",
    " from ",
    " returning ",
    " on conflict",
    " order by ",
    " limit ",
    " group by ",
    ";",
];

/// The text of every `WHERE` clause, to the next clause keyword.
fn conditions(sql: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = sql;
    while let Some(i) = rest.find(" where ") {
        rest = &rest[i + 7..];
        let end = [
            " returning ",
            " order by ",
            " limit ",
            " for update",
            " on conflict",
            ";",
        ]
        .iter()
        .filter_map(|k| rest.find(k))
        .min()
        .unwrap_or(rest.len());
        out.push(&rest[..end]);
    }
    out
}

/// `(column, value)` pairs a statement writes: the `SET` lists (of an `UPDATE` or an upsert's
/// `DO UPDATE` / `ON DUPLICATE KEY UPDATE`) and an `INSERT`'s columns with their `VALUES`.
fn assignments(sql: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = sql;
    // Each list starts after the keyword that opens it.
    while let Some(start) = [" set ", " key update "]
        .iter()
        .filter_map(|k| rest.find(k).map(|i| i + k.len()))
        .min()
    {
        rest = &rest[start..];
        let end = CLAUSE_ENDS
            .iter()
            .filter_map(|k| rest.find(k))
            .min()
            .unwrap_or(rest.len());
        for part in top_level(&rest[..end], ',') {
            if let Some((col, val)) = part.split_once('=') {
                let col = col.trim();
                let col = col.rsplit('.').next().unwrap_or(col).trim_matches('"');
                if col.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') && !col.is_empty() {
                    out.push((col.to_string(), val.trim().to_string()));
                }
            }
        }
    }
    if let Some(i) = sql.find("insert into ") {
        let after = &sql[i..];
        if let (Some(open), Some(v)) = (after.find('('), after.find(" values"))
            && open < v
            && let Some(ce) = after[open..].find(')').map(|j| open + j)
            && let Some(vo) = after[v..].find('(').map(|j| v + j)
        {
            let cols = top_level(&after[open + 1..ce], ',');
            let vals = top_level(until_close(&after[vo + 1..]), ',');
            for (c, v) in cols.iter().zip(vals.iter()) {
                out.push((c.trim().trim_matches('"').to_string(), v.trim().to_string()));
            }
        }
    }
    out
}

/// The text up to the `)` that closes the group this text is inside.
fn until_close(text: &str) -> &str {
    let mut depth = 0usize;
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' if depth == 0 => return &text[..i],
            ')' => depth -= 1,
            _ => {}
        }
    }
    text
}

fn top_level(text: &str, sep: char) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0usize, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            c if c == sep && depth == 0 => {
                out.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&text[start..]);
    out
}

fn is_null(v: &str) -> bool {
    v == "null" || v == "''"
}

/// The table after `keyword` (`DELETE FROM leases`) names a lease or lock table.
fn table_is_lease(sql: &str, keyword: &str, vocab: &LeaseTable) -> bool {
    let padded = format!(" {sql}");
    let Some(i) = padded.find(&format!(" {keyword} ")) else {
        return false;
    };
    let table = padded[i + keyword.len() + 2..]
        .trim_start()
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '"'))
        .next()
        .unwrap_or("");
    vocab.table_words.iter().any(|w| table.contains(w.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vocab() -> LeaseTable {
        LeaseTable {
            holder_columns: ["locked_by", "holder", "owner", "leader"]
                .map(String::from)
                .to_vec(),
            expiry_columns: ["expire", "until", "deadline"].map(String::from).to_vec(),
            table_words: ["lock", "lease", "leader"].map(String::from).to_vec(),
            triggers: Vec::new(),
        }
    }

    #[test]
    fn claims_renewals_and_releases() {
        let v = vocab();
        let claim = "WITH c AS (SELECT job_id FROM jobs WHERE run_at <= $1 AND (lock_expires_at IS NULL OR lock_expires_at <= $1) FOR UPDATE SKIP LOCKED) UPDATE jobs SET locked_by = $3, lock_expires_at = $1 + make_interval(secs => $4) FROM c WHERE jobs.job_id = c.job_id RETURNING jobs.job_id";
        assert_eq!(lease_op(claim, &v), Some(LeaseOp::Claim));
        let upsert = "INSERT INTO leases (name, holder, expires_at) VALUES ($1, $2, $3) ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at WHERE leases.expires_at <= $4";
        assert_eq!(lease_op(upsert, &v), Some(LeaseOp::Claim));
        let renew = "UPDATE leases SET expires_at = NOW() + INTERVAL '30 seconds' WHERE name = $1 AND holder = $2";
        assert_eq!(lease_op(renew, &v), Some(LeaseOp::Renew));
        let insert = "INSERT INTO distributed_locks (identifier, owner, acquired_at) VALUES ($1, $2, $3) ON CONFLICT (identifier) DO NOTHING";
        assert_eq!(lease_op(insert, &v), Some(LeaseOp::Claim));
        let release = "DELETE FROM leases WHERE name = $1 AND holder = $2";
        assert_eq!(lease_op(release, &v), Some(LeaseOp::Release));
        let clear = "UPDATE jobs SET locked_by = NULL, lock_expires_at = NULL WHERE id = $1 AND locked_by = $2";
        assert_eq!(lease_op(clear, &v), Some(LeaseOp::Release));
    }

    #[test]
    fn other_statements_are_no_leases() {
        let v = vocab();
        for sql in [
            "UPDATE sessions SET expires_at = $1 WHERE id = $2",
            "DELETE FROM sessions WHERE expires_at < now()",
            "DELETE FROM jobs WHERE locked_by = $1",
            "SELECT holder, expires_at FROM leases WHERE name = $1",
            "UPDATE users SET name = 'owner = x, expires = y' WHERE id = 1",
            "INSERT INTO audit (owner, note) VALUES ($1, $2)",
        ] {
            assert_eq!(lease_op(sql, &v), None, "{sql}");
        }
    }
}
