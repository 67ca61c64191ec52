//! ARD catalogs (`/.well-known/ai-catalog.json`), as the crawler reads
//! them: JSON, `ard::parse_catalog` for the publishing domain (entry by
//! entry), each entry's kind, publisher and descriptor.
#![no_main]

use agentmesh::formats::ard;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Ok(doc) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let Ok(catalog) = ard::parse_catalog(&doc, "catalog.formats.test") else {
        return;
    };
    for entry in catalog.entries.iter().flatten() {
        let _ = (entry.kind(), entry.publisher(), entry.to_descriptor());
    }
});
