//! The transparency log in the store: what goes in (the records this
//! node signs, sealed for hidden agents; nothing else, nothing twice),
//! what is served (the durable tree only), and that its root, tiles and
//! proofs are RFC 6962's, computed here independently of `tlog_tiles`.

use ed25519_dalek::SigningKey;
use sha2::{Digest, Sha256};

use super::super::*;
use crate::descriptor::{Descriptor, DocumentFormat};
use crate::record::{DescriptorRecord, RecordBody, SignedRecord};
use crate::tlog::{self, Hash, TilePath};
use crate::trust::Evidence;

fn node_key() -> SigningKey {
    SigningKey::from_bytes(&[7; 32])
}

fn open(dir: &std::path::Path) -> Store {
    Store::open_with(
        dir,
        &StoreOptions {
            cache_bytes: 16 << 20,
            log_signer: Some(node_key().verifying_key().to_bytes()),
            ..StoreOptions::default()
        },
    )
    .expect("the store opens")
}

/// A descriptor record of `id` at `seq`, signed by `key`.
fn record(id: &str, seq: u64, key: &SigningKey) -> (SignedRecord, RecordBody) {
    let d = Descriptor {
        id: id.into(),
        name: format!("agent {id}"),
        description: String::new(),
        version: None,
        publisher: None,
        endpoint: None,
        capabilities: vec!["translate".into()],
        tags: vec![],
        languages: vec![],
        status: None,
        auth: None,
        format: DocumentFormat::Aidip,
    };
    let body = DescriptorRecord::new(d, "{}".into(), seq, 1, 3600, Evidence::default());
    let signed = SignedRecord::sign_descriptor(&body, key).expect("it signs");
    (signed, RecordBody::Descriptor(Box::new(body)))
}

fn put(store: &Store, id: &str, seq: u64, key: &SigningKey) -> SignedRecord {
    let (signed, body) = record(id, seq, key);
    store
        .blocking()
        .put(&signed, &body, Origin::Local, Expect::Any)
        .expect("the write is taken");
    signed
}

/// RFC 6962's leaf hash, written out.
fn leaf(entry: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update([0]);
    h.update(entry);
    h.finalize().into()
}

/// RFC 6962's Merkle Tree Hash, written out (section 2.1).
fn mth(leaves: &[[u8; 32]]) -> [u8; 32] {
    match leaves.len() {
        0 => Sha256::digest(b"").into(),
        1 => leaves[0],
        n => {
            let k = 1 << (usize::BITS - 1 - (n - 1).leading_zeros());
            let mut h = Sha256::new();
            h.update([1]);
            h.update(mth(&leaves[..k]));
            h.update(mth(&leaves[k..]));
            h.finalize().into()
        }
    }
}

#[test]
fn the_log_holds_each_record_the_node_signs_once_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let stranger = SigningKey::from_bytes(&[8; 32]);
    let mut entries = Vec::new();
    for i in 0..300 {
        entries.push(put(&store, &format!("urn:test:{i}"), 1, &node_key()).encode());
        if i % 60 == 0 {
            put(&store, &format!("urn:other:{i}"), 1, &stranger);
        }
    }
    // Refused (a seq not above the one held): nothing is appended.
    let (stale, body) = record("urn:test:0", 1, &node_key());
    assert!(store
        .blocking()
        .put(&stale, &body, Origin::Local, Expect::Any)
        .is_err());
    let s = store.blocking();
    assert_eq!(
        s.log_head().unwrap().0,
        0,
        "nothing is served before a flush"
    );
    s.flush().unwrap();
    let (size, root) = s.log_head().unwrap();
    assert_eq!(size, 300);
    let leaves: Vec<[u8; 32]> = entries.iter().map(|e| leaf(e)).collect();
    assert_eq!(root.0, mth(&leaves), "the root is RFC 6962's");
    for (i, e) in entries.iter().enumerate() {
        assert_eq!(s.log_entry(i as u64).unwrap().as_ref(), Some(e));
        assert_eq!(s.log_index_of(e).unwrap(), Some(i as u64));
    }
    assert_eq!(s.log_entry(300).unwrap(), None);
    assert_eq!(s.log_root(0).unwrap().unwrap().0, mth(&[]));
    assert_eq!(s.log_root(129).unwrap().unwrap().0, mth(&leaves[..129]));
    assert!(s.log_root(301).unwrap().is_err());
}

#[test]
fn proofs_check_against_the_roots_they_name() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    for i in 0..70 {
        put(&store, &format!("urn:test:{i}"), 1, &node_key());
    }
    let s = store.blocking();
    s.flush().unwrap();
    for size in [1u64, 2, 3, 7, 8, 9, 64, 70] {
        let root = s.log_root(size).unwrap().unwrap();
        for index in 0..size {
            let proof = s.log_inclusion(index, size).unwrap().unwrap();
            let entry = s.log_entry(index).unwrap().unwrap();
            tlog_tiles::check_record(&proof, size, root, index, Hash(leaf(&entry)))
                .unwrap_or_else(|e| panic!("entry {index} in {size}: {e}"));
            let wrong = Hash(leaf(b"another entry"));
            assert!(tlog_tiles::check_record(&proof, size, root, index, wrong).is_err());
        }
        for from in 1..=size {
            let proof = s.log_consistency(from, size).unwrap().unwrap();
            let old = s.log_root(from).unwrap().unwrap();
            tlog_tiles::check_tree(&proof, size, root, from, old)
                .unwrap_or_else(|e| panic!("{from} -> {size}: {e}"));
        }
    }
    assert_eq!(
        s.log_consistency(0, 70).unwrap().unwrap(),
        vec![],
        "from the empty tree"
    );
    assert_eq!(s.log_consistency(0, 0).unwrap().unwrap(), vec![]);
    assert!(s.log_inclusion(70, 70).unwrap().is_err());
    assert!(s.log_inclusion(0, 71).unwrap().is_err());
    assert!(s.log_consistency(9, 8).unwrap().is_err());
}

#[test]
fn tiles_and_bundles_are_laid_out_as_tlog_tiles_says() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let mut entries = Vec::new();
    for i in 0..300 {
        entries.push(put(&store, &format!("urn:test:{i}"), 1, &node_key()).encode());
    }
    let s = store.blocking();
    s.flush().unwrap();
    let leaves: Vec<[u8; 32]> = entries.iter().map(|e| leaf(e)).collect();
    let tile = |path: &str| s.log_tile(TilePath::parse(path).unwrap()).unwrap();

    assert_eq!(tile("0/000").unwrap(), leaves[..256].concat());
    assert_eq!(tile("0/001.p/44").unwrap(), leaves[256..300].concat());
    assert_eq!(tile("0/001.p/3").unwrap(), leaves[256..259].concat());
    assert_eq!(tile("1/000.p/1").unwrap(), mth(&leaves[..256]).to_vec());
    let mut bundle = Vec::new();
    for e in &entries[256..300] {
        bundle.extend_from_slice(&(e.len() as u16).to_be_bytes());
        bundle.extend_from_slice(e);
    }
    assert_eq!(tile("entries/001.p/44").unwrap(), bundle);
    // What the tree of 300 does not hold.
    for beyond in [
        "0/001",
        "0/001.p/45",
        "1/000",
        "0/002.p/1",
        "entries/001",
        "2/000.p/1",
    ] {
        assert!(tile(beyond).is_err(), "{beyond} was served");
    }
}

#[test]
fn a_hidden_agents_record_is_logged_sealed() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let s = store.blocking();
    let hidden = Entitlement {
        visibility: Visibility::Private,
        owner: Some("key:owner".into()),
        ..Entitlement::default()
    };
    s.set_entitlement("urn:test:private", &hidden).unwrap();
    let private = put(&store, "urn:test:private", 1, &node_key()).encode();
    let public = put(&store, "urn:test:public", 1, &node_key()).encode();
    s.flush().unwrap();
    let sealed = s.log_entry(0).unwrap().unwrap();
    assert_eq!(sealed, tlog::entry_of(&private, true));
    assert!(!sealed
        .windows(16)
        .any(|w| private.windows(16).any(|p| p == w)));
    assert_eq!(s.log_entry(1).unwrap().unwrap(), public);
    assert_eq!(s.log_index_of(&private).unwrap(), Some(0));
}

#[test]
fn suspensions_and_their_lifting_are_logged_sealed_for_a_hidden_agent() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let s = store.blocking();
    put(&store, "urn:test:public", 1, &node_key());
    let hidden = Entitlement {
        visibility: Visibility::Private,
        owner: Some("key:owner".into()),
        ..Entitlement::default()
    };
    s.set_entitlement("urn:test:private", &hidden).unwrap();
    put(&store, "urn:test:private", 1, &node_key());
    let since = s
        .suspend("urn:test:public", "spam\u{7}reports")
        .unwrap()
        .since;
    assert!(s.unsuspend("urn:test:public").unwrap());
    // Nothing to lift: nothing logged.
    assert!(!s.unsuspend("urn:test:public").unwrap());
    s.suspend("urn:test:private", "abuse").unwrap();
    s.flush().unwrap();
    assert_eq!(s.log_head().unwrap().0, 5);
    let statement = |i: u64| -> serde_json::Value {
        let entry = s.log_entry(i).unwrap().unwrap();
        let json = entry
            .strip_prefix(tlog::SUSPENSION_PREFIX)
            .unwrap_or_else(|| panic!("entry {i} is not a suspension"));
        serde_json::from_slice(json).unwrap()
    };
    assert_eq!(
        statement(2),
        serde_json::json!({"agent_id": "urn:test:public", "state": "suspended", "reason": "spamreports", "at": since})
    );
    assert_eq!(statement(3)["state"], "lifted");
    let sealed = s.log_entry(4).unwrap().unwrap();
    assert!(
        sealed.starts_with(tlog::SEALED_PREFIX),
        "the hidden agent's suspension is sealed"
    );
    assert!(!String::from_utf8_lossy(&sealed).contains("urn:test:private"));
    // The suspension itself holds, as before.
    assert!(s.suspension("urn:test:private").is_some());
    assert!(s.suspension("urn:test:public").is_none());
}

#[test]
fn the_log_reopens_at_its_durable_size() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    for i in 0..10 {
        put(&store, &format!("urn:test:{i}"), 1, &node_key());
    }
    store.blocking().flush().unwrap();
    let before = store.blocking().log_head().unwrap();
    store.close_blocking().unwrap();
    let store = open(dir.path());
    assert_eq!(store.blocking().log_head().unwrap(), before);
    put(&store, "urn:test:10", 1, &node_key());
    store.blocking().flush().unwrap();
    let (size, root) = store.blocking().log_head().unwrap();
    assert_eq!(size, 11);
    let proof = store.blocking().log_consistency(10, 11).unwrap().unwrap();
    tlog_tiles::check_tree(&proof, size, root, before.0, before.1).unwrap();
}
