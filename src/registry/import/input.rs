//! The input side of an import: lines read with a bound on what one holds
//! ([`LineReader`]), where the lines come from (the input's lines, or the
//! items of one JSON document: [`Source`]), and a line's way through a
//! batch ([`Entry`] before validation, [`Checked`] after).

use std::collections::VecDeque;

use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncBufReadExt as _};

use super::report::LineResult;
use crate::registry::Prepared;

/// Largest input read as one JSON document (an `mcp-registry` list), in
/// bytes; larger lists are given as NDJSON, one server per line.
pub const MAX_DOCUMENT_BYTES: usize = 128 << 20;

/// A line waiting in a batch.
pub(super) enum Entry {
    /// Already decided (too long, superseded).
    Done(LineResult),
    /// A document line to parse, validate and issue.
    Line { line: u64, bytes: Vec<u8> },
    /// An item of one JSON document, already parsed, numbered from 1.
    Item { line: u64, item: Value },
}

/// A line after validation.
pub(super) enum Checked {
    Done(LineResult),
    Ready {
        line: u64,
        id: String,
        prepared: Box<Prepared>,
    },
    /// An agent to delete when it is held here (a server the MCP
    /// Registry deleted).
    Delete {
        line: u64,
        id: String,
    },
}

impl Checked {
    /// The agent this issues or deletes.
    pub(super) fn id(&self) -> Option<&str> {
        match self {
            Self::Ready { id, .. } | Self::Delete { id, .. } => Some(id),
            Self::Done(_) => None,
        }
    }
}

/// Where the lines of an import come from.
pub(super) enum Source {
    /// The input's lines (after these, read already).
    Lines(VecDeque<Read>),
    /// The items of one JSON document, read whole.
    Items(std::vec::IntoIter<Entry>),
}

/// One unit of input: a line, or an item of a document.
pub(super) enum Unit {
    Read(Read),
    Entry(Entry),
}

impl Source {
    pub(super) async fn next<R: AsyncBufRead + Unpin>(
        &mut self,
        reader: &mut LineReader<R>,
    ) -> std::io::Result<Option<Unit>> {
        match self {
            Self::Lines(before) => match before.pop_front() {
                Some(read) => Ok(Some(Unit::Read(read))),
                None => Ok(reader.next_line().await?.map(Unit::Read)),
            },
            Self::Items(items) => Ok(items.next().map(Unit::Entry)),
        }
    }
}

/// One line as read.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Read {
    /// The line's bytes, without its `\n` (or `\r\n`).
    Line(Vec<u8>),
    /// Over the limit: skipped to its end, not held.
    TooLong { bytes: u64 },
}

/// Splits input into lines, holding at most `max` bytes of one.
pub(super) struct LineReader<R> {
    /// The input.
    pub(super) inner: R,
    /// The longest line held, in bytes.
    pub(super) max: usize,
}

impl<R: AsyncBufRead + Unpin> LineReader<R> {
    /// Lines of `inner`, at most `max` bytes of each held.
    pub(super) fn new(inner: R, max: usize) -> Self {
        Self { inner, max }
    }

    /// The next line; `None` at the end of input. A last line without a
    /// newline is a line.
    pub(super) async fn next_line(&mut self) -> std::io::Result<Option<Read>> {
        let mut buf = Vec::new();
        let mut bytes: u64 = 0;
        let mut too_long = false;
        let mut any = false;
        loop {
            let available = self.inner.fill_buf().await?;
            if available.is_empty() {
                if !any {
                    return Ok(None);
                }
                break;
            }
            any = true;
            let (chunk, used, end) = match available.iter().position(|&b| b == b'\n') {
                Some(i) => (&available[..i], i + 1, true),
                None => (available, available.len(), false),
            };
            bytes += chunk.len() as u64;
            if !too_long {
                if buf.len() + chunk.len() > self.max.saturating_add(1) {
                    // One byte over is kept so that a `\r` before the
                    // newline does not count against the limit.
                    too_long = true;
                    buf = Vec::new();
                } else {
                    buf.extend_from_slice(chunk);
                }
            }
            self.inner.consume(used);
            if end {
                break;
            }
        }
        if !too_long && buf.last() == Some(&b'\r') {
            buf.pop();
            bytes -= 1;
        }
        if too_long || buf.len() > self.max {
            return Ok(Some(Read::TooLong { bytes }));
        }
        Ok(Some(Read::Line(buf)))
    }
}
