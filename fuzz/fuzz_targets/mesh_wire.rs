//! The search protocol's wire (`/agentmesh/search/1.0.0`), read with the
//! node's own codec and bounds (`mesh::read_request`, `mesh::read_response`:
//! libp2p's CBOR codec, 24 KiB and 2 MiB). The first byte picks the side:
//! even, a request a peer sends this node (then `SearchRequest::check`, as
//! the event loop does); odd, a response a peer answers with (then
//! `SearchResponse::bound` and each record decoded, as the asker does
//! before its judge sees them).
#![no_main]

use agentmesh::mesh::{self, wire};
use agentmesh::record::SignedRecord;
use agentmesh_fuzz::selector;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((mode, bytes)) = selector(data) else {
        return;
    };
    if mode & 1 == 0 {
        if let Ok(request) = mesh::read_request(bytes) {
            if request.check().is_ok() {
                let _ = request.bounded_limit();
                for name in request.capabilities.iter().chain(&request.tags) {
                    let _ = wire::known_digest(name);
                }
            }
        }
    } else if let Ok(response) = mesh::read_response(bytes) {
        let response = response.bound(wire::MAX_SEARCH_LIMIT);
        assert!(response.records.len() <= wire::MAX_SEARCH_LIMIT as usize);
        for record in &response.records {
            if let Ok(r) = SignedRecord::decode(record) {
                let _ = r.body();
            }
        }
    }
});
