//! Fault-injection harness: randomized schedules against a backend and a
//! fenced resource, with an invariant checker.
//!
//! Invariants (per lock key), checked on timestamps each taken on the
//! monotonic clock on the side that makes the check conservative:
//! * the fenced resource never admits a token lower than one it already
//!   admitted (admissions are serialized at the resource, so their order is
//!   the order the checker sees);
//! * every admitted token was handed out by an acquisition, and every
//!   acquisition's token was the newest at acquire time: for tokens `t < t'`,
//!   `t'` was not granted before `t` was even requested, and no token repeats;
//! * no two holders overlap: for `t < t'`, the end of `t`'s hold (its last
//!   `valid_until`, or the moment it started releasing) is not after the
//!   moment `t'` was granted.
#![allow(dead_code)]

use std::collections::HashMap;
use std::io::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fenced_lock::{Fence, FenceError, LockBackend, LockError, Ticket};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::time::Instant;

/// One acquisition as the worker saw it.
#[derive(Clone, Debug)]
pub struct Hold {
    pub key: String,
    pub token: u64,
    /// Before the acquire request was sent.
    pub sent: Instant,
    /// After the grant was received.
    pub granted: Instant,
    /// min(last valid_until, start of release / moment the loss was seen).
    pub end: Instant,
}

#[derive(Default)]
struct State {
    holds: Vec<Hold>,
    admitted: Vec<(String, u64)>,
    violations: Vec<String>,
}

/// Counts and the invariant checker, shared by all workers of a run.
#[derive(Clone, Default)]
pub struct Checker {
    state: Arc<Mutex<State>>,
    /// One gate per resource: admit + record happen under it.
    gates: Arc<Mutex<HashMap<String, Arc<tokio::sync::Mutex<u64>>>>>,
    pub counters: Arc<Counters>,
}

/// Totals of a run.
#[derive(Default, Debug)]
pub struct Counters {
    pub acquired: std::sync::atomic::AtomicU64,
    pub admitted: std::sync::atomic::AtomicU64,
    pub rejected: std::sync::atomic::AtomicU64,
    pub errors: std::sync::atomic::AtomicU64,
    pub lost: std::sync::atomic::AtomicU64,
    pub timeouts: std::sync::atomic::AtomicU64,
}

fn inc(c: &std::sync::atomic::AtomicU64) {
    c.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

fn get(c: &std::sync::atomic::AtomicU64) -> u64 {
    c.load(std::sync::atomic::Ordering::Relaxed)
}

impl Checker {
    pub fn hold(&self, h: Hold) {
        inc(&self.counters.acquired);
        self.state.lock().unwrap().holds.push(h);
    }

    pub fn violation(&self, v: String) {
        self.state.lock().unwrap().violations.push(v);
    }

    /// A write to the fenced resource `resource` carrying `token`; returns
    /// whether it was admitted. The admit and its bookkeeping are serialized
    /// per resource, so a lower token admitted after a higher one is caught.
    pub async fn write<F: Fence>(&self, fence: &F, resource: &str, ticket: Ticket) -> bool {
        let token = ticket.token;
        let gate = self
            .gates
            .lock()
            .unwrap()
            .entry(resource.to_owned())
            .or_default()
            .clone();
        let mut high = gate.lock().await;
        match fence.check_only(resource, ticket).await {
            Ok(()) => {
                inc(&self.counters.admitted);
                if token.get() < *high {
                    self.violation(format!(
                        "{resource}: token {token} admitted after {}",
                        *high
                    ));
                }
                *high = (*high).max(token.get());
                self.state
                    .lock()
                    .unwrap()
                    .admitted
                    .push((resource.to_owned(), token.get()));
                true
            }
            Err(FenceError::Stale(_)) => {
                inc(&self.counters.rejected);
                false
            }
            Err(_) => {
                inc(&self.counters.errors);
                false
            }
        }
    }

    /// Checks the acquisition invariants; returns all violations.
    pub fn finish(&self) -> Vec<String> {
        let st = self.state.lock().unwrap();
        let mut v = st.violations.clone();
        let mut by_key: HashMap<&str, Vec<&Hold>> = HashMap::new();
        for h in &st.holds {
            by_key.entry(h.key.as_str()).or_default().push(h);
        }
        for (key, mut hs) in by_key {
            hs.sort_by_key(|h| h.token);
            for w in hs.windows(2) {
                let (a, b) = (w[0], w[1]);
                if a.token == b.token {
                    v.push(format!("{key}: token {} handed out twice", a.token));
                }
                if b.granted <= a.sent {
                    v.push(format!(
                        "{key}: token {} was granted before token {} was requested (not newest)",
                        b.token, a.token
                    ));
                }
            }
            // Overlap also against every earlier hold, not only the previous one.
            let mut latest_end: Option<(&Hold, Instant)> = None;
            for h in &hs {
                if let Some((p, e)) = latest_end
                    && e > h.granted
                {
                    v.push(format!(
                        "{key}: holders overlap: token {} valid {:?} past the grant of token {}",
                        p.token,
                        e - h.granted,
                        h.token
                    ));
                }
                if latest_end.is_none_or(|(_, e)| h.end > e) {
                    latest_end = Some((h, h.end));
                }
            }
        }
        let issued: std::collections::HashSet<(&str, u64)> =
            st.holds.iter().map(|h| (h.key.as_str(), h.token)).collect();
        for (r, t) in &st.admitted {
            if !issued.contains(&(r.as_str(), *t)) {
                v.push(format!(
                    "{r}: admitted token {t} that no acquisition returned"
                ));
            }
        }
        v
    }

    /// All recorded holds.
    pub fn holds(&self) -> Vec<Hold> {
        self.state.lock().unwrap().holds.clone()
    }

    pub fn acquired(&self) -> u64 {
        get(&self.counters.acquired)
    }
    pub fn admitted(&self) -> u64 {
        get(&self.counters.admitted)
    }
    pub fn rejected(&self) -> u64 {
        get(&self.counters.rejected)
    }
    pub fn errors(&self) -> u64 {
        get(&self.counters.errors)
    }
}

/// Shape of a randomized run.
#[derive(Clone, Debug)]
pub struct Schedule {
    /// Total trials; each trial is one lock key contended by `workers`.
    pub trials: usize,
    /// Trials running at the same time.
    pub concurrency: usize,
    pub workers: usize,
    /// Acquisitions per worker per trial.
    pub rounds: usize,
    /// Writes per hold.
    pub writes: usize,
    pub ttl: Duration,
    /// Probability that a pause before a write is longer than the TTL.
    pub p_long_pause: f64,
    /// Probability of renewing before a write.
    pub p_renew: f64,
}

/// The seed: `FENCED_LOCK_FAULT_SEED` or a fresh random one.
pub fn seed() -> u64 {
    std::env::var("FENCED_LOCK_FAULT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random)
}

/// Writes a line to the real stderr, bypassing the test harness's capture,
/// and returns it.
pub fn report(line: String) -> String {
    let mut e = std::io::stderr().lock();
    let _ = writeln!(e, "{line}");
    let _ = e.flush();
    line
}

/// Runs `schedule` with one backend per worker slot (`backends[i]` serves
/// worker `i` of every trial) and one fence. Keys are `prefix` + trial number.
pub async fn randomized<B, F>(
    name: &str,
    backends: Vec<B>,
    fence: F,
    prefix: &str,
    schedule: Schedule,
    seed: u64,
) -> (String, Vec<String>)
where
    B: LockBackend + Clone + 'static,
    F: Fence + Clone + 'static,
{
    randomized_with(
        name,
        backends,
        fence,
        prefix,
        schedule,
        seed,
        Checker::default(),
    )
    .await
}

/// [`randomized`] recording into `checker`, so the caller can also read the
/// holds (e.g. which were held at the moment of an injected fault).
pub async fn randomized_with<B, F>(
    name: &str,
    backends: Vec<B>,
    fence: F,
    prefix: &str,
    schedule: Schedule,
    seed: u64,
    checker: Checker,
) -> (String, Vec<String>)
where
    B: LockBackend + Clone + 'static,
    F: Fence + Clone + 'static,
{
    assert_eq!(backends.len(), schedule.workers);
    let started = Instant::now();
    let sem = Arc::new(tokio::sync::Semaphore::new(schedule.concurrency));
    let mut tasks = Vec::new();
    for trial in 0..schedule.trials {
        let permit = sem.clone().acquire_owned().await.unwrap();
        let key = format!("{prefix}{trial}");
        let mut workers = Vec::new();
        for (w, b) in backends.iter().enumerate() {
            let rng = StdRng::seed_from_u64(
                seed ^ (trial as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (w as u64) << 56,
            );
            workers.push(tokio::spawn(worker(
                b.clone(),
                fence.clone(),
                checker.clone(),
                key.clone(),
                schedule.clone(),
                rng,
            )));
        }
        tasks.push(tokio::spawn(async move {
            for w in workers {
                let _ = w.await;
            }
            drop(permit);
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let violations = checker.finish();
    let line = format!(
        "fault-suite {name} randomized: seed={seed} trials={} workers={} ttl_ms={} acquisitions={} admitted={} rejected={} lost={} timeouts={} errors={} violations={} elapsed={:.1}s",
        schedule.trials,
        schedule.workers,
        schedule.ttl.as_millis(),
        checker.acquired(),
        checker.admitted(),
        checker.rejected(),
        get(&checker.counters.lost),
        get(&checker.counters.timeouts),
        checker.errors(),
        violations.len(),
        started.elapsed().as_secs_f64()
    );
    (report(line), violations)
}

async fn worker<B: LockBackend, F: Fence>(
    backend: B,
    fence: F,
    checker: Checker,
    key: String,
    s: Schedule,
    mut rng: StdRng,
) {
    let ttl = s.ttl;
    for _ in 0..s.rounds {
        tokio::time::sleep(ttl.mul_f64(rng.random_range(0.0..0.5))).await;
        let sent = Instant::now();
        let mut lease = match backend.acquire(&key, ttl, ttl * 3).await {
            Ok(l) => l,
            Err(LockError::Timeout { .. }) => {
                inc(&checker.counters.timeouts);
                continue;
            }
            Err(_) => {
                inc(&checker.counters.errors);
                continue;
            }
        };
        let granted = Instant::now();
        let token = lease.token();
        let mut end: Option<Instant> = None;
        for _ in 0..s.writes {
            // Pauses longer than the TTL stand for GC stalls: the holder wakes
            // up believing it still holds the lock, and writes anyway.
            let pause = if rng.random_bool(s.p_long_pause) {
                ttl.mul_f64(rng.random_range(1.2..2.5))
            } else {
                ttl.mul_f64(rng.random_range(0.0..0.25))
            };
            tokio::time::sleep(pause).await;
            if end.is_none() && rng.random_bool(s.p_renew) {
                match backend.renew(&mut lease).await {
                    Ok(()) => {}
                    Err(LockError::LockLost { .. }) => {
                        inc(&checker.counters.lost);
                        end = Some(Instant::now());
                    }
                    Err(_) => inc(&checker.counters.errors),
                }
            }
            checker.write(&fence, &key, lease.ticket()).await;
        }
        let release_start = Instant::now();
        let valid_until = lease.valid_until();
        let _ = backend.release(lease).await;
        let end = end.unwrap_or(release_start).min(valid_until);
        checker.hold(Hold {
            key: key.clone(),
            token: token.get(),
            sent,
            granted,
            end,
        });
    }
}
