//! Lease rows: a lock kept as a row of an ordinary table, read from the SQL text that claims,
//! renews or gives it up.
//!
//! A claim writes a holder and an expiry in one statement, guarded by the expiry having passed:
//! `UPDATE jobs SET locked_by = $1, lock_expires_at = now() + … WHERE lock_expires_at <= now()`,
//! `INSERT INTO leases (name, holder, expires_at) … ON CONFLICT (name) DO UPDATE SET … WHERE
//! leases.expires_at < $2`. A renewal moves the expiry of the row this holder holds (`SET
//! expires_at = … WHERE holder = $1`); a release deletes it or clears its holder under the same
//! test. Which columns are holders and expiries is the pack's vocabulary (`[lease-table]`); in a
//! table the vocabulary names as a lock's (`editing_lock`), a column written with a bound value
//! and tested against that same value is a holder too (`SET user_id = $3 … WHERE user_id = $3`).
//!
//! Precision first: a statement counts only when both kinds of column are written together (a
//! claim) or the holder is tested (a renewal or release). An update of an expiry alone (a
//! session's, a cache entry's) is no lease. Two claims name no holder column, and count because
//! the row is taken only once it has gone stale: a stamp written from the database clock and
//! tested against it in the same statement (`SET status = 'picked', taken_at = now() WHERE …
//! taken_at < now() - $1`), and an upsert handing a column to the newcomer under a staleness
//! test of a stamp or expiry (`id = CASE WHEN last_heartbeat < now() - $3 THEN excluded.id …`).

use crate::packs::{CallKind, LeaseTable};

/// What a statement does to a lease row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LeaseOp {
    Claim,
    Renew,
    Release,
    /// Holder and expiry cleared on a row picked without testing the holder: a release that
    /// does not check the lease is still this process's.
    Clear,
}

/// Reads one SQL statement. `None`: not a lease statement.
pub(crate) fn lease_op(text: &str, vocab: &LeaseTable) -> Option<LeaseOp> {
    let sql = mutation_as_statement(normalize(text));
    let words: Vec<&str> = sql
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .collect();
    let has = |w: &str| words.contains(&w);
    let conditions = conditions(&sql);
    let assigned = assignments(&sql);
    // In a lock table, a column written with a bound value and tested against that same value
    // (`SET user_id = $3 … WHERE editing_lock.user_id = $3 OR editing_lock.expires_at < $4`) is
    // the row's holder, whatever it is called.
    let lock_table = table_is_lease(&sql, "into", vocab) || table_is_lease(&sql, "update", vocab);
    let named_holders: Vec<&str> = if lock_table {
        assigned
            .iter()
            .filter(|(_, v)| v.starts_with('$') || v == "?")
            .filter(|(c, v)| conditions.iter().any(|cond| tests_equal(cond, c, v)))
            .map(|(c, _)| c.as_str())
            .collect()
    } else {
        Vec::new()
    };
    let holder = |c: &str| {
        vocab.holder_columns.iter().any(|h| c.contains(h.as_str())) || named_holders.contains(&c)
    };
    let expiry =
        |c: &str| !holder(c) && vocab.expiry_columns.iter().any(|e| c.contains(e.as_str()));
    // When the holder last renewed (`heartbeat`): the lease runs out a timeout after it.
    let stamp = |c: &str| {
        !holder(c) && !expiry(c) && vocab.stamp_columns.iter().any(|e| c.contains(e.as_str()))
    };
    let tests =
        |pred: &dyn Fn(&str) -> bool| conditions.iter().any(|cond| names_column(cond, pred));
    if has("delete") && has("from") {
        // In a lease table, any delete testing the holder; elsewhere, the delete of one row by
        // its key and its holder (`DELETE FROM job WHERE id = $1 AND locked_by = $2`: a job done
        // by the worker that claimed it). A worker's sweep of all its rows is neither.
        let keyed = conditions.iter().any(|cond| {
            let bound = |t: &str| {
                let v = t.trim();
                v.starts_with('$') || v == "?"
            };
            let pairs: Vec<(&str, &str)> = cond
                .split(" and ")
                .filter_map(|c| c.split_once('='))
                .filter(|(l, r)| !l.ends_with(['<', '>', '!']) && bound(r))
                .map(|(l, r)| (l.trim(), r.trim()))
                .collect();
            pairs.iter().any(|(c, _)| names_column(c, &holder))
                && pairs.iter().any(|(c, _)| !names_column(c, &holder))
        });
        return (tests(&holder) && (keyed || table_is_lease(&sql, "from", vocab)))
            .then_some(LeaseOp::Release);
    }
    if assigned.is_empty() {
        return None;
    }
    // An upsert that overwrites the row whoever holds it (`ON CONFLICT (role) DO UPDATE SET
    // node_id = EXCLUDED.node_id, lease_until = EXCLUDED.lease_until`, no `WHERE`, no `CASE`)
    // cannot fail for another holder: it records a lock won elsewhere (an advisory lock taken
    // just before), it takes none.
    if blind_upsert(&sql, &assigned) {
        return None;
    }
    let set = |pred: &dyn Fn(&str) -> bool, cleared: bool| {
        assigned
            .iter()
            .any(|(c, v)| pred(c) && (is_null(v) == cleared))
    };
    // A row with this holder put into a lock table: taken unless the key's row exists (the
    // unique key answers, through `ON CONFLICT DO NOTHING`'s rows or the insert's error). In
    // any table, a row written with a holder (or fencing token) and an expiry is one too.
    let lockish = |c: &str| {
        holder(c)
            && vocab
                .table_words
                .iter()
                .map(String::as_str)
                .chain(["fenc"])
                .any(|w| c.contains(w))
    };
    if has("insert")
        && set(&holder, false)
        && (table_is_lease(&sql, "into", vocab) || set(&lockish, false) && set(&expiry, false))
    {
        return Some(LeaseOp::Claim);
    }
    // An upsert whose `SET` list hands a column to the newcomer only while the row's stamp or
    // expiry is stale (`id = CASE WHEN last_heartbeat < now() - $3 THEN excluded.id ELSE id
    // END`; MySQL's `id = IF(last_heartbeat < NOW() - INTERVAL ? SECOND, VALUES(id), id)`): the
    // row taken over, a claim (the holder's own round renews it). The table may be named at
    // run time (`INSERT INTO {table}`): the staleness test in the takeover says enough.
    let runs_out = |c: &str| stamp(c) || expiry(c);
    let upsert = has("insert") && (sql.contains("on conflict") || sql.contains("on duplicate key"));
    if upsert
        && assigned.iter().any(|(c, v)| {
            !runs_out(c)
                && (v.starts_with("case ") || v.starts_with("if(") || v.starts_with("if ("))
                && stale_test(&[v.as_str()], &runs_out)
        })
    {
        return Some(LeaseOp::Claim);
    }
    // A row stamped with the database clock and taken again once that stamp is old (`SET status
    // = 'picked', taken_at = now() WHERE status = 'unpicked' OR taken_at < now() - $1`): a
    // claim with a timeout, whatever its columns are called.
    // Rows put back into a free state (`SET status = 'pending'`) are given up, not taken: a
    // reaper of stale claims.
    let frees = assigned
        .iter()
        .any(|(c, v)| is_status(c) && is_free_state(v));
    if has("update")
        && !frees
        && assigned
            .iter()
            .any(|(c, v)| is_clock(v) && conditions.iter().any(|cond| older_than(cond, c)))
    {
        return Some(LeaseOp::Claim);
    }
    // A row given an expiry from the database clock, taken again only once that expiry has
    // passed (`SET state = 'leased', leased_until = now() + $3 * interval '1 ms' WHERE state =
    // 'queued' OR leased_until <= now() … FOR UPDATE SKIP LOCKED`): a claim with a timeout
    // that names no holder. Only where the expiry is a lease's (its name, or the skip of rows
    // other claimers hold): a subscription's `valid_until` moved on is none. Skipping rows
    // other claimers hold says it of any column: a due time pushed on by the rows picked as due
    // (`SET next_attempt_at = now() + … WHERE next_attempt_at <= now() … SKIP LOCKED`) keeps
    // the row from other pickers until it runs out, a visibility timeout.
    let skips = sql.contains("skip locked");
    let leases = |c: &str| skips || vocab.table_words.iter().any(|w| c.contains(w.as_str()));
    if has("update")
        && !frees
        && !set(&holder, false)
        && assigned.iter().any(|(c, v)| {
            (expiry(c) && leases(c) || skips && !holder(c) && !stamp(c))
                && reads_clock(v)
                && !is_clock(v)
                && !in_the_past(v)
                && conditions.iter().any(|cond| older_than(cond, c))
        })
    {
        return Some(LeaseOp::Claim);
    }
    if set(&holder, false) && set(&expiry, false) {
        // Written together, and guarded by the old lease having run out (or by the row being
        // free, or by skipping rows another claimer holds): a claim.
        let guarded =
            tests(&expiry) || holder_free(&conditions, &holder) || sql.contains("skip locked");
        if guarded || sql.contains("on conflict") || sql.contains("on duplicate key") {
            return Some(LeaseOp::Claim);
        }
        // `SET lease_id = $2, leased_until = $3 WHERE id = $1 AND lease_id = $4`: the holder
        // re-leasing its own row under a new token, a renewal.
        return tests(&holder).then_some(LeaseOp::Renew);
    }
    if set(&stamp, false) && (tests(&stamp) || tests(&holder)) {
        // `SET heartbeat = now() WHERE heartbeat < now() - $2 … FOR UPDATE SKIP LOCKED`: rows
        // whose holder stopped renewing, taken. Otherwise (`WHERE heartbeat = $2`, `WHERE
        // locked_by = $2`) the holder renews the stamp it holds (owner-checked).
        let stale = sql.contains("skip locked") || stale_test(&conditions, &stamp);
        return Some(if stale || set(&holder, false) {
            LeaseOp::Claim
        } else {
            LeaseOp::Renew
        });
    }
    if set(&holder, true) && tests(&holder) {
        return Some(LeaseOp::Release);
    }
    // `SET lease_id = NULL, leased_until = NULL WHERE id = $1`: given back whoever holds it (a
    // sweeper of expired rows tests the expiry, and is no holder's release).
    // …and one that picks only free rows (`WHERE state = 'pending'`) finds no lease to give back,
    // nor does an upsert that writes the row afresh (`INSERT … ON CONFLICT DO UPDATE SET job_id =
    // EXCLUDED.job_id, locked_by = NULL, …`: a job registered again, its claim reset).
    if has("update")
        && !upsert
        && set(&holder, true)
        && set(&expiry, true)
        && !tests(&expiry)
        && !picks_free(&conditions)
    {
        return Some(LeaseOp::Clear);
    }
    if set(&expiry, false) && !set(&holder, false) && tests(&holder) {
        // `SET expires_at = now() - interval '1 ms' WHERE holder = $1`: expired at once, the
        // lease given back (the next claimer finds it run out), not renewed.
        let expires_now = assigned
            .iter()
            .any(|(c, v)| expiry(c) && (is_clock(v) || in_the_past(v)));
        return Some(if expires_now {
            LeaseOp::Release
        } else {
            LeaseOp::Renew
        });
    }
    // In a lock table, the expiry moved on (not cleared, not into the past) on a row picked
    // without asking whether it ran out (`UPDATE editing_lock SET expires_at = $1 WHERE
    // entity_id = $2 AND user_id = $3`): a renewal, its holder test in a column this statement
    // does not name as one (so taken as made: no `unchecked-renewal` from it).
    if lock_table
        && has("update")
        && !conditions.is_empty()
        && assigned.iter().all(|(c, _)| expiry(c) || stamp(c))
        && assigned
            .iter()
            .any(|(c, v)| expiry(c) && !is_null(v) && !in_the_past(v) && !is_clock(v))
        && !tests(&expiry)
    {
        return Some(LeaseOp::Renew);
    }
    None
}

/// An upsert whose update takes the row unconditionally: `ON CONFLICT … DO UPDATE SET …` with
/// no `WHERE` after it, or MySQL's `ON DUPLICATE KEY UPDATE`, neither choosing a value by a
/// `CASE`/`IF` on the row.
fn blind_upsert(sql: &str, assigned: &[(String, String)]) -> bool {
    let Some(at) = sql
        .find(" on conflict")
        .or_else(|| sql.find(" on duplicate key"))
    else {
        return false;
    };
    let tail = &sql[at..];
    let chooses = assigned
        .iter()
        .any(|(_, v)| v.starts_with("case ") || v.starts_with("if(") || v.starts_with("if ("));
    !tail.contains("do nothing") && !tail.contains(" where ") && !chooses
}

/// A claim in two statements, its second: a holder and an expiry written to a row picked by key
/// alone (`UPDATE jobs SET locked_by = $1, locked_until = now() + … WHERE id = $2`), taken
/// because an earlier `SELECT … FOR UPDATE` of the same transaction picked the row
/// (`row_pick`). The table written, for the caller to find that select. `lease_op` reads the
/// statement first: this is only for what it leaves.
pub(crate) fn keyed_write(text: &str, vocab: &LeaseTable) -> Option<String> {
    let sql = normalize(text);
    if !sql.trim_start().starts_with("update ") {
        return None;
    }
    let assigned = assignments(&sql);
    let holder = |c: &str| vocab.holder_columns.iter().any(|h| c.contains(h.as_str()));
    let expiry =
        |c: &str| !holder(c) && vocab.expiry_columns.iter().any(|e| c.contains(e.as_str()));
    let writes = |pred: &dyn Fn(&str) -> bool| {
        assigned
            .iter()
            .any(|(c, v)| pred(c) && !is_null(v) && !in_the_past(v))
    };
    (writes(&holder) && writes(&expiry)).then(|| table_after(&sql, "update"))?
}

/// The first half of a two-statement claim: a `SELECT … FOR UPDATE` that picks rows whose
/// lease ran out (a test of the expiry), that nobody holds, or that skips rows other claimers
/// hold. The table whose rows it locks. A row locked by key alone (`WHERE id = $1 FOR
/// UPDATE`) is a holder's own, read before a renewal: no pick.
pub(crate) fn row_pick(text: &str, vocab: &LeaseTable) -> Option<String> {
    let sql = normalize(text);
    if !sql.trim_start().starts_with("select ")
        || !(sql.contains(" for update") || sql.contains(" for no key update"))
    {
        return None;
    }
    let holder = |c: &str| vocab.holder_columns.iter().any(|h| c.contains(h.as_str()));
    let expiry =
        |c: &str| !holder(c) && vocab.expiry_columns.iter().any(|e| c.contains(e.as_str()));
    let conditions = conditions(&sql);
    let picks = sql.contains("skip locked")
        || conditions.iter().any(|c| names_column(c, &expiry))
        || holder_free(&conditions, &holder);
    picks.then(|| table_after(&sql, "from"))?
}

/// The table named after `keyword` (`update jobs set …`: `jobs`), without its schema.
fn table_after(sql: &str, keyword: &str) -> Option<String> {
    let padded = format!(" {sql}");
    let i = padded.find(&format!(" {keyword} "))?;
    let table = padded[i + keyword.len() + 2..]
        .trim_start()
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '"'))
        .next()?
        .trim_matches('"');
    let table = table.rsplit('.').next()?.trim_matches('"');
    (!table.is_empty()).then(|| table.to_string())
}

/// Is an assigned value the database clock minus something (`now() - interval '1 second'`,
/// ClickHouse's `now64(3) - toIntervalMillisecond(1)`)?
fn in_the_past(v: &str) -> bool {
    let v = v.trim();
    ["now()", "now64(", "current_timestamp", "clock_timestamp()"]
        .iter()
        .any(|c| v.starts_with(c))
        && v.split_once(" - ")
            .is_some_and(|(clock, _)| !clock.contains(" + "))
}

/// A column holding a row's state (`status`, `state`, `job_state`).
fn is_status(column: &str) -> bool {
    column.ends_with("status") || column.ends_with("state")
}

/// States in which a row is nobody's: waiting to be claimed.
const FREE_STATES: [&str; 11] = [
    "pending",
    "queued",
    "enqueued",
    "new",
    "waiting",
    "ready",
    "available",
    "idle",
    "unclaimed",
    "unlocked",
    "scheduled",
];

/// Is the value a free state's literal (`'pending'`)?
fn is_free_state(v: &str) -> bool {
    let v = v.trim();
    v.strip_prefix('\'')
        .and_then(|v| v.strip_suffix('\''))
        .is_some_and(|v| FREE_STATES.contains(&v))
}

/// Does a condition keep only rows in a free state (`… AND state = 'pending'`)? Alternatives
/// (`or`) may let held rows in, so only a conjunct counts.
fn picks_free(conditions: &[&str]) -> bool {
    conditions.iter().any(|cond| {
        !cond.contains(" or ")
            && cond.split(" and ").any(|part| {
                part.trim_matches(|c: char| c == '(' || c == ')' || c == ' ')
                    .split_once(" = ")
                    .is_some_and(|(l, r)| {
                        let col = l.trim().rsplit('.').next().unwrap_or("");
                        is_status(col) && is_free_state(r)
                    })
            })
    })
}

/// Does a condition compare `column` (bare or qualified) for equality with `value` (`t.user_id =
/// $3`, `user_id = ?`)? `?` placeholders cannot be told apart: a column written with one and
/// compared with one counts.
fn tests_equal(cond: &str, column: &str, value: &str) -> bool {
    cond.split(" or ")
        .flat_map(|d| d.split(" and "))
        .any(|term| {
            let term = term.trim().trim_start_matches('(').trim_end_matches(')');
            let Some((l, r)) = term.split_once('=') else {
                return false;
            };
            if l.ends_with(['<', '>', '!']) || r.starts_with('=') {
                return false;
            }
            let (l, r) = (l.trim(), r.trim());
            let col = |t: &str| t.rsplit('.').next().unwrap_or(t).trim_matches('"') == column;
            (col(l) && r == value) || (col(r) && l == value)
        })
}

/// Does SQL text name a column `pred` accepts (as a whole word)?
fn names_column(text: &str, pred: &dyn Fn(&str) -> bool) -> bool {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .any(|w| !w.is_empty() && pred(w))
}

/// How SQL spells the database's clock.
const DB_CLOCKS: [&str; 3] = ["now()", "current_timestamp", "clock_timestamp()"];

/// Does the text read the database's clock?
fn reads_clock(t: &str) -> bool {
    DB_CLOCKS.iter().any(|n| t.contains(n))
}

/// The database's clock as a value: `now()`, `current_timestamp`, `clock_timestamp()`.
fn is_clock(v: &str) -> bool {
    matches!(
        v.trim(),
        "now()" | "current_timestamp" | "current_timestamp()" | "clock_timestamp()"
    )
}

/// Does a condition ask for rows whose `column` is older than the clock allows (`taken_at <
/// now() - $1`, `now() - interval '5 minutes' > taken_at`)?
fn older_than(cond: &str, column: &str) -> bool {
    let names = |t: &str| names_column(t, &|w: &str| w == column);
    cond.split(" or ")
        .flat_map(|p| p.split(" and "))
        .any(|part| {
            let part = unwrapped(part);
            part.split_once(" < ")
                .or_else(|| part.split_once(" <= "))
                .is_some_and(|(l, r)| names(l) && !reads_clock(l) && reads_clock(r))
                || part
                    .split_once(" > ")
                    .or_else(|| part.split_once(" >= "))
                    .is_some_and(|(l, r)| reads_clock(l) && names(r) && !reads_clock(r))
        })
}

/// A condition's part without the brackets around it that it does not close itself
/// (`(state = 'leased' and leased_until <= now()))` gives `leased_until <= now()`).
fn unwrapped(part: &str) -> &str {
    let mut p = part.trim().trim_start_matches(['(', ' ']);
    while p.ends_with(')') && p.matches(')').count() > p.matches('(').count() {
        p = p[..p.len() - 1].trim_end();
    }
    p
}

/// Does a condition ask for a row nobody holds (`holder IS NULL`, `holder = ''`)?
fn holder_free(conditions: &[&str], holder: &dyn Fn(&str) -> bool) -> bool {
    conditions.iter().any(|cond| {
        cond.split(" or ")
            .flat_map(|p| p.split(" and "))
            .any(|part| {
                names_column(part, holder) && (part.contains(" is null") || part.contains("= ''"))
            })
    })
}

/// Does a condition compare a stamp column with the clock (`heartbeat < now() - $2`)? A claim
/// of stale rows; a comparison with a bound value is the holder's compare-and-set.
fn stale_test(conditions: &[&str], stamp: &dyn Fn(&str) -> bool) -> bool {
    conditions.iter().any(|cond| {
        cond.split(" and ")
            .any(|part| names_column(part, stamp) && reads_clock(part))
    })
}

/// The lease length a statement writes when the SQL spells it: the first `now() + interval '30
/// minutes'` (PostgreSQL, also `'30 minutes'::interval`), `NOW() + INTERVAL 30 SECOND` or
/// `DATE_ADD(NOW(), INTERVAL 30 SECOND)` (MySQL), in milliseconds. A bound length (`now() + $2`)
/// is the program's, not read here.
pub(crate) fn lease_interval_ms(text: &str) -> Option<f64> {
    let folded = text
        .to_ascii_lowercase()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    for now in DB_CLOCKS {
        let mut from = 0;
        while let Some(i) = folded[from..].find(now).map(|i| from + i) {
            from = i + now.len();
            let rest = folded[from..].trim_start();
            // `now() + …`, or `date_add(now(), …)` (not `date_sub`: a staleness test).
            let added = folded[..i].trim_end().ends_with("date_add(");
            let Some(rest) = rest
                .strip_prefix('+')
                .or_else(|| rest.strip_prefix(',').filter(|_| added))
                .map(str::trim_start)
            else {
                continue;
            };
            let rest = rest.strip_prefix("interval").map_or(rest, str::trim_start);
            let quoted = rest.starts_with('\'');
            let body = rest.trim_start_matches('\'');
            let end = if quoted {
                body.find('\'')?
            } else {
                // MySQL: a number and one unit word.
                body.char_indices()
                    .filter(|(_, c)| *c == ' ')
                    .nth(1)
                    .map_or(body.len(), |(k, _)| k)
            };
            if let Some(ms) = interval_ms(body[..end].trim()) {
                return Some(ms);
            }
        }
    }
    None
}

/// A lease expiry whose length is a bound parameter: `now() + ($2::int * interval '1 second')`,
/// `now() + interval '1 second' * $2`, `now() + make_interval(secs => $2)`, `now() + ($2 || '
/// seconds')::interval`. The parameter's number (1-based) and the milliseconds in one of it.
pub(crate) fn lease_interval_param(text: &str) -> Option<(usize, f64)> {
    let folded = text
        .to_ascii_lowercase()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let param = |t: &str| -> Option<usize> {
        let t = t.trim().trim_start_matches('(').trim();
        let digits: String = t
            .strip_prefix('$')?
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().ok().filter(|&n| n > 0)
    };
    for now in DB_CLOCKS {
        let mut from = 0;
        while let Some(i) = folded[from..].find(now).map(|i| from + i) {
            from = i + now.len();
            let Some(rest) = folded[from..].trim_start().strip_prefix('+') else {
                continue;
            };
            let rest = rest.trim_start().trim_start_matches('(').trim_start();
            if let Some(secs) = rest.strip_prefix("make_interval(") {
                let secs = secs.trim_start().strip_prefix("secs").map(str::trim_start);
                if let Some(n) = secs.and_then(|t| t.strip_prefix("=>")).and_then(param) {
                    return Some((n, 1_000.0));
                }
                continue;
            }
            // `$2 || ' seconds')::interval`
            if let Some(n) = param(rest)
                && let Some(cat) = rest.find("||")
                && let Some(q) = rest[cat..].find('\'')
            {
                let body = &rest[cat + q + 1..];
                let unit = body.split('\'').next().unwrap_or_default();
                if let Some(ms) = interval_ms(&format!("1{}", unit.trim())) {
                    return Some((n, ms));
                }
            }
            // `$2::int * interval '1 second'` or `interval '1 second' * $2`
            let Some((left, right)) = rest.split_once('*') else {
                continue;
            };
            let unit_of = |t: &str| -> Option<f64> {
                let t = t.trim().trim_start_matches("interval").trim();
                let body = t.strip_prefix('\'')?;
                interval_ms(body.split('\'').next()?.trim())
            };
            if let (Some(n), Some(ms)) = (param(left), unit_of(right)) {
                return Some((n, ms));
            }
            if let (Some(ms), Some(n)) = (unit_of(left), param(right)) {
                return Some((n, ms));
            }
        }
    }
    None
}

/// `30 minutes`, `1 hour`, `15 second`, `10s`: one quantity and its unit, in milliseconds.
fn interval_ms(text: &str) -> Option<f64> {
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let n: f64 = text[..split].parse().ok()?;
    let unit = text[split..].trim().trim_end_matches(')').trim();
    let per = match unit {
        "ms" | "millisecond" | "milliseconds" => 1.0,
        u => match u.trim_end_matches('s') {
            "" | "sec" | "second" => 1_000.0,
            "min" | "minute" => 60_000.0,
            "hour" | "h" => 3_600_000.0,
            "day" | "d" => 86_400_000.0,
            _ => return None,
        },
    };
    Some(n * per)
}

impl LeaseOp {
    pub(crate) fn kind(self) -> CallKind {
        match self {
            LeaseOp::Claim => CallKind::TryAcquire,
            LeaseOp::Renew => CallKind::Renew,
            LeaseOp::Release | LeaseOp::Clear => CallKind::Release,
        }
    }
}

/// Lower case, comments and string literals blanked (but free states' names), whitespace folded.
/// ClickHouse writes rows by mutations: `ALTER TABLE t UPDATE a = 1 WHERE …` is `UPDATE t SET
/// a = 1 WHERE …`, `ALTER TABLE t DELETE WHERE …` is `DELETE FROM t WHERE …`.
fn mutation_as_statement(sql: String) -> String {
    let Some(rest) = sql.trim_start().strip_prefix("alter table ") else {
        return sql;
    };
    let Some((table, what)) = rest.split_once(' ') else {
        return sql;
    };
    if let Some(after) = what.strip_prefix("update ") {
        format!("update {table} set {after}")
    } else if let Some(after) = what.strip_prefix("delete ") {
        format!("delete from {table} {after}")
    } else {
        sql
    }
}

fn normalize(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                // A literal: its text is data, not SQL; a free state's name is kept
                // (`'pending'`), being no column's.
                let mut lit = String::new();
                for d in chars.by_ref() {
                    if d == '\'' {
                        break;
                    }
                    lit.push(d.to_ascii_lowercase());
                }
                out.push('\'');
                if FREE_STATES.contains(&lit.as_str()) {
                    out.push_str(&lit);
                }
                out.push('\'');
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
    // Every `INSERT` (a CTE may hold one before the main one): its columns, with the `VALUES`
    // they take when the statement lists them (`INSERT … SELECT` computes them: unknown, not
    // null).
    let mut from = 0;
    while let Some(i) = sql[from..].find("insert into ").map(|i| from + i) {
        from = i + "insert into ".len();
        let after = &sql[i..];
        let Some(open) = after.find('(') else { break };
        // The column list follows the table name directly.
        if after["insert into ".len()..open].trim().contains(' ') {
            continue;
        }
        let cols = top_level(until_close(&after[open + 1..]), ',');
        let rest = &after[open + 1 + until_close(&after[open + 1..]).len()..];
        let vals = rest
            .trim_start_matches(')')
            .trim_start()
            .strip_prefix("values")
            .and_then(|v| v.trim_start().strip_prefix('('))
            .map(|v| top_level(until_close(v), ','));
        for (k, c) in cols.iter().enumerate() {
            let v = vals
                .as_ref()
                .and_then(|v| v.get(k))
                .map_or("", |v| v.trim());
            out.push((c.trim().trim_matches('"').to_string(), v.to_string()));
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

    #[test]
    fn lease_length_bound_as_a_parameter() {
        let at = |t: &str| lease_interval_param(t);
        assert_eq!(
            at("SET e = now() + ($2::int * interval '1 second')"),
            Some((2, 1_000.0))
        );
        assert_eq!(
            at("SET e = NOW() + interval '1 minute' * $3"),
            Some((3, 60_000.0))
        );
        assert_eq!(
            at("SET e = now() + make_interval(secs=>$4)"),
            Some((4, 1_000.0))
        );
        assert_eq!(
            at("SET e = now() + ($1 || ' milliseconds')::interval"),
            Some((1, 1.0))
        );
        // A literal interval is no parameter; a staleness test subtracts.
        assert_eq!(at("SET e = now() + interval '30 seconds'"), None);
        assert_eq!(at("WHERE e < now() - ($2 * interval '1 second')"), None);
    }

    fn vocab() -> LeaseTable {
        LeaseTable {
            holder_columns: [
                "locked_by",
                "holder",
                "owner",
                "leader",
                "lease_id",
                "fencing_token",
            ]
            .map(String::from)
            .to_vec(),
            expiry_columns: ["expire", "until", "deadline"].map(String::from).to_vec(),
            table_words: ["lock", "lease", "leader"].map(String::from).to_vec(),
            stamp_columns: vec!["heartbeat".to_string()],
            triggers: Vec::new(),
            statement_builders: Vec::new(),
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
        // A finished job deleted by its key and the worker that claimed it, in any table.
        let done = "DELETE FROM job WHERE id = $1 AND locked_by = $2";
        assert_eq!(lease_op(done, &v), Some(LeaseOp::Release));
        let clear = "UPDATE jobs SET locked_by = NULL, lock_expires_at = NULL WHERE id = $1 AND locked_by = $2";
        assert_eq!(lease_op(clear, &v), Some(LeaseOp::Release));
        // Cleared whoever holds it; a free state tested beside another (`or`) lets held rows in.
        let blind = "UPDATE jobs SET locked_by = NULL, lock_expires_at = NULL WHERE id = $1";
        assert_eq!(lease_op(blind, &v), Some(LeaseOp::Clear));
        let either = "UPDATE jobs SET state = 'cancelled', locked_by = NULL, lock_expires_at = NULL WHERE id = $1 AND (state = 'pending' OR state = 'running')";
        assert_eq!(lease_op(either, &v), Some(LeaseOp::Clear));
        // A job registered again: the upsert writes the row afresh, its claim reset.
        let again = "INSERT INTO scheduler_jobs (job_id, job_key, run_at) VALUES ($1, $2, $3) ON CONFLICT (job_key) DO UPDATE SET job_id = EXCLUDED.job_id, run_at = EXCLUDED.run_at, locked_by = NULL, lock_expires_at = NULL";
        assert_eq!(lease_op(again, &v), None);
        // A stale stamp taken (`status = 'picked'` is no free state).
        let take = "UPDATE q SET status = 'picked', taken_at = now() WHERE status = 'unpicked' OR taken_at < now() - $1";
        assert_eq!(lease_op(take, &v), Some(LeaseOp::Claim));
    }

    #[test]
    fn conditional_takeovers_and_stale_stamps() {
        let v = vocab();
        // The takeover in the upsert's SET list (PostgreSQL, then MySQL).
        let pg = "INSERT INTO election_leader (service, id, last_heartbeat) VALUES ($1, $2, NOW()) ON CONFLICT (service) DO UPDATE SET id = CASE WHEN election_leader.last_heartbeat < NOW() - $3::INTERVAL THEN EXCLUDED.id ELSE election_leader.id END, last_heartbeat = CASE WHEN election_leader.id = EXCLUDED.id THEN EXCLUDED.last_heartbeat ELSE election_leader.last_heartbeat END RETURNING service, id";
        assert_eq!(lease_op(pg, &v), Some(LeaseOp::Claim));
        let my = "INSERT IGNORE INTO election_leader (service, id, last_heartbeat) VALUES (?, ?, NOW()) ON DUPLICATE KEY UPDATE id = if(last_heartbeat < NOW() - INTERVAL ? SECOND, VALUES(id), id), last_heartbeat = if(id = VALUES(id), VALUES(last_heartbeat), last_heartbeat)";
        assert_eq!(lease_op(my, &v), Some(LeaseOp::Claim));
        // The same shape with no staleness test of a lease column: no lease.
        let counter = "INSERT INTO page_views (page, views, seen_at) VALUES ($1, 1, NOW()) ON CONFLICT (page) DO UPDATE SET views = CASE WHEN page_views.views > 100 THEN 100 ELSE page_views.views + 1 END";
        assert_eq!(lease_op(counter, &v), None);
        // A claim stamped with the database clock and retaken once stale.
        let picked = "UPDATE proof_generation_details SET status = 'picked_by_prover', updated_at = NOW(), prover_taken_at = NOW() WHERE l1_batch_number = (SELECT l1_batch_number FROM proof_generation_details WHERE status = 'unpicked' OR (status = 'picked_by_prover' AND prover_taken_at < NOW() - $1::INTERVAL) ORDER BY l1_batch_number LIMIT 1) RETURNING l1_batch_number";
        assert_eq!(lease_op(picked, &v), Some(LeaseOp::Claim));
        // Stamped, but tested for being recent (or not tested at all): no claim.
        let seen = "UPDATE users SET last_seen = NOW() WHERE id = $1 AND last_seen > NOW() - INTERVAL '1 day'";
        assert_eq!(lease_op(seen, &v), None);
        let touch = "UPDATE users SET updated_at = NOW() WHERE id = $1";
        assert_eq!(lease_op(touch, &v), None);
    }

    #[test]
    fn expiry_claims_without_a_holder() {
        let v = vocab();
        // A job leased until a clock-plus expiry, retaken once that expiry has passed.
        let leased = "WITH cte AS (SELECT id FROM jobs WHERE queue = $1 AND (state = 'queued'::job_state OR (state = 'leased'::job_state AND leased_until <= now())) FOR UPDATE SKIP LOCKED LIMIT $2) UPDATE jobs j SET state = 'leased'::job_state, leased_until = now() + ($3::int * interval '1 millisecond'), updated_at = now() FROM cte WHERE j.id = cte.id";
        assert_eq!(lease_op(leased, &v), Some(LeaseOp::Claim));
        // A subscription moved on once it ran out: no lease's expiry.
        let subscription = "UPDATE subscriptions SET valid_until = now() + interval '30 days' WHERE valid_until < now() AND auto_renew";
        assert_eq!(lease_op(subscription, &v), None);
        // Put back into the queue once expired: a reaper, not a claim.
        let reaper = "UPDATE jobs SET state = 'queued', leased_until = now() + interval '1 second' WHERE state = 'leased' AND leased_until <= now()";
        assert_eq!(lease_op(reaper, &v), None);
    }

    #[test]
    fn clickhouse_mutations_read_as_statements() {
        let v = vocab();
        let claim = "ALTER TABLE leader_leases UPDATE holder = ?, token = ?, expires_at = now64(3) + toIntervalMillisecond(?) WHERE name = ? AND (holder = ? OR expires_at < now64(3))";
        assert_eq!(lease_op(claim, &v), Some(LeaseOp::Claim));
        let release = "ALTER TABLE leader_leases DELETE WHERE name = ? AND holder = ?";
        assert_eq!(lease_op(release, &v), Some(LeaseOp::Release));
        let expire = "ALTER TABLE leader_leases UPDATE expires_at = now64(3) - toIntervalMillisecond(1) WHERE name = ? AND holder = ?";
        assert_eq!(lease_op(expire, &v), Some(LeaseOp::Release));
        let renew = "ALTER TABLE leader_leases UPDATE expires_at = now64(3) + toIntervalMillisecond(?) WHERE name = ? AND holder = ?";
        assert_eq!(lease_op(renew, &v), Some(LeaseOp::Renew));
        let other = "ALTER TABLE leader_leases ADD COLUMN holder String";
        assert_eq!(lease_op(other, &v), None);
    }

    #[test]
    fn tokens_stamps_and_computed_inserts() {
        let v = vocab();
        // A lease id as the holder, on a table not named for locks.
        let claim = "WITH next AS (SELECT * FROM imports WHERE (leased_until IS NULL OR leased_until <= now()) LIMIT 1 FOR UPDATE SKIP LOCKED) UPDATE imports SET leased_until = now() + interval '30 minutes', lease_id = $1 FROM next WHERE imports.id = next.id";
        assert_eq!(lease_op(claim, &v), Some(LeaseOp::Claim));
        let renew = "UPDATE imports SET leased_until = $2 WHERE id = $1 AND lease_id = $3";
        assert_eq!(lease_op(renew, &v), Some(LeaseOp::Renew));
        let clear = "UPDATE imports SET lease_id = NULL, leased_until = NULL, status = 'paused' WHERE id = $1";
        assert_eq!(lease_op(clear, &v), Some(LeaseOp::Clear));
        let sweep =
            "UPDATE imports SET lease_id = NULL, leased_until = NULL WHERE leased_until < now()";
        assert_eq!(lease_op(sweep, &v), None);
        let rotate = "UPDATE imports SET state = $2, lease_id = $3, leased_until = $4 WHERE id = $1 AND lease_id = $5";
        assert_eq!(lease_op(rotate, &v), Some(LeaseOp::Renew));
        assert_eq!(
            lease_interval_ms(
                "UPDATE t SET leased_until = now() + interval '30 minutes', lease_id = $1"
            ),
            Some(1_800_000.0)
        );
        assert_eq!(
            lease_interval_ms(
                "UPDATE t SET expires_at = NOW() + INTERVAL 15 SECOND WHERE holder = ?"
            ),
            Some(15_000.0)
        );
        assert_eq!(
            lease_interval_ms("SET expires_at = now() + '10 seconds'::interval"),
            Some(10_000.0)
        );
        assert_eq!(
            lease_interval_ms("SET expires_at = DATE_ADD(NOW(), INTERVAL 90 SECOND)"),
            Some(90_000.0)
        );
        assert_eq!(
            lease_interval_ms("WHERE expires_at < DATE_SUB(NOW(), INTERVAL 5 MINUTE)"),
            None
        );
        assert_eq!(
            lease_interval_ms("SET expires_at = now() + $2 WHERE expires_at < now()"),
            None
        );
        let free = "UPDATE locks SET holder = $1, expires_at = now() + interval '10 seconds' WHERE name = $2 AND (holder IS NULL OR holder = $1)";
        assert_eq!(lease_op(free, &v), Some(LeaseOp::Claim));
        // A heartbeat lease: stale rows taken, the holder's compare-and-set renewal.
        let stale = "WITH picked AS (SELECT task_id FROM tasks WHERE heartbeat < NOW() - $2::INTERVAL LIMIT 3 FOR UPDATE SKIP LOCKED) UPDATE tasks SET heartbeat = NOW() WHERE task_id IN (SELECT task_id FROM picked)";
        assert_eq!(lease_op(stale, &v), Some(LeaseOp::Claim));
        let beat = "UPDATE tasks SET heartbeat = NOW() WHERE task_id = $1 AND heartbeat::TEXT = $2";
        assert_eq!(lease_op(beat, &v), Some(LeaseOp::Renew));
        // A key row written with an expiry and a fencing token by `INSERT … SELECT`.
        let key = "WITH b AS (INSERT INTO backend (id, drone_id) VALUES ($1, $2) RETURNING id) INSERT INTO backend_key (id, key_name, expires_at, fencing_token) SELECT $1, $3, now() + $4, 7 FROM b RETURNING fencing_token";
        assert_eq!(lease_op(key, &v), Some(LeaseOp::Claim));
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
            // An owner and an expiry on an ordinary table: a session or an invitation.
            "INSERT INTO sessions (id, owner_id, expires_at) VALUES ($1, $2, $3)",
            "INSERT INTO invites (code, owner) SELECT $1, $2",
            // A worker's own heartbeat, and one reset by a sweeper: no holder, no guard.
            "UPDATE workers SET heartbeat = now() WHERE id = $1",
            "UPDATE workers SET heartbeat = now(), status = 'idle' WHERE status = 'busy'",
            // A reaper putting stale claims back (no holder's release), and a cancel that
            // picks only rows nobody holds.
            "UPDATE work SET status = 'pending', claim_token = NULL, updated_at = NOW() WHERE status = 'running' AND updated_at < NOW() - make_interval(secs => $1)",
            "UPDATE tasks SET state = 'cancelled', locked_by = NULL, lock_expires_at = NULL WHERE task_id = $1 AND state = 'pending'",
            // A new row written with its lock columns empty: nothing held, nothing given back.
            "INSERT INTO jobs (id, queue, locked_at, locked_by, lock_expires_at) VALUES ($1, $2, NULL, NULL, NULL)",
        ] {
            assert_eq!(lease_op(sql, &v), None, "{sql}");
        }
    }
}
