//! Records that guard no side effect (a turn's start, a read's start and close, a message) wait
//! in the store for its next write, which writes them first in the same transaction: a turn of
//! one read is then one transaction, not four, each of which costs round trips to the server.
//! A read of this store writes them first (alone), so this process always reads what it did.
//! A write that fails leaves them waiting, ahead of any deferred meanwhile, unless they are what
//! can never be written (their session's lease was taken over, their turn was begun already):
//! those go with the refused write, so that one lost session does not stop the store.

use std::future::Future;
use std::sync::{Arc, OnceLock, PoisonError};

use clawsmith_protocol::{Event, EventPayload, ModelMessage};
use clawsmith_store::{DeferredEvent, DeferredRecords, StoreError};

use crate::turns::insert_checkpoint;
use crate::{PgStore, Take, insert_events, insert_messages};

/// One record waiting for the store's next write.
#[derive(Clone)]
pub(crate) enum Pending {
    /// A message (already JSON, masked).
    Message { session: String, json: String },
    /// A turn's checkpoint, then its opening events.
    Turn {
        session: String,
        turn: String,
        events: Vec<(EventPayload, Arc<OnceLock<Event>>)>,
        timestamp_ms: u64,
    },
    /// An event.
    Event {
        session: String,
        payload: Box<EventPayload>,
        timestamp_ms: u64,
        stored: Arc<OnceLock<Event>>,
    },
}

impl Pending {
    pub(crate) fn session(&self) -> &str {
        match self {
            Pending::Message { session, .. }
            | Pending::Turn { session, .. }
            | Pending::Event { session, .. } => session,
        }
    }

    /// The message indexes and event numbers it takes.
    fn takes(&self) -> (i64, i64) {
        match self {
            Pending::Message { .. } => (1, 0),
            Pending::Turn { events, .. } => (0, i64::try_from(events.len()).unwrap_or(i64::MAX)),
            Pending::Event { .. } => (0, 1),
        }
    }
}

/// Whether a write refused with `error` may succeed when tried again (the server or the
/// connection failed), rather than never (a lease taken over, a turn begun twice, an unknown
/// session).
pub(crate) fn may_pass(error: &StoreError) -> bool {
    matches!(error, StoreError::Backend { .. })
}

/// What `records` take in all.
pub(crate) fn takes(records: &[Pending]) -> Take {
    let (messages, events) = records.iter().fold((0, 0), |(m, e), record| {
        let (dm, de) = record.takes();
        (m + dm, e + de)
    });
    Take::of(messages, events)
}

/// Writes `records` (all of one session) in `tx` under `epoch`, numbered from `first` (the
/// session's next message index and event number); the events to hand to their handles once
/// the transaction commits.
pub(crate) async fn write(
    tx: &deadpool_postgres::Transaction<'_>,
    records: &[Pending],
    epoch: i64,
    first: (i64, i64),
) -> Result<Vec<(Arc<OnceLock<Event>>, Event)>, StoreError> {
    // Every row's number is known before any is sent, so the inserts are sent together (one
    // round trip for all; the server runs them in the order sent): the turns' checkpoints, then
    // every message in one statement and every event in one more.
    let (mut index, mut sequence) = first;
    let mut messages = Vec::new();
    let mut turns = Vec::new();
    let mut events: Vec<(Arc<OnceLock<Event>>, Event)> = Vec::new();
    for record in records {
        match record {
            Pending::Message { session, json } => {
                messages.push((session.as_str(), index, json.as_str()));
                index += 1;
            }
            Pending::Turn {
                session,
                turn,
                events: opening,
                timestamp_ms,
            } => {
                turns.push((session.as_str(), turn.as_str(), (index, sequence - 1)));
                for (payload, slot) in opening {
                    events.push((
                        Arc::clone(slot),
                        Event {
                            session_id: session.clone(),
                            sequence: u64::try_from(sequence).unwrap_or(0),
                            timestamp_ms: *timestamp_ms,
                            payload: payload.clone(),
                        },
                    ));
                    sequence += 1;
                }
            }
            Pending::Event {
                session,
                payload,
                timestamp_ms,
                stored: slot,
            } => {
                events.push((
                    Arc::clone(slot),
                    Event {
                        session_id: session.clone(),
                        sequence: u64::try_from(sequence).unwrap_or(0),
                        timestamp_ms: *timestamp_ms,
                        payload: (**payload).clone(),
                    },
                ));
                sequence += 1;
            }
        }
    }
    type Insert<'a> = std::pin::Pin<Box<dyn Future<Output = Result<(), StoreError>> + Send + 'a>>;
    let rows: Vec<&Event> = events.iter().map(|(_, event)| event).collect();
    let mut inserts: Vec<Insert<'_>> = Vec::new();
    for (session, turn, standing) in turns {
        inserts.push(Box::pin(async move {
            match insert_checkpoint(tx, session, turn, epoch, standing).await? {
                Some(_) => Ok(()),
                None => Err(StoreError::TurnExists {
                    session_id: session.to_owned(),
                    turn_id: turn.to_owned(),
                }),
            }
        }));
    }
    if !messages.is_empty() {
        inserts.push(Box::pin(insert_messages(tx, &messages, epoch)));
    }
    if !rows.is_empty() {
        inserts.push(Box::pin(insert_events(tx, &rows, epoch)));
    }
    futures_util::future::try_join_all(inserts).await?;
    Ok(events)
}

impl PgStore {
    fn defer(&self, records: impl IntoIterator<Item = Pending>) {
        self.inner
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend(records);
    }

    /// The records waiting, taken out of the queue (a write that takes them puts them back
    /// with [`PgStore::put_back`] when it fails).
    pub(crate) fn take_pending(&self) -> Vec<Pending> {
        std::mem::take(
            &mut *self
                .inner
                .pending
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        )
    }

    /// Puts records a failed write had taken back at the head of the queue.
    pub(crate) fn put_back(&self, mut records: Vec<Pending>) {
        if records.is_empty() {
            return;
        }
        let mut pending = self
            .inner
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        records.append(&mut pending);
        *pending = records;
    }

    /// Whether the start of `turn_id` waits in this store.
    pub(crate) fn defers_turn(&self, session_id: &str, turn_id: &str) -> bool {
        self.inner
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .any(|record| {
                matches!(record, Pending::Turn { session, turn, .. }
                         if session == session_id && turn == turn_id)
            })
    }

    pub(crate) fn pending_count(&self) -> usize {
        self.inner
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    pub(crate) fn has_pending(&self) -> bool {
        !self
            .inner
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_empty()
    }

    /// Writes what waits, alone: one transaction per session they belong to, in order.
    pub(crate) fn write_pending_alone(&self, records: Vec<Pending>) -> Result<(), StoreError> {
        let mut sessions: Vec<String> = Vec::new();
        for record in &records {
            if !sessions.iter().any(|session| session == record.session()) {
                sessions.push(record.session().to_owned());
            }
        }
        let mut records: Vec<Option<Pending>> = records.into_iter().map(Some).collect();
        for session in sessions {
            let group: Vec<Pending> = records
                .iter_mut()
                .filter(|record| record.as_ref().is_some_and(|r| r.session() == session))
                .filter_map(Option::take)
                .collect();
            if let Err(error) = self.write_with(
                "writing deferred records",
                &session,
                Take::default(),
                group,
                |_, _, _| Box::pin(async { Ok(()) }),
            ) {
                // `write_with` put the group back; the groups after it follow it.
                // What is left waits for the next write, in its order.
                self.put_back(records.into_iter().flatten().collect());
                return Err(error);
            }
        }
        Ok(())
    }
}

impl DeferredRecords for PgStore {
    fn defer_message(&self, session_id: &str, message: &ModelMessage) -> Result<(), StoreError> {
        let json = clawsmith_checkpoint::stored_message_json(message)?;
        self.defer([Pending::Message {
            session: session_id.to_owned(),
            json,
        }]);
        Ok(())
    }

    fn defer_turn_start(
        &self,
        session_id: &str,
        turn_id: &str,
        events: Vec<EventPayload>,
        timestamp_ms: u64,
    ) -> Result<Vec<DeferredEvent>, StoreError> {
        let slots: Vec<Arc<OnceLock<Event>>> =
            events.iter().map(|_| Arc::new(OnceLock::new())).collect();
        let handles = slots.iter().cloned().map(DeferredEvent::new).collect();
        self.defer([Pending::Turn {
            session: session_id.to_owned(),
            turn: turn_id.to_owned(),
            events: events.into_iter().zip(slots).collect(),
            timestamp_ms,
        }]);
        Ok(handles)
    }

    fn defer_call_start(
        &self,
        session_id: &str,
        assistant: Option<&ModelMessage>,
        started: EventPayload,
        timestamp_ms: u64,
    ) -> Result<DeferredEvent, StoreError> {
        let assistant = assistant
            .map(clawsmith_checkpoint::stored_message_json)
            .transpose()?;
        let slot = Arc::new(OnceLock::new());
        let message = assistant.map(|json| Pending::Message {
            session: session_id.to_owned(),
            json,
        });
        self.defer(message.into_iter().chain([Pending::Event {
            session: session_id.to_owned(),
            payload: Box::new(started),
            timestamp_ms,
            stored: Arc::clone(&slot),
        }]));
        Ok(DeferredEvent::new(slot))
    }

    fn defer_call_close(
        &self,
        session_id: &str,
        completed: EventPayload,
        timestamp_ms: u64,
        message: &ModelMessage,
    ) -> Result<DeferredEvent, StoreError> {
        let json = clawsmith_checkpoint::stored_message_json(message)?;
        let slot = Arc::new(OnceLock::new());
        self.defer([
            Pending::Message {
                session: session_id.to_owned(),
                json,
            },
            Pending::Event {
                session: session_id.to_owned(),
                payload: Box::new(completed),
                timestamp_ms,
                stored: Arc::clone(&slot),
            },
        ]);
        Ok(DeferredEvent::new(slot))
    }

    fn flush_deferred(&self) -> Result<(), StoreError> {
        let records = self.take_pending();
        if records.is_empty() {
            return Ok(());
        }
        self.write_pending_alone(records)
    }
}
