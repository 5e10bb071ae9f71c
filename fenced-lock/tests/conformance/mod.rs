//! One conformance suite for every backend. A backend's test file implements
//! [`Harness`] (and [`FenceHarness`]) and expands [`lock_suite!`] / [`fence_suite!`].
#![allow(dead_code)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fenced_lock::{
    Fence, FencingToken, HolderId, Keeper, LockAdmin, LockBackend, LockError, LossReason,
    StaleToken, Ticket,
};
use tokio::time::Instant;

/// How a backend is brought up for the suite.
pub trait Harness: Send + Sync + 'static {
    /// The backend under test.
    type B: LockBackend + LockAdmin + Clone + 'static;
    /// A NEW client (new connection / instance) of the same backend store.
    fn client(&self) -> impl Future<Output = Self::B> + Send;
    /// A short TTL the backend honours (etcd rounds up to whole seconds).
    fn ttl(&self) -> Duration;
    /// Operator override: removes the current holder of `key` without
    /// resetting the token (used to check that renew notices).
    fn break_lock(&self, key: &str) -> impl Future<Output = ()> + Send;
}

/// A unique key per test so parallel runs never collide.
pub fn unique(name: &str) -> String {
    format!("{name}-{:016x}", rand::random::<u64>())
}

fn t(n: u64) -> FencingToken {
    FencingToken::new(n).expect("non-zero")
}

/// One holder identity for the fence cases that are about token order only.
const A: HolderId = HolderId::from_raw(0xa11c_e000_0000_0001);

fn tk(n: u64) -> Ticket {
    Ticket::new(t(n), A)
}

pub async fn sequential_tokens_increase<H: Harness>(h: H) {
    let b = h.client().await;
    let key = unique("seq");
    let mut last = None;
    for _ in 0..5 {
        let lease = b.try_acquire(&key, h.ttl()).await.unwrap().expect("free");
        if let Some(prev) = last {
            assert!(lease.token() > prev, "{} !> {}", lease.token(), prev);
        }
        last = Some(lease.token());
        assert!(b.release(lease).await.unwrap());
    }
}

pub async fn held_key_is_not_acquired<H: Harness>(h: H) {
    let b = h.client().await;
    let other = h.client().await;
    let key = unique("held");
    let lease = b
        .try_acquire(&key, h.ttl() * 4)
        .await
        .unwrap()
        .expect("free");
    assert!(other.try_acquire(&key, h.ttl()).await.unwrap().is_none());
    // Same key, different name: independent.
    let other_key = other
        .try_acquire(&format!("{key}-2"), h.ttl())
        .await
        .unwrap()
        .expect("independent key");
    assert!(other.release(other_key).await.unwrap());
    assert!(b.release(lease).await.unwrap());
}

pub async fn expiry_then_takeover_increases_token_and_fences_old<H: Harness>(h: H) {
    let b1 = h.client().await;
    let b2 = h.client().await;
    let key = unique("takeover");
    let mut old = b1.try_acquire(&key, h.ttl()).await.unwrap().expect("free");
    // The conservative expiry is never later than the server's.
    assert!(old.remaining() <= h.ttl());
    let new = b2
        .acquire(&key, h.ttl(), h.ttl() * 6)
        .await
        .expect("takeover after expiry");
    assert!(
        old.is_expired(),
        "took over before the old lease's valid_until"
    );
    assert!(new.token() > old.token());
    // The expired holder can neither renew nor release, and leaves the new one alone.
    let err = b1.renew(&mut old).await.unwrap_err();
    assert!(err.is_lock_lost(), "{err}");
    assert!(matches!(err, LockError::LockLost { .. }));
    assert!(!b1.release(old).await.unwrap());
    assert!(
        b1.try_acquire(&key, h.ttl()).await.unwrap().is_none(),
        "new holder untouched"
    );
    let new_token = new.token();
    let mut new = new;
    b2.renew(&mut new)
        .await
        .expect("new holder can still renew");
    assert_eq!(new.token(), new_token);
    assert!(b2.release(new).await.unwrap());
}

pub async fn release_then_reacquire_increases_token<H: Harness>(h: H) {
    let b = h.client().await;
    let key = unique("rel");
    let a = b
        .try_acquire(&key, h.ttl() * 4)
        .await
        .unwrap()
        .expect("free");
    let ta = a.token();
    assert!(b.release(a).await.unwrap());
    let c = b
        .try_acquire(&key, h.ttl() * 4)
        .await
        .unwrap()
        .expect("free after release");
    assert!(c.token() > ta);
    assert!(b.release(c).await.unwrap());
}

pub async fn new_client_continues_tokens<H: Harness>(h: H) {
    let key = unique("client");
    let first = {
        let b = h.client().await;
        let l = b
            .try_acquire(&key, h.ttl() * 4)
            .await
            .unwrap()
            .expect("free");
        let tok = l.token();
        assert!(b.release(l).await.unwrap());
        tok
    };
    let b = h.client().await;
    let l = b
        .try_acquire(&key, h.ttl() * 4)
        .await
        .unwrap()
        .expect("free");
    assert!(l.token() > first, "new client restarted tokens");
    assert!(b.release(l).await.unwrap());
}

pub async fn renew_keeps_token_and_extends<H: Harness>(h: H) {
    let b = h.client().await;
    let other = h.client().await;
    let key = unique("renew");
    let ttl = h.ttl();
    let mut lease = b.try_acquire(&key, ttl).await.unwrap().expect("free");
    let token = lease.token();
    let end = Instant::now() + ttl * 3;
    while Instant::now() < end {
        tokio::time::sleep(ttl / 4).await;
        let before = lease.valid_until();
        b.renew(&mut lease).await.expect("renew while held");
        assert!(lease.valid_until() >= before);
        assert_eq!(lease.token(), token);
        if let Some(stolen) = other.try_acquire(&key, ttl).await.unwrap() {
            // Only legitimate if our lease had already run out (a starved
            // machine can take longer than the TTL between two calls).
            assert!(
                lease.is_expired(),
                "token {} acquired while {token} was renewed and unexpired",
                stolen.token()
            );
            return;
        }
    }
    assert!(b.release(lease).await.unwrap());
}

pub async fn release_of_foreign_lease_is_refused<H: Harness>(h: H) {
    let b = h.client().await;
    let key = unique("foreign");
    let lease = b
        .try_acquire(&key, h.ttl() * 4)
        .await
        .unwrap()
        .expect("free");
    // A forged lease with the right key and token but another owner.
    let forged = fenced_lease_copy(&lease);
    assert!(
        !b.release(forged).await.unwrap(),
        "released someone else's lock"
    );
    assert!(b.try_acquire(&key, h.ttl()).await.unwrap().is_none());
    assert!(b.release(lease).await.unwrap());
}

fn fenced_lease_copy(l: &fenced_lock::Lease) -> fenced_lock::Lease {
    fenced_lock::Lease::new(
        l.key(),
        l.token(),
        fenced_lock::OwnerId::random(),
        l.ttl(),
        l.valid_until(),
    )
}

/// Operator view: inspect shows the hold's token and time left (never the owner), and
/// force-release frees the key; the holder then learns it lost the lock and the next
/// token is larger.
pub async fn inspect_and_force_release<H: Harness>(h: H) {
    let b = h.client().await;
    let admin = h.client().await;
    let key = unique("admin");
    assert_eq!(admin.inspect(&key).await.unwrap(), None);
    let mut lease = b
        .try_acquire(&key, h.ttl() * 4)
        .await
        .unwrap()
        .expect("free");
    let info = admin.inspect(&key).await.unwrap().expect("held");
    assert_eq!(info.token, lease.token());
    assert!(
        info.remaining > Duration::ZERO && info.remaining <= h.ttl() * 4 + Duration::from_secs(1)
    );
    assert!(admin.force_release(&key).await.unwrap());
    assert!(!admin.force_release(&key).await.unwrap());
    assert_eq!(admin.inspect(&key).await.unwrap(), None);
    assert!(b.renew(&mut lease).await.unwrap_err().is_lock_lost());
    let next = admin
        .try_acquire(&key, h.ttl())
        .await
        .unwrap()
        .expect("freed");
    assert!(next.token() > lease.token());
    assert!(admin.release(next).await.unwrap());
}

pub async fn acquire_wait_is_bounded<H: Harness>(h: H) {
    let b = h.client().await;
    let key = unique("bounded");
    let holder = b
        .try_acquire(&key, h.ttl() * 10)
        .await
        .unwrap()
        .expect("free");
    let started = Instant::now();
    let wait = Duration::from_millis(150);
    let err = b.acquire(&key, h.ttl(), wait).await.unwrap_err();
    assert!(matches!(err, LockError::Timeout { .. }), "{err}");
    assert!(started.elapsed() < wait + Duration::from_secs(2));
    assert!(b.release(holder).await.unwrap());
}

pub async fn bad_input_is_typed<H: Harness>(h: H) {
    let b = h.client().await;
    let ttl = h.ttl();
    assert!(matches!(
        b.try_acquire("", ttl).await,
        Err(LockError::EmptyKey)
    ));
    assert!(matches!(
        b.acquire("", ttl, Duration::ZERO).await,
        Err(LockError::EmptyKey)
    ));
    assert!(matches!(
        b.try_acquire("k", Duration::ZERO).await,
        Err(LockError::InvalidTtl { .. })
    ));
    assert!(matches!(
        b.try_acquire("k", Duration::from_secs(400 * 24 * 3600))
            .await,
        Err(LockError::InvalidTtl { .. })
    ));
    let long = "k".repeat(fenced_lock::MAX_KEY_LEN + 1);
    assert!(matches!(
        b.try_acquire(&long, ttl).await,
        Err(LockError::KeyTooLong { .. })
    ));
}

/// Shared record of who holds the key, kept by the suite itself.
#[derive(Default)]
struct Tracker {
    current: Option<(FencingToken, Instant, bool)>,
    last_token: Option<FencingToken>,
    acquisitions: usize,
    violations: Vec<String>,
}

pub async fn contention_never_overlaps<H: Harness>(h: H, tasks: usize, rounds: usize) {
    let h = Arc::new(h);
    let key = unique("contend");
    let tracker = Arc::new(Mutex::new(Tracker::default()));
    let ttl = h.ttl();
    let mut joins = Vec::new();
    for task in 0..tasks {
        let h = h.clone();
        let key = key.clone();
        let tracker = tracker.clone();
        joins.push(tokio::spawn(async move {
            let b = h.client().await;
            for round in 0..rounds {
                let lease = b
                    .acquire(&key, ttl, ttl * 4 * (tasks as u32 + 2))
                    .await
                    .unwrap_or_else(|e| panic!("task {task} round {round}: {e}"));
                {
                    let mut tr = tracker.lock().unwrap();
                    let now = Instant::now();
                    tr.acquisitions += 1;
                    if now >= lease.valid_until() {
                        // Expired before we could even record it: we never held it.
                        continue;
                    }
                    if let Some((tok, until, released)) = tr.current
                        && !released
                        && now < until
                    {
                        let msg = format!(
                            "token {} acquired while token {tok} valid for {:?} more",
                            lease.token(),
                            until - now
                        );
                        tr.violations.push(msg);
                    }
                    if let Some(last) = tr.last_token
                        && lease.token() <= last
                    {
                        let msg = format!("token {} after {last}", lease.token());
                        tr.violations.push(msg);
                    }
                    tr.last_token = Some(lease.token());
                    tr.current = Some((lease.token(), lease.valid_until(), false));
                }
                tokio::time::sleep(Duration::from_millis(3)).await;
                if task == 0 && round == 1 {
                    // Abandon once: the next holder must wait for expiry.
                    continue;
                }
                {
                    let mut tr = tracker.lock().unwrap();
                    if let Some(cur) = tr.current.as_mut()
                        && cur.0 == lease.token()
                    {
                        cur.2 = true;
                    }
                }
                b.release(lease).await.expect("release");
            }
        }));
    }
    for j in joins {
        j.await.expect("task panicked");
    }
    let tr = tracker.lock().unwrap();
    assert!(tr.violations.is_empty(), "{:#?}", tr.violations);
    assert_eq!(
        tr.acquisitions,
        tasks * rounds,
        "every task acquired every round"
    );
}

pub async fn keeper_holds_beyond_ttl_and_releases<H: Harness>(h: H) {
    let b = h.client().await;
    let other = h.client().await;
    let key = unique("keeper");
    let ttl = h.ttl();
    // Twice the short TTL leaves slack for a starved CI machine; renewal is
    // still every third of it, so the hold outlasts the TTL several times.
    let lease = b.try_acquire(&key, ttl * 2).await.unwrap().expect("free");
    let token = lease.token();
    let keeper = Keeper::new(b.clone(), lease);
    assert_eq!(keeper.token(), token);
    let out = keeper
        .run(async {
            tokio::time::sleep(ttl * 5).await;
            7
        })
        .await
        .expect("not lost while renewed");
    assert_eq!(out, 7);
    assert!(other.try_acquire(&key, ttl).await.unwrap().is_none());
    let reason = keeper.lost_reason();
    let held = keeper.release().await.unwrap();
    assert!(held, "lost before release: {reason:?}");
    let next = other
        .try_acquire(&key, ttl)
        .await
        .unwrap()
        .expect("released");
    assert!(next.token() > token);
    assert!(other.release(next).await.unwrap());
}

pub async fn keeper_reports_expiry_and_cancels_work<H: Harness>(h: H) {
    let b = h.client().await;
    let key = unique("keeper-exp");
    let ttl = h.ttl();
    let lease = b.try_acquire(&key, ttl).await.unwrap().expect("free");
    let valid_until = lease.valid_until();
    // Renewing less often than the TTL: the lease must be reported lost.
    let keeper = Keeper::with_renew_interval(b.clone(), lease, ttl * 10);
    let started = Instant::now();
    let r = keeper
        .run(async {
            tokio::time::sleep(ttl * 5).await;
        })
        .await;
    assert!(matches!(r, Err(LockError::LockLost { .. })), "{r:?}");
    let now = Instant::now();
    assert!(now >= valid_until, "loss reported before valid_until");
    assert!(
        now < valid_until + ttl,
        "loss reported late: {:?}",
        now - started
    );
    assert_eq!(keeper.lost_reason(), Some(LossReason::Expired));
    let token = keeper.token();
    // The server expires the lease at or after the local, conservative deadline (etcd in whole
    // seconds), so release may still find it held, or leave it to expire; either way it returns
    // without error and the key becomes free, with a larger token for the next holder.
    let _still_held = keeper.release().await.unwrap();
    let next = b
        .acquire(&key, ttl, Duration::from_secs(10))
        .await
        .expect("free after a lost keeper");
    assert!(next.token() > token);
    assert!(b.release(next).await.unwrap());
}

pub async fn keeper_reports_revocation<H: Harness>(h: H) {
    let b = h.client().await;
    let key = unique("keeper-rev");
    let ttl = h.ttl();
    let lease = b.try_acquire(&key, ttl * 4).await.unwrap().expect("free");
    let keeper = Keeper::with_renew_interval(b.clone(), lease, ttl / 4);
    let mut watch = keeper.watch();
    h.break_lock(&key).await;
    let reason = tokio::time::timeout(ttl * 4, watch.lost())
        .await
        .expect("loss noticed before the TTL");
    assert_eq!(reason, LossReason::Revoked);
    assert!(keeper.is_lost());
    assert!(!keeper.release().await.unwrap());
}

pub async fn keeper_drop_does_not_block_and_releases<H: Harness>(h: H) {
    let b = h.client().await;
    let key = unique("keeper-drop");
    let ttl = h.ttl() * 10;
    let lease = b.try_acquire(&key, ttl).await.unwrap().expect("free");
    let keeper = Keeper::new(b.clone(), lease);
    let started = Instant::now();
    drop(keeper);
    assert!(
        started.elapsed() < Duration::from_millis(50),
        "Drop blocked"
    );
    // Released in the background well before the (long) TTL.
    let again = b
        .acquire(&key, h.ttl(), ttl / 2)
        .await
        .expect("released by Drop");
    assert!(b.release(again).await.unwrap());
}

/// How a fence is brought up for the suite.
pub trait FenceHarness: Send + Sync + 'static {
    /// The fence under test.
    type F: Fence + Clone + 'static;
    /// A new client of the same fence store.
    fn fence(&self) -> impl Future<Output = Self::F> + Send;
}

pub async fn fence_rejects_lower_admits_equal<H: FenceHarness>(h: H) {
    let f = h.fence().await;
    let r = unique("res");
    f.check_only(&r, tk(5)).await.unwrap();
    f.check_only(&r, tk(5))
        .await
        .expect("equal token, same holder: admitted");
    f.check_only(&r, tk(7)).await.unwrap();
    let err = f.check_only(&r, tk(6)).await.unwrap_err();
    let stale: &StaleToken = err.as_stale().expect("stale");
    assert_eq!(stale.presented, t(6));
    assert_eq!(stale.current, Some(t(7)));
    assert!(err.to_string().contains("stale fencing token 6"), "{err}");
    // Another client sees the same high-water mark.
    let f2 = h.fence().await;
    assert!(f2.check_only(&r, tk(1)).await.is_err());
    f2.check_only(&r, tk(7)).await.unwrap();
    // Resources are independent.
    f2.check_only(&format!("{r}-other"), tk(1)).await.unwrap();
    assert!(matches!(
        f2.check_only("", tk(1)).await,
        Err(fenced_lock::FenceError::EmptyResource)
    ));
}

/// Issue 13, defect 2: a token handed out twice (a backend that lost its counter) must not
/// let two leases write. The fence remembers which lease it admitted.
pub async fn fence_refuses_equal_token_from_another_lease<H: FenceHarness>(h: H) {
    let f = h.fence().await;
    let r = unique("equal");
    let a = Ticket::new(t(9), HolderId::random());
    let b = Ticket::new(t(9), HolderId::random());
    f.check_only(&r, a).await.unwrap();
    let err = f
        .check_only(&r, b)
        .await
        .expect_err("equal token from another lease admitted");
    assert_eq!(err.as_stale().map(|s| s.current), Some(Some(t(9))), "{err}");
    // The first holder keeps writing, from another client too.
    h.fence().await.check_only(&r, a).await.unwrap();
    // A newer token from anyone supersedes it.
    f.check_only(&r, Ticket::new(t(10), b.holder))
        .await
        .unwrap();
    assert!(f.check_only(&r, a).await.is_err());
}

pub async fn fence_is_safe_under_concurrent_admits<H: FenceHarness>(h: H) {
    let h = Arc::new(h);
    let r = unique("race");
    let n = 40u64;
    // Interleave tokens so low ones often arrive after high ones.
    let mut order: Vec<u64> = (1..=n).collect();
    order.sort_by_key(|x| (x * 7919) % 41);
    let admitted = Arc::new(Mutex::new(Vec::new()));
    let mut joins = Vec::new();
    for chunk in order.chunks(10) {
        let h = h.clone();
        let r = r.clone();
        let chunk = chunk.to_vec();
        let admitted = admitted.clone();
        joins.push(tokio::spawn(async move {
            let f = h.fence().await;
            for x in chunk {
                match f.check_only(&r, tk(x)).await {
                    Ok(()) => admitted.lock().unwrap().push(x),
                    Err(e) => assert!(e.as_stale().is_some(), "{e}"),
                }
            }
        }));
    }
    for j in joins {
        j.await.unwrap();
    }
    let f = h.fence().await;
    // The highest token always wins and everything lower is now refused.
    assert!(admitted.lock().unwrap().contains(&n));
    f.check_only(&r, tk(n)).await.unwrap();
    for x in [1, n / 2, n - 1] {
        assert!(
            f.check_only(&r, tk(x)).await.is_err(),
            "{x} admitted after {n}"
        );
    }
}

/// Lock + fence together: a paused holder whose lease expired is fenced off.
pub async fn fence_stops_paused_holder<H: Harness, F: FenceHarness>(h: H, fh: F) {
    let b = h.client().await;
    let f = fh.fence().await;
    let key = unique("paused");
    let old = b.try_acquire(&key, h.ttl()).await.unwrap().expect("free");
    f.check_only(&key, old.ticket()).await.unwrap();
    // "GC pause": the lease expires and another client takes over.
    let b2 = h.client().await;
    let new = b2.acquire(&key, h.ttl() * 4, h.ttl() * 6).await.unwrap();
    f.check_only(&key, new.ticket()).await.unwrap();
    // The old holder wakes up and tries to write: refused.
    assert!(f.check_only(&key, old.ticket()).await.is_err());
    assert!(b2.release(new).await.unwrap());
}

/// Expands one `#[tokio::test]` per lock-suite case for a harness constructor.
#[macro_export]
macro_rules! lock_suite {
    ($harness:expr) => {
        $crate::lock_suite!(@cases $harness;
            sequential_tokens_increase,
            held_key_is_not_acquired,
            inspect_and_force_release,
            expiry_then_takeover_increases_token_and_fences_old,
            release_then_reacquire_increases_token,
            new_client_continues_tokens,
            renew_keeps_token_and_extends,
            release_of_foreign_lease_is_refused,
            acquire_wait_is_bounded,
            bad_input_is_typed,
            keeper_holds_beyond_ttl_and_releases,
            keeper_reports_expiry_and_cancels_work,
            keeper_reports_revocation,
            keeper_drop_does_not_block_and_releases,
        );
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn contention_never_overlaps() {
            conformance::contention_never_overlaps($harness.await, 4, 5).await;
        }
    };
    (@cases $harness:expr; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                conformance::$case($harness.await).await;
            }
        )*
    };
}

/// Expands the fence-suite cases for a fence harness constructor.
#[macro_export]
macro_rules! fence_suite {
    ($harness:expr) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn fence_rejects_lower_admits_equal() {
            conformance::fence_rejects_lower_admits_equal($harness.await).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn fence_refuses_equal_token_from_another_lease() {
            conformance::fence_refuses_equal_token_from_another_lease($harness.await).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn fence_is_safe_under_concurrent_admits() {
            conformance::fence_is_safe_under_concurrent_admits($harness.await).await;
        }
    };
}
