//! The base protocol of LSP: `Content-Length` headers, then a JSON body — read with bounds.

use std::io;

use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The largest message body accepted (a workspace-symbol answer of a big project fits easily).
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;
/// The longest header line.
const MAX_HEADER_LINE_BYTES: usize = 1024;
/// The most header lines of one message.
const MAX_HEADER_LINES: usize = 16;

/// Reads one message: `Ok(None)` at a clean end of stream (before any header byte). A malformed
/// header, a missing or oversized `Content-Length`, a body cut short or that is not JSON are
/// errors (`InvalidData` / `UnexpectedEof`); the stream is then out of step and must be dropped.
pub async fn read_message<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    max_bytes: usize,
) -> io::Result<Option<serde_json::Value>> {
    let mut length = None;
    let mut line = Vec::new();
    for index in 0..=MAX_HEADER_LINES {
        line.clear();
        let read = (&mut *reader)
            .take(MAX_HEADER_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut line)
            .await?;
        if read == 0 {
            if index == 0 {
                return Ok(None);
            }
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "stream ended inside message headers",
            ));
        }
        if !line.ends_with(b"\n") {
            return Err(invalid(format!(
                "header line longer than {MAX_HEADER_LINE_BYTES} bytes"
            )));
        }
        let text = std::str::from_utf8(&line)
            .map_err(|_| invalid("header line is not UTF-8".to_owned()))?
            .trim_end_matches(['\r', '\n']);
        if text.is_empty() {
            let length = length
                .ok_or_else(|| invalid("message without a Content-Length header".to_owned()))?;
            if length > max_bytes {
                return Err(invalid(format!(
                    "message of {length} bytes is over the limit of {max_bytes}"
                )));
            }
            let mut body = vec![0u8; length];
            reader.read_exact(&mut body).await?;
            return serde_json::from_slice(&body)
                .map(Some)
                .map_err(|error| invalid(format!("message body is not JSON: {error}")));
        }
        let Some((name, value)) = text.split_once(':') else {
            return Err(invalid(format!("malformed header line {text:?}")));
        };
        if name.trim().eq_ignore_ascii_case("content-length") {
            length = Some(
                value
                    .trim()
                    .parse::<usize>()
                    .map_err(|_| invalid(format!("bad Content-Length {:?}", value.trim())))?,
            );
        }
    }
    Err(invalid(format!(
        "more than {MAX_HEADER_LINES} header lines"
    )))
}

/// Writes one message with its `Content-Length` header and flushes.
pub async fn write_message<W: AsyncWrite + Unpin>(
    writer: &mut W,
    message: &serde_json::Value,
) -> io::Result<()> {
    let body = serde_json::to_vec(message)?;
    let mut frame = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    frame.extend_from_slice(&body);
    writer.write_all(&frame).await?;
    writer.flush().await
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn read_all(bytes: &[u8], max: usize) -> Vec<Result<Option<serde_json::Value>, String>> {
        let mut reader = tokio::io::BufReader::new(bytes);
        let mut out = Vec::new();
        loop {
            let next = read_message(&mut reader, max)
                .await
                .map_err(|e| e.to_string());
            let stop = !matches!(next, Ok(Some(_)));
            out.push(next);
            if stop {
                return out;
            }
        }
    }

    #[tokio::test]
    async fn frames_are_read_with_bounds() {
        let two =
            b"Content-Length: 7\r\n\r\n{\"a\":1}content-length:2\r\nContent-Type: x\r\n\r\n[]";
        assert_eq!(
            read_all(two, 100).await,
            [
                Ok(Some(serde_json::json!({"a": 1}))),
                Ok(Some(serde_json::json!([]))),
                Ok(None)
            ]
        );
        let cases: [(&[u8], &str); 6] = [
            (b"Content-Length: 2000\r\n\r\n", "over the limit of 100"),
            (b"Content-Type: x\r\n\r\n{}", "without a Content-Length"),
            (b"Content-Length: x\r\n\r\n{}", "bad Content-Length"),
            (b"Content-Length: 5\r\n\r\n{}", "early eof"),
            (b"Content-Length: 2\r\n\r\nno", "not JSON"),
            (b"Content-Length: 2\r\n", "inside message headers"),
        ];
        for (bytes, needle) in cases {
            let results = read_all(bytes, 100).await;
            let error = results.last().unwrap().clone().unwrap_err();
            assert!(error.contains(needle), "{bytes:?}: {error}");
        }
        let long = format!("X-Long: {}\r\n", "a".repeat(2000));
        let error = read_all(long.as_bytes(), 100)
            .await
            .pop()
            .unwrap()
            .unwrap_err();
        assert!(error.contains("header line longer"), "{error}");
    }

    #[tokio::test]
    async fn written_frames_read_back() {
        let mut buffer = Vec::new();
        let message = serde_json::json!({"jsonrpc": "2.0", "method": "x", "params": {"é": 1}});
        write_message(&mut buffer, &message).await.unwrap();
        write_message(&mut buffer, &message).await.unwrap();
        let read = read_all(&buffer, 1000).await;
        assert_eq!(
            read,
            [Ok(Some(message.clone())), Ok(Some(message)), Ok(None)]
        );
    }
}
