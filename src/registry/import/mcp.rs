//! The `mcp-registry` input of an import
//! ([`ImportFormat::McpRegistry`](super::ImportFormat::McpRegistry)):
//! MCP Registry servers ([`crate::formats::mcp`]) issued as this node's
//! registrations under `mcp:{name}`, their `server.json` (compact) as the
//! document, with what the registry's metadata said of it inside
//! ([`mcp::stored_document`]).
//!
//! [`sniff`] reads the first line to tell the two shapes of input apart.
//! A line that is a whole JSON value other than a list starts NDJSON: each
//! line a `server.json` or a `{server, _meta}` item, read line by line
//! within the line limit. Anything else is one JSON document (at most
//! [`MAX_DOCUMENT_BYTES`]): a list API response, an array of items or of
//! `server.json` objects, or a single `server.json`. Its items are numbered
//! from 1 (the results' `line`). In a document, an item the registry marks
//! as not the latest version, or one whose name comes again later (a
//! later version of the same server), is skipped, so that the newest
//! stays and a re-import of the document changes nothing. NDJSON lines are
//! not compared with each other: of two lines of one name, the later one
//! stays.
//!
//! [`check`] turns one item into what the importer does: issue it (active
//! or deprecated), delete the agent when the registry deleted the server
//! (when it is not held, it is skipped), skip it (not the latest), or
//! refuse it ([`Reason::McpServerInvalid`]).

use std::collections::{HashMap, VecDeque};

use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncReadExt as _};

use super::input::{Checked, Entry, LineReader, Read, Source, MAX_DOCUMENT_BYTES};
use super::report::{LineResult, Stopped};
use crate::formats::mcp::{self, Status};
use crate::formats::FormatError;
use crate::registry::Prepared;
use crate::trust::Reason;

/// Reads the start of the input (its blank lines and first line) and
/// answers where its lines or items come from; a document is read whole
/// and split into its items here.
pub(super) async fn sniff<R: AsyncBufRead + Unpin>(
    reader: &mut LineReader<R>,
    max_line_bytes: usize,
) -> Result<Source, Stopped> {
    reader.max = MAX_DOCUMENT_BYTES.max(max_line_bytes);
    let mut before = VecDeque::new();
    loop {
        let line = before.len() as u64 + 1;
        let read = reader.next_line().await.map_err(|e| Stopped::Read {
            message: format!("line {line}: {e}"),
        })?;
        let bytes = match read {
            None => break,
            Some(Read::TooLong { bytes }) => {
                return Err(Stopped::Invalid {
                    message: format!(
                        "line {line} has {bytes} bytes: more than one JSON document may have \
                         ({MAX_DOCUMENT_BYTES}); give larger lists as NDJSON, one server per line"
                    ),
                })
            }
            Some(Read::Line(bytes)) if bytes.iter().all(u8::is_ascii_whitespace) => {
                before.push_back(Read::Line(bytes));
                continue;
            }
            Some(Read::Line(bytes)) => bytes,
        };
        return match serde_json::from_slice::<Value>(&bytes) {
            Ok(first) if !mcp::is_list(&first) => {
                // NDJSON: this line is its first item, within the line
                // limit as the others are.
                before.push_back(if bytes.len() > max_line_bytes {
                    Read::TooLong {
                        bytes: bytes.len() as u64,
                    }
                } else {
                    Read::Line(bytes)
                });
                break;
            }
            Ok(list) => {
                let rest = read_rest(reader, MAX_DOCUMENT_BYTES - bytes.len()).await?;
                if !rest.iter().all(u8::is_ascii_whitespace) {
                    return Err(Stopped::Invalid {
                        message: format!(
                            "more input follows the server list on line {line}: give one JSON \
                             document, or NDJSON of servers"
                        ),
                    });
                }
                drop(bytes);
                document(Ok(list)).await
            }
            Err(_) => {
                // The first line is not a whole value: the document goes on.
                let mut all = bytes;
                all.push(b'\n');
                let rest = read_rest(reader, MAX_DOCUMENT_BYTES - all.len()).await?;
                all.extend_from_slice(&rest);
                document(Err(all)).await
            }
        };
    }
    reader.max = max_line_bytes;
    Ok(Source::Lines(before))
}

/// The rest of the input, when it has at most `limit` bytes.
async fn read_rest<R: AsyncBufRead + Unpin>(
    reader: &mut LineReader<R>,
    limit: usize,
) -> Result<Vec<u8>, Stopped> {
    let mut rest = Vec::new();
    (&mut reader.inner)
        .take(limit as u64 + 1)
        .read_to_end(&mut rest)
        .await
        .map_err(|e| Stopped::Read {
            message: e.to_string(),
        })?;
    if rest.len() > limit {
        return Err(Stopped::Invalid {
            message: format!(
                "the document has more than {MAX_DOCUMENT_BYTES} bytes; give larger lists as \
                 NDJSON, one server per line"
            ),
        });
    }
    Ok(rest)
}

/// The items of one document, parsed (`Ok`) or as its text (`Err`), on a
/// blocking thread.
async fn document(doc: Result<Value, Vec<u8>>) -> Result<Source, Stopped> {
    let entries = tokio::task::spawn_blocking(move || {
        let doc = match doc {
            Ok(doc) => doc,
            Err(text) => serde_json::from_slice(&text).map_err(|e| Stopped::Invalid {
                message: format!(
                    "the input is neither one JSON document ({e}) nor NDJSON (its first line \
                     is not a whole JSON value)"
                ),
            })?,
        };
        entries(doc)
    })
    .await
    .map_err(|e| Stopped::Store {
        message: format!("reading the document failed: {e}"),
    })??;
    Ok(Source::Items(entries.into_iter()))
}

/// The entries of a document: its items in order, numbered from 1, those
/// the registry says are not the latest or a later item of the same name
/// supersedes already skipped.
fn entries(doc: Value) -> Result<Vec<Entry>, Stopped> {
    let items = if mcp::is_list(&doc) {
        mcp::into_list_items(doc).map_err(|e| Stopped::Invalid {
            message: e.to_string(),
        })?
    } else {
        vec![doc]
    };
    // The last item of each name the registry does not call outdated.
    let mut last: HashMap<&str, usize> = HashMap::new();
    for (i, item) in items.iter().enumerate() {
        if let Some(name) = mcp::item_name(item) {
            if mcp::item_is_latest(item) != Some(false) {
                last.insert(name, i);
            }
        }
    }
    let superseded_by: Vec<Option<usize>> = items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let name = mcp::item_name(item)?;
            let at = *last.get(name)?;
            (at != i && mcp::item_is_latest(item) != Some(false)).then_some(at)
        })
        .collect();
    drop(last);
    Ok(items
        .into_iter()
        .zip(superseded_by)
        .enumerate()
        .map(|(i, (item, superseded_by))| {
            let line = i as u64 + 1;
            match (superseded_by, mcp::item_name(&item)) {
                (Some(later), Some(name)) => Entry::Done(LineResult::skipped(
                    line,
                    format!("{}{name}", mcp::ID_PREFIX),
                    format!("item {} is a later entry of {name}", later + 1),
                )),
                _ => Entry::Item { line, item },
            }
        })
        .collect())
}

/// What to do with the item on `line`.
pub(super) fn check(line: u64, item: &Value) -> Checked {
    if mcp::is_list(item) {
        return Checked::Done(LineResult::refused_as(
            line,
            None,
            FormatError::new(
                Reason::McpServerInvalid,
                "a server list on one line of NDJSON: give a list as the whole input",
            ),
        ));
    }
    let named = mcp::item_name(item).map(|n| format!("{}{n}", mcp::ID_PREFIX));
    let server = match mcp::parse_item(item) {
        Ok(server) => server,
        Err(e) => return Checked::Done(LineResult::refused_as(line, named, e)),
    };
    let id = server.id();
    if server.is_latest == Some(false) {
        return Checked::Done(LineResult::skipped(
            line,
            id,
            format!(
                "version {} is not the latest of {}",
                server.version, server.name
            ),
        ));
    }
    if server.status == Status::Deleted {
        return Checked::Delete { line, id };
    }
    Checked::Ready {
        line,
        id,
        prepared: Box::new(Prepared::mcp_server(
            &server,
            &mcp::stored_document(mcp::server_of(item), mcp::meta_of(item)),
        )),
    }
}
