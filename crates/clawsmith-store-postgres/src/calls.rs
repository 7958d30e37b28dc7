//! Closing calls: the journal entry, the tool message and the event in one transaction.

use clawsmith_protocol::{
    Event, EventPayload, ModelMessage, ToolCompleted, ToolResultSummary, ToolStatus,
};
use clawsmith_store::StoreError;

use crate::{PgStore, Take, insert_event, insert_message, now_ms, pg, prepared};

impl PgStore {
    pub(crate) fn journal_has_call_in(
        &self,
        session_id: &str,
        turn_id: &str,
        call_id: &str,
    ) -> Result<bool, StoreError> {
        let pool = self.inner.pool.clone();
        let (session, turn, call) = (
            session_id.to_owned(),
            turn_id.to_owned(),
            call_id.to_owned(),
        );
        self.run(async move {
            let client = crate::connect(&pool, "looking up a journaled call").await?;
            let found = client
                .query_opt(
                    "SELECT 1 FROM clawsmith_journal
                     WHERE session_id = $1 AND turn_id = $2 AND call_id = $3",
                    &[&session, &turn, &call],
                )
                .await
                .map_err(pg("looking up a journaled call"))?;
            Ok(found.is_some())
        })
    }

    /// The journal entry's close (when `journaled`), the tool message and the event, in one
    /// fenced transaction.
    pub(crate) fn close_call_in(
        &self,
        session_id: &str,
        journaled: Option<(&str, ToolStatus)>,
        completed: EventPayload,
        timestamp_ms: u64,
        message: &ModelMessage,
    ) -> Result<Event, StoreError> {
        let json = clawsmith_checkpoint::stored_message_json(message)?;
        let journaled = journaled.map(|(call, status)| (call.to_owned(), status));
        let session = session_id.to_owned();
        let now = i64::try_from(now_ms()).unwrap_or(i64::MAX);
        self.write(
            "closing a call",
            session_id,
            Take::of(1, 1),
            move |tx, epoch, (index, sequence)| {
                Box::pin(async move {
                    if let Some((call, status)) = &journaled {
                        let statement = prepared(
                            tx,
                            "UPDATE clawsmith_journal SET closed_at_ms = $3, status = $4
                             WHERE session_id = $1 AND call_id = $2 AND closed_at_ms IS NULL",
                            "closing a journaled call",
                        )
                        .await?;
                        tx.execute(&statement, &[&session, call, &now, &status.as_str()])
                            .await
                            .map_err(pg("closing a journaled call"))?;
                    }
                    insert_message(tx, &session, index, epoch, &json).await?;
                    let event = Event {
                        session_id: session,
                        sequence: u64::try_from(sequence).unwrap_or(0),
                        timestamp_ms,
                        payload: completed,
                    };
                    insert_event(tx, &event, epoch).await?;
                    Ok(event)
                })
            },
        )
    }

    pub(crate) fn close_call_with_message_in(
        &self,
        session_id: &str,
        journaled: Option<(&str, ToolStatus)>,
        completed: ToolCompleted,
        timestamp_ms: u64,
        summary: ToolResultSummary,
    ) -> Result<Event, StoreError> {
        let message = ModelMessage::tool_result(
            completed.tool_call_id.clone(),
            completed.tool_name.clone(),
            completed.output.clone(),
            summary,
        );
        self.close_call_in(
            session_id,
            journaled,
            EventPayload::ToolCompleted(completed),
            timestamp_ms,
            &message,
        )
    }
}
