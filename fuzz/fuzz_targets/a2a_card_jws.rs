//! A2A Agent Cards and their JWS signatures, as the crawler reads them:
//! the card JSON (`a2a::classify`, `a2a::parse_card`, the descriptor),
//! then each signature checked (`a2a::verify_signature`: protected header,
//! JCS payloads, EdDSA and ES256) against a key set. The input is the card,
//! optionally followed by a 0xFF byte and the key set (JWKS) as fetched
//! from its `jku`; without one, the testbed's card key set, so signed
//! seeds verify and the whole check runs.
#![no_main]

use agentmesh::formats::a2a;
use agentmesh::testbed::formats::{card_key, KID};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let (card, jwks) = match data.iter().position(|&b| b == 0xFF) {
        Some(i) => (&data[..i], Some(&data[i + 1..])),
        None => (data, None),
    };
    let Ok(doc) = serde_json::from_slice::<Value>(card) else {
        return;
    };
    let _ = a2a::classify(&doc);
    let Ok(parsed) = a2a::parse_card(&doc) else {
        return;
    };
    let _ = parsed.to_descriptor("a2a:fuzz.example");
    let jwks = match jwks {
        Some(bytes) => match serde_json::from_slice::<Value>(bytes) {
            Ok(v) => v,
            Err(_) => return,
        },
        None => a2a::jwks_of(&card_key().verifying_key(), KID),
    };
    for signature in &parsed.signatures {
        let _ = a2a::verify_signature(&doc, signature, &jwks);
    }
});
