//! ADP's `/.well-known/agent.json`, as the crawler reads it
//! (`DocumentChecker::check`: JSON, protocol, schema, domain), then what it
//! does with a document that passes: the fingerprint chain, the key
//! rotation statement against a held key, the descriptor. The document is
//! checked against the domain it names (so the steps after the domain
//! check are reached) and against a fixed one.
#![no_main]

use std::sync::OnceLock;

use agentmesh::adp::check::{fingerprint_chain, DocumentChecker};
use agentmesh::adp::rotation;
use agentmesh::formats::a2a;
use agentmesh_fuzz::stranger_key;
use libfuzzer_sys::fuzz_target;

fn checker() -> &'static DocumentChecker {
    static CHECKER: OnceLock<DocumentChecker> = OnceLock::new();
    CHECKER.get_or_init(DocumentChecker::new)
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let named = serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .and_then(|v| {
            // A legacy A2A card is served at the same path.
            let _ = a2a::classify(&v);
            v.pointer("/identity/domain")?.as_str().map(str::to_owned)
        });
    for domain in ["fuzz.example"].into_iter().chain(named.as_deref()) {
        let Ok(doc) = checker().check(domain, text) else {
            continue;
        };
        let fp = doc.identity.public_key.fingerprint.to_ascii_lowercase();
        let _ = fingerprint_chain(&fp, &doc);
        let _ = doc.proven_key();
        let _ = rotation::continuity(&doc, &stranger_key().verifying_key());
        let _ = doc.to_descriptor();
    }
});
