//! A runtime-agnostic cancellation signal.
//!
//! The protocol crate must not depend on tokio, so this is a small shared flag plus a list of
//! wakers: synchronous code polls [`CancellationSignal::is_cancelled`], async code awaits
//! [`CancellationSignal::cancelled`].

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};

/// A clonable cancellation flag; every clone observes the same cancellation.
#[derive(Debug, Clone, Default)]
pub struct CancellationSignal {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    cancelled: AtomicBool,
    wakers: Mutex<Vec<Waker>>,
}

impl CancellationSignal {
    /// A signal that has not fired.
    pub fn new() -> CancellationSignal {
        CancellationSignal::default()
    }

    /// Fires the signal and wakes every waiter. Idempotent.
    pub fn cancel(&self) {
        self.inner.cancelled.store(true, Ordering::SeqCst);
        let wakers = std::mem::take(
            &mut *self
                .inner
                .wakers
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        for waker in wakers {
            waker.wake();
        }
    }

    /// Whether the signal fired.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancelled.load(Ordering::SeqCst)
    }

    /// A future that completes once the signal fires.
    pub fn cancelled(&self) -> Cancelled<'_> {
        Cancelled { signal: self }
    }
}

/// Future returned by [`CancellationSignal::cancelled`].
#[derive(Debug)]
pub struct Cancelled<'a> {
    signal: &'a CancellationSignal,
}

impl Future for Cancelled<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.signal.is_cancelled() {
            return Poll::Ready(());
        }
        let mut wakers = self
            .signal
            .inner
            .wakers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // Check again under the lock: `cancel` stores the flag before taking the lock, so either
        // we see the flag here or `cancel` sees our waker.
        if self.signal.is_cancelled() {
            return Poll::Ready(());
        }
        if !wakers.iter().any(|w| w.will_wake(cx.waker())) {
            wakers.push(cx.waker().clone());
        }
        Poll::Pending
    }
}
