//! What a signed answer's checker and a transparency-log client read
//! from a stranger: the first byte picks the shape. 0: a signed answer,
//! checked by `answer::check` as `agentmesh verify-answer` checks it
//! (with the input's second half as an older checkpoint); 1: a tile path
//! (`TilePath::parse`, and what parses prints back the same); 2: a
//! checkpoint note opened with the fixed node key's verifier key; 3: a
//! message of the checkpoints topic as a witness decodes it, and an
//! equivocation proof (from it, or from JSON as it is served) checked.
#![no_main]

use agentmesh::answer::{self, CheckOptions};
use agentmesh::tlog::witness::Equivocation;
use agentmesh::tlog::{note, Checkpoint, TilePath};
use agentmesh::witness::TopicMessage;
use agentmesh_fuzz::node_key;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&shape, rest)) = data.split_first() else {
        return;
    };
    match shape % 4 {
        0 => {
            let half = rest.len() / 2;
            let options = CheckOptions {
                old_checkpoint: Some(rest[half..].to_vec()),
                ..CheckOptions::default()
            };
            let report = answer::check(rest, &options);
            assert_eq!(report.ok, report.failures.is_empty());
            let _ = answer::check(rest, &CheckOptions::default());
        }
        1 => {
            if let Ok(path) = std::str::from_utf8(rest) {
                if let Ok(tile) = TilePath::parse(path) {
                    assert_eq!(tile.to_string(), path);
                }
            }
        }
        3 => {
            if let Some(TopicMessage::Equivocation(e)) = TopicMessage::decode(rest) {
                let _ = e.verify();
            }
            if let Ok(e) = serde_json::from_slice::<Equivocation>(rest) {
                let _ = e.verify();
            }
        }
        _ => {
            let vkey = note::verifier_key("agentmesh/fuzz", &node_key().verifying_key());
            if let Ok(head) = Checkpoint::open(rest, &vkey, None) {
                assert!(!head.origin.is_empty());
            }
        }
    }
});
