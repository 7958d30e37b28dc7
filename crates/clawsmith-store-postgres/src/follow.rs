//! Following other writers: a connection of its own listens on `clawsmith_events`, where every
//! commit that adds events says `session:last-sequence`.

use std::sync::mpsc;
use std::time::Duration;

use futures_util::StreamExt;
use tokio_postgres::AsyncMessage;

use crate::{backend, pg};
use clawsmith_store::StoreError;

/// New events of any session, as other writers commit them.
#[derive(Debug)]
pub struct Follower {
    news: mpsc::Receiver<Result<(String, u64), String>>,
    /// The connection's client: dropping it ends the connection, and with it the listener.
    _client: tokio_postgres::Client,
    listener: tokio::task::JoinHandle<()>,
}

impl Drop for Follower {
    fn drop(&mut self) {
        self.listener.abort();
    }
}

impl clawsmith_store::EventFollower for Follower {
    fn wait(&self, timeout: Duration) -> Result<Vec<(String, u64)>, StoreError> {
        Follower::wait(self, timeout)
    }
}

impl Follower {
    /// The sessions that got events, with their last sequence, waiting at most `timeout` for
    /// the first; empty when none came. An error means the listening connection ended (a
    /// follower then reads again from its last sequence and follows anew).
    pub fn wait(&self, timeout: Duration) -> Result<Vec<(String, u64)>, StoreError> {
        let mut news = Vec::new();
        let first = match self.news.recv_timeout(timeout) {
            Ok(first) => first,
            Err(mpsc::RecvTimeoutError::Timeout) => return Ok(news),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(StoreError::Backend {
                    context: "following the store",
                    message: "the listening connection ended".to_owned(),
                });
            }
        };
        news.push(first.map_err(backend("following the store"))?);
        while let Ok(next) = self.news.try_recv() {
            news.push(next.map_err(backend("following the store"))?);
        }
        Ok(news)
    }
}

/// Opens the listening connection and starts forwarding its notifications.
pub(crate) async fn listen(
    connection: crate::tls::Connection,
    runtime: tokio::runtime::Handle,
) -> Result<Follower, StoreError> {
    let (client, mut connection) = connection
        .config
        .connect(connection.tls)
        .await
        .map_err(pg("connecting a follower"))?;
    let (sender, news) = mpsc::channel();
    let listener = runtime.spawn(async move {
        let mut messages =
            futures_util::stream::poll_fn(move |context| connection.poll_message(context));
        while let Some(message) = messages.next().await {
            let news = match message {
                Ok(AsyncMessage::Notification(notification)) => {
                    let payload = notification.payload();
                    let Some((session, sequence)) = payload.rsplit_once(':') else {
                        continue;
                    };
                    let Ok(sequence) = sequence.parse::<u64>() else {
                        continue;
                    };
                    Ok((session.to_owned(), sequence))
                }
                Ok(_) => continue,
                Err(error) => Err(crate::chain(&error)),
            };
            let failed = news.is_err();
            if sender.send(news).is_err() || failed {
                return;
            }
        }
    });
    client
        .batch_execute("LISTEN clawsmith_events")
        .await
        .map_err(pg("listening for new events"))?;
    Ok(Follower {
        news,
        _client: client,
        listener,
    })
}
