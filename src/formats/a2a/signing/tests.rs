use super::super::tests::{minimal_v1, python_hybrid};
use super::super::{parse_card, AgentCard};
use super::*;
use serde_json::json;

const KID: &str = "key-1";
const JKU: &str = "https://echo.example.com/.well-known/jwks.json";

fn ed_key() -> ed25519_dalek::SigningKey {
    ed25519_dalek::SigningKey::from_bytes(&[7; 32])
}

fn jwks() -> Value {
    jwks_of(&ed_key().verifying_key(), KID)
}

fn card_of(doc: &Value) -> AgentCard {
    parse_card(doc).expect("a card")
}

/// A signature entry with the protected header `header` (and 64 zero
/// bytes as signature), read back.
fn entry_with(header: Value) -> CardSignature {
    let mut doc = minimal_v1();
    doc["signatures"] = json!([{
        "protected": URL_SAFE_NO_PAD.encode(header.to_string()),
        "signature": URL_SAFE_NO_PAD.encode([0u8; 64]),
    }]);
    card_of(&doc).signatures.remove(0)
}

#[test]
fn an_eddsa_signature_verifies_and_a_changed_field_does_not() {
    let signed = sign_card(&minimal_v1(), &ed_key(), KID, Some(JKU));
    let card = card_of(&signed);
    assert_eq!(card.signatures.len(), 1);
    let sig = &card.signatures[0];
    assert_eq!(
        sig.header,
        ProtectedHeader {
            alg: "EdDSA".into(),
            kid: KID.into(),
            typ: Some("JOSE".into()),
            jku: Some(JKU.into()),
        }
    );
    assert_eq!(sig.signature.len(), 64);
    assert_eq!(verify_signature(&signed, sig, &jwks()), Ok(()));
    // The key it verified with, to compare with what DNS publishes.
    assert_eq!(
        signing_key(&signed, sig, &jwks()),
        Ok(SignerKey::Ed25519(ed_key().verifying_key().to_bytes()))
    );

    let mut changed = signed.clone();
    changed["skills"][0]["description"] = json!("Returns nothing.");
    assert_eq!(
        verify_signature(&changed, sig, &jwks()),
        Err(SignatureError::Bad)
    );
    let mut moved = signed.clone();
    moved["supportedInterfaces"][0]["url"] = json!("https://evil.example/a2a");
    assert_eq!(
        verify_signature(&moved, sig, &jwks()),
        Err(SignatureError::Bad)
    );
    // Another key under the same kid.
    let other = jwks_of(
        &ed25519_dalek::SigningKey::from_bytes(&[8; 32]).verifying_key(),
        KID,
    );
    assert_eq!(
        verify_signature(&signed, sig, &other),
        Err(SignatureError::Bad)
    );
}

#[test]
fn canonicalisation_ignores_member_order_and_empty_values() {
    let signed = sign_card(&minimal_v1(), &ed_key(), KID, None);
    let sig = card_of(&signed).signatures.remove(0);
    // The same card, members in reverse order, with empties added.
    let mut reordered = Map::new();
    for (k, v) in signed.as_object().unwrap().iter().rev() {
        reordered.insert(k.clone(), v.clone());
    }
    reordered.insert("iconUrl".into(), json!(""));
    reordered.insert("securitySchemes".into(), json!({}));
    reordered["capabilities"] = json!({"extensions": [], "streaming": null});
    reordered["skills"][0]["examples"] = json!([]);
    let reordered = Value::Object(reordered);
    assert_ne!(reordered.to_string(), signed.to_string());
    assert_eq!(signing_payload(&reordered), signing_payload(&signed));
    assert_eq!(verify_signature(&reordered, &sig, &jwks()), Ok(()));
    // A boolean is content, even false.
    let mut with_false = signed.clone();
    with_false["capabilities"]["streaming"] = json!(false);
    assert_eq!(
        verify_signature(&with_false, &sig, &jwks()),
        Err(SignatureError::Bad)
    );
}

#[test]
fn a_signature_over_the_literal_payload_is_accepted() {
    // A card with a REQUIRED empty member, signed as the spec's rule 1
    // reads: the empty description kept.
    let mut doc = minimal_v1();
    doc["description"] = json!("");
    let protected = URL_SAFE_NO_PAD.encode(r#"{"alg":"EdDSA","kid":"key-1","typ":"JOSE"}"#);
    let literal = signing_payload_literal(&doc);
    assert_ne!(literal, signing_payload(&doc));
    let signature = ed_key().sign(&signing_input(&protected, &literal));
    doc["signatures"] = json!([{"protected": protected,
        "signature": URL_SAFE_NO_PAD.encode(signature.to_bytes())}]);
    let sig = card_of(&doc).signatures.remove(0);
    assert_eq!(verify_signature(&doc, &sig, &jwks()), Ok(()));
}

#[test]
fn the_presence_form_keeps_required_empties_only() {
    let doc = json!({"name": "", "version": "", "iconUrl": "", "documentationUrl": null,
        "supportedInterfaces": [{"url": "u", "protocolBinding": "", "protocolVersion": "",
            "tenant": ""}],
        "capabilities": {"extensions": [{"uri": "e", "required": false, "params": {}}],
            "streaming": false},
        "skills": [{"id": "s", "name": "", "description": "", "tags": [], "examples": []}],
        "securitySchemes": {
            "tls": {"mtlsSecurityScheme": {}},
            "code": {"oauth2SecurityScheme": {"flows": {"authorizationCode": {
                "authorizationUrl": "a", "tokenUrl": "t", "scopes": {},
                "refreshUrl": "", "pkceRequired": false}}}}},
        "securityRequirements": [],
        "x-extra": {"list": [], "flag": false}});
    let expected = json!({"name": "", "version": "",
        "supportedInterfaces": [{"url": "u", "protocolBinding": "", "protocolVersion": ""}],
        "capabilities": {"extensions": [{"uri": "e"}], "streaming": false},
        "skills": [{"id": "s", "name": "", "description": "", "tags": []}],
        "securitySchemes": {
            "tls": {"mtlsSecurityScheme": {}},
            "code": {"oauth2SecurityScheme": {"flows": {"authorizationCode": {
                "authorizationUrl": "a", "tokenUrl": "t", "scopes": {}}}}}},
        "x-extra": {"flag": false}});
    assert_eq!(
        String::from_utf8(signing_payload_literal(&doc)).unwrap(),
        serde_jcs::to_string(&expected).unwrap()
    );
}

#[test]
fn a_signature_over_the_card_as_sent_is_accepted() {
    let mut doc = minimal_v1();
    doc["capabilities"] = json!({"extensions": []});
    let protected = URL_SAFE_NO_PAD.encode(r#"{"alg":"EdDSA","kid":"key-1"}"#);
    let whole = serde_jcs::to_vec(&doc).unwrap();
    assert_ne!(whole, signing_payload_literal(&doc));
    let signature = ed_key().sign(&signing_input(&protected, &whole));
    doc["signatures"] = json!([{"protected": protected,
        "signature": URL_SAFE_NO_PAD.encode(signature.to_bytes())}]);
    let sig = card_of(&doc).signatures.remove(0);
    assert_eq!(sig.header.typ, None);
    assert_eq!(verify_signature(&doc, &sig, &jwks()), Ok(()));
}

#[test]
fn a_hybrid_served_card_verifies_over_its_v1_members() {
    // Signed as a 1.0 card; served with the 0.3 members merged in.
    let mut v1 = python_hybrid();
    let obj = v1.as_object_mut().unwrap();
    for key in COMPAT_MEMBERS {
        obj.remove(key);
    }
    v1["securitySchemes"]["bearer"] = json!({"httpAuthSecurityScheme": {"scheme": "Bearer"}});
    v1["capabilities"]["extensions"][0]
        .as_object_mut()
        .unwrap()
        .remove("required");
    let signed = sign_card(&v1, &ed_key(), KID, None);
    let mut served = python_hybrid();
    served["signatures"] = signed["signatures"].clone();
    assert_ne!(signing_payload(&served), signing_payload(&signed));
    assert_eq!(signing_payload_v1(&served), signing_payload(&signed));
    let sig = card_of(&served).signatures.remove(0);
    assert_eq!(verify_signature(&served, &sig, &jwks()), Ok(()));
    // The 1.0 members stay covered.
    served["supportedInterfaces"][0]["url"] = json!("http://evil.example");
    assert_eq!(
        verify_signature(&served, &sig, &jwks()),
        Err(SignatureError::Bad)
    );
    // A 0.x card is not projected.
    let legacy = json!({"url": "https://x", "name": "n"});
    assert_eq!(signing_payload_v1(&legacy), signing_payload(&legacy));
}

#[test]
fn a_second_signature_is_appended_and_both_verify() {
    let second = ed25519_dalek::SigningKey::from_bytes(&[9; 32]);
    let once = sign_card(&minimal_v1(), &ed_key(), KID, None);
    let twice = sign_card(&once, &second, "key-2", None);
    let card = card_of(&twice);
    assert_eq!(card.signatures.len(), 2);
    assert_eq!(
        verify_signature(&twice, &card.signatures[0], &jwks()),
        Ok(())
    );
    let jwks2 = jwks_of(&second.verifying_key(), "key-2");
    assert_eq!(
        verify_signature(&twice, &card.signatures[1], &jwks2),
        Ok(())
    );
    assert_eq!(sign_card(&json!([1]), &ed_key(), KID, None), json!([1]));
}

#[test]
fn an_unknown_kid_or_unusable_jwks_is_no_key() {
    let signed = sign_card(&minimal_v1(), &ed_key(), "key-9", None);
    let sig = card_of(&signed).signatures.remove(0);
    let missing = SignatureError::NoKey("key-9".into());
    assert_eq!(missing.reason(), Reason::CardSignatureUnchecked);
    let no_key = Err(missing);
    assert_eq!(verify_signature(&signed, &sig, &jwks()), no_key);
    assert_eq!(
        verify_signature(&signed, &sig, &json!({"keys": {}})),
        no_key
    );
    assert_eq!(verify_signature(&signed, &sig, &json!([])), no_key);
    let mut short = jwks_of(&ed_key().verifying_key(), "key-9");
    short["keys"][0]["x"] = json!("AAAA");
    assert_eq!(verify_signature(&signed, &sig, &short), no_key);
}

#[test]
fn a_key_that_disagrees_with_the_header_is_bad() {
    let signed = sign_card(&minimal_v1(), &ed_key(), KID, None);
    let sig = card_of(&signed).signatures.remove(0);
    for (member, value) in [
        ("alg", "ES256"),
        ("crv", "X25519"),
        ("kty", "EC"),
        ("use", "enc"),
    ] {
        let mut keys = jwks();
        keys["keys"][0][member] = json!(value);
        assert_eq!(
            verify_signature(&signed, &sig, &keys),
            Err(SignatureError::Bad),
            "{member}: {value}"
        );
    }
    // A fitting key later in the set with the same kid is found.
    let mut keys = jwks();
    let good = keys["keys"][0].clone();
    keys["keys"][0]["kty"] = json!("RSA");
    keys["keys"].as_array_mut().unwrap().push(good);
    assert_eq!(verify_signature(&signed, &sig, &keys), Ok(()));
    assert_eq!(SignatureError::Bad.reason(), Reason::CardSignatureBad);
}

#[test]
fn none_hmac_and_other_algorithms_are_unsupported() {
    let doc = minimal_v1();
    for alg in ["none", "HS256", "RS256", "eddsa"] {
        let sig = entry_with(json!({"alg": alg, "kid": KID, "typ": "JOSE"}));
        let err = verify_signature(&doc, &sig, &jwks()).unwrap_err();
        assert_eq!(err, SignatureError::UnsupportedAlgorithm(alg.into()));
        assert_eq!(err.reason(), Reason::CardSignatureUnchecked);
    }
}

#[test]
fn a_protected_header_that_does_not_decode_makes_the_card_invalid() {
    let mut doc = minimal_v1();
    let sig = URL_SAFE_NO_PAD.encode([0u8; 64]);
    for (protected, expected) in [
        (
            "not base64!".to_owned(),
            "/signatures/0/protected: not a base64url JSON header",
        ),
        (
            URL_SAFE_NO_PAD.encode("[1]"),
            "/signatures/0/protected: the protected header is not an object",
        ),
        (
            URL_SAFE_NO_PAD.encode(r#"{"alg":"EdDSA"}"#),
            "/signatures/0/protected/kid: required",
        ),
        (
            URL_SAFE_NO_PAD.encode(r#"{"kid":"k"}"#),
            "/signatures/0/protected/alg: required",
        ),
    ] {
        doc["signatures"] = json!([{"protected": protected, "signature": sig}]);
        let err = parse_card(&doc).unwrap_err();
        assert_eq!(err.reason, Reason::CardInvalid);
        assert!(err.message.starts_with(expected), "{}", err.message);
    }
    doc["signatures"] = json!([{"protected": URL_SAFE_NO_PAD.encode(r#"{"alg":"EdDSA","kid":"k"}"#),
        "signature": "++=="}]);
    assert!(parse_card(&doc)
        .unwrap_err()
        .message
        .starts_with("/signatures/0/signature: not base64url"));
}

#[test]
fn an_es256_signature_verifies_and_a_flipped_bit_does_not() {
    use p256::ecdsa::signature::Signer as _;
    let key = p256::ecdsa::SigningKey::from_bytes(&[0x11; 32].into()).unwrap();
    let point = key.verifying_key().to_encoded_point(false);
    let jwks = json!({"keys": [{"kty": "EC", "crv": "P-256", "alg": "ES256", "kid": "ec-1",
        "x": URL_SAFE_NO_PAD.encode(point.x().unwrap()),
        "y": URL_SAFE_NO_PAD.encode(point.y().unwrap())}]});
    let mut doc = minimal_v1();
    let protected = URL_SAFE_NO_PAD.encode(r#"{"alg":"ES256","typ":"JOSE","kid":"ec-1"}"#);
    let signature: p256::ecdsa::Signature =
        key.sign(&signing_input(&protected, &signing_payload(&doc)));
    let mut bytes = signature.to_bytes().to_vec();
    assert_eq!(bytes.len(), 64);
    doc["signatures"] = json!([{"protected": protected,
        "signature": URL_SAFE_NO_PAD.encode(&bytes)}]);
    let sig = card_of(&doc).signatures.remove(0);
    assert_eq!(verify_signature(&doc, &sig, &jwks), Ok(()));
    assert_eq!(signing_key(&doc, &sig, &jwks), Ok(SignerKey::P256));

    bytes[40] ^= 0x01;
    let flipped = CardSignature {
        signature: bytes,
        ..sig.clone()
    };
    assert_eq!(
        verify_signature(&doc, &flipped, &jwks),
        Err(SignatureError::Bad)
    );
    // A DER-shaped (longer) signature is not R||S.
    let der = CardSignature {
        signature: signature.to_der().as_bytes().to_vec(),
        ..sig
    };
    assert_eq!(
        verify_signature(&doc, &der, &jwks),
        Err(SignatureError::Bad)
    );
}

#[test]
fn the_spec_canonicalisation_example_holds() {
    // A2A 1.0.1 §8.4.1: input and canonical output.
    let input: Value = serde_json::from_str(
        r#"{"name":"Example Agent","description":"","capabilities":{"streaming":false,"pushNotifications":false,"extensions":[]},"skills":[]}"#,
    )
    .unwrap();
    assert_eq!(
        String::from_utf8(signing_payload_literal(&input)).unwrap(),
        r#"{"capabilities":{"pushNotifications":false,"streaming":false},"description":"","name":"Example Agent","skills":[]}"#
    );
    // What the SDKs sign for it: every empty value gone.
    assert_eq!(
        String::from_utf8(signing_payload(&input)).unwrap(),
        r#"{"capabilities":{"pushNotifications":false,"streaming":false},"name":"Example Agent"}"#
    );
    // `signatures` is never part of the payload; JCS number and key order.
    let doc = json!({"signatures": [1], "b": 1.0, "a": [1e21, "\u{20ac}"], "\u{e9}": true});
    assert_eq!(
        String::from_utf8(signing_payload_literal(&doc)).unwrap(),
        "{\"a\":[1e+21,\"\u{20ac}\"],\"b\":1,\"\u{e9}\":true}"
    );
}
