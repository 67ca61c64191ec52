//! The answering half of a mesh search: a peer's [`SearchRequest`] is
//! answered from this node's own index ([`Registry::find`]: the request's
//! filters narrow, its text is understood and ranked by BM25), best
//! first, as the signed records this node holds. The asker verifies them
//! itself; nothing here is trusted more for having been sent by us.

use std::collections::HashMap;

use serde_bytes::ByteBuf;

use crate::mesh::wire::{known_digest, SearchRequest, SearchResponse, MAX_RESPONSE_BYTES};
use crate::registry::{Registry, SearchQuery};
use crate::store::Filter;

/// Answers a peer's search from `registry`: at most the request's
/// (bounded) limit of records, best first, leaving out those the asker
/// listed in `known` at the same or a higher seq, within half the response
/// size limit (`truncated` when records were left out for room). A
/// request this node cannot run (a malformed language term) or a failed
/// search is answered with nothing.
pub async fn answer(registry: &Registry, request: &SearchRequest) -> SearchResponse {
    let filter = match Filter::new(
        request.capabilities.iter().map(String::as_str),
        request.tags.iter().map(String::as_str),
        request.languages.iter().map(String::as_str),
    ) {
        Ok(f) => f,
        Err(_) => return SearchResponse::default(),
    };
    let limit = request.bounded_limit() as usize;
    let known: HashMap<u64, u64> = request.known.iter().copied().collect();
    // Room for the records the asker lists as known, which are left out.
    let query = SearchQuery {
        filter,
        query: request.query.clone(),
        after: None,
        limit: limit + known.len() + 1,
        explain: false,
    };
    // The registry walks and ranks on a blocking thread.
    let Ok((found, _)) = registry.find(&query).await else {
        return SearchResponse::default();
    };
    let fresh = found.into_iter().filter(|(_, agent)| {
        let id = agent.body.agent_id();
        known
            .get(&known_digest(id))
            .is_none_or(|&seq| agent.body.seq() > seq)
    });
    let mut records = Vec::new();
    let mut bytes = 0usize;
    let mut truncated = false;
    for (_, agent) in fresh {
        if records.len() == limit {
            truncated = true;
            break;
        }
        let encoded = agent.record.encode();
        if bytes + encoded.len() > (MAX_RESPONSE_BYTES as usize) / 2 {
            truncated = true;
            break;
        }
        bytes += encoded.len();
        records.push(ByteBuf::from(encoded));
    }
    SearchResponse { records, truncated }
}
