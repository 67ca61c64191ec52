//! The golden vectors of `proto/vectors/records.json`: how they are
//! generated, that each decodes (or is refused) as it says, and that the
//! file matches the generator.

use super::*;

const VECTORS_PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/proto/vectors/records.json");
/// 2026-01-01T00:00:00Z.
const ISSUED_AT: u64 = 1_767_225_600;
const SEQ: u64 = ISSUED_AT * 1000;
const TTL_SECS: u64 = 7 * 24 * 3600;

#[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Vector {
    name: String,
    description: String,
    hex: String,
    signer_public_key_hex: String,
    expect: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    payload: Option<Value>,
}

fn vector(name: &str, description: &str, bytes: &[u8], signer: &[u8], expect: &str) -> Vector {
    Vector {
        name: name.into(),
        description: description.into(),
        hex: hex::encode(bytes),
        signer_public_key_hex: hex::encode(signer),
        expect: expect.into(),
        payload: None,
    }
}

/// A decoded payload: an agent record's, or a liveness result.
enum Payload {
    Agent(RecordBody),
    Liveness(LivenessRecord),
}

/// `SignedRecord::decode` followed by reading the payload by type
/// (`body`, or `liveness` for a liveness record): the full check a node
/// runs.
fn check_any(bytes: &[u8]) -> Result<(SignedRecord, Payload), RecordError> {
    let rec = SignedRecord::decode(bytes)?;
    let payload = match rec.kind() {
        RecordType::Liveness => Payload::Liveness(rec.liveness()?),
        _ => Payload::Agent(rec.body()?),
    };
    Ok((rec, payload))
}

fn ok_vector(name: &str, description: &str, rec: &SignedRecord) -> Vector {
    let (_, body) = check_any(&rec.encode()).expect("ok vectors hold valid bodies");
    Vector {
        payload: Some(payload_json(&body)),
        ..vector(
            name,
            description,
            &rec.encode(),
            rec.signer().as_bytes(),
            "ok",
        )
    }
}

/// The payload as JSON, field for field, byte strings as lowercase hex.
fn payload_json(body: &Payload) -> Value {
    let hex_field = |v: &mut Value, key: &str| {
        let bytes: Vec<u8> = serde_json::from_value(v[key].take()).unwrap();
        v[key] = Value::String(hex::encode(bytes));
    };
    match body {
        Payload::Agent(RecordBody::Descriptor(d)) => {
            let mut v = serde_json::to_value(d).unwrap();
            hex_field(&mut v, "doc_sha256");
            if let Some(challenge) = v["evidence"].get_mut("challenge") {
                hex_field(challenge, "rand");
                hex_field(challenge, "signature");
            }
            v
        }
        Payload::Agent(RecordBody::Tombstone(t)) => serde_json::to_value(t).unwrap(),
        Payload::Liveness(l) => serde_json::to_value(l).unwrap(),
    }
}

fn example(path: &str) -> Value {
    let path = format!("{}/proto/examples/{path}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

fn translator_body() -> DescriptorRecord {
    let doc = example("aidip/valid/translator-draft-example.json");
    let meta = crate::aidip::MetadataValidator::new()
        .parse(&doc)
        .expect("the draft's example is valid");
    let descriptor = meta.to_descriptor("agent-12345");
    let document = serde_json::to_string(&doc).unwrap();
    DescriptorRecord::new(
        descriptor,
        document,
        SEQ,
        ISSUED_AT,
        TTL_SECS,
        Evidence::default(),
    )
}

/// The example key of `proto/README.md`: seed = SHA-256 of the label text.
fn example_agent_key(label: &str) -> SigningKey {
    let seed = Sha256::digest(format!("agentmesh proto example key: {label}").as_bytes());
    SigningKey::from_bytes(&seed.into())
}

/// Alice's ADP example, key-verified: fingerprint chain and a challenge
/// signed by Alice's key, computed as docs/protocol.md#crawl-challenge says.
fn alice_body() -> DescriptorRecord {
    let doc = example("adp/valid/alice-draft-example.json");
    let alice = example_agent_key("alice.agent");
    assert_eq!(
        doc["identity"]["publicKey"]["fingerprint"],
        crate::identity::fingerprint(&alice.verifying_key()),
        "the example document carries the example key's fingerprint"
    );
    let adp: crate::adp::AgentDocument = serde_json::from_value(doc.clone()).unwrap();
    let mut body = DescriptorRecord::new(
        adp.to_descriptor(),
        serde_json::to_string(&doc).unwrap(),
        SEQ,
        ISSUED_AT,
        TTL_SECS,
        Evidence::default(),
    );
    let verifier = libp2p::identity::Keypair::ed25519_from_bytes([1; 32])
        .unwrap()
        .public()
        .to_peer_id()
        .to_string();
    let unix_ms = SEQ - 2_000;
    let rand: Vec<u8> = (0..16).collect();
    let mut nonce = Sha256::new();
    nonce.update(&body.doc_sha256);
    nonce.update(verifier.as_bytes());
    nonce.update(unix_ms.to_be_bytes());
    nonce.update(&rand);
    let nonce = hex::encode(nonce.finalize());
    let handshake = format!("ADP/1.0 handshake\n{nonce}\n{}\n{verifier}", body.agent_id);
    body.evidence = Evidence {
        dnssec: true,
        fingerprint: true,
        challenge: Some(ChallengeProof {
            verifier,
            unix_ms,
            rand,
            signature: alice.sign(handshake.as_bytes()).to_bytes().to_vec(),
        }),
        mutual_peer: false,
        dnssec_chain: None,
    };
    body
}

/// A descriptor whose padded document makes the envelope exactly `size`
/// bytes, correctly signed (`SignedRecord::sign` would refuse over 16 KiB).
fn padded_envelope(size: usize) -> Vec<u8> {
    let make = |pad: usize| {
        let document = format!(
            r#"{{"name":"Padding","description":"{}"}}"#,
            "x".repeat(pad)
        );
        let mut descriptor = sample_descriptor("agent-padding");
        descriptor.name = "Padding".into();
        let body = DescriptorRecord::new(
            descriptor,
            document,
            SEQ,
            ISSUED_AT,
            TTL_SECS,
            Evidence::default(),
        );
        signed_envelope("descriptor", &to_cbor(&body), &node_key())
    };
    let base = make(1000).len();
    let made = make(1000 + size - base);
    assert_eq!(made.len(), size, "padding grows the envelope byte for byte");
    made
}

fn golden_vectors() -> Vec<Vector> {
    let node = node_key();
    let node_pub = node.verifying_key().to_bytes();
    let translator = SignedRecord::sign_descriptor(&translator_body(), &node).unwrap();
    let t_bytes = translator.encode();
    let t_payload = translator.payload().to_vec();
    let alice = SignedRecord::sign_descriptor(&alice_body(), &node).unwrap();
    let revoked = TombstoneRecord {
        agent_id: "agent-12345".into(),
        seq: SEQ + 60_000,
        issued_at: ISSUED_AT + 60,
        reason: TombstoneReason::Revoked,
    };
    let deleted = TombstoneRecord {
        agent_id: "agent:alice.agent".into(),
        seq: SEQ + 120_000,
        issued_at: ISSUED_AT + 120,
        reason: TombstoneReason::Deleted,
    };
    let liveness = LivenessRecord {
        agent_id: "agent-12345".into(),
        seq: SEQ,
        state: LiveState::Alive,
        checked_at: ISSUED_AT + 60,
        rtt_ms: 42,
        protocol: ProbeProtocol::Aidip,
    };
    let mut dead = serde_json::to_value(&liveness).unwrap();
    dead["state"] = "dead".into();
    let dead_payload = to_cbor(&dead);
    let at_limit = SignedRecord::decode(&padded_envelope(MAX_RECORD_BYTES)).unwrap();
    let over_limit = padded_envelope(MAX_RECORD_BYTES + 1);
    let sig = translator.signature.to_bytes();
    let mut flipped = sig;
    flipped[0] ^= 0x01;
    let mut not_a_point = [0; 32];
    not_a_point[0] = 2;
    let mut other_agent = translator_body();
    other_agent.agent_id = "agent-99999".into();
    let mut changed = translator_body();
    changed.document = changed.document.replace("1.2.0", "1.2.1");
    let tomb_payload = to_cbor(&revoked);
    let envelope_map = || {
        ciborium::from_reader::<ciborium::Value, _>(&t_bytes[..])
            .unwrap()
            .into_map()
            .unwrap()
    };
    let mut extra_field = envelope_map();
    extra_field.push(("comment".into(), "hello".into()));
    let extra_field = to_cbor(&ciborium::Value::Map(extra_field));
    let no_signature = envelope_map().into_iter().take(3).collect();
    let no_signature = to_cbor(&ciborium::Value::Map(no_signature));
    let mut reordered = envelope_map();
    reordered.swap(0, 1);
    let reordered = to_cbor(&ciborium::Value::Map(reordered));
    let mut indefinite = t_bytes.clone();
    assert_eq!(indefinite[0], 0xa4, "a definite map of four members");
    indefinite[0] = 0xbf;
    indefinite.push(0xff);
    let short_head = [&[0x58, 0x20][..], &node_pub[..]].concat();
    let long_head = [&[0x59, 0x00, 0x20][..], &node_pub[..]].concat();
    let at = t_bytes
        .windows(short_head.len())
        .position(|w| w == short_head)
        .expect("the signer is a 32-byte string");
    let longer_head = [
        &t_bytes[..at],
        &long_head,
        &t_bytes[at + short_head.len()..],
    ]
    .concat();
    vec![
        ok_vector(
            "descriptor_aidip_translator",
            "proto/examples/aidip/valid/translator-draft-example.json registered as agent-12345 \
            and mapped to a descriptor; document = the example as compact JSON (members in file \
            order); evidence all false (unverified); signed by the node key (seed 0x01 x 32).",
            &translator,
        ),
        ok_vector(
            "descriptor_adp_alice_key_verified",
            "proto/examples/adp/valid/alice-draft-example.json as crawled: dnssec and fingerprint \
            true plus a challenge proof (key-verified). The challenge is signed by Alice's \
            example key (proto/README.md: seed = SHA-256(\"agentmesh proto example key: \
            alice.agent\")); verifier = the libp2p peer id of the node key; nonce = \
            hex(SHA-256(doc_sha256 || UTF-8(verifier) || unix_ms as 8 bytes big-endian || \
            rand)); signed text = \"ADP/1.0 handshake\\n\" + nonce + \"\\n\" + agent_id + \
            \"\\n\" + verifier. The record is signed by the node key (seed 0x01 x 32).",
            &alice,
        ),
        ok_vector(
            "tombstone_revoked_by_node",
            "agent-12345 revoked by the node that attested it (node key, seed 0x01 x 32); seq \
            above the descriptor's.",
            &SignedRecord::sign_tombstone(&revoked, &node).unwrap(),
        ),
        ok_vector(
            "tombstone_deleted_by_agent",
            "agent:alice.agent deleted, signed by Alice's own example key.",
            &SignedRecord::sign_tombstone(&deleted, &example_agent_key("alice.agent")).unwrap(),
        ),
        ok_vector(
            "liveness_alive_by_node",
            "The node (seed 0x01 x 32) found agent-12345 alive over AIDIP, at the seq of \
            descriptor_aidip_translator, 60 s after it was signed, in 42 ms.",
            &SignedRecord::sign_liveness(&liveness, &node).unwrap(),
        ),
        vector(
            "bad_payload_liveness_unknown_state",
            "liveness_alive_by_node with the state \"dead\", which no probe finds, correctly \
            signed.",
            &signed_envelope("liveness", &dead_payload, &node),
            &node_pub,
            "bad_payload",
        ),
        ok_vector(
            "descriptor_at_size_limit",
            "A descriptor whose document is padded so that the envelope is exactly 16384 bytes: \
            the largest record accepted.",
            &at_limit,
        ),
        vector(
            "bad_signature_bit_flip",
            "descriptor_aidip_translator with the lowest bit of the signature's first byte \
            flipped.",
            &raw_envelope("descriptor", &t_payload, &node_pub, &flipped),
            &node_pub,
            "bad_signature",
        ),
        vector(
            "bad_signature_other_signer",
            "descriptor_aidip_translator signed by another key (seed 0x02 x 32) while the signer \
            field names the node key.",
            &raw_envelope(
                "descriptor",
                &t_payload,
                &node_pub,
                &sign_with(SIGNING_CONTEXT, "descriptor", &t_payload, &other_key()),
            ),
            &node_pub,
            "bad_signature",
        ),
        vector(
            "bad_signature_wrong_domain",
            "descriptor_aidip_translator's payload signed by the node key with the prefix \
            \"agentmesh/record/v0\\n\" instead of \"agentmesh/record/v1\\n\".",
            &raw_envelope(
                "descriptor",
                &t_payload,
                &node_pub,
                &sign_with(b"agentmesh/record/v0\n", "descriptor", &t_payload, &node),
            ),
            &node_pub,
            "bad_signature",
        ),
        vector(
            "bad_signature_type_relabelled",
            "tombstone_revoked_by_node's payload and signature in an envelope whose type says \
            descriptor: the type is part of the signed bytes.",
            &raw_envelope(
                "descriptor",
                &tomb_payload,
                &node_pub,
                &sign_with(SIGNING_CONTEXT, "tombstone", &tomb_payload, &node),
            ),
            &node_pub,
            "bad_signature",
        ),
        vector(
            "too_large",
            "As descriptor_at_size_limit, one byte of padding more: 16385 bytes, correctly \
            signed.",
            &over_limit,
            &node_pub,
            "too_large",
        ),
        vector(
            "malformed_truncated",
            "descriptor_aidip_translator without its last byte.",
            &t_bytes[..t_bytes.len() - 1],
            &node_pub,
            "malformed",
        ),
        vector("malformed_empty", "Zero bytes.", &[], &[], "malformed"),
        vector(
            "trailing_bytes",
            "descriptor_aidip_translator followed by one 0x00 byte.",
            &[&t_bytes[..], &[0]].concat(),
            &node_pub,
            "trailing_bytes",
        ),
        vector(
            "unknown_type",
            "An envelope of type \"endorsement\" carrying descriptor_aidip_translator's payload, \
            correctly signed over that type name.",
            &signed_envelope("endorsement", &t_payload, &node),
            &node_pub,
            "unknown_type",
        ),
        vector(
            "malformed_signer_31_bytes",
            "descriptor_aidip_translator with the signer cut to its first 31 bytes.",
            &raw_envelope("descriptor", &t_payload, &node_pub[..31], &sig),
            &node_pub[..31],
            "malformed",
        ),
        vector(
            "malformed_signature_63_bytes",
            "descriptor_aidip_translator with the signature cut to its first 63 bytes.",
            &raw_envelope("descriptor", &t_payload, &node_pub, &sig[..63]),
            &node_pub,
            "malformed",
        ),
        vector(
            "malformed_signer_not_a_point",
            "descriptor_aidip_translator with a 32-byte signer (0x02 then 31 zero bytes) that is \
            not a point on Ed25519's curve.",
            &raw_envelope("descriptor", &t_payload, &not_a_point, &sig),
            &not_a_point,
            "malformed",
        ),
        vector(
            "malformed_unknown_envelope_field",
            "descriptor_aidip_translator with a fifth envelope member \"comment\": \"hello\".",
            &extra_field,
            &node_pub,
            "malformed",
        ),
        vector(
            "malformed_missing_signature",
            "descriptor_aidip_translator without its signature member.",
            &no_signature,
            &node_pub,
            "malformed",
        ),
        vector(
            "non_canonical_keys_reordered",
            "descriptor_aidip_translator's envelope with \"payload\" before \"type\": the same \
            members, correctly signed, in another key order.",
            &reordered,
            &node_pub,
            "non_canonical",
        ),
        vector(
            "non_canonical_indefinite_map",
            "descriptor_aidip_translator's envelope as an indefinite-length map (0xbf ... 0xff).",
            &indefinite,
            &node_pub,
            "non_canonical",
        ),
        vector(
            "non_canonical_longer_head",
            "descriptor_aidip_translator with the signer's length written in a two-byte head \
            (0x59 0x00 0x20) instead of the shortest (0x58 0x20).",
            &longer_head,
            &node_pub,
            "non_canonical",
        ),
        vector(
            "bad_payload_tombstone_as_descriptor",
            "tombstone_revoked_by_node's payload in a descriptor envelope, correctly signed as a \
            descriptor.",
            &signed_envelope("descriptor", &tomb_payload, &node),
            &node_pub,
            "bad_payload",
        ),
        vector(
            "bad_payload_agent_id_mismatch",
            "descriptor_aidip_translator with agent_id agent-99999 while descriptor.id stays \
            agent-12345, correctly signed.",
            &SignedRecord::sign_descriptor(&other_agent, &node)
                .unwrap()
                .encode(),
            &node_pub,
            "bad_payload",
        ),
        vector(
            "digest_mismatch",
            "descriptor_aidip_translator whose document says version 1.2.1 while doc_sha256 is \
            still the hash of the 1.2.0 document, correctly signed.",
            &SignedRecord::sign_descriptor(&changed, &node)
                .unwrap()
                .encode(),
            &node_pub,
            "digest_mismatch",
        ),
    ]
}

fn vectors_json() -> String {
    serde_json::to_string_pretty(&golden_vectors()).unwrap() + "\n"
}

#[test]
#[ignore = "writes proto/vectors/records.json; run with --ignored to regenerate"]
fn regenerate_golden_vectors() {
    std::fs::write(VECTORS_PATH, vectors_json()).unwrap();
}

#[test]
fn golden_vectors_decode_as_expected() {
    let text = std::fs::read_to_string(VECTORS_PATH).unwrap();
    let vectors: Vec<Vector> = serde_json::from_str(&text).unwrap();
    let mut seen = std::collections::BTreeSet::new();
    for v in &vectors {
        let bytes = hex::decode(&v.hex).unwrap();
        seen.insert(v.expect.as_str());
        match (check_any(&bytes), v.expect.as_str()) {
            (Ok((rec, body)), "ok") => {
                assert_eq!(
                    hex::encode(rec.signer().as_bytes()),
                    v.signer_public_key_hex,
                    "{}",
                    v.name
                );
                assert_eq!(Some(payload_json(&body)), v.payload, "{}", v.name);
                assert_eq!(hex::encode(rec.encode()), v.hex, "{}: re-encoded", v.name);
                let canonical = match &body {
                    Payload::Agent(RecordBody::Descriptor(d)) => to_cbor(d),
                    Payload::Agent(RecordBody::Tombstone(t)) => to_cbor(t),
                    Payload::Liveness(l) => to_cbor(l),
                };
                assert_eq!(canonical, rec.payload(), "{}: payload re-encoded", v.name);
            }
            (Err(e), want) => {
                assert_eq!(e.reason(), want, "{}: {e}", v.name);
                assert_eq!(v.payload, None, "{}", v.name);
            }
            (Ok(_), want) => panic!("{}: decoded, expected {want}", v.name),
        }
    }
    let codes = [
        "ok",
        "too_large",
        "malformed",
        "trailing_bytes",
        "unknown_type",
        "non_canonical",
        "bad_signature",
        "bad_payload",
        "digest_mismatch",
    ];
    assert_eq!(
        seen,
        codes.into_iter().collect(),
        "every outcome has a vector"
    );
}

#[test]
fn golden_vectors_match_the_generator() {
    let text = std::fs::read_to_string(VECTORS_PATH).unwrap();
    assert!(
        text == vectors_json(),
        "proto/vectors/records.json is out of date: if the wire format changed on purpose, \
         run `cargo test --lib regenerate_golden_vectors -- --ignored`"
    );
}
