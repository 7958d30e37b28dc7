//! Newline-delimited JSON-RPC over a pair of pipes, for both MCP sides, with the limits rmcp's
//! stdio transport lacks: every line read is capped *before* it is buffered, an oversized line
//! becomes an error someone reads (never a silent drop), and a line the pipe does not take at
//! once waits in a bounded queue for one writer task, so a peer that stops reading stops us from
//! queueing more.
//!
//! The server side ([`crate::jsonrpc::ServerTransport`]) builds on [`LineReader`] and
//! [`LineWriter`]; [`ClientTransport`] is the client side, over a spawned server's stdio.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::model::{ErrorCode as JsonRpcErrorCode, ErrorData, JsonRpcMessage, RequestId};
use rmcp::service::{RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, BufReader};
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

/// One line for the writer task, `written` bytes of it already out; `release` (a request slot)
/// is dropped once the line is written.
pub(crate) struct Outgoing {
    line: Vec<u8>,
    written: usize,
    release: Option<OwnedSemaphorePermit>,
}

/// The pipe and what the writer knows about it, shared by the senders and the writer task.
struct WriterState<W> {
    write: W,
    /// Lines queued for the writer task or being written by it. While any are, a new line
    /// queues behind them; with none, its sender writes it itself.
    pending: usize,
    /// A write failed (the peer is gone) or the writer closed: nothing more is sent.
    closed: bool,
    /// Where a line is serialised: kept between lines, so a steady stream of answers
    /// allocates nothing (a `read_file` answer is ~10 KB).
    buffer: Vec<u8>,
}

/// The writing half: a line is written by whoever sends it — the service's own task,
/// with one `write` of the line and its newline — when nothing waits to be written before it;
/// only the rest of a line the pipe did not take at once, and lines sent meanwhile, go through
/// a bounded queue to one task that waits until the peer reads. Before, every line took the
/// queue: a hand-off to the writer task (and often a wake-up of a second worker thread) per
/// answer.
pub(crate) struct LineWriter {
    state: Arc<Mutex<WriterState<PipeWrite>>>,
    queue: Option<mpsc::Sender<Outgoing>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

/// The pipe a [`LineWriter`] owns.
type PipeWrite = Box<dyn AsyncWrite + Unpin + Send>;

/// The error of a send once the peer is gone (or the writer closed).
fn peer_gone() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the MCP peer is gone")
}

/// Writes what the pipe takes now, without waiting: a write attempted outside the writer task
/// has no waker of its own (if the pipe is full, the writer task registers its own when it takes
/// over the rest of the line).
fn write_now<W: AsyncWrite + Unpin>(write: &mut W, bytes: &[u8]) -> std::io::Result<usize> {
    let mut context = std::task::Context::from_waker(std::task::Waker::noop());
    let mut written = 0;
    while written < bytes.len() {
        match std::pin::Pin::new(&mut *write).poll_write(&mut context, &bytes[written..]) {
            std::task::Poll::Ready(Ok(0)) => return Err(std::io::ErrorKind::WriteZero.into()),
            std::task::Poll::Ready(Ok(count)) => written += count,
            std::task::Poll::Ready(Err(error))
                if error.kind() == std::io::ErrorKind::Interrupted => {}
            std::task::Poll::Ready(Err(error)) => return Err(error),
            std::task::Poll::Pending => break,
        }
    }
    Ok(written)
}

impl LineWriter {
    /// Spawns the writer task on the current runtime.
    pub(crate) fn spawn<W: AsyncWrite + Unpin + Send + 'static>(write: W) -> LineWriter {
        let state = Arc::new(Mutex::new(WriterState {
            write: Box::new(write) as PipeWrite,
            pending: 0,
            closed: false,
            buffer: Vec::new(),
        }));
        let (queue, mut outgoing) = mpsc::channel::<Outgoing>(WRITE_QUEUE);
        let shared = Arc::clone(&state);
        let task = tokio::spawn(async move {
            let lock = || shared.lock().unwrap_or_else(PoisonError::into_inner);
            while let Some(Outgoing {
                line,
                mut written,
                release,
            }) = outgoing.recv().await
            {
                let result = std::future::poll_fn(|context| {
                    let mut state = lock();
                    while written < line.len() {
                        let write = std::pin::Pin::new(&mut state.write);
                        match std::task::ready!(write.poll_write(context, &line[written..])) {
                            Ok(0) => {
                                return std::task::Poll::Ready(Err(
                                    std::io::ErrorKind::WriteZero.into()
                                ));
                            }
                            Ok(count) => written += count,
                            Err(error) => return std::task::Poll::Ready(Err(error)),
                        }
                    }
                    std::pin::Pin::new(&mut state.write).poll_flush(context)
                })
                .await;
                let mut state = lock();
                state.pending -= 1;
                // The slot frees only now that the answer left; a failed write ends the writer
                // (the peer is gone), which closes the queue for every sender.
                drop(release);
                if result.is_err() {
                    state.closed = true;
                    break;
                }
            }
            let _ = std::future::poll_fn(|context| {
                std::pin::Pin::new(&mut lock().write).poll_shutdown(context)
            })
            .await;
        });
        LineWriter {
            state,
            queue: Some(queue),
            task: Some(task),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, WriterState<PipeWrite>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Closes the queue and waits (briefly, the peer may not read) for the queued lines.
    pub(crate) async fn close(&mut self) {
        drop(self.queue.take());
        if let Some(mut task) = self.task.take()
            && tokio::time::timeout(CLOSE_GRACE, &mut task).await.is_err()
        {
            task.abort();
        }
        self.lock().closed = true;
    }

    /// Waits until a line can be queued: a refusal is sent once this resolves, without a wait
    /// between taking it and sending it (cancel-safe). `None` once the writer is gone.
    pub(crate) async fn room(&self) -> Option<mpsc::OwnedPermit<Outgoing>> {
        self.queue.clone()?.reserve_owned().await.ok()
    }

    /// Sends `message` with the room [`LineWriter::room`] gave.
    pub(crate) fn send_with<M: serde::Serialize>(
        &self,
        room: mpsc::OwnedPermit<Outgoing>,
        message: &M,
    ) -> Result<(), std::io::Error> {
        match self.try_send(Some(room), message, None)? {
            None => Ok(()),
            // `try_send` hands a line back only when it got no room.
            Some(_) => Err(peer_gone()),
        }
    }

    /// Serialises `message`; with `room` and nothing waiting before it, writes it with its
    /// newline now (all of it, or what the pipe takes at once: the rest is queued with `room`,
    /// next in line). Otherwise it is queued with `room`, or, without room, handed back to be
    /// queued by the caller (counted as pending already, so that what is sent after it queues
    /// behind it).
    fn try_send<M: serde::Serialize>(
        &self,
        room: Option<mpsc::OwnedPermit<Outgoing>>,
        message: &M,
        release: Option<OwnedSemaphorePermit>,
    ) -> Result<Option<Outgoing>, std::io::Error> {
        let mut guard = self.lock();
        let state = &mut *guard;
        if state.closed {
            return Err(peer_gone());
        }
        let mut buffer = std::mem::take(&mut state.buffer);
        buffer.clear();
        let serialised = serde_json::to_writer(&mut buffer, message);
        if let Err(error) = serialised {
            state.buffer = buffer;
            return Err(std::io::Error::other(error));
        }
        buffer.push(b'\n');
        let mut written = 0;
        // Only with room: the rest of a line the pipe did not take must be queued at once.
        if state.pending == 0 && room.is_some() {
            written = match write_now(&mut state.write, &buffer) {
                Ok(written) => written,
                Err(error) => {
                    state.closed = true;
                    state.buffer = buffer;
                    return Err(error);
                }
            };
            if written == buffer.len() {
                state.buffer = buffer;
                drop(guard);
                drop(release);
                return Ok(None);
            }
        }
        // Queued: the line keeps its own copy, the buffer stays for the next one.
        let line = Outgoing {
            line: buffer.clone(),
            written,
            release,
        };
        state.buffer = buffer;
        state.pending += 1;
        match room {
            Some(room) => {
                room.send(line);
                Ok(None)
            }
            None => Ok(Some(line)),
        }
    }

    /// The future a `Transport::send` returns: the line is serialised and, when nothing waits
    /// before it, written now; otherwise queued by the future (waiting while the queue is
    /// full). An error when the writer is gone. `release` is dropped once the line is written.
    pub(crate) fn send<M: serde::Serialize>(
        &self,
        message: &M,
        release: Option<OwnedSemaphorePermit>,
    ) -> impl Future<Output = Result<(), std::io::Error>> + Send + 'static + use<M> {
        let room = self
            .queue
            .as_ref()
            .and_then(|queue| queue.clone().try_reserve_owned().ok());
        let outcome = self.try_send(room, message, release);
        let queue = self.queue.clone();
        let state = Arc::clone(&self.state);
        async move {
            let Some(line) = outcome? else {
                return Ok(());
            };
            let sent = match queue {
                Some(queue) => queue.send(line).await.is_ok(),
                None => false,
            };
            if sent {
                Ok(())
            } else {
                let mut state = state.lock().unwrap_or_else(PoisonError::into_inner);
                state.pending -= 1;
                state.closed = true;
                Err(peer_gone())
            }
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

#[cfg(test)]
mod writer_tests {
    use tokio::io::AsyncReadExt;

    use super::*;

    /// A message of `size` bytes of text, numbered.
    fn message(number: usize, size: usize) -> serde_json::Value {
        serde_json::json!({"n": number, "text": "x".repeat(size)})
    }

    /// Reads `count` lines from `read` and returns their numbers, checking each is whole.
    async fn numbers(read: &mut (impl AsyncRead + Unpin), count: usize) -> Vec<u64> {
        let mut reader = LineReader::new(read, 1 << 20);
        let mut found = Vec::new();
        while found.len() < count {
            assert_eq!(reader.next().await, LineRead::Line);
            let value: serde_json::Value =
                serde_json::from_slice(reader.line()).expect("a whole JSON line");
            found.push(value["n"].as_u64().expect("numbered"));
        }
        found
    }

    #[tokio::test]
    async fn lines_larger_than_the_pipe_arrive_whole_and_in_order() {
        // A pipe of 100 bytes: every 10 KB line is written partly by its sender and finished
        // by the writer task, and the lines sent meanwhile queue behind it.
        let (write, mut read) = tokio::io::duplex(100);
        let writer = LineWriter::spawn(write);
        let sends: Vec<_> = (0..5)
            .map(|number| writer.send(&message(number, 10_000), None))
            .collect();
        let reading = tokio::spawn(async move { numbers(&mut read, 5).await });
        for send in sends {
            send.await.expect("sent");
        }
        assert_eq!(reading.await.expect("read"), vec![0, 1, 2, 3, 4]);
    }

    #[tokio::test]
    async fn a_line_written_at_once_takes_no_queue_and_frees_its_slot_at_once() {
        let (write, mut read) = tokio::io::duplex(1 << 16);
        let writer = LineWriter::spawn(write);
        let slots = Arc::new(Semaphore::new(1));
        let slot = Arc::clone(&slots).acquire_owned().await.expect("a slot");
        // The future is not polled: the line left inside `send`.
        let sent = writer.send(&message(7, 100), Some(slot));
        assert_eq!(slots.available_permits(), 1, "freed once written");
        assert_eq!(numbers(&mut read, 1).await, vec![7]);
        sent.await.expect("sent");
    }

    #[tokio::test]
    async fn a_slot_frees_only_once_its_line_is_out() {
        let (write, mut read) = tokio::io::duplex(64);
        let writer = LineWriter::spawn(write);
        let slots = Arc::new(Semaphore::new(1));
        let slot = Arc::clone(&slots).acquire_owned().await.expect("a slot");
        writer
            .send(&message(1, 1_000), Some(slot))
            .await
            .expect("queued");
        assert_eq!(
            slots.available_permits(),
            0,
            "the peer has not read the line yet"
        );
        assert_eq!(numbers(&mut read, 1).await, vec![1]);
        // The writer task frees the slot right after its last write.
        let freed = tokio::time::timeout(Duration::from_secs(5), slots.acquire()).await;
        assert!(freed.is_ok(), "the slot came back once the line was read");
    }

    #[tokio::test]
    async fn sending_to_a_peer_that_left_is_an_error() {
        let (write, read) = tokio::io::duplex(64);
        drop(read);
        let writer = LineWriter::spawn(write);
        let error = writer
            .send(&message(1, 10), None)
            .await
            .expect_err("nobody reads");
        assert_eq!(error.kind(), std::io::ErrorKind::BrokenPipe);
        // And every send after it.
        let again = writer.send(&message(2, 10), None).await;
        assert!(again.is_err());
    }

    #[tokio::test]
    async fn closing_waits_for_the_queued_lines() {
        let (write, mut read) = tokio::io::duplex(64);
        let mut writer = LineWriter::spawn(write);
        for number in 0..3 {
            writer
                .send(&message(number, 500), None)
                .await
                .expect("queued");
        }
        let reading = tokio::spawn(async move {
            let found = numbers(&mut read, 3).await;
            let mut rest = Vec::new();
            read.read_to_end(&mut rest).await.expect("read to the end");
            (found, rest)
        });
        writer.close().await;
        let (found, rest) = reading.await.expect("read");
        assert_eq!(found, vec![0, 1, 2]);
        assert!(rest.is_empty(), "nothing after the last line");
        assert!(writer.send(&message(9, 1), None).await.is_err(), "closed");
    }
}
