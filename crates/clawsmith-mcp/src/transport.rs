//! Newline-delimited JSON-RPC over a pair of pipes, for both MCP sides, with the limits rmcp's
//! stdio transport lacks: every line read is capped *before* it is buffered, an oversized line
//! becomes an error someone reads (never a silent drop), and writes go through one writer task
//! fed by a bounded queue, so a peer that stops reading stops us from queueing more.
//!
//! The server side ([`crate::jsonrpc::ServerTransport`]) builds on [`LineReader`] and
//! [`LineWriter`]; [`ClientTransport`] is the client side, over a spawned server's stdio.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::model::{ErrorCode as JsonRpcErrorCode, ErrorData, JsonRpcMessage, RequestId};
use rmcp::service::{RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};

/// Longest line (one JSON-RPC message) read from an external MCP server: a larger answer fails
/// the request it answers with a clear error.
pub const MAX_ANSWER_LINE_BYTES: usize = 16 * 1024 * 1024;

/// Messages waiting for the writer task. Small: it only smooths bursts; a peer that does not
/// read fills it, and then whoever sends waits.
const WRITE_QUEUE: usize = 16;
/// How long closing waits for queued messages to reach a peer that may have stopped reading.
const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// What one bounded line read found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum LineRead {
    /// A whole line is in [`LineReader::line`] (without its `\n`).
    Line,
    /// The line was longer than the cap; its bytes were dropped as they arrived.
    Oversized,
    /// The peer closed the pipe (or reading failed).
    Eof,
}

/// Reads `\n`-terminated lines without ever holding more than `max_line` bytes of one.
///
/// Cancel-safe: [`LineReader::next`] is polled inside `select!` loops, so a partial line stays in
/// the struct and the next call resumes it.
pub(crate) struct LineReader<R> {
    read: BufReader<R>,
    line: Vec<u8>,
    max_line: usize,
    /// An oversized line was reported; its tail is still being skipped.
    discarding: bool,
    /// The last result was a whole line: clear it before reading the next.
    consumed: bool,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    pub(crate) fn new(read: R, max_line: usize) -> LineReader<R> {
        LineReader {
            read: BufReader::new(read),
            line: Vec::new(),
            max_line,
            discarding: false,
            consumed: false,
        }
    }

    /// The line found by the last [`LineRead::Line`], without its `\n` (and `\r`).
    pub(crate) fn line(&self) -> &[u8] {
        let line = self.line.strip_suffix(b"\n").unwrap_or(&self.line);
        line.strip_suffix(b"\r").unwrap_or(line)
    }

    pub(crate) async fn next(&mut self) -> LineRead {
        if std::mem::take(&mut self.consumed) {
            self.line.clear();
        }
        loop {
            let (taken, found_newline) = {
                let available = match self.read.fill_buf().await {
                    Ok(available) => available,
                    Err(_) => return LineRead::Eof,
                };
                if available.is_empty() {
                    return LineRead::Eof;
                }
                let newline = available.iter().position(|byte| *byte == b'\n');
                let take = newline.map_or(available.len(), |index| index + 1);
                if !self.discarding {
                    if self.line.len().saturating_add(take) > self.max_line {
                        // Drop what was gathered and skip to the end of the line.
                        self.line = Vec::new();
                        self.discarding = true;
                    } else {
                        self.line.extend_from_slice(&available[..take]);
                    }
                }
                (take, newline.is_some())
            };
            // No await between the copy and the consume: a cancelled read loses nothing.
            self.read.consume(taken);
            if found_newline {
                if std::mem::take(&mut self.discarding) {
                    return LineRead::Oversized;
                }
                self.consumed = true;
                return LineRead::Line;
            }
        }
    }
}

/// One line for the writer task; `release` (a request slot) is dropped once the line is written.
pub(crate) struct Outgoing {
    pub(crate) line: Vec<u8>,
    pub(crate) release: Option<OwnedSemaphorePermit>,
}

/// The writing half: a bounded queue into one task that owns the pipe.
pub(crate) struct LineWriter {
    queue: Option<mpsc::Sender<Outgoing>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl LineWriter {
    /// Spawns the writer task on the current runtime.
    pub(crate) fn spawn<W: AsyncWrite + Unpin + Send + 'static>(mut write: W) -> LineWriter {
        let (queue, mut outgoing) = mpsc::channel::<Outgoing>(WRITE_QUEUE);
        let task = tokio::spawn(async move {
            while let Some(Outgoing { mut line, release }) = outgoing.recv().await {
                // One write per message: the line and its newline leave in one system call.
                line.push(b'\n');
                let written = async {
                    write.write_all(&line).await?;
                    write.flush().await
                }
                .await;
                // The slot frees only now that the answer left; a failed write ends the writer
                // (the peer is gone), which closes the queue for every sender.
                drop(release);
                if written.is_err() {
                    break;
                }
            }
            let _ = write.shutdown().await;
        });
        LineWriter {
            queue: Some(queue),
            task: Some(task),
        }
    }

    /// A sender for `send` futures (which must be `'static`).
    pub(crate) fn queue(&self) -> Option<mpsc::Sender<Outgoing>> {
        self.queue.clone()
    }

    /// Closes the queue and waits (briefly, the peer may not read) for the queued lines.
    pub(crate) async fn close(&mut self) {
        drop(self.queue.take());
        if let Some(mut task) = self.task.take()
            && tokio::time::timeout(CLOSE_GRACE, &mut task).await.is_err()
        {
            task.abort();
        }
    }
}

impl LineWriter {
    /// The future a `Transport::send` returns: serializes `message` now, then queues it
    /// (waiting while the queue is full); an error when the writer is gone. `release` is
    /// dropped once the line is written.
    pub(crate) fn send<M: serde::Serialize>(
        &self,
        message: &M,
        release: Option<OwnedSemaphorePermit>,
    ) -> impl Future<Output = Result<(), std::io::Error>> + Send + 'static + use<M> {
        let queue = self.queue.clone();
        let line = serde_json::to_vec(message);
        async move {
            let closed =
                || std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the MCP peer is gone");
            let line = line.map_err(std::io::Error::other)?;
            queue
                .ok_or_else(closed)?
                .send(Outgoing { line, release })
                .await
                .map_err(|_| closed())
        }
    }
}

/// Requests the peer sent that are read and not answered yet, at most `limit`: a request waits
/// for a slot after it is read and before the service sees it (meanwhile nothing more is read),
/// and its slot frees once its answer is written (or the peer cancels it: rmcp then drops the
/// answer). Answers and notifications take no slot. This is the backpressure of both sides: a
/// peer that sends requests and never reads the answers stalls itself.
pub(crate) struct RequestSlots<M> {
    slots: Arc<Semaphore>,
    unanswered: Arc<Mutex<HashMap<RequestId, OwnedSemaphorePermit>>>,
    /// A request read, waiting for its slot.
    parked: Option<Box<M>>,
}

impl<Req, Resp, Not> RequestSlots<JsonRpcMessage<Req, Resp, Not>> {
    pub(crate) fn new(limit: usize) -> Self {
        RequestSlots {
            slots: Arc::new(Semaphore::new(limit)),
            unanswered: Arc::new(Mutex::new(HashMap::new())),
            parked: None,
        }
    }

    fn unanswered(&self) -> std::sync::MutexGuard<'_, HashMap<RequestId, OwnedSemaphorePermit>> {
        self.unanswered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether a request with this id waits for its answer.
    pub(crate) fn is_unanswered(&self, id: &RequestId) -> bool {
        self.unanswered().contains_key(id)
    }

    /// Holds `message` until it has a slot (requests) or passes it on (anything else); frees the
    /// slot of a request the peer cancels.
    pub(crate) fn admit(
        &mut self,
        message: Box<JsonRpcMessage<Req, Resp, Not>>,
    ) -> Option<JsonRpcMessage<Req, Resp, Not>>
    where
        Not: serde::Serialize,
    {
        match message.as_ref() {
            JsonRpcMessage::Request(_) => {
                self.parked = Some(message);
                None
            }
            JsonRpcMessage::Notification(notification) => {
                if let Some(id) = cancelled_request(&notification.notification) {
                    self.unanswered().remove(&id);
                }
                Some(*message)
            }
            _ => Some(*message),
        }
    }

    /// Whether a request waits for its slot.
    pub(crate) fn is_parked(&self) -> bool {
        self.parked.is_some()
    }

    /// Gives up on the parked request (to refuse it instead).
    pub(crate) fn take_parked(&mut self) -> Option<Box<JsonRpcMessage<Req, Resp, Not>>> {
        self.parked.take()
    }

    /// The parked request once it has its slot; `None` at once when nothing is parked.
    /// Cancel-safe: the request stays parked until the slot is taken.
    pub(crate) async fn admitted(&mut self) -> Option<JsonRpcMessage<Req, Resp, Not>> {
        self.parked.as_ref()?;
        let slot = Arc::clone(&self.slots).acquire_owned().await.ok()?;
        let message = self.parked.take()?;
        if let JsonRpcMessage::Request(request) = message.as_ref() {
            self.unanswered().insert(request.id.clone(), slot);
        }
        Some(*message)
    }

    /// The slot of the request `message` answers, if it is an answer: dropped once written.
    pub(crate) fn release<Req2, Resp2, Not2>(
        &self,
        message: &JsonRpcMessage<Req2, Resp2, Not2>,
    ) -> Option<OwnedSemaphorePermit> {
        let id = match message {
            JsonRpcMessage::Response(response) => Some(&response.id),
            JsonRpcMessage::Error(error) => error.id.as_ref(),
            _ => None,
        }?;
        self.unanswered().remove(id)
    }
}

/// The request a `notifications/cancelled` names.
pub(crate) fn cancelled_request(notification: &impl serde::Serialize) -> Option<RequestId> {
    let value = serde_json::to_value(notification).ok()?;
    if value.get("method")? != "notifications/cancelled" {
        return None;
    }
    serde_json::from_value(value.get("params")?.get("requestId")?.clone()).ok()
}

/// The client side over a spawned server's stdout (read) and stdin (write).
///
/// Requests the *server* sends (sampling, roots, pings…) take [`RequestSlots`] like a client's
/// requests do on the server side: a server that floods requests and never reads our answers
/// stalls its own connection (its calls then time out) instead of growing this process.
///
/// A line over [`MAX_ANSWER_LINE_BYTES`] cannot be parsed, so its request id is unknown: every
/// request still waiting for an answer is failed with an error that says why (a server answers
/// one call at a time here: MCP tools are not concurrency-safe). A malformed answer to a pending
/// request fails that request the same way. Both instead of rmcp's silent drop, which left the
/// caller waiting forever.
pub(crate) struct ClientTransport<R> {
    reader: LineReader<R>,
    writer: LineWriter,
    server: String,
    pending: Arc<Mutex<HashSet<RequestId>>>,
    failures: VecDeque<RxJsonRpcMessage<RoleClient>>,
    server_requests: RequestSlots<RxJsonRpcMessage<RoleClient>>,
}

/// Requests an external server may have waiting for our answers.
const MAX_SERVER_REQUESTS: usize = 32;

impl<R: AsyncRead + Unpin + Send> ClientTransport<R> {
    pub(crate) fn new<W: AsyncWrite + Unpin + Send + 'static>(
        server: &str,
        read: R,
        write: W,
        max_line: usize,
    ) -> ClientTransport<R> {
        ClientTransport {
            reader: LineReader::new(read, max_line),
            writer: LineWriter::spawn(write),
            server: server.to_owned(),
            pending: Arc::new(Mutex::new(HashSet::new())),
            failures: VecDeque::new(),
            server_requests: RequestSlots::new(MAX_SERVER_REQUESTS),
        }
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, HashSet<RequestId>> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Fails every pending request with `message`.
    fn fail_pending(&mut self, message: &str) {
        let ids: Vec<RequestId> = self.pending().drain().collect();
        for id in ids {
            self.failures.push_back(failure(id, message));
        }
    }

    /// The message of one line, or `None` to skip it.
    fn parse(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        let value: serde_json::Value = serde_json::from_slice(self.reader.line()).ok()?;
        let id = value
            .get("id")
            .cloned()
            .and_then(|id| serde_json::from_value::<RequestId>(id).ok());
        match serde_json::from_value::<RxJsonRpcMessage<RoleClient>>(value) {
            Ok(message) => {
                if let JsonRpcMessage::Response(response) = &message {
                    self.pending().remove(&response.id);
                } else if let JsonRpcMessage::Error(error) = &message
                    && let Some(id) = &error.id
                {
                    self.pending().remove(id);
                }
                Some(message)
            }
            // An answer we are waiting for that does not parse: say so instead of waiting.
            Err(error) => {
                let id = id.filter(|id| self.pending().remove(id))?;
                Some(failure(
                    id,
                    &format!(
                        "the MCP server `{}` sent a malformed answer: {error}",
                        self.server
                    ),
                ))
            }
        }
    }
}

fn failure(id: RequestId, message: &str) -> RxJsonRpcMessage<RoleClient> {
    JsonRpcMessage::error(
        ErrorData::new(JsonRpcErrorCode::INTERNAL_ERROR, message.to_owned(), None),
        Some(id),
    )
}

impl<R: AsyncRead + Unpin + Send> Transport<RoleClient> for ClientTransport<R> {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        match &item {
            JsonRpcMessage::Request(request) => {
                self.pending().insert(request.id.clone());
            }
            // A call that timed out or was cancelled waits for nothing any more.
            JsonRpcMessage::Notification(notification) => {
                if let Some(id) = cancelled_request(&notification.notification) {
                    self.pending().remove(&id);
                }
            }
            _ => {}
        }
        let release = self.server_requests.release(&item);
        self.writer.send(&item, release)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            if let Some(failure) = self.failures.pop_front() {
                return Some(failure);
            }
            if let Some(request) = self.server_requests.admitted().await {
                return Some(request);
            }
            match self.reader.next().await {
                LineRead::Eof => return None,
                LineRead::Oversized => {
                    let message = format!(
                        "the MCP server `{}` sent a message over the {} MiB line cap; it was \
                         discarded",
                        self.server,
                        MAX_ANSWER_LINE_BYTES / (1024 * 1024)
                    );
                    self.fail_pending(&message);
                }
                LineRead::Line => {
                    if let Some(message) = self.parse()
                        && let Some(message) = self.server_requests.admit(Box::new(message))
                    {
                        return Some(message);
                    }
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.writer.close().await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A line, or what was found instead.
    type Found = Result<String, LineRead>;

    /// Reads every line of `input` with a cap of `max` bytes.
    async fn lines(input: &[u8], max: usize) -> Vec<Found> {
        let mut reader = LineReader::new(input, max);
        let mut found = Vec::new();
        loop {
            match reader.next().await {
                LineRead::Line => {
                    found.push(Ok(String::from_utf8_lossy(reader.line()).into_owned()));
                }
                LineRead::Eof => return found,
                other => found.push(Err(other)),
            }
        }
    }

    #[tokio::test]
    async fn lines_are_capped_before_they_are_buffered() {
        // (input, cap, lines found)
        let table: [(&[u8], usize, Vec<Found>); 5] = [
            (b"a\nbb\n", 8, vec![Ok("a".into()), Ok("bb".into())]),
            (b"a\r\n\n", 8, vec![Ok("a".into()), Ok(String::new())]),
            (
                b"0123456789\nok\n",
                8,
                vec![Err(LineRead::Oversized), Ok("ok".into())],
            ),
            // The cap counts the newline: 7 bytes + `\n` fit in 8.
            (b"0123456\n", 8, vec![Ok("0123456".into())]),
            // A last line without a newline is incomplete: nothing to deliver.
            (b"a\npartial", 8, vec![Ok("a".into())]),
        ];
        for (input, max, expected) in table {
            assert_eq!(
                lines(input, max).await,
                expected,
                "{:?}",
                String::from_utf8_lossy(input)
            );
        }
    }
}
