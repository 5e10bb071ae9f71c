//! The import incident, reproduced on a real PostgreSQL. Shared by the example
//! (`examples/import_incident/main.rs`) and the integration test
//! (`tests/import_incident.rs`), which include this file with `#[path]`.
//!
//! Two workers import the same file of N lines into one table. Whoever holds
//! the lock resumes from the checkpoint (the highest line already written + 1),
//! writes batches, renews the lock before a batch when a renewal is due, and
//! marks the file done at the end. Worker A stalls once, half-way, right after
//! a renewal and with its next batch already read (the batch "in flight"): its
//! whole task, renewal included, stops for `pause`. The lock expires, worker B
//! takes over and resumes from the checkpoint. What A does when it wakes up
//! depends on the variant.
#![allow(dead_code)]

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use fenced_lock::{
    FenceError, Lease, LockBackend, PostgresBackend, PostgresFence, PostgresOptions,
};
use serde::Serialize;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_postgres::{Client, NoTls};

/// Error type of the scenario.
pub type Error = Box<dyn std::error::Error + Send + Sync>;

/// One way of protecting the import.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Variant {
    /// Plain TTL lock; renewal does not check who holds the lock.
    BlindRenewal,
    /// The same with a 5x longer TTL and a 5x longer pause.
    LongerTtl,
    /// Renewal checks ownership; the worker stops when a renewal fails.
    CheckedRenewal,
    /// fenced-lock lease; every batch is admitted by the PostgreSQL fence in
    /// the same transaction as the insert.
    Fenced,
    /// No fencing, but rows are keyed by (file, line) with a uniqueness
    /// constraint (and `ON CONFLICT DO NOTHING`); run with the blind lock.
    Idempotent,
    /// The idempotent import with no lock at all: both workers import the
    /// whole file at the same time.
    IdempotentNoLock,
}

impl Variant {
    /// All five, in the order of the table.
    pub const ALL: [Variant; 6] = [
        Variant::BlindRenewal,
        Variant::LongerTtl,
        Variant::CheckedRenewal,
        Variant::Fenced,
        Variant::Idempotent,
        Variant::IdempotentNoLock,
    ];

    /// Whether rows are keyed by (file, line).
    pub fn idempotent(self) -> bool {
        matches!(self, Variant::Idempotent | Variant::IdempotentNoLock)
    }

    /// Number and short description for the table.
    pub fn label(self) -> &'static str {
        match self {
            Variant::BlindRenewal => "1 plain TTL lock, blind renewal",
            Variant::LongerTtl => "2 same, 5x TTL and 5x pause",
            Variant::CheckedRenewal => "3 ownership-checked renewal",
            Variant::Fenced => "4 fenced writes (fenced-lock)",
            Variant::Idempotent => "5 idempotent (file, line) key",
            Variant::IdempotentNoLock => "5b idempotent key, no lock at all",
        }
    }
}

/// Parameters of a run.
#[derive(Clone, Debug, Serialize)]
pub struct Config {
    /// libpq connection string (never sent anywhere but the configured host).
    #[serde(skip)]
    pub pg: String,
    /// Lines in the imported file.
    pub lines: usize,
    /// Lines per insert (and the size of the batch in flight during the pause).
    pub batch: usize,
    /// Lock TTL (variant 2 multiplies it by 5).
    #[serde(rename = "ttl_ms", serialize_with = "ser_ms")]
    pub ttl: Duration,
    /// A renewal is due when this much time passed since the last one.
    #[serde(rename = "renew_every_ms", serialize_with = "ser_ms")]
    pub renew_every: Duration,
    /// Length of worker A's stall (variant 2 multiplies it by 5).
    #[serde(rename = "pause_ms", serialize_with = "ser_ms")]
    pub pause: Duration,
}

fn ser_ms<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_millis() as u64)
}

impl Config {
    /// The demo's scaled-down timings: a 60 s TTL renewed every 30 s becomes
    /// 600 ms / 300 ms; the stall is 700 ms.
    pub fn demo(pg: impl Into<String>, lines: usize) -> Self {
        Self {
            pg: pg.into(),
            lines,
            batch: 200,
            ttl: Duration::from_millis(600),
            renew_every: Duration::from_millis(300),
            pause: Duration::from_millis(700),
        }
    }
}

/// What one variant produced.
#[derive(Clone, Debug, Serialize)]
pub struct Outcome {
    /// Which variant.
    pub variant: Variant,
    /// Lock TTL used, ms.
    pub ttl_ms: u64,
    /// Worker A's stall, ms.
    pub pause_ms: u64,
    /// Lines in the file.
    pub lines: usize,
    /// Rows in the table at the end.
    pub rows_written: u64,
    /// Rows beyond the first for the same line.
    pub duplicate_rows: u64,
    /// Lines of the file with no row.
    pub missing_lines: u64,
    /// Rows a worker tried to write while the lock table already named a
    /// newer holder (checked right before each insert).
    pub stale_writes_attempted: u64,
    /// Rows refused by the database: by the fence (variant 4) or by the
    /// uniqueness constraint (variant 5).
    pub stale_writes_rejected: u64,
    /// Wall time of the whole variant, ms.
    pub wall_ms: u64,
}

/// Default connection string: loopback, trust auth, database `test`.
pub fn default_pg() -> String {
    std::env::var("FENCED_LOCK_PG").unwrap_or_else(|_| {
        "host=127.0.0.1 port=5432 user=postgres dbname=test \
         options='-c synchronous_commit=off'"
            .into()
    })
}

/// Table names of one run (unique per run, dropped at the end).
#[derive(Clone, Debug)]
struct Tables {
    rows: String,
    naive_locks: String,
    fl_locks: String,
    fence: String,
    done: String,
}

impl Tables {
    fn new() -> Self {
        let base = format!("import_{:016x}", rand::random::<u64>());
        Self {
            rows: base.clone(),
            naive_locks: format!("{base}_locks"),
            fl_locks: format!("{base}_fl"),
            fence: format!("{base}_fence"),
            done: format!("{base}_done"),
        }
    }
}

const FILE: &str = "customers-2026-11-29.csv";
const KEY: &str = "import:customers-2026-11-29.csv";
const RESOURCE: &str = "customers-2026-11-29.csv";

async fn connect(pg: &str) -> Result<Client, Error> {
    let (client, conn) = tokio_postgres::connect(pg, NoTls).await?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(client)
}

/// Runs one variant end to end: fresh tables, two workers, counts, drop.
pub async fn run_variant(cfg: &Config, variant: Variant) -> Result<Outcome, Error> {
    run_variant_with_pause(cfg, variant, cfg.pause).await
}

/// Same, with an explicit stall length (variant 2 still multiplies TTL and stall by 5).
pub async fn run_variant_with_pause(
    cfg: &Config,
    variant: Variant,
    pause: Duration,
) -> Result<Outcome, Error> {
    let mut cfg = cfg.clone();
    cfg.pause = pause;
    if variant == Variant::LongerTtl {
        cfg.ttl *= 5;
        cfg.renew_every *= 5;
        cfg.pause *= 5;
    }
    let tables = Tables::new();
    let admin = connect(&cfg.pg).await?;
    let result = run_inner(&cfg, variant, &tables, &admin).await;
    let drop = admin
        .batch_execute(&format!(
            "DROP TABLE IF EXISTS {}; DROP TABLE IF EXISTS {}; DROP TABLE IF EXISTS {};
             DROP TABLE IF EXISTS {}; DROP TABLE IF EXISTS {};",
            tables.rows, tables.naive_locks, tables.fl_locks, tables.fence, tables.done
        ))
        .await;
    let outcome = result?;
    drop?;
    Ok(outcome)
}

async fn run_inner(
    cfg: &Config,
    variant: Variant,
    tables: &Tables,
    admin: &Client,
) -> Result<Outcome, Error> {
    let unique = if variant.idempotent() {
        ", PRIMARY KEY (file, line)"
    } else {
        ""
    };
    admin
        .batch_execute(&format!(
            "CREATE TABLE {rows} (file text NOT NULL, line int NOT NULL, payload text NOT NULL,
                                  writer int NOT NULL{unique});
             CREATE INDEX ON {rows} (file, line);
             CREATE TABLE {done} (file text PRIMARY KEY);
             {locks};",
            rows = tables.rows,
            done = tables.done,
            locks = fenced_lock::backend::postgres::migration_sql(&tables.naive_locks)?,
        ))
        .await?;
    let fence = if variant == Variant::Fenced {
        Some(PostgresFence::connect(&cfg.pg, &tables.fence).await?)
    } else {
        None
    };
    let shared = Arc::new(Shared {
        cfg: cfg.clone(),
        variant,
        tables: tables.clone(),
        fence,
        a_holds: Notify::new(),
    });
    let started = Instant::now();
    let a = tokio::spawn(worker(shared.clone(), 0));
    // B starts once A holds the lock, so A is always the first holder.
    tokio::time::timeout(Duration::from_secs(30), shared.a_holds.notified())
        .await
        .map_err(|_| "worker A did not acquire the lock within 30 s")?;
    let b = tokio::spawn(worker(shared.clone(), 1));
    let sa = a.await??;
    let sb = b.await??;
    let wall = started.elapsed();

    let row = admin
        .query_one(
            &format!(
                "SELECT count(*), count(DISTINCT line) FROM {} WHERE file = $1",
                tables.rows
            ),
            &[&FILE],
        )
        .await?;
    let rows: i64 = row.get(0);
    let distinct: i64 = row.get(1);
    Ok(Outcome {
        variant,
        ttl_ms: cfg.ttl.as_millis() as u64,
        pause_ms: cfg.pause.as_millis() as u64,
        lines: cfg.lines,
        rows_written: rows as u64,
        duplicate_rows: (rows - distinct) as u64,
        missing_lines: (cfg.lines as i64 - distinct) as u64,
        stale_writes_attempted: sa.stale_attempted + sb.stale_attempted,
        stale_writes_rejected: sa.rejected + sb.rejected,
        wall_ms: wall.as_millis() as u64,
    })
}

struct Shared {
    cfg: Config,
    variant: Variant,
    tables: Tables,
    fence: Option<PostgresFence>,
    a_holds: Notify,
}

#[derive(Default)]
struct Stats {
    stale_attempted: u64,
    rejected: u64,
}

/// The lock as one worker sees it.
enum Held {
    Naive {
        token: i64,
        owner: [u8; 16],
    },
    Fenced(Lease),
    /// No lock (variant 5b).
    None,
}

impl Held {
    fn token(&self) -> i64 {
        match self {
            Held::Naive { token, .. } => *token,
            Held::Fenced(l) => l.token().to_i64().unwrap_or(i64::MAX),
            Held::None => 0,
        }
    }
}

/// One worker's connections and lock operations.
struct Worker {
    shared: Arc<Shared>,
    id: i32,
    client: Client,
    fenced: Option<PostgresBackend>,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

impl Worker {
    fn lock_table(&self) -> &str {
        if self.fenced.is_some() {
            &self.shared.tables.fl_locks
        } else {
            &self.shared.tables.naive_locks
        }
    }

    async fn try_acquire(&self) -> Result<Option<Held>, Error> {
        let ttl = self.shared.cfg.ttl;
        if self.shared.variant == Variant::IdempotentNoLock {
            return Ok(Some(Held::None));
        }
        if let Some(b) = &self.fenced {
            return Ok(b.try_acquire(KEY, ttl).await?.map(Held::Fenced));
        }
        let owner: [u8; 16] = rand::random();
        let row = self
            .client
            .query_opt(
                &format!(
                    "INSERT INTO {t} AS l (lock_key, token, owner, expires_at)
                     VALUES ($1, 1, $2, now() + $3::float8 * interval '1 millisecond')
                     ON CONFLICT (lock_key) DO UPDATE
                        SET token = l.token + 1, owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at
                      WHERE l.expires_at <= now()
                     RETURNING token",
                    t = self.shared.tables.naive_locks
                ),
                &[&KEY, &&owner[..], &ms(ttl)],
            )
            .await?;
        Ok(row.map(|r| Held::Naive {
            token: r.get(0),
            owner,
        }))
    }

    /// Renews; `false` means the lock is lost (never for blind renewal).
    async fn renew(&self, held: &mut Held) -> Result<bool, Error> {
        let ttl = ms(self.shared.cfg.ttl);
        let t = &self.shared.tables.naive_locks;
        match (held, self.shared.variant) {
            (Held::None, _) => Ok(true),
            (Held::Fenced(lease), _) => {
                let b = self.fenced.as_ref().ok_or("fenced lease without backend")?;
                match b.renew(lease).await {
                    Ok(()) => Ok(true),
                    Err(fenced_lock::LockError::LockLost { .. }) => Ok(false),
                    Err(e) => Err(e.into()),
                }
            }
            (Held::Naive { token, owner }, Variant::CheckedRenewal) => {
                let n = self
                    .client
                    .execute(
                        &format!(
                            "UPDATE {t} SET expires_at = now() + $2::float8 * interval '1 millisecond'
                              WHERE lock_key = $1 AND owner = $3 AND token = $4 AND expires_at > now()"
                        ),
                        &[&KEY, &ttl, &&owner[..], &*token],
                    )
                    .await?;
                Ok(n == 1)
            }
            (Held::Naive { .. }, _) => {
                // The naive renewal: extend whatever lock is there.
                self.client
                    .execute(
                        &format!(
                            "UPDATE {t} SET expires_at = now() + $2::float8 * interval '1 millisecond'
                              WHERE lock_key = $1"
                        ),
                        &[&KEY, &ttl],
                    )
                    .await?;
                Ok(true)
            }
        }
    }

    async fn release(&self, held: Held) -> Result<(), Error> {
        match held {
            Held::None => {}
            Held::Fenced(lease) => {
                let b = self.fenced.as_ref().ok_or("fenced lease without backend")?;
                b.release(lease).await?;
            }
            Held::Naive { token, owner } => {
                self.client
                    .execute(
                        &format!(
                            "UPDATE {} SET owner = NULL, expires_at = '-infinity'
                              WHERE lock_key = $1 AND owner = $2 AND token = $3",
                            self.shared.tables.naive_locks
                        ),
                        &[&KEY, &&owner[..], &token],
                    )
                    .await?;
            }
        }
        Ok(())
    }

    /// Whether the lock table already names a newer holder than `held`.
    async fn is_stale(&self, held: &Held) -> Result<bool, Error> {
        if matches!(held, Held::None) {
            return Ok(false);
        }
        let row = self
            .client
            .query_one(
                &format!(
                    "SELECT token FROM {} WHERE lock_key = $1",
                    self.lock_table()
                ),
                &[&KEY],
            )
            .await?;
        Ok(row.get::<_, i64>(0) != held.token())
    }

    /// Writes lines `[from, to)`; returns `(rows_inserted, rows_refused)`.
    async fn write(&mut self, held: &Held, from: usize, to: usize) -> Result<(u64, u64), Error> {
        let lines: Vec<i32> = (from as i32..to as i32).collect();
        let payloads: Vec<String> = lines
            .iter()
            .map(|l| format!("customer-{l:06},plan-{},region-{}", l % 7, l % 3))
            .collect();
        let n = lines.len() as u64;
        let rows = &self.shared.tables.rows;
        let insert = format!(
            "INSERT INTO {rows} (file, line, payload, writer)
             SELECT $1, l, p, $4 FROM unnest($2::int4[], $3::text[]) AS u(l, p)"
        );
        match self.shared.variant {
            Variant::Fenced => {
                let fence = self.shared.fence.clone().ok_or("no fence")?;
                let ticket = match held {
                    Held::Fenced(l) => l.ticket(),
                    _ => return Err("fenced variant without a fenced lease".into()),
                };
                // The fenced transaction: the check and the insert commit together.
                match fence.transaction(&mut self.client, RESOURCE, ticket).await {
                    Ok(tx) => {
                        let k = tx
                            .execute(&insert, &[&FILE, &lines, &payloads, &self.id])
                            .await?;
                        tx.commit().await?;
                        Ok((k, 0))
                    }
                    Err(FenceError::Stale(_)) => Ok((0, n)),
                    Err(e) => Err(e.into()),
                }
            }
            Variant::Idempotent | Variant::IdempotentNoLock => {
                let k = self
                    .client
                    .execute(
                        &format!("{insert} ON CONFLICT (file, line) DO NOTHING"),
                        &[&FILE, &lines, &payloads, &self.id],
                    )
                    .await?;
                Ok((k, n - k))
            }
            _ => {
                let k = self
                    .client
                    .execute(&insert, &[&FILE, &lines, &payloads, &self.id])
                    .await?;
                Ok((k, 0))
            }
        }
    }

    async fn is_done(&self) -> Result<bool, Error> {
        let r = self
            .client
            .query_opt(
                &format!("SELECT 1 FROM {} WHERE file = $1", self.shared.tables.done),
                &[&FILE],
            )
            .await?;
        Ok(r.is_some())
    }

    async fn mark_done(&self) -> Result<(), Error> {
        self.client
            .execute(
                &format!(
                    "INSERT INTO {} (file) VALUES ($1) ON CONFLICT DO NOTHING",
                    self.shared.tables.done
                ),
                &[&FILE],
            )
            .await?;
        Ok(())
    }

    /// Where a new holder resumes: the line after the highest one written.
    async fn checkpoint(&self) -> Result<usize, Error> {
        let r = self
            .client
            .query_one(
                &format!(
                    "SELECT coalesce(max(line) + 1, 0) FROM {} WHERE file = $1",
                    self.shared.tables.rows
                ),
                &[&FILE],
            )
            .await?;
        Ok(r.get::<_, i32>(0) as usize)
    }
}

/// One importer. Worker 0 (A) stalls once, half-way through the file.
async fn worker(shared: Arc<Shared>, id: i32) -> Result<Stats, Error> {
    let client = connect(&shared.cfg.pg).await?;
    let fenced = if shared.variant == Variant::Fenced {
        Some(
            PostgresBackend::connect_with(
                &shared.cfg.pg,
                PostgresOptions::default().table(&shared.tables.fl_locks),
            )
            .await?,
        )
    } else {
        None
    };
    let mut w = Worker {
        shared: shared.clone(),
        id,
        client,
        fenced,
    };
    let cfg = shared.cfg.clone();
    let mut stats = Stats::default();
    let mut stalled = id != 0;
    let give_up = Instant::now() + Duration::from_secs(60);
    loop {
        if Instant::now() > give_up {
            return Err(format!("worker {id} did not finish within 60 s").into());
        }
        let Some(mut held) = w.try_acquire().await? else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        if id == 0 {
            shared.a_holds.notify_one();
        }
        if w.is_done().await? {
            w.release(held).await?;
            return Ok(stats);
        }
        let mut last_renew = Instant::now();
        let mut next = w.checkpoint().await?;
        let mut lost = false;
        while next < cfg.lines {
            if last_renew.elapsed() >= cfg.renew_every {
                last_renew = Instant::now();
                if !w.renew(&mut held).await? {
                    lost = true;
                    break;
                }
            }
            let end = (next + cfg.batch).min(cfg.lines);
            if !stalled && next >= cfg.lines / 2 {
                // The stall strikes right after a renewal (the lock has its full
                // TTL left) with the next batch already read: it is "in flight"
                // and gets written as soon as the task runs again.
                stalled = true;
                last_renew = Instant::now();
                if !w.renew(&mut held).await? {
                    lost = true;
                    break;
                }
                tokio::time::sleep(cfg.pause).await;
            }
            if w.is_stale(&held).await? {
                stats.stale_attempted += (end - next) as u64;
            }
            let (_, refused) = w.write(&held, next, end).await?;
            if shared.variant == Variant::Fenced && refused > 0 {
                // The fence says a newer holder exists: stop at once.
                stats.rejected += refused;
                lost = true;
                break;
            }
            if shared.variant.idempotent() {
                stats.rejected += refused;
            }
            next = end;
        }
        if !lost {
            w.mark_done().await?;
            w.release(held).await?;
            return Ok(stats);
        }
        // Lost the lock: go back to acquiring (the new holder will finish and
        // mark the file done).
    }
}

/// Sweep for the chart: duplicates against stall length for variants 1, 3, 4.
pub async fn sweep(cfg: &Config, pauses: &[Duration]) -> Result<Vec<Outcome>, Error> {
    let mut out = Vec::new();
    for &p in pauses {
        for v in [
            Variant::BlindRenewal,
            Variant::CheckedRenewal,
            Variant::Fenced,
        ] {
            out.push(run_variant_with_pause(cfg, v, p).await?);
        }
    }
    Ok(out)
}

/// The results as a text table.
pub fn table(outcomes: &[Outcome]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<34} {:>7} {:>7} {:>8} {:>10} {:>8} {:>9} {:>9} {:>8}",
        "variant",
        "TTL ms",
        "stall",
        "rows",
        "duplicates",
        "missing",
        "stale try",
        "rejected",
        "wall ms"
    );
    for o in outcomes {
        let _ = writeln!(
            s,
            "{:<34} {:>7} {:>7} {:>8} {:>10} {:>8} {:>9} {:>9} {:>8}",
            o.variant.label(),
            o.ttl_ms,
            o.pause_ms,
            o.rows_written,
            o.duplicate_rows,
            o.missing_lines,
            o.stale_writes_attempted,
            o.stale_writes_rejected,
            o.wall_ms
        );
    }
    s
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// An SVG line chart of duplicate rows against stall length (from [`sweep`]).
pub fn chart_svg(points: &[Outcome], lines: usize, ttl_ms: u64) -> String {
    let (w, h) = (880.0_f64, 440.0_f64);
    let (left, right, top, bottom) = (80.0, 260.0, 64.0, 60.0);
    let pw = w - left - right;
    let ph = h - top - bottom;
    let xmax = points.iter().map(|p| p.pause_ms).max().unwrap_or(1).max(1) as f64;
    let ymax_raw = points
        .iter()
        .map(|p| p.duplicate_rows)
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    // A round axis maximum.
    let mag = 10f64.powf(ymax_raw.log10().floor());
    let ymax = (ymax_raw / mag).ceil() * mag;
    let x = |v: f64| left + v / xmax * pw;
    let y = |v: f64| top + ph - v / ymax * ph;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="{w}" height="{h}" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{left}" y="24" font-size="15" font-weight="bold">Import incident: duplicate rows vs. stall of worker A</text>"#
    );
    let _ = writeln!(
        s,
        r##"<text x="{left}" y="44" fill="#444">{}</text>"##,
        esc(&format!(
            "{lines} lines, lock TTL {ttl_ms} ms, two workers, real PostgreSQL; one run per point"
        ))
    );
    // Grid and axes.
    for i in 0..=5 {
        let v = ymax * f64::from(i) / 5.0;
        let yy = y(v);
        let _ = writeln!(
            s,
            r##"<line x1="{left}" y1="{yy:.1}" x2="{:.1}" y2="{yy:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            left + pw,
            left - 8.0,
            yy + 4.0,
            v.round()
        );
    }
    let mut xs: Vec<u64> = points.iter().map(|p| p.pause_ms).collect();
    xs.sort_unstable();
    xs.dedup();
    for &p in &xs {
        let xx = x(p as f64);
        let _ = writeln!(
            s,
            r##"<line x1="{xx:.1}" y1="{top}" x2="{xx:.1}" y2="{:.1}" stroke="#eee"/><text x="{xx:.1}" y="{:.1}" text-anchor="middle">{p}</text>"##,
            top + ph,
            top + ph + 18.0
        );
    }
    // TTL marker.
    let tx = x(ttl_ms as f64);
    let _ = writeln!(
        s,
        r##"<line x1="{tx:.1}" y1="{top}" x2="{tx:.1}" y2="{:.1}" stroke="#888" stroke-dasharray="4 4"/><text x="{:.1}" y="{:.1}" fill="#555">TTL</text>"##,
        top + ph,
        tx + 4.0,
        top + 14.0
    );
    let _ = writeln!(
        s,
        r##"<line x1="{left}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#333"/><line x1="{left}" y1="{top}" x2="{left}" y2="{:.1}" stroke="#333"/>"##,
        top + ph,
        left + pw,
        top + ph,
        top + ph
    );
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">stall of worker A (ms)</text>"#,
        left + pw / 2.0,
        h - 16.0
    );
    let _ = writeln!(
        s,
        r#"<text transform="translate(20 {:.1}) rotate(-90)" text-anchor="middle">duplicate rows</text>"#,
        top + ph / 2.0
    );
    let series = [
        (Variant::BlindRenewal, "#d62728", "1 blind renewal"),
        (Variant::CheckedRenewal, "#ff7f0e", "3 checked renewal"),
        (Variant::Fenced, "#2ca02c", "4 fenced (fenced-lock)"),
    ];
    for (i, (v, color, name)) in series.iter().enumerate() {
        let mut pts: Vec<&Outcome> = points.iter().filter(|p| p.variant == *v).collect();
        pts.sort_by_key(|p| p.pause_ms);
        let path: Vec<String> = pts
            .iter()
            .map(|p| {
                format!(
                    "{:.1},{:.1}",
                    x(p.pause_ms as f64),
                    y(p.duplicate_rows as f64)
                )
            })
            .collect();
        let _ = writeln!(
            s,
            r#"<polyline points="{}" fill="none" stroke="{color}" stroke-width="2.5"/>"#,
            path.join(" ")
        );
        for p in &pts {
            let _ = writeln!(
                s,
                r#"<circle cx="{:.1}" cy="{:.1}" r="4" fill="{color}"><title>{}: stall {} ms, {} duplicates</title></circle>"#,
                x(p.pause_ms as f64),
                y(p.duplicate_rows as f64),
                esc(name),
                p.pause_ms,
                p.duplicate_rows
            );
        }
        if let Some(last) = pts.last() {
            let _ = writeln!(
                s,
                r#"<text x="{:.1}" y="{:.1}" fill="{color}" font-weight="bold">{}</text>"#,
                x(last.pause_ms as f64) + 8.0,
                y(last.duplicate_rows as f64) + [4.0, -12.0, 4.0][i],
                last.duplicate_rows
            );
        }
        let ly = top + 20.0 + 22.0 * i as f64;
        let lx = left + pw + 56.0;
        let _ = writeln!(
            s,
            r#"<line x1="{lx:.1}" y1="{ly:.1}" x2="{:.1}" y2="{ly:.1}" stroke="{color}" stroke-width="3"/><text x="{:.1}" y="{:.1}">{}</text>"#,
            lx + 22.0,
            lx + 28.0,
            ly + 4.0,
            esc(name)
        );
    }
    let _ = writeln!(s, "</svg>");
    s
}
