//! The challenge handshake frames (ADP/1.0 over WebSocket), the crawler's
//! side: an agent's answer frame read as `crawl::challenge` reads it (JSON
//! into a `HandshakeFrame`, at most `MAX_FRAME_BYTES`), then judged as
//! `crawl::proof` judges it (`handshake::check_answer` against the
//! challenge's nonce and the agent's key; the mutual half's completion when
//! the agent sent a nonce of its own). The agent is the fixed stranger key
//! and the nonce fixed, so a correctly signed answer (a seed) passes.
#![no_main]

use agentmesh::adp::handshake::{self, HandshakeFrame, MAX_FRAME_BYTES};
use agentmesh::identity;
use agentmesh_fuzz::{challenge_nonce, node_key, stranger_key, CHALLENGED, VERIFIER};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() > MAX_FRAME_BYTES {
        return;
    }
    let Ok(answer) = serde_json::from_slice::<HandshakeFrame>(data) else {
        return;
    };
    let nonce = challenge_nonce();
    // Without publicKey.full the answer's own key stands when it decodes.
    let _ = identity::decode_public_key(&answer.public_key);
    let agent = stranger_key().verifying_key();
    if let Ok(checked) = handshake::check_answer(&answer, &nonce, CHALLENGED, VERIFIER, &agent) {
        assert_eq!(checked.signature.len(), 64);
        if let Some(theirs) = checked.agent_nonce.as_deref() {
            let reply = handshake::completion(VERIFIER, &node_key(), &nonce, CHALLENGED, theirs);
            let _ = serde_json::to_string(&reply).expect("a frame serialises");
        }
    }
});
