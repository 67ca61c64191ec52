//! Key rotation: behaviour and the golden vectors
//! (`proto/vectors/key-rotation.json`; regenerate them with
//! `cargo test --lib regenerate_rotation_vectors -- --ignored`).

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::*;

const VECTORS_PATH: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/proto/vectors/key-rotation.json"
);
const AGENT_ID: &str = "agent:rotating.example";

fn key(seed: u8) -> SigningKey {
    SigningKey::from_bytes(&[seed; 32])
}

/// A document of `AGENT_ID` under `new`, with `identity` members added.
fn document(new: &VerifyingKey, extra: Value) -> AgentDocument {
    let text = include_str!("../../../proto/examples/adp/valid/minimal-required-only.json");
    let mut doc: Value = serde_json::from_str(text).unwrap();
    doc["identity"]["id"] = json!(AGENT_ID);
    doc["identity"]["domain"] = json!("rotating.example");
    doc["identity"]["publicKey"] = json!({
        "algorithm": "ed25519",
        "fingerprint": identity::fingerprint(new),
        "full": identity::encode_public_key(new),
    });
    for (k, v) in extra.as_object().unwrap() {
        doc["identity"][k] = v.clone();
    }
    serde_json::from_value(doc).unwrap()
}

/// One golden vector: the held key, the document's identity, the outcome.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct Vector {
    name: String,
    description: String,
    /// The key the node holds for the agent (base64url).
    held_key: String,
    /// The crawled document's `identity` object.
    identity: Value,
    /// `same_key`, `rotated`, or the refusal: `not_from_held_key`,
    /// `no_statement`, `malformed`, `bad_signature`.
    expect: String,
}

fn outcome(r: Result<Continuity, RotationError>) -> &'static str {
    match r {
        Ok(Continuity::SameKey) => "same_key",
        Ok(Continuity::Rotated { .. }) => "rotated",
        Err(RotationError::NotFromHeldKey { .. }) => "not_from_held_key",
        Err(RotationError::NoStatement) => "no_statement",
        Err(RotationError::Malformed { .. }) => "malformed",
        Err(RotationError::BadSignature) => "bad_signature",
    }
}

fn vectors() -> Vec<Vector> {
    let (old, new, other) = (key(3), key(4), key(5));
    let (old_v, new_v) = (old.verifying_key(), new.verifying_key());
    let prev = json!(identity::fingerprint(&old_v));
    let statement = serde_json::to_value(sign(AGENT_ID, &old, &new_v)).unwrap();
    let by_other = serde_json::to_value(sign(AGENT_ID, &other, &new_v)).unwrap();
    let mut forged = statement.clone();
    forged["previousKey"] = json!(identity::encode_public_key(&old_v));
    forged["signature"] = by_other["signature"].clone();
    let for_other_agent =
        serde_json::to_value(sign("agent:elsewhere.example", &old, &new_v)).unwrap();
    let held = identity::encode_public_key(&old_v);
    let case = |name: &str, description: &str, key: &VerifyingKey, extra: Value, expect: &str| {
        let doc = document(key, extra);
        Vector {
            name: name.into(),
            description: description.into(),
            held_key: held.clone(),
            identity: serde_json::to_value(&doc.identity).unwrap(),
            expect: expect.into(),
        }
    };
    vec![
        case("same_key", "The document still carries the held key.", &old_v, json!({}), "same_key"),
        case(
            "rotated",
            "New key (seed 0x04 x 32), previousFingerprint = the held key (seed 0x03 x 32), keyRotation signed by the held key over \"ADP/1.0 key-rotation\\n\" + agent_id + \"\\n\" + previousFingerprint + \"\\n\" + fingerprint.",
            &new_v,
            json!({"previousFingerprint": prev, "keyRotation": statement}),
            "rotated",
        ),
        case(
            "no_previous_fingerprint",
            "New key, no previousFingerprint: not a rotation of the held key.",
            &new_v,
            json!({}),
            "not_from_held_key",
        ),
        case(
            "previous_fingerprint_of_another_key",
            "New key, previousFingerprint of a key the node does not hold (seed 0x05 x 32).",
            &new_v,
            json!({"previousFingerprint": identity::fingerprint(&other.verifying_key()), "keyRotation": statement}),
            "not_from_held_key",
        ),
        case(
            "no_statement",
            "New key and previousFingerprint = the held key, but no keyRotation.",
            &new_v,
            json!({"previousFingerprint": prev}),
            "no_statement",
        ),
        case(
            "statement_signed_by_another_key",
            "keyRotation naming the held key whose signature is by another key.",
            &new_v,
            json!({"previousFingerprint": prev, "keyRotation": forged}),
            "bad_signature",
        ),
        case(
            "statement_for_another_agent",
            "keyRotation signed by the held key for agent:elsewhere.example.",
            &new_v,
            json!({"previousFingerprint": prev, "keyRotation": for_other_agent}),
            "bad_signature",
        ),
        case(
            "statement_with_an_unknown_member",
            "keyRotation with a member the profile does not define.",
            &new_v,
            json!({"previousFingerprint": prev, "keyRotation": {"previousKey": held, "signature": statement["signature"], "note": "x"}}),
            "malformed",
        ),
    ]
}

fn vectors_json() -> String {
    serde_json::to_string_pretty(&vectors()).unwrap() + "\n"
}

#[test]
#[ignore = "writes proto/vectors/key-rotation.json; run with --ignored to regenerate"]
fn regenerate_rotation_vectors() {
    std::fs::write(VECTORS_PATH, vectors_json()).unwrap();
}

#[test]
fn rotation_vectors_match_the_generator_and_give_their_outcome() {
    let text = std::fs::read_to_string(VECTORS_PATH).unwrap();
    assert_eq!(
        text,
        vectors_json(),
        "proto/vectors/key-rotation.json is out of date: regenerate it if the profile changed on purpose"
    );
    let parsed: Vec<Vector> = serde_json::from_str(&text).unwrap();
    for v in parsed {
        let held = identity::decode_public_key(&v.held_key).unwrap();
        let mut doc = document(&held, json!({}));
        doc.identity = serde_json::from_value(v.identity.clone()).unwrap();
        assert_eq!(outcome(continuity(&doc, &held)), v.expect, "{}", v.name);
    }
}

#[test]
fn a_chain_of_rotations_is_followed_one_step_at_a_time_and_never_back() {
    let (k1, k2, k3) = (key(3), key(4), key(6));
    let step = |from: &SigningKey, to: &SigningKey| {
        document(
            &to.verifying_key(),
            json!({
                "previousFingerprint": identity::fingerprint(&from.verifying_key()),
                "keyRotation": sign(AGENT_ID, from, &to.verifying_key()),
            }),
        )
    };
    let two = step(&k1, &k2);
    let three = step(&k2, &k3);
    assert!(matches!(
        continuity(&two, &k1.verifying_key()),
        Ok(Continuity::Rotated { .. })
    ));
    assert!(matches!(
        continuity(&three, &k2.verifying_key()),
        Ok(Continuity::Rotated { .. })
    ));
    // Skipping a step, or going back to a replaced key, is no rotation.
    assert!(continuity(&three, &k1.verifying_key()).is_err());
    assert!(matches!(
        continuity(&two, &k3.verifying_key()),
        Err(RotationError::NotFromHeldKey { .. })
    ));
}
