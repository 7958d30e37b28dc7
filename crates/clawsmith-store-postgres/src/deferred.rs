//! Records that guard no side effect (a turn's start, a read's start and close, a message) wait
//! in the store for its next write, which writes them first in the same transaction: a turn of
//! one read is then one transaction, not four, each of which costs round trips to the server.
//! A read of this store writes them first (alone), so this process always reads what it did.
//! A write that fails leaves them waiting, ahead of any deferred meanwhile, unless they are what
//! can never be written (their session's lease was taken over, their turn was begun already):
//! those go with the refused write, so that one lost session does not stop the store.

use std::sync::{Arc, OnceLock, PoisonError};

use clawsmith_protocol::{Event, EventPayload, ModelMessage};
use clawsmith_store::{DeferredEvent, DeferredRecords, StoreError, TurnManifest};

use crate::turns::signed;
use crate::{PgStore, Take, now_ms, prepared};

/// One record waiting for the store's next write.
#[derive(Clone)]
pub(crate) enum Pending {
    /// A message (already JSON, masked).
    Message { session: String, json: String },
    /// A turn's checkpoint, then its opening events; the checkpoint is written finished when
    /// the turn finished before its start was written ([`PgStore::finish_deferred_turn`]).
    Turn {
        session: String,
        turn: String,
        events: Vec<(EventPayload, Arc<OnceLock<Event>>)>,
        timestamp_ms: u64,
        finished_at_ms: Option<u64>,
    },
    /// An event.
    Event {
        session: String,
        payload: Box<EventPayload>,
        timestamp_ms: u64,
        stored: Arc<OnceLock<Event>>,
        /// Written by the write that took it or not at all (an append, a turn's
        /// `turn.completed`): a failed write does not leave it waiting.
        at_once: bool,
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

/// The statement that writes records, prepared on a connection (once: the pool keeps it).
pub(crate) struct Statements {
    records: tokio_postgres::Statement,
}

impl Statements {
    pub(crate) async fn prepare(tx: &crate::Tx) -> Result<Statements, StoreError> {
        // One statement for the turns' checkpoints, the messages and the events (arrays of each,
        // empty where there are none); it notifies followers of each session's last event. The
        // checkpoints' insert is plain: a turn begun already fails the statement, and with it
        // the transaction, whatever was sent after it.
        let records = prepared(
            tx,
            "WITH checkpoints AS (
               INSERT INTO clawsmith_checkpoints
                 (session_id, turn_id, created_at_ms, message_count, event_sequence,
                  todos_json, state, finished_at_ms, epoch)
               SELECT t.session_id, t.turn_id, t.created_at_ms, t.message_count,
                      t.event_sequence,
                      COALESCE((SELECT todos_json FROM clawsmith_todos
                                WHERE session_id = t.session_id), '[]'),
                      CASE WHEN t.finished_at_ms IS NULL THEN 'open' ELSE 'finished' END,
                      t.finished_at_ms, $1
               FROM unnest($2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::bigint[],
                           $7::bigint[])
                 AS t (session_id, turn_id, created_at_ms, message_count, event_sequence,
                       finished_at_ms)),
             messages AS (
               INSERT INTO clawsmith_messages (session_id, idx, epoch, message_json)
               SELECT m.session_id, m.idx, $1, m.message_json
               FROM unnest($8::text[], $9::bigint[], $10::text[])
                 AS m (session_id, idx, message_json)),
             events AS (
               INSERT INTO clawsmith_events
                 (session_id, sequence, epoch, timestamp_ms, type, event_json)
               SELECT e.session_id, e.sequence, $1, e.timestamp_ms, e.type, e.event_json
               FROM unnest($11::text[], $12::bigint[], $13::bigint[], $14::text[], $15::text[])
                 AS e (session_id, sequence, timestamp_ms, type, event_json)
               RETURNING session_id, sequence)
             SELECT pg_notify('clawsmith_events', session_id || ':' || max(sequence))
             FROM events GROUP BY session_id",
            "writing waiting records",
        )
        .await?;
        Ok(Statements { records })
    }
}

/// A turn's checkpoint as the records write it: where the session stands at its start (the
/// next message index, the last event sequence before it) and, for a turn that finished
/// before its start was written, when it finished.
struct CheckpointRow<'a> {
    session: &'a str,
    turn: &'a str,
    created_at_ms: i64,
    message_count: i64,
    event_sequence: i64,
    finished_at_ms: Option<i64>,
}

/// Writes `records` (all of one session) in `tx` under `epoch`, numbered from `first` (the
/// session's next message index and event number); the events to hand to their handles once
/// the transaction commits.
///
/// Every row's number is known before it is sent and the statement is prepared, so the one
/// statement writing them is sent when this future is first polled: a write polls its body's
/// statements after it, and they all go in one round trip (the server runs them in the order
/// sent).
pub(crate) async fn send(
    tx: &crate::Tx,
    statements: &Statements,
    records: &[Pending],
    epoch: i64,
    first: (i64, i64),
) -> Result<Vec<(Arc<OnceLock<Event>>, Event)>, StoreError> {
    let (mut index, mut sequence) = first;
    let mut messages = Vec::new();
    let mut turns: Vec<CheckpointRow<'_>> = Vec::new();
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
                finished_at_ms,
            } => {
                turns.push(CheckpointRow {
                    session,
                    turn,
                    created_at_ms: signed(now_ms()),
                    message_count: index,
                    event_sequence: sequence - 1,
                    finished_at_ms: finished_at_ms.map(signed),
                });
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
                ..
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
    let turn_sessions: Vec<&str> = turns.iter().map(|turn| turn.session).collect();
    let turn_ids: Vec<&str> = turns.iter().map(|turn| turn.turn).collect();
    let created: Vec<i64> = turns.iter().map(|turn| turn.created_at_ms).collect();
    let counts: Vec<i64> = turns.iter().map(|turn| turn.message_count).collect();
    let standing: Vec<i64> = turns.iter().map(|turn| turn.event_sequence).collect();
    let finished: Vec<Option<i64>> = turns.iter().map(|turn| turn.finished_at_ms).collect();
    let message_sessions: Vec<&str> = messages.iter().map(|(session, _, _)| *session).collect();
    let indexes: Vec<i64> = messages.iter().map(|(_, index, _)| *index).collect();
    let message_jsons: Vec<&str> = messages.iter().map(|(_, _, json)| *json).collect();
    let event_sessions: Vec<&str> = events
        .iter()
        .map(|(_, event)| event.session_id.as_str())
        .collect();
    let sequences: Vec<i64> = events
        .iter()
        .map(|(_, event)| signed(event.sequence))
        .collect();
    let timestamps: Vec<i64> = events
        .iter()
        .map(|(_, event)| signed(event.timestamp_ms))
        .collect();
    let kinds: Vec<&str> = events
        .iter()
        .map(|(_, event)| event.payload.kind())
        .collect();
    let event_jsons = events
        .iter()
        .map(|(_, event)| clawsmith_checkpoint::stored_event_json(event))
        .collect::<Result<Vec<String>, StoreError>>()?;
    tx.query(
        &statements.records,
        &[
            &epoch,
            &turn_sessions,
            &turn_ids,
            &created,
            &counts,
            &standing,
            &finished,
            &message_sessions,
            &indexes,
            &message_jsons,
            &event_sessions,
            &sequences,
            &timestamps,
            &kinds,
            &event_jsons,
        ],
    )
    .await
    .map_err(|error| {
        turn_exists(&error, &turns).unwrap_or_else(|| crate::pg("writing waiting records")(error))
    })?;
    Ok(events)
}

/// [`StoreError::TurnExists`] when `error` is the checkpoints' uniqueness refusing one of
/// `turns` (the server names the key it refused).
fn turn_exists(error: &tokio_postgres::Error, turns: &[CheckpointRow<'_>]) -> Option<StoreError> {
    let refusal = error.as_db_error()?;
    if refusal.code() != &tokio_postgres::error::SqlState::UNIQUE_VIOLATION
        || refusal.table() != Some("clawsmith_checkpoints")
    {
        return None;
    }
    let detail = refusal.detail().unwrap_or_default();
    let (session, turn) = turns
        .iter()
        .find(|row| detail.contains(&format!("({}, {})", row.session, row.turn)))
        .or(turns.first())
        .map(|row| (row.session, row.turn))?;
    Some(StoreError::TurnExists {
        session_id: session.to_owned(),
        turn_id: turn.to_owned(),
    })
}

/// The records waiting for the store's next write, in order, and the turns (session, turn)
/// whose start a write has taken and not yet landed: until it lands, that turn's checkpoint is
/// neither waiting here nor committed, and what needs it (the turn's finish, another write of
/// its session) waits for the landing.
#[derive(Default)]
pub(crate) struct Queue {
    records: Vec<Pending>,
    flying: Vec<(String, String)>,
}

impl Queue {
    /// Every record waiting, taken out, their turns marked as flying.
    fn take_records(&mut self) -> Vec<Pending> {
        let records = std::mem::take(&mut self.records);
        self.flying.extend(turn_keys(&records));
        records
    }

    fn flying_in(&self, session_id: &str) -> bool {
        self.flying.iter().any(|(session, _)| session == session_id)
    }
}

/// The records, to read: taking them goes through [`Queue::take_records`], which marks their
/// turns as flying.
impl std::ops::Deref for Queue {
    type Target = Vec<Pending>;

    fn deref(&self) -> &Vec<Pending> {
        &self.records
    }
}

/// The turns a write took, landed when it is dropped (after the write put back what it puts
/// back), so that a write that ends any way, a panic included, never leaves them flying.
pub(crate) struct Flown<'a> {
    store: &'a PgStore,
    keys: Vec<(String, String)>,
}

impl Flown<'_> {
    /// Hands the turns on to the write that takes the records over: nothing lands here.
    fn hand_on(mut self) {
        self.keys.clear();
    }
}

impl Drop for Flown<'_> {
    fn drop(&mut self) {
        self.store.land_keys(std::mem::take(&mut self.keys));
    }
}

/// The (session, turn) of each turn's start among `records`.
pub(crate) fn turn_keys(records: &[Pending]) -> Vec<(String, String)> {
    records
        .iter()
        .filter_map(|record| match record {
            Pending::Turn { session, turn, .. } => Some((session.clone(), turn.clone())),
            _ => None,
        })
        .collect()
}

impl PgStore {
    /// The records waiting, locked.
    fn queue(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.inner
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn defer(&self, records: impl IntoIterator<Item = Pending>) {
        self.queue().records.extend(records);
    }

    /// The records waiting, taken out of the queue (a write that takes them puts them back
    /// with [`PgStore::put_back`] when it fails, and lands their turns when it ends:
    /// [`PgStore::flown`]).
    pub(crate) fn take_pending(&self) -> Vec<Pending> {
        self.queue().take_records()
    }

    /// [`PgStore::take_pending`] for a write of `session_id`, once no turn of that session
    /// another write took is still on its way: the write may need its checkpoint.
    pub(crate) fn take_pending_after_landing(&self, session_id: &str) -> Vec<Pending> {
        self.inner
            .landed
            .wait_while(self.queue(), |queue| queue.flying_in(session_id))
            .unwrap_or_else(PoisonError::into_inner)
            .take_records()
    }

    /// The turns of `records`, a write's, to land when it ends ([`Flown`]).
    pub(crate) fn flown(&self, records: &[Pending]) -> Flown<'_> {
        Flown {
            store: self,
            keys: turn_keys(records),
        }
    }

    /// Says that the write which took the turns `keys` ([`turn_keys`] of its records) has
    /// ended (they were written, refused for good, or put back): they are no longer flying.
    fn land_keys(&self, keys: Vec<(String, String)>) {
        if keys.is_empty() {
            return;
        }
        {
            let mut queue = self.queue();
            for key in keys {
                if let Some(at) = queue.flying.iter().position(|flying| *flying == key) {
                    queue.flying.swap_remove(at);
                }
            }
        }
        self.inner.landed.notify_all();
    }

    /// Puts records a failed write had taken back at the head of the queue as they were before
    /// it: but for those written at once or not at all, and with their turns open again (a
    /// turn's finish marks its start finished just before it takes it). This happens under the
    /// queue's lock, so no other write takes them half restored.
    pub(crate) fn put_back(&self, mut records: Vec<Pending>) {
        records.retain(|record| !matches!(record, Pending::Event { at_once: true, .. }));
        for record in &mut records {
            if let Pending::Turn { finished_at_ms, .. } = record {
                *finished_at_ms = None;
            }
        }
        if records.is_empty() {
            return;
        }
        let mut pending = self.queue();
        records.append(&mut pending.records);
        pending.records = records;
    }

    /// Finishes `turn_id` when its start still waits in this store (`None` when it does not):
    /// the turn recorded no file (recording one is a write, which writes its start), so its
    /// checkpoint is written finished and `completed` after the waiting records, all in one
    /// transaction, whose rows and COMMIT go in one round trip. Marking the turn and taking the
    /// records happen under the queue's lock, so no other write takes them in between. If the
    /// write fails and the records wait again, the turn is open again and `completed` is not
    /// among them.
    pub(crate) fn finish_deferred_turn(
        &self,
        session_id: &str,
        turn_id: &str,
        completed: &Option<(EventPayload, u64)>,
    ) -> Result<Option<(TurnManifest, Option<Event>)>, StoreError> {
        let slot = completed.as_ref().map(|_| Arc::new(OnceLock::new()));
        let records = {
            // A turn whose start another write took is finished once that write lands: here if
            // it put the start back, the general way if it wrote it.
            let key = (session_id.to_owned(), turn_id.to_owned());
            let mut pending = self
                .inner
                .landed
                .wait_while(self.queue(), |queue| queue.flying.contains(&key))
                .unwrap_or_else(PoisonError::into_inner);
            let Some(finished) = pending.records.iter_mut().find_map(|record| match record {
                Pending::Turn {
                    session,
                    turn,
                    finished_at_ms,
                    ..
                } if session == session_id && turn == turn_id => Some(finished_at_ms),
                _ => None,
            }) else {
                return Ok(None);
            };
            *finished = Some(now_ms());
            if let (Some((payload, timestamp_ms)), Some(slot)) = (completed, &slot) {
                pending.records.push(Pending::Event {
                    session: session_id.to_owned(),
                    payload: Box::new(payload.clone()),
                    timestamp_ms: *timestamp_ms,
                    stored: Arc::clone(slot),
                    at_once: true,
                });
            }
            pending.take_records()
        };
        let written = if records.iter().all(|record| record.session() == session_id) {
            self.write_only_records("finishing a turn", session_id, records)
        } else {
            self.write_records(
                "finishing a turn",
                session_id,
                Take::default(),
                records,
                |tx, _, _| Box::pin(tx.commit()),
            )
        };
        // A failed write put the records back with the turn open and without `completed`.
        written?;
        let event = match slot {
            Some(slot) => Some(slot.get().cloned().ok_or_else(|| StoreError::Backend {
                context: "finishing a turn",
                message: "the turn's event was not appended".to_owned(),
            })?),
            None => None,
        };
        let manifest = TurnManifest {
            session_id: session_id.to_owned(),
            turn_id: turn_id.to_owned(),
            files: Vec::new(),
        };
        Ok(Some((manifest, event)))
    }

    /// Whether the start of `turn_id` waits in this store.
    pub(crate) fn defers_turn(&self, session_id: &str, turn_id: &str) -> bool {
        self.queue().iter().any(|record| {
            matches!(record, Pending::Turn { session, turn, .. }
                         if session == session_id && turn == turn_id)
        })
    }

    pub(crate) fn pending_count(&self) -> usize {
        self.queue().len()
    }

    pub(crate) fn has_pending(&self) -> bool {
        !self.queue().is_empty()
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
            if let Err(error) = self.write_only_records("writing deferred records", &session, group)
            {
                // The failed write put the group back; the groups after it follow it.
                // What is left waits for the next write, in its order.
                let rest: Vec<Pending> = records.into_iter().flatten().collect();
                let _flown = self.flown(&rest);
                self.put_back(rest);
                return Err(error);
            }
        }
        Ok(())
    }

    /// Appends an event as a record written at once, after the records waiting (all of
    /// `session_id`), in their transaction; the payload back, unsent, when records of another
    /// session wait (those are written alone first, by the general way). A failed append
    /// leaves no trace of the event among the records that wait again (it is written at once
    /// or not at all).
    pub(crate) fn append_as_record(
        &self,
        session_id: &str,
        payload: EventPayload,
        timestamp_ms: u64,
    ) -> Result<Result<Event, StoreError>, Box<EventPayload>> {
        let slot = Arc::new(OnceLock::new());
        let records = {
            let mut pending = self.queue();
            if pending.iter().any(|record| record.session() != session_id) {
                return Err(Box::new(payload));
            }
            let mut records = pending.take_records();
            records.push(Pending::Event {
                session: session_id.to_owned(),
                payload: Box::new(payload),
                timestamp_ms,
                stored: Arc::clone(&slot),
                at_once: true,
            });
            records
        };
        if let Err(error) = self.write_only_records("appending an event", session_id, records) {
            return Ok(Err(error));
        }
        Ok(slot.get().cloned().ok_or_else(|| StoreError::Backend {
            context: "appending an event",
            message: "the event was not written".to_owned(),
        }))
    }
}

/// How a write on numbers known beforehand ended short of writing.
enum Unwritten {
    /// The session's counters were not where this store thought: nothing was written, and the
    /// records are handed back to be written as any other write does.
    Moved(Vec<Pending>),
    /// Why it failed; the records wait again or went with it, as for [`PgStore::write_with`].
    Failed(StoreError),
}

impl PgStore {
    /// Writes `records`, all of `session_id`, in one transaction of their own. When this store
    /// holds the session's lease and knows its next numbers (its last write left them), BEGIN,
    /// the lease check on those numbers, the records and COMMIT go in one round trip
    /// ([`PgStore::write_known`]); otherwise, or when the numbers moved, as any write.
    pub(crate) fn write_only_records(
        &self,
        context: &'static str,
        session_id: &str,
        records: Vec<Pending>,
    ) -> Result<(), StoreError> {
        let records = match self.known_next(session_id) {
            Some((epoch, next)) => {
                match self.write_known(context, session_id, epoch, next, records) {
                    Ok(()) => return Ok(()),
                    Err(Unwritten::Failed(error)) => return Err(error),
                    Err(Unwritten::Moved(records)) => {
                        self.saw_next(session_id, epoch, None);
                        records
                    }
                }
            }
            None => records,
        };
        self.write_with(context, session_id, Take::default(), records, |tx, _, _| {
            Box::pin(tx.commit())
        })
    }

    /// Writes `records` under `epoch` numbered from `next`, sent in one round trip with BEGIN,
    /// the lease check and COMMIT: the server's `clawsmith_fence_known_numbers` takes the
    /// numbers only if they are still next and the lease is still this store's at `epoch`, and
    /// otherwise fails the transaction before the records' statement runs (the server runs a
    /// connection's statements in order and refuses the rest of a failed transaction).
    fn write_known(
        &self,
        context: &'static str,
        session_id: &str,
        epoch: i64,
        next: (i64, i64),
        records: Vec<Pending>,
    ) -> Result<(), Unwritten> {
        let pool = self.inner.pool.clone();
        let holder = self.inner.holder.clone();
        let session = session_id.to_owned();
        let take = takes(&records);
        let flown = self.flown(&records);
        let records = Arc::new(records);
        let written = Arc::clone(&records);
        // A failure is the records' own (`true`: the lease, their rows) or not (the
        // connection, the commit), as in `write_with`.
        let result = self.run_raw(async move {
            let tx = match crate::connect(&pool, context).await {
                Ok(client) => crate::Tx::on(client),
                Err(error) => return Ok(Err(Refused::Error(error, false))),
            };
            let outcome = async {
                let innocent = |error| Refused::Error(error, false);
                let statements = Statements::prepare(&tx).await.map_err(innocent)?;
                let fence = prepared(
                    &tx,
                    "SELECT clawsmith_fence_known_numbers($1, $2, $3, $4, $5, $6, $7)",
                    "checking the session's lease",
                )
                .await
                .map_err(innocent)?;
                let parameters: [&(dyn tokio_postgres::types::ToSql + Sync); 7] = [
                    &session,
                    &holder,
                    &epoch,
                    &next.0,
                    &next.1,
                    &take.messages,
                    &take.events,
                ];
                let (begun, fenced, stored, committed) = futures_util::join!(
                    tx.begin(),
                    tx.query_one(&fence, &parameters),
                    send(&tx, &statements, &written, epoch, next),
                    tx.commit(),
                );
                begun.map_err(crate::pg(context)).map_err(innocent)?;
                let wanted: bool = match fenced {
                    Ok(row) => row.get(0),
                    Err(error) => return Err(fence_refused(error, &session, epoch)),
                };
                let stored = stored.map_err(|error| Refused::Error(error, true))?;
                committed.map_err(innocent)?;
                Ok((stored, wanted))
            };
            let outcome = outcome.await;
            if outcome.is_err() {
                tx.rollback().await;
            }
            Ok(outcome)
        });
        let refused = match result {
            Ok(Ok((stored, wanted))) => {
                for (slot, event) in stored {
                    let _ = slot.set(event);
                }
                self.saw_wanted(session_id, wanted);
                self.saw_next(
                    session_id,
                    epoch,
                    Some((next.0 + take.messages, next.1 + take.events)),
                );
                return Ok(());
            }
            Ok(Err(refused)) => refused,
            Err(error) => Refused::Error(error, false),
        };
        let records = Arc::try_unwrap(records).unwrap_or_else(|shared| (*shared).clone());
        match refused {
            Refused::Moved => {
                flown.hand_on();
                Err(Unwritten::Moved(records))
            }
            Refused::Error(error, theirs) => {
                if !theirs || may_pass(&error) {
                    self.put_back(records);
                }
                Err(Unwritten::Failed(error))
            }
        }
    }
}

/// Why [`PgStore::write_known`]'s transaction wrote nothing.
enum Refused {
    Moved,
    /// The error, and whether it is the records' own.
    Error(StoreError, bool),
}

/// What the server's refusal of a lease check on known numbers means.
fn fence_refused(error: tokio_postgres::Error, session_id: &str, epoch: i64) -> Refused {
    match error.code().map(tokio_postgres::error::SqlState::code) {
        Some("CS001") => Refused::Error(
            StoreError::LeaseLost {
                session_id: session_id.to_owned(),
                epoch: u64::try_from(epoch).unwrap_or(0),
            },
            true,
        ),
        Some("CS002") => Refused::Moved,
        _ => Refused::Error(crate::pg("checking the session's lease")(error), false),
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
            finished_at_ms: None,
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
            at_once: false,
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
                at_once: false,
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
