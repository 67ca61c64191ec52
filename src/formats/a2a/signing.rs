//! JWS signatures on A2A Agent Cards (A2A 1.0 §8.4): each `signatures[]`
//! entry is a flattened JWS with a detached payload, the card itself
//! canonicalised with RFC 8785 (JCS). The signing input is
//! `ASCII(protected) || '.' || BASE64URL(payload)` (not RFC 7797).
//!
//! The spec's rule for the payload (drop defaults, keep required members)
//! and what both reference SDKs sign (every null, empty string, empty
//! array and empty object dropped, booleans kept) differ, so a verifier
//! rebuilds the payload several ways ([`signing_payload`],
//! [`signing_payload_literal`], [`signing_payload_v1`], and the card as
//! sent) and accepts a signature over any of them: each is a function of
//! the received card, and each covers every member agentmesh reads. Only `EdDSA` (Ed25519) and `ES256` (P-256)
//! are checked; the key comes from a JWKS the caller fetched (never trust
//! a `jku` on its own say-so: that is the caller's policy).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use ed25519_dalek::Signer as _;
use p256::ecdsa::signature::Verifier as _;
use serde_json::{Map, Value};

use super::{invalid, Long, Obj};
use crate::formats::FormatError;
use crate::verify::Reason;

/// Largest decoded `protected` header, bytes.
const MAX_PROTECTED_BYTES: usize = 1024;

/// One entry of a card's `signatures`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CardSignature {
    /// The protected header, base64url as sent (it is part of the signing
    /// input byte for byte).
    pub protected: String,
    /// The protected header, decoded.
    pub header: ProtectedHeader,
    /// The signature bytes (base64url-decoded).
    pub signature: Vec<u8>,
}

/// The members of a signature's protected header this code reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtectedHeader {
    /// `alg` (required).
    pub alg: String,
    /// `kid` (required: it names the key).
    pub kid: String,
    /// `typ` (SHOULD be `JOSE`; not checked).
    pub typ: Option<String>,
    /// `jku`: where the signer says its JWKS is.
    pub jku: Option<String>,
}

/// Why a signature was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SignatureError {
    /// The signature does not verify under the key its `kid` names, over
    /// any form of the payload (or that key is not a key for its `alg`).
    #[error("the card signature does not verify")]
    Bad,
    /// An `alg` this code does not check (`none`, `HS256`, `RS256`, ...).
    #[error("unsupported signature algorithm {0:?}")]
    UnsupportedAlgorithm(String),
    /// No usable key with this `kid` in the JWKS.
    #[error("no usable key {0:?} in the JWKS")]
    NoKey(String),
}

impl SignatureError {
    /// The reason code: [`Reason::CardSignatureBad`] for a bad signature,
    /// [`Reason::CardSignatureUnchecked`] when it could not be checked.
    pub fn reason(&self) -> Reason {
        match self {
            Self::Bad => Reason::CardSignatureBad,
            Self::UnsupportedAlgorithm(_) | Self::NoKey(_) => Reason::CardSignatureUnchecked,
        }
    }
}

/// Reads one `signatures[]` entry: `protected` and `signature` required,
/// `protected` decoding to a JSON object with `alg` and `kid` strings.
pub(super) fn parse_signature(entry: &Obj<'_>) -> Result<CardSignature, FormatError> {
    let protected = entry.string("protected", Long::Refuse)?;
    let at = entry.pointer("protected");
    let header = URL_SAFE_NO_PAD
        .decode(&protected)
        .ok()
        .filter(|bytes| bytes.len() <= MAX_PROTECTED_BYTES)
        .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
        .ok_or_else(|| invalid(format!("{at}: not a base64url JSON header")))?;
    let header = Obj::new(&header, at, "the protected header")?;
    let header = ProtectedHeader {
        alg: header.string("alg", Long::Refuse)?,
        kid: header.string("kid", Long::Refuse)?,
        typ: header.opt_string("typ", Long::Refuse)?,
        jku: header.opt_string("jku", Long::Refuse)?,
    };
    let signature = entry.string("signature", Long::Refuse)?;
    let signature = URL_SAFE_NO_PAD
        .decode(&signature)
        .map_err(|_| invalid(format!("{}: not base64url", entry.pointer("signature"))))?;
    Ok(CardSignature {
        protected,
        header,
        signature,
    })
}

/// The payload both reference SDKs sign: the card without `signatures`,
/// with every `null`, empty string, empty array and empty object removed,
/// recursively (a container emptied by that is removed too; booleans and
/// numbers are kept), canonicalised with RFC 8785.
pub fn signing_payload(doc: &Value) -> Vec<u8> {
    jcs(&prune(&without_signatures(doc)).unwrap_or_else(|| Value::Object(Map::new())))
}

/// The payload as the spec's rule reads (A2A 1.0 §8.4.1 rule 1, field
/// presence): the card without `signatures` and nulls; an empty string,
/// array or object is removed unless the 1.0 proto marks the member
/// REQUIRED there (`"description": ""` and `"skills": []` stay, an empty
/// `extensions` goes) or it is a security scheme's oneof member; `false`
/// is removed only for the plain (not `optional`) booleans
/// `capabilities.extensions[].required` and `pkceRequired`. Array entries
/// are kept. Then RFC 8785.
pub fn signing_payload_literal(doc: &Value) -> Vec<u8> {
    jcs(&presence_form(&without_signatures(doc), Place::Card))
}

/// The payload an SDK signs when it serves more than it signed: for a 1.0
/// card (`supportedInterfaces`), the 0.3 compatibility members a 1.0
/// server adds are dropped first (the top-level `url`,
/// `preferredTransport`, `protocolVersion`, `additionalInterfaces`,
/// `security` and `supportsAuthenticatedExtendedCard`; a skill's
/// `security`; a scheme's members beside its 1.0 wrapper), and so are the
/// `false` values of the plain booleans protobuf JSON never writes
/// (`capabilities.extensions[].required`, `pkceRequired`); then as
/// [`signing_payload`]. None of the dropped members is read by
/// [`super::parse_card`] for a 1.0 card, so a signature over this form
/// still covers every member agentmesh uses.
pub fn signing_payload_v1(doc: &Value) -> Vec<u8> {
    let mut card = without_signatures(doc);
    if let Some(obj) = card.as_object_mut() {
        if obj.get("supportedInterfaces").is_some_and(Value::is_array) {
            project_v1(obj);
        }
    }
    jcs(&prune(&card).unwrap_or_else(|| Value::Object(Map::new())))
}

/// The 0.3 members a 1.0 card may carry beside its own.
const COMPAT_MEMBERS: [&str; 6] = [
    "url",
    "preferredTransport",
    "protocolVersion",
    "additionalInterfaces",
    "security",
    "supportsAuthenticatedExtendedCard",
];

/// The 1.0 `SecurityScheme` oneof members.
const SCHEME_WRAPPERS: [&str; 5] = [
    "apiKeySecurityScheme",
    "httpAuthSecurityScheme",
    "oauth2SecurityScheme",
    "openIdConnectSecurityScheme",
    "mtlsSecurityScheme",
];

fn project_v1(card: &mut Map<String, Value>) {
    for key in COMPAT_MEMBERS {
        card.remove(key);
    }
    for skill in objects(card.get_mut("skills")) {
        skill.remove("security");
    }
    let extensions = card
        .get_mut("capabilities")
        .and_then(Value::as_object_mut)
        .and_then(|c| c.get_mut("extensions"));
    for extension in objects(extensions) {
        remove_false(extension, "required");
    }
    let Some(schemes) = card
        .get_mut("securitySchemes")
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    for scheme in schemes.values_mut().filter_map(Value::as_object_mut) {
        if SCHEME_WRAPPERS.iter().any(|w| scheme.contains_key(*w)) {
            scheme.retain(|key, _| SCHEME_WRAPPERS.contains(&key.as_str()));
        }
        let code_flow = scheme
            .get_mut("oauth2SecurityScheme")
            .and_then(|s| s.get_mut("flows"))
            .and_then(|f| f.get_mut("authorizationCode"))
            .and_then(Value::as_object_mut);
        if let Some(flow) = code_flow {
            remove_false(flow, "pkceRequired");
        }
    }
}

/// The objects of an array member (none when it is absent or not an array).
fn objects(value: Option<&mut Value>) -> Vec<&mut Map<String, Value>> {
    match value {
        Some(Value::Array(items)) => items.iter_mut().filter_map(Value::as_object_mut).collect(),
        _ => Vec::new(),
    }
}

fn remove_false(obj: &mut Map<String, Value>, key: &str) {
    if obj.get(key) == Some(&Value::Bool(false)) {
        obj.remove(key);
    }
}

/// Where a member sits in a 1.0 card, for the spec's field-presence rule.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    Card,
    Interface,
    Provider,
    Skill,
    Capabilities,
    Extension,
    Schemes,
    Scheme,
    ApiKey,
    HttpAuth,
    OAuth2,
    OpenIdConnect,
    Flows,
    AuthorizationCode,
    ClientCredentials,
    DeviceCode,
    Other,
}

impl Place {
    /// The members kept even when empty: the REQUIRED ones (proto
    /// `field_behavior`), and a scheme's set oneof member.
    fn kept_when_empty(self) -> &'static [&'static str] {
        match self {
            Self::Card => &[
                "name",
                "description",
                "supportedInterfaces",
                "version",
                "capabilities",
                "defaultInputModes",
                "defaultOutputModes",
                "skills",
            ],
            Self::Interface => &["url", "protocolBinding", "protocolVersion"],
            Self::Provider => &["url", "organization"],
            Self::Skill => &["id", "name", "description", "tags"],
            Self::Scheme => &SCHEME_WRAPPERS,
            Self::ApiKey => &["location", "name"],
            Self::HttpAuth => &["scheme"],
            Self::OAuth2 => &["flows"],
            Self::OpenIdConnect => &["openIdConnectUrl"],
            Self::AuthorizationCode => &["authorizationUrl", "tokenUrl", "scopes"],
            Self::ClientCredentials => &["tokenUrl", "scopes"],
            Self::DeviceCode => &["deviceAuthorizationUrl", "tokenUrl", "scopes"],
            Self::Capabilities | Self::Extension | Self::Schemes | Self::Flows | Self::Other => &[],
        }
    }

    /// The plain booleans, whose `false` is the default and is omitted.
    fn plain_booleans(self) -> &'static [&'static str] {
        match self {
            Self::Extension => &["required"],
            Self::AuthorizationCode => &["pkceRequired"],
            _ => &[],
        }
    }

    /// The place of member `key`'s value (of its entries, for an array).
    fn child(self, key: &str) -> Self {
        match (self, key) {
            (Self::Card, "supportedInterfaces") => Self::Interface,
            (Self::Card, "provider") => Self::Provider,
            (Self::Card, "skills") => Self::Skill,
            (Self::Card, "capabilities") => Self::Capabilities,
            (Self::Card, "securitySchemes") => Self::Schemes,
            (Self::Capabilities, "extensions") => Self::Extension,
            (Self::Schemes, _) => Self::Scheme,
            (Self::Scheme, "apiKeySecurityScheme") => Self::ApiKey,
            (Self::Scheme, "httpAuthSecurityScheme") => Self::HttpAuth,
            (Self::Scheme, "oauth2SecurityScheme") => Self::OAuth2,
            (Self::Scheme, "openIdConnectSecurityScheme") => Self::OpenIdConnect,
            (Self::OAuth2, "flows") => Self::Flows,
            (Self::Flows, "authorizationCode") => Self::AuthorizationCode,
            (Self::Flows, "clientCredentials") => Self::ClientCredentials,
            (Self::Flows, "deviceCode") => Self::DeviceCode,
            _ => Self::Other,
        }
    }
}

/// `value` (at `place`) under the spec's field-presence rule; see
/// [`signing_payload_literal`].
fn presence_form(value: &Value, place: Place) -> Value {
    let empty = |v: &Value| match v {
        Value::String(s) => s.is_empty(),
        Value::Array(items) => items.is_empty(),
        Value::Object(members) => members.is_empty(),
        _ => false,
    };
    match value {
        Value::Object(members) => Value::Object(
            members
                .iter()
                .filter(|(k, v)| {
                    let default_false =
                        **v == Value::Bool(false) && place.plain_booleans().contains(&k.as_str());
                    !v.is_null() && !default_false
                })
                .map(|(k, v)| (k, presence_form(v, place.child(k))))
                .filter(|(k, v)| !empty(v) || place.kept_when_empty().contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v))
                .collect(),
        ),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .filter(|v| !v.is_null())
                .map(|v| presence_form(v, place))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// The card without `signatures`, canonicalised, nothing else changed: what
/// a signer that canonicalises the file it serves signs.
fn as_sent_payload(doc: &Value) -> Vec<u8> {
    jcs(&without_signatures(doc))
}

fn without_signatures(doc: &Value) -> Value {
    let mut card = doc.clone();
    if let Some(obj) = card.as_object_mut() {
        obj.remove("signatures");
    }
    card
}

/// `value` without nulls and empty strings, arrays and objects, bottom up;
/// `None` when nothing is left.
fn prune(value: &Value) -> Option<Value> {
    match value {
        Value::Null => None,
        Value::String(s) if s.is_empty() => None,
        Value::Array(items) => {
            let kept: Vec<Value> = items.iter().filter_map(prune).collect();
            (!kept.is_empty()).then_some(Value::Array(kept))
        }
        Value::Object(members) => {
            let kept: Map<String, Value> = members
                .iter()
                .filter_map(|(k, v)| prune(v).map(|v| (k.clone(), v)))
                .collect();
            (!kept.is_empty()).then_some(Value::Object(kept))
        }
        other => Some(other.clone()),
    }
}

fn jcs(value: &Value) -> Vec<u8> {
    serde_jcs::to_vec(value)
        .expect("a serde_json::Value has finite numbers and string keys, which JCS always encodes")
}

/// Checks one signature of the card `doc` against the keys in `jwks`
/// (`{"keys": [...]}`): the key whose `kid` is the header's, of the type
/// the header's `alg` needs (`EdDSA`: `kty` OKP, `crv` Ed25519; `ES256`:
/// `kty` EC, `crv` P-256, signature R‖S in 64 bytes), its own `alg` and
/// `use` (when given) agreeing. The signature is accepted over any of the
/// payload forms.
///
/// # Errors
/// [`SignatureError::UnsupportedAlgorithm`] for any other `alg`;
/// [`SignatureError::NoKey`] when no key has the `kid` or its key material
/// does not decode; [`SignatureError::Bad`] when the signature does not
/// verify, or the key with that `kid` is not a key for the `alg`.
pub fn verify_signature(
    doc: &Value,
    sig: &CardSignature,
    jwks: &Value,
) -> Result<(), SignatureError> {
    let alg = Alg::parse(&sig.header.alg)?;
    let key = find_key(jwks, &sig.header.kid, alg)?;
    let mut payloads = vec![
        signing_payload(doc),
        signing_payload_v1(doc),
        signing_payload_literal(doc),
        as_sent_payload(doc),
    ];
    payloads.sort();
    payloads.dedup();
    let verified = payloads
        .iter()
        .any(|payload| key.verifies(&signing_input(&sig.protected, payload), &sig.signature));
    if verified {
        Ok(())
    } else {
        Err(SignatureError::Bad)
    }
}

fn signing_input(protected: &str, payload: &[u8]) -> Vec<u8> {
    format!("{protected}.{}", URL_SAFE_NO_PAD.encode(payload)).into_bytes()
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Alg {
    EdDsa,
    Es256,
}

impl Alg {
    fn parse(alg: &str) -> Result<Self, SignatureError> {
        match alg {
            "EdDSA" => Ok(Self::EdDsa),
            "ES256" => Ok(Self::Es256),
            other => Err(SignatureError::UnsupportedAlgorithm(other.to_owned())),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::EdDsa => "EdDSA",
            Self::Es256 => "ES256",
        }
    }

    /// The JWK `kty` and `crv` this algorithm needs.
    fn key_type(self) -> (&'static str, &'static str) {
        match self {
            Self::EdDsa => ("OKP", "Ed25519"),
            Self::Es256 => ("EC", "P-256"),
        }
    }
}

enum Key {
    Ed25519(ed25519_dalek::VerifyingKey),
    P256(p256::ecdsa::VerifyingKey),
}

impl Key {
    fn verifies(&self, input: &[u8], signature: &[u8]) -> bool {
        match self {
            Self::Ed25519(key) => ed25519_dalek::Signature::from_slice(signature)
                .is_ok_and(|s| key.verify_strict(input, &s).is_ok()),
            Self::P256(key) => p256::ecdsa::Signature::from_slice(signature)
                .is_ok_and(|s| key.verify(input, &s).is_ok()),
        }
    }
}

/// The key `kid` of `jwks`, for `alg`.
fn find_key(jwks: &Value, kid: &str, alg: Alg) -> Result<Key, SignatureError> {
    let no_key = || SignatureError::NoKey(kid.to_owned());
    let keys = jwks
        .get("keys")
        .and_then(Value::as_array)
        .ok_or_else(no_key)?;
    let mut named = keys
        .iter()
        .filter(|k| k.get("kid").and_then(Value::as_str) == Some(kid))
        .peekable();
    if named.peek().is_none() {
        return Err(no_key());
    }
    let jwk = named
        .find(|jwk| fits(jwk, alg))
        .ok_or(SignatureError::Bad)?;
    let coordinate = |name: &str| -> Option<Vec<u8>> {
        let bytes = URL_SAFE_NO_PAD.decode(jwk.get(name)?.as_str()?).ok()?;
        (bytes.len() == 32).then_some(bytes)
    };
    let key = match alg {
        Alg::EdDsa => coordinate("x")
            .and_then(|x| <[u8; 32]>::try_from(x).ok())
            .and_then(|x| ed25519_dalek::VerifyingKey::from_bytes(&x).ok())
            .map(Key::Ed25519),
        Alg::Es256 => coordinate("x")
            .zip(coordinate("y"))
            .and_then(|(x, y)| {
                let point = p256::EncodedPoint::from_affine_coordinates(
                    x.as_slice().into(),
                    y.as_slice().into(),
                    false,
                );
                p256::ecdsa::VerifyingKey::from_encoded_point(&point).ok()
            })
            .map(Key::P256),
    };
    key.ok_or_else(no_key)
}

/// Whether a JWK's own `kty`, `crv`, `alg` and `use` agree with `alg`.
fn fits(jwk: &Value, alg: Alg) -> bool {
    let member = |name: &str| jwk.get(name).and_then(Value::as_str);
    let (kty, crv) = alg.key_type();
    member("kty") == Some(kty)
        && member("crv") == Some(crv)
        && member("alg").is_none_or(|a| a == alg.name())
        && member("use").is_none_or(|u| u == "sig")
}

/// The card `doc` with one `EdDSA` signature by `key` appended to its
/// `signatures` (protected header `alg`, `typ` `JOSE`, `kid`, and `jku`
/// when given), over [`signing_payload`]. A `doc` that is not an object is
/// returned unchanged. For tests and the testbed.
pub fn sign_card(
    doc: &Value,
    key: &ed25519_dalek::SigningKey,
    kid: &str,
    jku: Option<&str>,
) -> Value {
    let mut card = doc.clone();
    let Some(obj) = card.as_object_mut() else {
        return card;
    };
    let mut header = Map::new();
    header.insert("alg".into(), "EdDSA".into());
    header.insert("typ".into(), "JOSE".into());
    header.insert("kid".into(), kid.into());
    if let Some(jku) = jku {
        header.insert("jku".into(), jku.into());
    }
    let header = serde_json::to_vec(&header).expect("a JSON map of strings always serialises");
    let protected = URL_SAFE_NO_PAD.encode(header);
    let signature = key.sign(&signing_input(&protected, &signing_payload(doc)));
    let entry = serde_json::json!({
        "protected": protected,
        "signature": URL_SAFE_NO_PAD.encode(signature.to_bytes()),
    });
    match obj.get_mut("signatures") {
        Some(Value::Array(signatures)) => signatures.push(entry),
        _ => {
            obj.insert("signatures".into(), Value::Array(vec![entry]));
        }
    }
    card
}

/// A JWKS holding `key` as an Ed25519 JWK (`kty` OKP, `crv` Ed25519,
/// `alg` EdDSA, `use` sig) under `kid`.
pub fn jwks_of(key: &ed25519_dalek::VerifyingKey, kid: &str) -> Value {
    serde_json::json!({"keys": [{
        "kty": "OKP",
        "crv": "Ed25519",
        "alg": "EdDSA",
        "use": "sig",
        "kid": kid,
        "x": URL_SAFE_NO_PAD.encode(key.as_bytes()),
    }]})
}

#[cfg(test)]
mod tests {
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
}
