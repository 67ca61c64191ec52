//! What a signed answer's checker and a transparency-log client read
//! from a stranger: the first byte picks the shape. 0: a signed answer,
//! checked by `answer::check` as `agentmesh verify-answer` checks it
//! (with the input's second half as an older checkpoint); 1: a tile path
//! (`TilePath::parse`, and what parses prints back the same); 2: a
//! checkpoint note opened with the fixed node key's verifier key; 3: a
//! message of the checkpoints topic as a witness decodes it, and an
//! equivocation proof (from it, or from JSON as it is served) checked;
//! 4: a record's DNSSEC chain, read and checked from the root's anchor and
//! from its own top zone, for `_agent.fuzz.test.` TXT.
#![no_main]

use agentmesh::answer::{self, CheckOptions};
use agentmesh::tlog::witness::Equivocation;
use agentmesh::tlog::{note, Checkpoint, TilePath};
use agentmesh::witness::TopicMessage;
use agentmesh_fuzz::node_key;
use libfuzzer_sys::fuzz_target;

/// The name shape 4 asks a chain to prove (the seeds' chains are for it).
const CHAIN_OWNER: &str = "_agent.fuzz.test.";

fuzz_target!(|data: &[u8]| {
    let Some((&shape, rest)) = data.split_first() else {
        return;
    };
    match shape % 5 {
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
        4 => {
            use agentmesh::dnssec::{chain, TrustAnchorSet};
            use hickory_proto::rr::{Name, RecordType};
            let owner = Name::from_ascii(CHAIN_OWNER).expect("a name");
            let at = agentmesh::record::unix_now();
            if let Ok(records) = chain::decode(rest) {
                assert!(records.len() <= chain::MAX_CHAIN_RECORDS);
            }
            let anchors = TrustAnchorSet::builtin_root();
            let _ = chain::verify(rest, &anchors, &owner, RecordType::TXT, at);
            if let Ok(proved) = chain::verify_self_anchored(rest, &owner, RecordType::TXT, at) {
                assert!(!proved.records.is_empty());
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
