//! Tests of the record model: one test per way [`SignedRecord`] refuses
//! bytes, [`next_seq`], and the golden vectors in
//! `proto/vectors/records.json` (regenerate them with
//! `cargo test --lib regenerate_golden_vectors -- --ignored`).

use serde_json::Value;

use super::*;
use crate::descriptor::DocumentFormat;
use crate::trust::ChallengeProof;

mod golden;

pub(crate) fn sample_descriptor(id: &str) -> Descriptor {
    Descriptor {
        id: id.into(),
        name: "Translator".into(),
        description: "Translates".into(),
        version: None,
        publisher: None,
        endpoint: Some("https://api.example.com/t".into()),
        capabilities: vec!["translation".into()],
        tags: vec![],
        languages: vec!["en".into()],
        status: None,
        auth: None,
        format: DocumentFormat::Aidip,
    }
}

#[test]
fn signed_descriptor_round_trips() {
    let key = SigningKey::from_bytes(&[1; 32]);
    let body = DescriptorRecord::new(
        sample_descriptor("a"),
        "{}".into(),
        5,
        100,
        60,
        Evidence::default(),
    );
    let rec = SignedRecord::sign_descriptor(&body, &key).unwrap();
    let back = SignedRecord::decode(&rec.encode()).unwrap();
    assert_eq!(back, rec);
    assert_eq!(back.descriptor().unwrap(), body);
}

#[test]
fn a_liveness_result_round_trips_and_is_no_agent_record() {
    let key = SigningKey::from_bytes(&[1; 32]);
    let body = LivenessRecord {
        agent_id: "a".into(),
        seq: 5,
        state: LiveState::AuthRequired,
        checked_at: 100,
        rtt_ms: 7,
        protocol: ProbeProtocol::Mcp,
    };
    let rec = SignedRecord::sign_liveness(&body, &key).unwrap();
    let back = SignedRecord::decode(&rec.encode()).unwrap();
    assert_eq!(back.kind().as_str(), "liveness");
    assert_eq!(back.liveness().unwrap(), body);
    assert!(matches!(
        back.body(),
        Err(RecordError::BadPayload {
            kind: "liveness",
            ..
        })
    ));
    assert!(back.descriptor().is_err());
    // Unknown members, states and protocols are refused.
    let payload = |extra: &str| {
        let mut v: serde_json::Value = serde_json::to_value(&body).unwrap();
        match extra {
            "member" => v["extra"] = 1.into(),
            "state" => v["state"] = "dead".into(),
            _ => v["protocol"] = "grpc".into(),
        }
        cbor::to_cbor(&v)
    };
    for extra in ["member", "state", "protocol"] {
        let rec = SignedRecord::sign(RecordType::Liveness, payload(extra), &key).unwrap();
        assert!(
            matches!(rec.liveness(), Err(RecordError::BadPayload { .. })),
            "{extra}"
        );
    }
    // A payload over its bound is neither signed nor read.
    let long = LivenessRecord {
        agent_id: "x".repeat(MAX_LIVENESS_PAYLOAD_BYTES),
        ..body
    };
    assert!(SignedRecord::sign_liveness(&long, &key).is_err());
    let rec = SignedRecord::sign(RecordType::Liveness, cbor::to_cbor(&long), &key).unwrap();
    assert!(rec.liveness().is_err());
}

// ---------------------------------------------------------------------------
// Helpers that state the wire format independently of the code under test.

/// The attesting node's key in tests and vectors.
fn node_key() -> SigningKey {
    SigningKey::from_bytes(&[1; 32])
}

/// A key that is not the node's.
fn other_key() -> SigningKey {
    SigningKey::from_bytes(&[2; 32])
}

fn sample_body() -> DescriptorRecord {
    DescriptorRecord::new(
        sample_descriptor("a"),
        r#"{"name":"Translator"}"#.into(),
        5,
        100,
        60,
        Evidence::default(),
    )
}

fn sample_tombstone() -> TombstoneRecord {
    TombstoneRecord {
        agent_id: "a".into(),
        seq: 6,
        issued_at: 101,
        reason: TombstoneReason::Revoked,
    }
}

/// Ed25519 over `prefix || kind || "\n" || payload`.
fn sign_with(prefix: &[u8], kind: &str, payload: &[u8], key: &SigningKey) -> Vec<u8> {
    let mut msg = prefix.to_vec();
    msg.extend_from_slice(kind.as_bytes());
    msg.push(b'\n');
    msg.extend_from_slice(payload);
    key.sign(&msg).to_bytes().to_vec()
}

/// An envelope with arbitrary field contents.
fn raw_envelope(kind: &str, payload: &[u8], signer: &[u8], signature: &[u8]) -> Vec<u8> {
    to_cbor(&Envelope {
        kind: kind.into(),
        payload: payload.to_vec(),
        signer: signer.to_vec(),
        signature: signature.to_vec(),
    })
}

/// A correctly signed envelope of any type name and payload.
fn signed_envelope(kind: &str, payload: &[u8], key: &SigningKey) -> Vec<u8> {
    let signature = sign_with(SIGNING_CONTEXT, kind, payload, key);
    raw_envelope(kind, payload, key.verifying_key().as_bytes(), &signature)
}

// ---------------------------------------------------------------------------
// One test per refusal.

#[test]
fn signature_covers_the_stated_signing_input() {
    let rec = SignedRecord::sign_descriptor(&sample_body(), &node_key()).unwrap();
    let expected = sign_with(
        b"agentmesh/record/v1\n",
        "descriptor",
        rec.payload(),
        &node_key(),
    );
    assert_eq!(rec.signature.to_bytes().to_vec(), expected);
    assert_eq!(
        rec.encode(),
        signed_envelope("descriptor", rec.payload(), &node_key())
    );
}

#[test]
fn a_flipped_bit_anywhere_signed_is_a_bad_signature() {
    let rec = SignedRecord::sign_descriptor(&sample_body(), &node_key()).unwrap();
    let (payload, signer) = (rec.payload(), rec.signer().as_bytes());
    let signature = rec.signature.to_bytes();
    for bit in [0, 7, 255, 256, 511] {
        let mut sig = signature;
        sig[bit / 8] ^= 1 << (bit % 8);
        let bytes = raw_envelope("descriptor", payload, signer, &sig);
        assert!(
            matches!(SignedRecord::decode(&bytes), Err(RecordError::BadSignature)),
            "signature bit {bit}"
        );
    }
    let mut tampered = payload.to_vec();
    tampered[10] ^= 0x01;
    let bytes = raw_envelope("descriptor", &tampered, signer, &signature);
    assert!(matches!(
        SignedRecord::decode(&bytes),
        Err(RecordError::BadSignature)
    ));
    // Signed by one key, claiming another.
    let forged = sign_with(SIGNING_CONTEXT, "descriptor", payload, &other_key());
    let bytes = raw_envelope("descriptor", payload, signer, &forged);
    assert!(matches!(
        SignedRecord::decode(&bytes),
        Err(RecordError::BadSignature)
    ));
}

#[test]
fn wrong_domain_separation_is_a_bad_signature() {
    let payload = to_cbor(&sample_body());
    let key = node_key();
    for prefix in [&b"agentmesh/record/v0\n"[..], b"agentmesh/record/v1", b""] {
        let sig = sign_with(prefix, "descriptor", &payload, &key);
        let bytes = raw_envelope("descriptor", &payload, key.verifying_key().as_bytes(), &sig);
        assert!(
            matches!(SignedRecord::decode(&bytes), Err(RecordError::BadSignature)),
            "prefix {:?}",
            String::from_utf8_lossy(prefix)
        );
    }
    // The type is signed too: a tombstone's signature does not make the same
    // payload a descriptor.
    let payload = to_cbor(&sample_tombstone());
    let sig = sign_with(SIGNING_CONTEXT, "tombstone", &payload, &key);
    let bytes = raw_envelope("descriptor", &payload, key.verifying_key().as_bytes(), &sig);
    assert!(matches!(
        SignedRecord::decode(&bytes),
        Err(RecordError::BadSignature)
    ));
}

#[test]
fn oversize_is_refused_at_sign_time() {
    let key = node_key();
    let base = SignedRecord::sign(RecordType::Descriptor, vec![0; 1000], &key)
        .unwrap()
        .encode()
        .len();
    // 1000 and ~16 000 byte strings both have a 3-byte head, so the
    // envelope grows byte for byte with the payload.
    let fits = 1000 + MAX_RECORD_BYTES - base;
    let rec = SignedRecord::sign(RecordType::Descriptor, vec![0; fits], &key).unwrap();
    assert_eq!(rec.encode().len(), MAX_RECORD_BYTES);
    match SignedRecord::sign(RecordType::Descriptor, vec![0; fits + 1], &key) {
        Err(RecordError::TooLarge { size, max }) => {
            assert_eq!((size, max), (MAX_RECORD_BYTES + 1, MAX_RECORD_BYTES));
        }
        other => panic!("expected TooLarge, got {other:?}"),
    }
    let mut body = sample_body();
    body.document = "x".repeat(MAX_RECORD_BYTES);
    assert!(matches!(
        SignedRecord::sign_descriptor(&body, &key),
        Err(RecordError::TooLarge { .. })
    ));
}

#[test]
fn oversize_is_refused_at_decode_time() {
    let key = node_key();
    let overhead = signed_envelope("descriptor", &[0; 1000], &key).len() - 1000;
    let at_limit = signed_envelope("descriptor", &vec![0; MAX_RECORD_BYTES - overhead], &key);
    assert_eq!(at_limit.len(), MAX_RECORD_BYTES);
    SignedRecord::decode(&at_limit).expect("a record of exactly the limit is accepted");
    // Correctly signed, one byte over.
    let over = signed_envelope(
        "descriptor",
        &vec![0; MAX_RECORD_BYTES + 1 - overhead],
        &key,
    );
    assert_eq!(over.len(), MAX_RECORD_BYTES + 1);
    match SignedRecord::decode(&over) {
        Err(RecordError::TooLarge { size, max }) => {
            assert_eq!((size, max), (MAX_RECORD_BYTES + 1, MAX_RECORD_BYTES));
        }
        other => panic!("expected TooLarge, got {other:?}"),
    }
    // The size is checked before anything is parsed.
    let junk = vec![0xff; 1 << 20];
    assert!(matches!(
        SignedRecord::decode(&junk),
        Err(RecordError::TooLarge { size, .. }) if size == 1 << 20
    ));
    assert!(matches!(
        SignedRecord::decode_trusted(&junk),
        Err(RecordError::TooLarge { .. })
    ));
}

#[test]
fn every_truncation_is_malformed_and_never_panics() {
    for rec in [
        SignedRecord::sign_descriptor(&sample_body(), &node_key()).unwrap(),
        SignedRecord::sign_tombstone(&sample_tombstone(), &node_key()).unwrap(),
    ] {
        let bytes = rec.encode();
        for len in 0..bytes.len() {
            match SignedRecord::decode(&bytes[..len]) {
                Err(RecordError::Malformed { .. }) => {}
                other => panic!("prefix of {len}/{} bytes: {other:?}", bytes.len()),
            }
        }
        SignedRecord::decode(&bytes).expect("the whole record decodes");
    }
}

#[test]
fn trailing_bytes_are_refused() {
    let bytes = SignedRecord::sign_descriptor(&sample_body(), &node_key())
        .unwrap()
        .encode();
    let mut one = bytes.clone();
    one.push(0x00);
    assert!(matches!(
        SignedRecord::decode(&one),
        Err(RecordError::TrailingBytes { extra: 1 })
    ));
    // A second, valid record glued on is trailing bytes too.
    let twice = [bytes.clone(), bytes.clone()].concat();
    match SignedRecord::decode(&twice) {
        Err(RecordError::TrailingBytes { extra }) => assert_eq!(extra, bytes.len()),
        other => panic!("expected TrailingBytes, got {other:?}"),
    }
}

#[test]
fn unknown_record_type_is_refused() {
    // Correctly signed over its own type name: the name alone is refused.
    let bytes = signed_envelope("endorsement", &to_cbor(&sample_body()), &node_key());
    match SignedRecord::decode(&bytes) {
        Err(RecordError::UnknownType { kind }) => assert_eq!(kind, "endorsement"),
        other => panic!("expected UnknownType, got {other:?}"),
    }
    // Type names are case-sensitive.
    let bytes = signed_envelope("Descriptor", &to_cbor(&sample_body()), &node_key());
    assert!(matches!(
        SignedRecord::decode(&bytes),
        Err(RecordError::UnknownType { .. })
    ));
}

#[test]
fn wrong_length_signer_or_signature_is_malformed() {
    let rec = SignedRecord::sign_descriptor(&sample_body(), &node_key()).unwrap();
    let (payload, signer) = (rec.payload(), rec.signer().as_bytes());
    let sig = rec.signature.to_bytes();
    let cases: [(&str, &[u8], &[u8]); 6] = [
        ("signer is 31 bytes", &signer[..31], &sig),
        ("signer is 33 bytes", &[&signer[..], &[0]].concat(), &sig),
        ("signer is 0 bytes", &[], &sig),
        ("signature is 63 bytes", signer, &sig[..63]),
        ("signature is 65 bytes", signer, &[&sig[..], &[0]].concat()),
        ("signature is 0 bytes", signer, &[]),
    ];
    for (want, signer, sig) in cases {
        match SignedRecord::decode(&raw_envelope("descriptor", payload, signer, sig)) {
            Err(RecordError::Malformed { reason }) => {
                assert!(reason.contains(want), "{reason:?} should say {want:?}");
            }
            other => panic!("{want}: expected Malformed, got {other:?}"),
        }
    }
    // 32 bytes that are not a point on the curve.
    let mut not_a_point = [0; 32];
    not_a_point[0] = 2;
    assert!(VerifyingKey::from_bytes(&not_a_point).is_err());
    assert!(matches!(
        SignedRecord::decode(&raw_envelope("descriptor", payload, &not_a_point, &sig)),
        Err(RecordError::Malformed { .. })
    ));
}

#[test]
fn a_tombstone_is_not_a_descriptor() {
    let key = node_key();
    let tomb = SignedRecord::sign_tombstone(&sample_tombstone(), &key).unwrap();
    assert!(matches!(
        tomb.descriptor(),
        Err(RecordError::BadPayload {
            kind: "descriptor",
            ..
        })
    ));
    let desc = SignedRecord::sign_descriptor(&sample_body(), &key).unwrap();
    assert!(matches!(
        desc.tombstone(),
        Err(RecordError::BadPayload {
            kind: "tombstone",
            ..
        })
    ));
    // A tombstone payload correctly signed as a descriptor.
    let bytes = signed_envelope("descriptor", &to_cbor(&sample_tombstone()), &key);
    let rec = SignedRecord::decode(&bytes).expect("the envelope and signature are fine");
    assert!(matches!(
        rec.body(),
        Err(RecordError::BadPayload {
            kind: "descriptor",
            ..
        })
    ));
    // A payload that is not one CBOR item.
    let payload = [to_cbor(&sample_body()), vec![0]].concat();
    let rec = SignedRecord::decode(&signed_envelope("descriptor", &payload, &key)).unwrap();
    assert!(matches!(
        rec.body(),
        Err(RecordError::BadPayload {
            kind: "descriptor",
            ..
        })
    ));
}

#[test]
fn a_descriptor_about_another_agent_is_bad_payload() {
    let mut body = sample_body();
    body.agent_id = "b".into();
    let rec = SignedRecord::sign_descriptor(&body, &node_key()).unwrap();
    let rec = SignedRecord::decode(&rec.encode()).unwrap();
    match rec.descriptor() {
        Err(RecordError::BadPayload { kind, reason }) => {
            assert_eq!(kind, "descriptor");
            assert!(reason.contains("agent id"), "{reason}");
        }
        other => panic!("expected BadPayload, got {other:?}"),
    }
}

#[test]
fn a_changed_document_is_a_digest_mismatch() {
    let mut body = sample_body();
    body.document = r#"{"name":"Translator!"}"#.into();
    let rec = SignedRecord::sign_descriptor(&body, &node_key()).unwrap();
    let rec = SignedRecord::decode(&rec.encode()).unwrap();
    assert!(matches!(rec.descriptor(), Err(RecordError::DigestMismatch)));
    assert!(matches!(rec.body(), Err(RecordError::DigestMismatch)));
}

#[test]
fn non_canonical_encodings_of_a_valid_record_are_refused() {
    let rec = SignedRecord::sign_descriptor(&sample_body(), &node_key()).unwrap();
    let canonical = rec.encode();
    assert!(SignedRecord::decode(&canonical).is_ok());
    // The same fields in another key order: same signature, other bytes.
    let reordered = {
        use ciborium::Value as V;
        let map = V::Map(vec![
            (
                V::Text("signature".into()),
                V::Bytes(rec.signature.to_bytes().to_vec()),
            ),
            (V::Text("type".into()), V::Text("descriptor".into())),
            (V::Text("payload".into()), V::Bytes(rec.payload().to_vec())),
            (
                V::Text("signer".into()),
                V::Bytes(rec.signer().as_bytes().to_vec()),
            ),
        ]);
        let mut out = Vec::new();
        ciborium::into_writer(&map, &mut out).unwrap();
        out
    };
    assert_ne!(reordered, canonical);
    assert!(matches!(
        SignedRecord::decode(&reordered),
        Err(RecordError::NonCanonical)
    ));
}

#[test]
fn a_weak_signer_key_is_malformed() {
    // The identity point: a small-order key that "verifies" forged
    // signatures under non-strict verification.
    let mut identity = [0u8; 32];
    identity[0] = 1;
    let payload = to_cbor(&sample_body());
    let bytes = raw_envelope("descriptor", &payload, &identity, &[0u8; 64]);
    assert!(matches!(
        SignedRecord::decode(&bytes),
        Err(RecordError::Malformed { reason }) if reason.contains("weak")
    ));
}

#[test]
fn next_seq_is_above_what_is_held() {
    let first = next_seq(None);
    assert!(first > 0);
    assert!(
        first >= (unix_now() * 1000).saturating_sub(1000),
        "seq {first} is not Unix ms"
    );
    for held in [0, 1, first, first + 1_000_000, u64::MAX / 2, u64::MAX - 1] {
        assert!(next_seq(Some(held)) > held, "held {held}");
    }
    assert_eq!(next_seq(Some(u64::MAX - 1)), u64::MAX);
    let a = next_seq(Some(first));
    assert!(next_seq(Some(a)) > a);
}

#[test]
fn a_trusted_document_is_the_descriptors_document_and_a_tombstone_has_none() {
    let body = sample_body();
    let rec = SignedRecord::sign_descriptor(&body, &node_key()).unwrap();
    let bytes = rec.encode();
    assert_eq!(
        SignedRecord::trusted_document(&bytes).unwrap().as_deref(),
        Some(body.document.as_str())
    );
    let gone = SignedRecord::sign_tombstone(&sample_tombstone(), &node_key()).unwrap();
    assert_eq!(
        SignedRecord::trusted_document(&gone.encode()).unwrap(),
        None
    );
    // Bad bytes are refused, never a document: every truncation, trailing
    // bytes, an oversized input before it is parsed.
    for len in 0..bytes.len() {
        assert!(
            SignedRecord::trusted_document(&bytes[..len]).is_err(),
            "prefix of {len} bytes"
        );
    }
    let mut longer = bytes.clone();
    longer.push(0);
    assert!(matches!(
        SignedRecord::trusted_document(&longer),
        Err(RecordError::TrailingBytes { extra: 1 })
    ));
    assert!(matches!(
        SignedRecord::trusted_document(&vec![0xff; 1 << 20]),
        Err(RecordError::TooLarge { .. })
    ));
}

#[test]
fn a_transfer_verifies_for_its_id_and_new_key_only_and_round_trips_as_a_token() {
    let owner = SigningKey::from_bytes(&[21; 32]);
    let heir = SigningKey::from_bytes(&[22; 32]).verifying_key();
    let t = Transfer::sign("weather-bot", &heir, 7, &owner);
    assert_eq!(
        t.verify_for("weather-bot", &heir),
        Ok(owner.verifying_key())
    );
    assert!(t.covers(&owner.verifying_key(), 7));
    assert!(
        !t.covers(&owner.verifying_key(), 8),
        "the owner wrote after it"
    );
    assert!(!t.covers(&heir, 7), "not the held record's signer");
    assert!(matches!(
        t.verify_for("other-bot", &heir),
        Err(TransferError::Mismatch { .. })
    ));
    assert!(matches!(
        t.verify_for("weather-bot", &owner.verifying_key()),
        Err(TransferError::Mismatch { .. })
    ));
    let mut tampered = t.clone();
    tampered.up_to_seq = 8;
    assert_eq!(tampered.verify(), Err(TransferError::BadSignature));
    let mut short = t.clone();
    short.signature.pop();
    assert_eq!(short.verify(), Err(TransferError::BadSignature));

    assert_eq!(Transfer::from_token(&t.to_token()), Ok(t.clone()));
    for bad in ["", "!!", &"A".repeat(2000), "oWFhAQ"] {
        assert!(
            matches!(Transfer::from_token(bad), Err(TransferError::Malformed(_))),
            "{bad:?}"
        );
    }

    // A descriptor carrying it round-trips; one without encodes as before
    // (no `transfer` key), so the golden vectors still hold.
    let mut body = sample_body();
    let plain = SignedRecord::sign_descriptor(&body, &owner)
        .unwrap()
        .encode();
    assert!(!plain.windows(8).any(|w| w == b"transfer"));
    body.transfer = Some(t);
    let signed = SignedRecord::sign_descriptor(&body, &owner).unwrap();
    let decoded = SignedRecord::decode(&signed.encode()).unwrap();
    assert_eq!(decoded.descriptor().unwrap(), body);
}
