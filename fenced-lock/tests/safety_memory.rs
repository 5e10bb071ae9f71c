//! Issue 13 with the in-process backend and fences: the atomic fence forms, misuse
//! that used to panic, and what `Debug` prints.
#![cfg(feature = "memory")]

use std::time::Duration;

use fenced_lock::{Fenced, Keeper, LockBackend, MemoryBackend, MemoryFence};

/// Defect 1: with `Fenced::apply` a holder that paused past its lease cannot write after
/// the newer holder, whatever the interleaving of threads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fenced_apply_refuses_a_paused_holder() {
    let locks = MemoryBackend::new();
    let value = Fenced::new(0_u64);
    let fence = MemoryFence::new();
    let ttl = Duration::from_millis(20);
    let a = locks.try_acquire("res", ttl).await.unwrap().unwrap();
    value.apply(a.ticket(), |v| *v = 1).unwrap();
    tokio::time::sleep_until(a.valid_until()).await;
    let b = locks
        .acquire("res", ttl, Duration::from_secs(1))
        .await
        .unwrap();
    value.apply(b.ticket(), |v| *v = 999).unwrap();
    fence.apply("res", b.ticket(), || ()).unwrap();
    // A wakes up and writes: refused, B's value stays.
    assert!(value.apply(a.ticket(), |v| *v = 1).is_err());
    assert!(fence.apply("res", a.ticket(), || panic!("ran")).is_err());
    assert_eq!(value.get(|v| *v), 999);
    // Same holder twice stays admitted.
    value.apply(b.ticket(), |v| *v += 1).unwrap();
    assert_eq!(value.get(|v| *v), 1000);
}

/// Defect 1, concurrent: many holders in turn, each writing its token from its own
/// thread; a value is never overwritten by a smaller token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fenced_apply_is_monotonic_under_threads() {
    let locks = MemoryBackend::new();
    let value = Fenced::new(Vec::<u64>::new());
    let mut tickets = Vec::new();
    for _ in 0..16 {
        let l = locks
            .try_acquire("res", Duration::from_secs(1))
            .await
            .unwrap()
            .unwrap();
        tickets.push(l.ticket());
        locks.release(l).await.unwrap();
    }
    tickets.reverse(); // newest first: most older writes must be refused
    let joins: Vec<_> = tickets
        .into_iter()
        .map(|t| {
            let value = value.clone();
            std::thread::spawn(move || value.apply(t, |v| v.push(t.token.get())).is_ok())
        })
        .collect();
    let admitted = joins
        .into_iter()
        .filter(|_| true)
        .map(|j| j.join().unwrap())
        .filter(|ok| *ok)
        .count();
    let log = value.get(|v| v.clone());
    assert_eq!(log.len(), admitted);
    assert!(log.windows(2).all(|w| w[0] < w[1]), "{log:?}");
}

/// Defect 5 (P10): `wait = Duration::MAX` overflowed `Instant` and panicked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_with_any_wait_does_not_panic() {
    let locks = MemoryBackend::new();
    let held = locks
        .try_acquire("k", Duration::from_millis(50))
        .await
        .unwrap()
        .unwrap();
    let l2 = locks.clone();
    let r =
        tokio::spawn(async move { l2.acquire("k", Duration::from_secs(1), Duration::MAX).await })
            .await;
    let lease = r.expect("acquire panicked").expect("acquired after expiry");
    assert!(lease.token() > held.token());
    for wait in [
        Duration::ZERO,
        Duration::from_nanos(1),
        Duration::from_secs(u64::MAX),
    ] {
        let r = tokio::spawn({
            let l = locks.clone();
            async move { l.acquire("k", Duration::from_secs(1), wait).await.map(drop) }
        })
        .await;
        assert!(r.is_ok(), "wait {wait:?} panicked");
    }
}

/// Defect 7 (P5): `Keeper::new` outside a Tokio runtime panicked.
#[test]
fn keeper_outside_a_runtime_does_not_panic() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let locks = MemoryBackend::new();
    let lease = rt
        .block_on(locks.try_acquire("k", Duration::from_secs(1)))
        .unwrap()
        .unwrap();
    drop(rt);
    let made = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let keeper = Keeper::new(locks.clone(), lease);
        let lost = keeper.is_lost();
        drop(keeper);
        lost
    }));
    assert_eq!(
        made.ok(),
        Some(true),
        "panicked, or claimed to hold the lease"
    );
}

/// Defect 7: `Debug` printed the owner id, which authorises renew and release.
#[tokio::test]
async fn debug_output_never_contains_the_owner_id() {
    let locks = MemoryBackend::new();
    let lease = locks
        .try_acquire("k", Duration::from_secs(1))
        .await
        .unwrap()
        .unwrap();
    let owner = lease.owner().to_string();
    let printed = format!("{lease:?} {:?}", lease.owner());
    assert!(!printed.contains(&owner), "{printed}");
    let keeper = Keeper::new(locks, lease);
    assert!(!format!("{keeper:?}").contains(&owner));
}

/// `with_lock`: acquire, keep alive beyond the TTL, release; and the work is cancelled
/// when the lease is taken away.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_lock_runs_keeps_releases_and_cancels_on_loss() {
    let locks = MemoryBackend::new();
    let ledger = Fenced::new(Vec::<u64>::new());
    let ttl = Duration::from_millis(60);
    let ledger2 = ledger.clone();
    let out = locks
        .with_lock("job", ttl, Duration::from_secs(1), |guard| async move {
            tokio::time::sleep(ttl * 3).await; // outlives the TTL: the keeper renews
            ledger2.apply(guard.ticket(), |l| l.push(guard.token().get()))
        })
        .await
        .unwrap();
    assert!(out.is_ok());
    assert_eq!(ledger.get(|l| l.len()), 1);
    // Released: the next attempt succeeds at once.
    let next = locks
        .try_acquire("job", ttl)
        .await
        .unwrap()
        .expect("released");
    locks.release(next).await.unwrap();

    let breaker = locks.clone();
    let r = locks
        .with_lock("job", ttl, Duration::from_secs(1), |guard| async move {
            breaker.break_lock(guard.key());
            tokio::time::sleep(Duration::from_secs(5)).await;
            "finished"
        })
        .await;
    assert!(
        matches!(r, Err(fenced_lock::LockError::LockLost { .. })),
        "{r:?}"
    );
}

/// Memory slots of idle keys can be removed without tokens repeating.
#[tokio::test]
async fn memory_cleanup_keeps_tokens_monotonic() {
    let locks = MemoryBackend::new();
    let mut last = 0;
    for i in 0..20 {
        let l = locks
            .try_acquire(&format!("k{i}"), Duration::from_secs(5))
            .await
            .unwrap()
            .unwrap();
        last = last.max(l.token().get());
        locks.release(l).await.unwrap();
    }
    let held = locks
        .try_acquire("busy", Duration::from_secs(5))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(locks.cleanup_idle(), 20);
    for i in 0..20 {
        let l = locks
            .try_acquire(&format!("k{i}"), Duration::from_secs(5))
            .await
            .unwrap()
            .unwrap();
        assert!(l.token().get() > last);
        locks.release(l).await.unwrap();
    }
    assert!(
        locks.release(held).await.unwrap(),
        "cleanup dropped a held lock"
    );
}
