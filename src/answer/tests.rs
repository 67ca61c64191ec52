//! The offline check of signed answers: a real answer (records in a
//! store with its log, a checkpoint signed by the node) checks; each lie
//! a node could tell, sealed again with its own key so that only the
//! deeper checks can catch it, is named by its code.

use std::sync::Arc;

use ed25519_dalek::SigningKey;
use serde_json::{json, Value};

use super::*;
use crate::descriptor::{Descriptor, DocumentFormat};
use crate::record::{DescriptorRecord, RecordBody, SignedRecord};
use crate::store::{Expect, Origin, Store, StoreOptions};
use crate::tlog::Notary;
use crate::trust::{Evidence, TrustLevel};
use base64::engine::general_purpose::STANDARD as B64;

fn node_key() -> SigningKey {
    SigningKey::from_bytes(&[21; 32])
}

/// The key another node (which the answering node trusts) signs with.
fn other_node() -> SigningKey {
    SigningKey::from_bytes(&[22; 32])
}

/// ADP's `alice.agent` crawled at key-verified (the record of
/// proto/vectors/records.json), its document carrying the agent key in
/// full, with a real challenge proof by that key; signed by `signer`.
/// `broken`: the challenge signature does not verify.
fn alice(signer: &SigningKey, broken: bool) -> Vec<u8> {
    let vectors: Value =
        serde_json::from_str(include_str!("../../proto/vectors/records.json")).unwrap();
    let v = vectors
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "descriptor_adp_alice_key_verified")
        .unwrap();
    let record = SignedRecord::decode(&hex::decode(v["hex"].as_str().unwrap()).unwrap()).unwrap();
    let RecordBody::Descriptor(mut d) = record.body().unwrap() else {
        panic!("alice is a descriptor");
    };
    let agent = SigningKey::from_bytes(&[23; 32]);
    let mut doc: Value = serde_json::from_str(&d.document).unwrap();
    doc["identity"]["publicKey"]["full"] =
        json!(crate::identity::encode_public_key(&agent.verifying_key()));
    doc["identity"]["publicKey"]["fingerprint"] =
        json!(crate::identity::fingerprint(&agent.verifying_key()));
    d.document = doc.to_string();
    d.doc_sha256 = sha2::Sha256::digest(d.document.as_bytes()).to_vec();
    let proof = d.evidence.challenge.as_mut().unwrap();
    let n =
        crate::adp::handshake::nonce(&d.doc_sha256, &proof.verifier, proof.unix_ms, &proof.rand);
    let input = crate::adp::handshake::signing_input(&n, &d.agent_id, &proof.verifier);
    proof.signature = ed25519_dalek::Signer::sign(&agent, &input)
        .to_bytes()
        .to_vec();
    if broken {
        proof.signature[0] ^= 1;
    }
    SignedRecord::sign_descriptor(&d, signer).unwrap().encode()
}

fn aidip(id: &str) -> (SignedRecord, RecordBody) {
    let d = Descriptor {
        id: id.into(),
        name: id.into(),
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
    let body = DescriptorRecord::new(d, "{}".into(), 1, 1, 3600, Evidence::default());
    let signed = SignedRecord::sign_descriptor(&body, &node_key()).unwrap();
    (signed, RecordBody::Descriptor(Box::new(body)))
}

/// A node's store, its notary, and a signed answer of two of its own
/// registrations and alice (whose signer it trusts), with the old
/// checkpoint it signed after the first registration.
struct Fixture {
    _dir: tempfile::TempDir,
    notary: Notary,
    payload: Payload,
    old_checkpoint: Vec<u8>,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_with(
            dir.path(),
            &StoreOptions {
                cache_bytes: 8 << 20,
                log_signer: Some(node_key().verifying_key().to_bytes()),
                ..StoreOptions::default()
            },
        )
        .unwrap();
        let notary = Notary::new("agentmesh/test", Arc::new(node_key())).unwrap();
        let s = store.blocking();
        let mut records = Vec::new();
        let mut old_checkpoint = Vec::new();
        for id in ["one", "two"] {
            let (signed, body) = aidip(id);
            s.put(&signed, &body, Origin::Local, Expect::Any).unwrap();
            s.flush().unwrap();
            records.push(signed.encode());
            if old_checkpoint.is_empty() {
                let (size, root) = s.log_head().unwrap();
                old_checkpoint = notary.sign(size, root).to_vec();
            }
        }
        records.push(alice(&other_node(), false));
        let (size, root, proofs) = s.log_proofs(&records).unwrap();
        let ids = ["one", "two", "agent:alice.agent"];
        let results = ids
            .iter()
            .zip(&records)
            .zip(proofs)
            .map(|((id, bytes), proof)| ResultProof::new((*id).into(), bytes, proof))
            .collect();
        let request = RequestInfo::new("POST", "/agents/search", br#"{"query":"x"}"#);
        let payload = Payload {
            v: VERSION,
            node: NodeInfo {
                peer_id: crate::identity::peer_id_of_public(&node_key().verifying_key()),
                log_origin: "agentmesh/test".into(),
            },
            time: 1,
            request_hash: request.hash(),
            request,
            checkpoint: String::from_utf8(notary.sign(size, root).to_vec()).unwrap(),
            trusted_signers: vec![B64U.encode(other_node().verifying_key().as_bytes())],
            answer: json!([
                {"id": "one", "trust": {"level": "unverified"}},
                {"id": "two", "trust": {"level": "unverified"}},
                {"id": "agent:alice.agent", "trust": {"level": "key-verified"}},
            ]),
            results,
        };
        store.close_blocking().unwrap();
        Self {
            _dir: dir,
            notary,
            payload,
            old_checkpoint,
        }
    }

    /// The answer of `payload`, sealed with the node key.
    fn sealed(&self, payload: &Payload) -> Vec<u8> {
        let bytes = serde_json::to_vec(payload).unwrap();
        serde_json::to_vec(&seal(&bytes, self.notary.key())).unwrap()
    }

    /// The codes of the failures the check of `payload` finds.
    fn codes(&self, payload: &Payload, options: &CheckOptions) -> Vec<&'static str> {
        check(&self.sealed(payload), options)
            .failures
            .iter()
            .map(|f| f.code)
            .collect()
    }
}

#[test]
fn a_true_answer_checks_and_its_levels_are_recomputed() {
    let f = Fixture::new();
    let report = check(&f.sealed(&f.payload), &CheckOptions::default());
    assert!(report.ok, "{:?}", report.failures);
    let levels: Vec<_> = report
        .results
        .iter()
        .map(|r| (r.id.as_str(), r.level))
        .collect();
    assert_eq!(
        levels,
        [
            ("one", TrustLevel::Unverified),
            ("two", TrustLevel::Unverified),
            ("agent:alice.agent", TrustLevel::KeyVerified),
        ]
    );
    assert_eq!(report.log_size, Some(2));
    let options = CheckOptions {
        trusted_nodes: vec![node_key().verifying_key()],
        old_checkpoint: Some(f.old_checkpoint.clone()),
        request: Some(f.payload.request.clone()),
        dnssec_anchors: None,
    };
    assert!(check(&f.sealed(&f.payload), &options).ok);
}

#[test]
fn every_lie_is_named() {
    let f = Fixture::new();
    let none = CheckOptions::default();
    let lie = |change: &dyn Fn(&mut Payload)| {
        let mut p = f.payload.clone();
        change(&mut p);
        p
    };

    // A changed field of a record the node signed.
    let changed = lie(&|p| {
        let mut bytes = B64.decode(&p.results[0].record).unwrap();
        let at = bytes.windows(3).position(|w| w == b"one").unwrap();
        bytes[at] = b'x';
        p.results[0].record = B64.encode(bytes);
    });
    assert_eq!(f.codes(&changed, &none), ["record", "inclusion"]);

    // A result dropped with its proof.
    let dropped = lie(&|p| {
        p.results.remove(1);
    });
    assert_eq!(f.codes(&dropped, &none), ["results"]);

    // Two records swapped between results.
    let swapped = lie(&|p| {
        let (a, b) = (p.results[0].record.clone(), p.results[1].record.clone());
        p.results[0].record = b;
        p.results[1].record = a;
    });
    assert_eq!(
        f.codes(&swapped, &none),
        ["inclusion", "record", "inclusion", "record"]
    );

    // A stale checkpoint: the proofs were made for a larger tree.
    let stale = lie(&|p| p.checkpoint = String::from_utf8(f.old_checkpoint.clone()).unwrap());
    assert_eq!(f.codes(&stale, &none), ["inclusion", "inclusion"]);
    let newer = CheckOptions {
        old_checkpoint: Some(f.payload.checkpoint.clone().into_bytes()),
        ..CheckOptions::default()
    };
    assert!(f.codes(&stale, &newer).contains(&"stale"));

    // A forged trust level, and alice's evidence from a signer the node
    // does not trust.
    let forged = lie(&|p| p.answer[0]["trust"]["level"] = json!("key-verified"));
    assert_eq!(f.codes(&forged, &none), ["trust_level"]);
    let untrusted = lie(&|p| p.trusted_signers.clear());
    assert_eq!(f.codes(&untrusted, &none), ["trust_level"]);

    // The node's own record without its inclusion proof.
    let unproven = lie(&|p| p.results[1].inclusion = None);
    assert_eq!(f.codes(&unproven, &none), ["inclusion"]);

    // Another request's answer, another node's trust.
    let other = CheckOptions {
        request: Some(RequestInfo::new("POST", "/agents/search", b"{}")),
        trusted_nodes: vec![SigningKey::from_bytes(&[1; 32]).verifying_key()],
        ..CheckOptions::default()
    };
    assert_eq!(f.codes(&f.payload, &other), ["untrusted_node", "request"]);
    let rehashed = lie(&|p| p.request.target = "/agents".into());
    assert_eq!(f.codes(&rehashed, &none), ["request"]);
}

#[test]
fn a_challenge_that_does_not_verify_is_named() {
    let f = Fixture::new();
    let mut p = f.payload.clone();
    p.results[2].record = B64.encode(alice(&other_node(), true));
    assert_eq!(
        f.codes(&p, &CheckOptions::default()),
        ["evidence", "trust_level"]
    );
    p.answer[2]["trust"]["level"] = json!("unverified");
    assert_eq!(f.codes(&p, &CheckOptions::default()), ["evidence"]);
}

#[test]
fn what_is_not_a_signed_answer_is_refused_whole() {
    let f = Fixture::new();
    let sealed = f.sealed(&f.payload);
    let mut envelope: Envelope = serde_json::from_slice(&sealed).unwrap();
    let codes = |bytes: &[u8]| -> Vec<&'static str> {
        check(bytes, &CheckOptions::default())
            .failures
            .iter()
            .map(|f| f.code)
            .collect()
    };
    assert_eq!(codes(b"not json"), ["envelope"]);
    assert_eq!(codes(br#"{"agentmesh_answer":1}"#), ["envelope"]);
    assert_eq!(codes(&vec![b' '; MAX_ANSWER_BYTES + 1]), ["envelope"]);
    // A payload changed without the node's signature.
    let mut payload = B64U.decode(&envelope.payload).unwrap();
    let at = payload.windows(6).position(|w| w == b"\"time\"").unwrap();
    payload[at + 7] = b'2';
    envelope.payload = B64U.encode(&payload);
    assert_eq!(
        codes(&serde_json::to_vec(&envelope).unwrap()),
        ["signature"]
    );
    envelope.signature = "AAAA".into();
    assert_eq!(codes(&serde_json::to_vec(&envelope).unwrap()), ["envelope"]);
}
