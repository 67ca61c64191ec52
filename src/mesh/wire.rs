//! Wire types of the search protocol `/agentmesh/search/1.0.0`, carried as
//! CBOR by the request-response cbor codec, and their bounds.
//!
//! The event loop checks a [`SearchRequest`] on receipt
//! ([`SearchRequest::check`], limit clamped to [`MAX_SEARCH_LIMIT`]) before
//! the node's handler sees it, and bounds every [`SearchResponse`] both
//! when it sends one and when it receives one ([`SearchResponse::bound`]).
//! The records inside are opaque encoded `SignedRecord`s: the caller
//! verifies them before showing them.

use serde::{Deserialize, Serialize};
use serde_bytes::ByteBuf;

use crate::record::MAX_RECORD_BYTES;

/// Most records a search may ask for (and a response may carry).
pub const MAX_SEARCH_LIMIT: u32 = 100;
/// Most terms in each of `capabilities`, `tags`, `languages`.
pub const MAX_SEARCH_TERMS: usize = 32;
/// Longest term, in bytes.
pub const MAX_TERM_BYTES: usize = 128;
/// Longest free-text query, in bytes.
pub const MAX_QUERY_BYTES: usize = 1024;
/// Most entries in a request's `known` list.
pub const MAX_KNOWN: usize = 256;
/// Largest encoded request: 3 x 32 terms x (128 + CBOR header) + the query
/// is about 13.6 KiB, `known` at most 256 x 19 bytes (4.75 KiB); 24 KiB
/// leaves room for the map keys.
pub const MAX_REQUEST_BYTES: u64 = 24 * 1024;
/// Largest encoded response: 100 records of at most 16 KiB each (1.6 MiB)
/// plus CBOR headers; 2 MiB.
pub const MAX_RESPONSE_BYTES: u64 = 2 * 1024 * 1024;
/// Byte budget for the records of one response (leaves room for headers).
const RESPONSE_RECORD_BUDGET: usize = MAX_RESPONSE_BYTES as usize - 64 * 1024;

/// A search sent to a peer: every given term must match (the peer decides
/// how); `query` is free text for semantic search.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchRequest {
    /// Capabilities the agents must have.
    pub capabilities: Vec<String>,
    /// Tags the agents must have.
    pub tags: Vec<String>,
    /// Languages the agents must speak (BCP 47).
    pub languages: Vec<String>,
    /// Free-text query.
    pub query: Option<String>,
    /// Most records wanted (clamped to [`MAX_SEARCH_LIMIT`]).
    pub limit: u32,
    /// Records the asker already holds, as `(`[`known_digest`]`(agent id),
    /// seq)`: the peer leaves out a record whose agent is listed at the
    /// same or a higher seq, and sends others in its place. At most
    /// [`MAX_KNOWN`]. Absent from older askers (empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub known: Vec<(u64, u64)>,
}

/// How a [`SearchRequest`] names an agent in `known`: the first 8 bytes of
/// SHA-256 of the agent id, big-endian. (A collision only makes a peer
/// leave out one record the asker would have liked.)
pub fn known_digest(agent_id: &str) -> u64 {
    use sha2::{Digest, Sha256};
    let d = Sha256::digest(agent_id.as_bytes());
    u64::from_be_bytes(d[..8].try_into().expect("a SHA-256 digest has 8 bytes"))
}

/// A peer's answer: encoded `SignedRecord`s, to be verified by the caller.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchResponse {
    /// Encoded `SignedRecord`s.
    pub records: Vec<ByteBuf>,
    /// The peer held more than it sent.
    pub truncated: bool,
}

/// Why a search request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WireError {
    /// Too many terms in one list.
    #[error("{field} has {count} terms, over {max}")]
    TooManyTerms {
        /// The request field (`capabilities`, `tags`, `languages`, `known`).
        field: &'static str,
        /// How many it holds.
        count: usize,
        /// The most allowed.
        max: usize,
    },
    /// A term or the query is too long.
    #[error("a {field} value is {len} bytes, over {max}")]
    TooLong {
        /// The request field (a term list, or `query`).
        field: &'static str,
        /// The value's length in bytes.
        len: usize,
        /// The longest allowed, in bytes.
        max: usize,
    },
}

impl WireError {
    /// A short, stable reason code for counters.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::TooManyTerms { .. } => "too_many_terms",
            Self::TooLong { .. } => "term_too_long",
        }
    }
}

fn check_terms(field: &'static str, terms: &[String]) -> Result<(), WireError> {
    if terms.len() > MAX_SEARCH_TERMS {
        return Err(WireError::TooManyTerms {
            field,
            count: terms.len(),
            max: MAX_SEARCH_TERMS,
        });
    }
    if let Some(t) = terms.iter().find(|t| t.len() > MAX_TERM_BYTES) {
        return Err(WireError::TooLong {
            field,
            len: t.len(),
            max: MAX_TERM_BYTES,
        });
    }
    Ok(())
}

impl SearchRequest {
    /// Checks the term counts and lengths.
    ///
    /// # Errors
    /// [`WireError`] naming the first bound broken.
    pub fn check(&self) -> Result<(), WireError> {
        check_terms("capabilities", &self.capabilities)?;
        check_terms("tags", &self.tags)?;
        check_terms("languages", &self.languages)?;
        if self.known.len() > MAX_KNOWN {
            return Err(WireError::TooManyTerms {
                field: "known",
                count: self.known.len(),
                max: MAX_KNOWN,
            });
        }
        if let Some(q) = &self.query {
            if q.len() > MAX_QUERY_BYTES {
                return Err(WireError::TooLong {
                    field: "query",
                    len: q.len(),
                    max: MAX_QUERY_BYTES,
                });
            }
        }
        Ok(())
    }

    /// The limit, clamped to [`MAX_SEARCH_LIMIT`].
    pub fn bounded_limit(&self) -> u32 {
        self.limit.min(MAX_SEARCH_LIMIT)
    }
}

impl SearchResponse {
    /// Keeps at most `limit` (and [`MAX_SEARCH_LIMIT`]) records, drops any
    /// record over the record size limit, keeps the total under the
    /// response budget; sets `truncated` when anything was cut.
    pub fn bound(mut self, limit: u32) -> Self {
        let limit = limit.min(MAX_SEARCH_LIMIT) as usize;
        let before = self.records.len();
        let mut budget = RESPONSE_RECORD_BUDGET;
        let mut kept = Vec::with_capacity(before.min(limit));
        for r in self.records {
            if kept.len() == limit {
                break;
            }
            if r.len() > MAX_RECORD_BYTES || r.len() > budget {
                continue;
            }
            budget -= r.len();
            kept.push(r);
        }
        if kept.len() < before {
            self.truncated = true;
        }
        self.records = kept;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_bounds() {
        let mut r = SearchRequest {
            capabilities: vec!["translation".into()],
            limit: 1000,
            ..Default::default()
        };
        assert!(r.check().is_ok());
        assert_eq!(r.bounded_limit(), MAX_SEARCH_LIMIT);
        r.tags = vec!["x".into(); MAX_SEARCH_TERMS + 1];
        assert_eq!(r.check().unwrap_err().reason(), "too_many_terms");
        r.tags = vec!["x".repeat(MAX_TERM_BYTES + 1)];
        assert_eq!(r.check().unwrap_err().reason(), "term_too_long");
        r.tags.clear();
        r.known = vec![(1, 1); MAX_KNOWN + 1];
        assert_eq!(r.check().unwrap_err().reason(), "too_many_terms");
        r.known.clear();
        r.query = Some("q".repeat(MAX_QUERY_BYTES + 1));
        assert!(r.check().is_err());
    }

    #[test]
    fn largest_request_fits_the_codec_limit() {
        let terms = vec!["t".repeat(MAX_TERM_BYTES); MAX_SEARCH_TERMS];
        let r = SearchRequest {
            capabilities: terms.clone(),
            tags: terms.clone(),
            languages: terms,
            query: Some("q".repeat(MAX_QUERY_BYTES)),
            limit: MAX_SEARCH_LIMIT,
            known: vec![(u64::MAX, u64::MAX); MAX_KNOWN],
        };
        let mut out = Vec::new();
        ciborium::into_writer(&r, &mut out).unwrap();
        assert!(out.len() as u64 <= MAX_REQUEST_BYTES, "{} bytes", out.len());
    }

    #[test]
    fn response_bound_truncates_and_drops_oversize() {
        let small = ByteBuf::from(vec![1u8; 10]);
        let huge = ByteBuf::from(vec![2u8; MAX_RECORD_BYTES + 1]);
        let r = SearchResponse {
            records: vec![small.clone(), huge, small.clone(), small.clone()],
            truncated: false,
        }
        .bound(2);
        assert_eq!(r.records, vec![small.clone(), small.clone()]);
        assert!(r.truncated);
        let full = SearchResponse {
            records: vec![ByteBuf::from(vec![3u8; MAX_RECORD_BYTES]); 100],
            truncated: false,
        };
        let mut out = Vec::new();
        ciborium::into_writer(&full, &mut out).unwrap();
        assert!(out.len() as u64 <= MAX_RESPONSE_BYTES);
        let same = full.clone().bound(100);
        assert_eq!(same, full);
    }
}
