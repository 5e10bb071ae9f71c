//! Clock skew: a lease's local validity never depends on the wall clock.
//!
//! The wall clock of the process cannot be set from a test, so this is shown
//! two ways: (1) with tokio's paused clock, real (wall-clock) time passes and
//! nothing about the lease changes, while advancing the monotonic clock alone
//! expires it; (2) the crate's source contains no wall-clock source at all.
//! Expiry on the servers is judged on the server's own clock (PostgreSQL
//! `now()`, Redis `PX`, etcd lease TTL), never by comparing client timestamps.

#![cfg(feature = "memory")]

#[path = "support/faults.rs"]
mod faults;

use std::time::{Duration, SystemTime};

use fenced_lock::{LockBackend, MemoryBackend};

#[tokio::test(start_paused = true)]
async fn lease_validity_follows_the_monotonic_clock_only() {
    let locks = MemoryBackend::new();
    let ttl = Duration::from_secs(10);
    let lease = locks.try_acquire("job", ttl).await.unwrap().unwrap();
    // The type is the monotonic (tokio, pausable) Instant, not SystemTime.
    let valid_until: tokio::time::Instant = lease.valid_until();
    assert_eq!(lease.remaining(), ttl);

    // The wall clock moves by more than a second; the monotonic clock does not.
    let wall = SystemTime::now();
    std::thread::sleep(Duration::from_millis(1200));
    assert!(SystemTime::now().duration_since(wall).unwrap() >= Duration::from_secs(1));
    assert_eq!(lease.valid_until(), valid_until);
    assert_eq!(lease.remaining(), ttl, "wall-clock time changed nothing");
    assert!(!lease.is_expired());
    assert!(locks.try_acquire("job", ttl).await.unwrap().is_none());

    // Advancing only the monotonic clock expires it, at exactly the TTL.
    tokio::time::advance(ttl - Duration::from_millis(1)).await;
    assert!(!lease.is_expired());
    assert!(locks.try_acquire("job", ttl).await.unwrap().is_none());
    tokio::time::advance(Duration::from_millis(1)).await;
    assert!(lease.is_expired());
    let next = locks.try_acquire("job", ttl).await.unwrap().unwrap();
    assert!(next.token() > lease.token());
    faults::report(
        "fault-suite clock: wall clock +1.2s -> lease unchanged; monotonic +10s -> expired; violations=0"
            .into(),
    );
}

/// No wall-clock source anywhere in the crate: validity, renew timing and
/// acquire budgets all use `tokio::time::Instant`.
#[test]
fn crate_has_no_wall_clock_source() {
    fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    walk(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut files,
    );
    assert!(files.len() >= 10, "{files:?}");
    for f in files {
        let src = std::fs::read_to_string(&f).unwrap();
        for forbidden in [
            "SystemTime",
            "UNIX_EPOCH",
            "chrono::",
            "std::time::Instant",
            "OffsetDateTime",
        ] {
            assert!(!src.contains(forbidden), "{} uses {forbidden}", f.display());
        }
    }
}
