//! What keeps a live timeline current. A store that tells of new events as writers commit them
//! ([`SessionStore::follow_events`]: PostgreSQL's `LISTEN`, so writers on other hosts count) is
//! followed by one thread for the whole server, which hands each commit's news to every open
//! timeline; a timeline then reads its new events at once and otherwise waits. Without such a
//! store, or while the follower is reconnecting, each timeline asks the store's last sequence
//! every [`LIVE_POLL`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use clawsmith_store::{EventFollower, SessionStore};
use tokio::sync::broadcast;

use crate::LIVE_POLL;

/// While the feed is up, a timeline still reads the store's last sequence this often: a net
/// under the notifications, never their replacement.
pub const FOLLOWED_RECHECK: Duration = Duration::from_secs(30);

/// How long the follower thread waits for news before it looks whether the server is gone.
const FOLLOWER_WAIT: Duration = Duration::from_millis(500);

/// How long the follower thread waits before it connects again after losing its connection.
const RECONNECT_PAUSE: Duration = Duration::from_secs(1);

/// What the follower thread hands to timelines.
#[derive(Debug, Clone)]
pub(crate) enum News {
    /// `session` has events up to `last`.
    Events { session: String, last: u64 },
    /// The follower was deaf for a while (reconnected, or a timeline fell behind): every
    /// timeline reads the store again.
    Resync,
}

/// The server's one follower of the store, while the server lives.
#[derive(Debug)]
pub(crate) struct Feed {
    sender: broadcast::Sender<News>,
    up: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
}

impl Drop for Feed {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl Feed {
    /// Follows `store` when it can tell of commits; `None` when it cannot (timelines poll). A
    /// store that can but failed to start following is retried by the thread, and timelines
    /// poll until it is up.
    pub(crate) fn start(store: Arc<dyn SessionStore>) -> std::io::Result<Option<Feed>> {
        let follower = match store.follow_events() {
            Ok(None) => return Ok(None),
            Ok(Some(follower)) => Some(follower),
            Err(_) => None,
        };
        let (sender, _) = broadcast::channel(1024);
        let feed = Feed {
            sender: sender.clone(),
            up: Arc::new(AtomicBool::new(follower.is_some())),
            stop: Arc::new(AtomicBool::new(false)),
        };
        let (up, stop) = (feed.up.clone(), feed.stop.clone());
        std::thread::Builder::new()
            .name("clawsmith-web-follower".to_owned())
            .spawn(move || follow(&*store, follower, &sender, &up, &stop))?;
        Ok(Some(feed))
    }

    pub(crate) fn subscribe(&self) -> broadcast::Receiver<News> {
        self.sender.subscribe()
    }

    /// Whether the follower is hearing commits now.
    pub(crate) fn is_up(&self) -> bool {
        self.up.load(Ordering::Relaxed)
    }
}

/// The follower thread: hands on news until the server is gone; reconnects when the follower
/// goes deaf, and tells timelines to read again once it hears again.
fn follow(
    store: &dyn SessionStore,
    mut follower: Option<Box<dyn EventFollower>>,
    sender: &broadcast::Sender<News>,
    up: &AtomicBool,
    stop: &AtomicBool,
) {
    while !stop.load(Ordering::Relaxed) {
        match &follower {
            Some(listening) => match listening.wait(FOLLOWER_WAIT) {
                Ok(news) => {
                    for (session, last) in news {
                        // No timeline open is no one to tell.
                        let _ = sender.send(News::Events { session, last });
                    }
                }
                Err(_) => {
                    up.store(false, Ordering::Relaxed);
                    follower = None;
                    let _ = sender.send(News::Resync);
                }
            },
            None => {
                std::thread::sleep(RECONNECT_PAUSE);
                if let Ok(Some(listening)) = store.follow_events() {
                    follower = Some(listening);
                    up.store(true, Ordering::Relaxed);
                    // Commits made while deaf were not heard: read them.
                    let _ = sender.send(News::Resync);
                }
            }
        }
    }
}

/// Waits until `session` may have events after `after`: news of it (or of a resync) from a
/// feed that is up, else the next poll.
pub(crate) async fn wait_for_events(
    feed: Option<&Feed>,
    news: &mut Option<broadcast::Receiver<News>>,
    session: &str,
    after: u64,
) {
    let (Some(feed), Some(news)) = (feed, news.as_mut()) else {
        tokio::time::sleep(LIVE_POLL).await;
        return;
    };
    if !feed.is_up() {
        tokio::time::sleep(LIVE_POLL).await;
        return;
    }
    let heard = async {
        loop {
            match news.recv().await {
                Ok(News::Events { session: of, last }) if of == session && last > after => return,
                Ok(News::Events { .. }) => continue,
                Ok(News::Resync) | Err(broadcast::error::RecvError::Lagged(_)) => return,
                Err(broadcast::error::RecvError::Closed) => {
                    tokio::time::sleep(LIVE_POLL).await;
                    return;
                }
            }
        }
    };
    let _ = tokio::time::timeout(FOLLOWED_RECHECK, heard).await;
}
