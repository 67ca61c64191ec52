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
use crate::trust::Reason;

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
    signing_key(doc, sig, jwks).map(drop)
}

/// The public key a card's signature verified with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignerKey {
    /// An Ed25519 key (`EdDSA`): its 32 bytes, comparable with the key an
    /// AID record's `k` publishes.
    Ed25519([u8; 32]),
    /// A P-256 key (`ES256`).
    P256,
}

/// As [`verify_signature`], answering the key the signature verified
/// with (so a caller can ask whether DNS anchors it).
///
/// # Errors
/// As [`verify_signature`].
pub fn signing_key(
    doc: &Value,
    sig: &CardSignature,
    jwks: &Value,
) -> Result<SignerKey, SignatureError> {
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
        Ok(key.public())
    } else {
        Err(SignatureError::Bad)
    }
}

/// Checks a JWS over `payload` whose protected header (base64url as sent)
/// is `protected` and names `alg` and `kid`, against the keys in `jwks`,
/// under the same key rules as [`verify_signature`]: for signatures over
/// something other than a card (an ARD trust manifest's detached JWS).
///
/// # Errors
/// As [`verify_signature`].
pub fn verify_jws(
    protected: &str,
    header: &ProtectedHeader,
    payload: &[u8],
    signature: &[u8],
    jwks: &Value,
) -> Result<(), SignatureError> {
    let alg = Alg::parse(&header.alg)?;
    let key = find_key(jwks, &header.kid, alg)?;
    if key.verifies(&signing_input(protected, payload), signature) {
        Ok(())
    } else {
        Err(SignatureError::Bad)
    }
}

/// A detached `EdDSA` JWS (`header..signature`, RFC 7515 appendix F) by
/// `key` over `payload`, its header naming `kid` and `jku` when given.
/// For tests and the testbed.
pub fn sign_detached(
    payload: &[u8],
    key: &ed25519_dalek::SigningKey,
    kid: &str,
    jku: Option<&str>,
) -> String {
    let mut header = Map::new();
    header.insert("alg".into(), "EdDSA".into());
    header.insert("kid".into(), kid.into());
    if let Some(jku) = jku {
        header.insert("jku".into(), jku.into());
    }
    let header = serde_json::to_vec(&header).expect("a JSON map of strings always serialises");
    let protected = URL_SAFE_NO_PAD.encode(header);
    let signature = key.sign(&signing_input(&protected, payload));
    format!(
        "{protected}..{}",
        URL_SAFE_NO_PAD.encode(signature.to_bytes())
    )
}

/// The protected header `protected` (base64url) decoded and read: `alg`
/// and `kid` required, `typ` and `jku` when present.
///
/// # Errors
/// A message saying what is wrong with it.
pub fn parse_protected(protected: &str) -> Result<ProtectedHeader, String> {
    let header = URL_SAFE_NO_PAD
        .decode(protected)
        .ok()
        .filter(|bytes| bytes.len() <= MAX_PROTECTED_BYTES)
        .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
        .ok_or("the protected header is not base64url JSON of at most 1024 bytes")?;
    let member = |name: &str| -> Result<Option<String>, String> {
        match header.get(name) {
            None => Ok(None),
            Some(Value::String(s)) if s.len() <= MAX_PROTECTED_BYTES => Ok(Some(s.clone())),
            Some(_) => Err(format!("the protected header's {name} is not a string")),
        }
    };
    let required =
        |name: &str| member(name)?.ok_or_else(|| format!("the protected header has no {name}"));
    if header.get("b64") == Some(&Value::Bool(false)) || header.get("crit").is_some() {
        return Err("the protected header asks for b64 or crit, which are not supported".into());
    }
    Ok(ProtectedHeader {
        alg: required("alg")?,
        kid: required("kid")?,
        typ: member("typ")?,
        jku: member("jku")?,
    })
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
    fn public(&self) -> SignerKey {
        match self {
            Self::Ed25519(key) => SignerKey::Ed25519(key.to_bytes()),
            Self::P256(_) => SignerKey::P256,
        }
    }

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
mod tests;
