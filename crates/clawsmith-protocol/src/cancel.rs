//! A runtime-agnostic cancellation signal.
//!
//! The protocol crate must not depend on tokio, so this is a small shared flag plus a list of
//! wakers: synchronous code polls [`CancellationSignal::is_cancelled`], async code awaits
//! [`CancellationSignal::cancelled`].

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

/// A clonable cancellation flag; every clone observes the same cancellation.
#[derive(Debug, Clone, Default)]
pub struct CancellationSignal {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    cancelled: AtomicBool,
    waiters: Mutex<Waiters>,
}

/// The wakers of the pending [`Cancelled`] futures, each under its own key so that a future
/// dropped before the signal fires takes its waker out: a long-lived signal awaited by many
/// short-lived tasks (a connection's, by each of its calls) holds no finished task.
#[derive(Debug, Default)]
struct Waiters {
    next: u64,
    wakers: HashMap<u64, Waker>,
}

impl CancellationSignal {
    /// A signal that has not fired.
    pub fn new() -> CancellationSignal {
        CancellationSignal::default()
    }

    /// Fires the signal and wakes every waiter. Idempotent.
    pub fn cancel(&self) {
        self.inner.cancelled.store(true, Ordering::SeqCst);
        let wakers = std::mem::take(&mut self.waiters().wakers);
        for waker in wakers.into_values() {
            waker.wake();
        }
    }

    /// Whether the signal fired.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancelled.load(Ordering::SeqCst)
    }

    /// A future that completes once the signal fires.
    pub fn cancelled(&self) -> Cancelled<'_> {
        Cancelled {
            signal: self,
            key: None,
        }
    }

    fn waiters(&self) -> MutexGuard<'_, Waiters> {
        self.inner
            .waiters
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// Future returned by [`CancellationSignal::cancelled`]. Dropping it before the signal fires
/// removes its waker from the signal.
#[derive(Debug)]
pub struct Cancelled<'a> {
    signal: &'a CancellationSignal,
    /// The key of this future's waker among the signal's waiters, once it has been polled.
    key: Option<u64>,
}

impl Future for Cancelled<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        if this.signal.is_cancelled() {
            return Poll::Ready(());
        }
        let mut waiters = this.signal.waiters();
        // Check again under the lock: `cancel` stores the flag before taking the lock, so either
        // we see the flag here or `cancel` sees our waker.
        if this.signal.is_cancelled() {
            return Poll::Ready(());
        }
        let waiters = &mut *waiters;
        match this.key.and_then(|key| waiters.wakers.get_mut(&key)) {
            Some(waker) => {
                if !waker.will_wake(cx.waker()) {
                    waker.clone_from(cx.waker());
                }
            }
            None => {
                let key = waiters.next;
                waiters.next += 1;
                waiters.wakers.insert(key, cx.waker().clone());
                this.key = Some(key);
            }
        }
        Poll::Pending
    }
}

impl Drop for Cancelled<'_> {
    fn drop(&mut self) {
        if let Some(key) = self.key {
            self.signal.waiters().wakers.remove(&key);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;
    use std::task::Wake;

    use super::*;

    /// A waker that counts its wakes.
    #[derive(Default)]
    struct Counting(AtomicUsize);

    impl Wake for Counting {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn poll(future: &mut Cancelled<'_>, waker: &Arc<Counting>) -> Poll<()> {
        let waker = Waker::from(Arc::clone(waker));
        Pin::new(future).poll(&mut Context::from_waker(&waker))
    }

    /// Waiters dropped before the signal fires leave nothing behind (neither their wakers nor
    /// the tasks those keep alive); a waiter re-polled by another task keeps one entry, and
    /// only the live waiters are woken, once each.
    #[test]
    fn dropped_waiters_leave_no_waker_and_live_ones_are_woken() {
        let signal = CancellationSignal::new();
        let task = Arc::new(Counting::default());
        for _ in 0..1_000 {
            let mut waiter = signal.cancelled();
            assert_eq!(poll(&mut waiter, &task), Poll::Pending);
        }
        assert_eq!(signal.waiters().wakers.len(), 0);
        assert_eq!(
            Arc::strong_count(&task),
            1,
            "a dropped waiter kept its task"
        );

        let (first, second) = (Arc::new(Counting::default()), Arc::new(Counting::default()));
        let mut live = signal.cancelled();
        assert_eq!(poll(&mut live, &first), Poll::Pending);
        assert_eq!(poll(&mut live, &first), Poll::Pending);
        assert_eq!(poll(&mut live, &second), Poll::Pending);
        assert_eq!(signal.waiters().wakers.len(), 1);
        assert_eq!(Arc::strong_count(&first), 1, "the replaced waker was kept");

        signal.cancel();
        signal.cancel();
        assert_eq!(second.0.load(Ordering::SeqCst), 1);
        assert_eq!(first.0.load(Ordering::SeqCst), 0);
        assert_eq!(poll(&mut live, &second), Poll::Ready(()));
        drop(live);
        let mut late = signal.cancelled();
        assert_eq!(poll(&mut late, &task), Poll::Ready(()));
        assert_eq!(signal.waiters().wakers.len(), 0);
    }

    /// Racing `cancel` against waiters polled on other threads: every waiter is woken (a lost
    /// wake-up would leave its thread spinning until the test times out).
    #[test]
    fn cancel_racing_pollers_wakes_every_waiter() {
        for _ in 0..50 {
            let signal = CancellationSignal::new();
            let threads: Vec<_> = (0..4)
                .map(|_| {
                    let signal = signal.clone();
                    std::thread::spawn(move || {
                        let task = Arc::new(Counting::default());
                        let mut waiter = signal.cancelled();
                        while poll(&mut waiter, &task).is_pending() {
                            while task.0.load(Ordering::SeqCst) == 0 {
                                std::thread::yield_now();
                            }
                        }
                    })
                })
                .collect();
            signal.cancel();
            for thread in threads {
                thread.join().unwrap();
            }
        }
    }
}
