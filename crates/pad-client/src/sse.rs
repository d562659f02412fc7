//! The event stream (docs/api.md, Events): Server-Sent Events parsed into [`Event`]s.
//!
//! Only what pad's server sends is needed — `id:`, `event:`, `data:` fields,
//! `:` comments as keep-alives, blank lines ending a message — but the
//! parser follows the SSE rules for those (multi-line `data`, an optional
//! space after the colon, `\n` or `\r\n` line ends), so a proxy that re-frames
//! the stream does not break it.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use pad_core::Event;

use crate::error::{ClientError, snippet};

/// One SSE message: the fields pad uses.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Message {
    pub id: Option<String>,
    pub event: Option<String>,
    pub data: String,
}

/// Turns chunks of bytes, split anywhere (even inside a UTF-8 character),
/// into messages.
#[derive(Debug, Default)]
pub(crate) struct Parser {
    /// Bytes after the last line end.
    partial: Vec<u8>,
    /// The message being read; `None` until a field line arrives, so
    /// comment-only keep-alives dispatch nothing.
    current: Option<Message>,
}

impl Parser {
    /// Feeds a chunk; answers with the messages it completed.
    pub(crate) fn push(&mut self, chunk: &[u8]) -> Vec<Message> {
        self.partial.extend_from_slice(chunk);
        let mut done = Vec::new();
        let mut start = 0;
        while let Some(n) = self.partial[start..].iter().position(|&b| b == b'\n') {
            let mut line = &self.partial[start..start + n];
            start += n + 1;
            if let [rest @ .., b'\r'] = line {
                line = rest;
            }
            if let Some(m) = read_line(&mut self.current, &String::from_utf8_lossy(line)) {
                done.push(m);
            }
        }
        self.partial.drain(..start);
        done
    }
}

/// One line into the message being read; a blank line completes it.
fn read_line(current: &mut Option<Message>, line: &str) -> Option<Message> {
    if line.is_empty() {
        return current.take();
    }
    if line.starts_with(':') {
        return None;
    }
    let (field, value) = line.split_once(':').unwrap_or((line, ""));
    let value = value.strip_prefix(' ').unwrap_or(value);
    let m = current.get_or_insert_with(Message::default);
    match field {
        "id" => m.id = Some(value.to_string()),
        "event" => m.event = Some(value.to_string()),
        "data" => {
            if !m.data.is_empty() {
                m.data.push('\n');
            }
            m.data.push_str(value);
        }
        // `retry:` and unknown fields: nothing pad needs.
        _ => {}
    }
    None
}

/// The events of one open stream, in id order. Ends when the server closes
/// the connection; a dropped connection is an [`ClientError::Unavailable`]
/// item. Resuming is the caller's move: open a new stream after the last id.
pub struct EventStream {
    events: BoxStream<'static, Result<Event, ClientError>>,
}

impl EventStream {
    pub(crate) fn new(response: reqwest::Response) -> Self {
        let state = Some((response.bytes_stream().boxed(), Parser::default(), VecDeque::new()));
        // The state becomes `None` after a transport error: the stream ends there.
        let events = futures::stream::unfold(state, |state| async move {
            let (mut chunks, mut parser, mut ready) = state?;
            loop {
                if let Some(m) = ready.pop_front() {
                    return Some((decode(&m), Some((chunks, parser, ready))));
                }
                match chunks.next().await? {
                    Ok(chunk) => ready.extend(parser.push(&chunk)),
                    Err(e) => return Some((Err(ClientError::from_body(e)), None)),
                }
            }
        });
        EventStream { events: events.boxed() }
    }

    /// The next event; `None` when the server ended the stream. The same as
    /// `StreamExt::next`, for callers that do not use `futures`.
    pub async fn next_event(&mut self) -> Option<Result<Event, ClientError>> {
        self.events.next().await
    }
}

impl Stream for EventStream {
    type Item = Result<Event, ClientError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.events.poll_next_unpin(cx)
    }
}

/// A message's `data` is the event's JSON; its `id:` must agree with it, or
/// resuming from the last id would skip or repeat events.
fn decode(m: &Message) -> Result<Event, ClientError> {
    let event: Event = serde_json::from_str(&m.data)
        .map_err(|e| ClientError::Protocol(format!("event stream: {e} in {}", snippet(m.data.as_bytes()))))?;
    match &m.id {
        Some(id) if id.trim() != event.id.to_string() => {
            Err(ClientError::Protocol(format!("event stream: id {id} carries event {}", event.id)))
        }
        _ => Ok(event),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(id: &str, event: &str, data: &str) -> Message {
        Message { id: Some(id.into()), event: Some(event.into()), data: data.into() }
    }

    #[test]
    fn messages_end_at_blank_lines_and_comments_are_skipped() {
        let mut p = Parser::default();
        let out = p.push(
            b": keep-alive\n\nid: 1\nevent: item.created\ndata: {}\n\nid:2\r\nevent:x\r\ndata:a\r\ndata: b\r\n\r\n",
        );
        assert_eq!(out, [msg("1", "item.created", "{}"), msg("2", "x", "a\nb")]);
    }

    #[test]
    fn chunks_may_split_lines_and_characters() {
        let text = "id: 7\nevent: comment.created\ndata: {\"t\":\"é\"}\n\n".as_bytes();
        let mut p = Parser::default();
        let mut out = Vec::new();
        for byte in text {
            out.extend(p.push(std::slice::from_ref(byte)));
        }
        assert_eq!(out, [msg("7", "comment.created", "{\"t\":\"é\"}")]);
        assert!(p.push(b"id: 8\ndata: {}\n").is_empty(), "no blank line yet");
    }

    #[test]
    fn ids_must_match_the_event() {
        let data =
            r#"{"id":3,"type":"item.created","ref":"TASK-1","actor":"o@x","at":"2026-01-01T00:00:00Z","data":{}}"#;
        assert_eq!(decode(&msg("3", "item.created", data)).unwrap().id, 3);
        assert!(matches!(decode(&msg("4", "item.created", data)), Err(ClientError::Protocol(_))));
        assert!(matches!(decode(&msg("3", "item.created", "nope")), Err(ClientError::Protocol(_))));
    }
}
