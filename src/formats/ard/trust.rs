//! An ARD entry's `trustManifest` (ARD v0.91 §4.5; the member shapes of
//! the ARD CDDL): read, bound, and held to the publisher-authority binding
//! of §4.5.1. Its detached JWS is parsed here and checked by the crawler,
//! which fetches the key ([`key_source`] says where from); nothing here
//! touches the network.
//!
//! What a trust manifest proves on its own: nothing. Its identity,
//! attestations and provenance are the publisher's claims, kept as
//! written in the stored entry. A signature that verifies with a key the
//! publisher serves shows the manifest is the publisher's, as the HTTPS
//! fetch of the catalog already does; it is reported and earns no level.

use serde_json::{Map, Value};

use crate::formats::a2a::{self, ProtectedHeader};
use crate::formats::FormatError;
use crate::trust::Reason;

/// Most `attestations` (and most `provenance` links) read.
pub const MAX_CLAIMS: usize = 32;
/// Longest `identity`, attestation `uri`, or provenance `sourceId`, in
/// characters.
pub const MAX_TEXT_CHARS: usize = 2048;
/// Longest `signature` (a compact detached JWS), in characters.
pub const MAX_SIGNATURE_CHARS: usize = 4096;

/// A read trust manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustManifest {
    /// `identity`: a SPIFFE ID, a DID, an https URI or a domain.
    pub identity: String,
    /// The domain `identity` names (see [`identity_domain`]).
    pub identity_domain: String,
    /// `identityType`, as written.
    pub identity_type: Option<String>,
    /// `attestations`.
    pub attestations: Vec<Attestation>,
    /// `provenance`.
    pub provenance: Vec<Provenance>,
    /// `signature`, parsed.
    pub signature: Option<DetachedJws>,
}

/// One attestation: a claim and where its document is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attestation {
    /// `type` (`SOC2-Type2`, ...).
    pub kind: String,
    /// `uri` of the attestation document.
    pub uri: String,
    /// `mediaType` of that document.
    pub media_type: Option<String>,
    /// `digest` of that document.
    pub digest: Option<String>,
}

/// One provenance link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Provenance {
    /// `relation`: `derivedFrom`, `publishedFrom` or `copiedFrom`.
    pub relation: String,
    /// `sourceId`.
    pub source_id: String,
}

/// A compact detached JWS (`header..signature`, RFC 7515 appendix F).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DetachedJws {
    /// The protected header, base64url as sent.
    pub protected: String,
    /// The protected header, read.
    pub header: ProtectedHeader,
    /// The signature bytes.
    pub signature: Vec<u8>,
}

impl TrustManifest {
    /// One line for a crawl report: the identity and the claims.
    pub fn summary(&self) -> String {
        let kinds: Vec<&str> = self.attestations.iter().map(|a| a.kind.as_str()).collect();
        format!(
            "identity {} (domain {}), {} attestation(s){}{}, {} provenance link(s), claimed by the publisher",
            self.identity,
            self.identity_domain,
            kinds.len(),
            if kinds.is_empty() { "" } else { ": " },
            kinds.join(", "),
            self.provenance.len(),
        )
    }
}

/// Reads the `trustManifest` `raw` of the entry at `at` (a JSON pointer)
/// whose identifier's publisher is `publisher` (canonical).
///
/// # Errors
/// [`Reason::CatalogEntryInvalid`] when it is not an object, has no
/// string `identity`, breaks a bound, has a malformed attestation,
/// provenance link or signature, or when its identity's domain does not
/// align with the publisher (§4.5.1: the same domain, or one inside the
/// other).
pub fn parse(raw: &Value, at: &str, publisher: &str) -> Result<TrustManifest, FormatError> {
    let at = format!("{at}/trustManifest");
    let invalid = |member: &str, what: &str| {
        FormatError::new(Reason::CatalogEntryInvalid, format!("{at}{member}: {what}"))
    };
    let Some(manifest) = raw.as_object() else {
        return Err(invalid("", "not an object"));
    };
    let identity = text(manifest, "identity", &at, MAX_TEXT_CHARS)?
        .ok_or_else(|| invalid("/identity", "missing: ARD requires the identity"))?;
    let identity_domain = identity_domain(&identity).ok_or_else(|| {
        invalid(
            "/identity",
            "names no domain (a did:web, spiffe://, https:// identity or a domain name is needed to bind it to the publisher)",
        )
    })?;
    if !aligned(&identity_domain, publisher) {
        return Err(invalid(
            "/identity",
            &format!(
                "its domain {identity_domain:?} does not align with the identifier's publisher {publisher:?}"
            ),
        ));
    }
    let attestations = list(manifest, "attestations", &at)?
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let at = format!("{at}/attestations/{i}");
            let a = a.as_object().ok_or_else(|| {
                FormatError::new(Reason::CatalogEntryInvalid, format!("{at}: not an object"))
            })?;
            let required = |key: &str| {
                text(a, key, &at, MAX_TEXT_CHARS)?.ok_or_else(|| {
                    FormatError::new(Reason::CatalogEntryInvalid, format!("{at}/{key}: missing"))
                })
            };
            Ok(Attestation {
                kind: required("type")?,
                uri: required("uri")?,
                media_type: text(a, "mediaType", &at, MAX_TEXT_CHARS)?,
                digest: text(a, "digest", &at, MAX_TEXT_CHARS)?,
            })
        })
        .collect::<Result<Vec<_>, FormatError>>()?;
    let provenance = list(manifest, "provenance", &at)?
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let at = format!("{at}/provenance/{i}");
            let p = p.as_object().ok_or_else(|| {
                FormatError::new(Reason::CatalogEntryInvalid, format!("{at}: not an object"))
            })?;
            let relation = text(p, "relation", &at, 64)?;
            let Some(relation @ ("derivedFrom" | "publishedFrom" | "copiedFrom")) =
                relation.as_deref()
            else {
                return Err(FormatError::new(
                    Reason::CatalogEntryInvalid,
                    format!("{at}/relation: not derivedFrom, publishedFrom or copiedFrom"),
                ));
            };
            let source_id = text(p, "sourceId", &at, MAX_TEXT_CHARS)?.ok_or_else(|| {
                FormatError::new(
                    Reason::CatalogEntryInvalid,
                    format!("{at}/sourceId: missing"),
                )
            })?;
            Ok(Provenance {
                relation: relation.to_owned(),
                source_id,
            })
        })
        .collect::<Result<Vec<_>, FormatError>>()?;
    let signature = text(manifest, "signature", &at, MAX_SIGNATURE_CHARS)?
        .map(|s| parse_detached(&s).map_err(|why| invalid("/signature", &why)))
        .transpose()?;
    Ok(TrustManifest {
        identity,
        identity_domain,
        identity_type: text(manifest, "identityType", &at, 64)?,
        attestations,
        provenance,
        signature,
    })
}

/// The domain an identity names, lower-cased: `did:web:{host}[:path]`
/// (a `%3A`-encoded port dropped), `spiffe://{trust domain}/...`,
/// `https://{host}/...`, or a bare domain name. `None` for any other
/// identity (`did:key`, `did:ion`, ...), which names no domain.
pub fn identity_domain(identity: &str) -> Option<String> {
    let identity = identity.trim();
    let host = if let Some(rest) = strip_prefix_ci(identity, "did:web:") {
        let host = rest.split(':').next().unwrap_or_default();
        let lower = host.to_ascii_lowercase();
        lower.split("%3a").next().unwrap_or_default().to_owned()
    } else if let Some(rest) = strip_prefix_ci(identity, "spiffe://") {
        rest.split('/')
            .next()
            .unwrap_or_default()
            .to_ascii_lowercase()
    } else if strip_prefix_ci(identity, "https://").is_some() {
        url::Url::parse(identity)
            .ok()?
            .host_str()?
            .to_ascii_lowercase()
    } else if identity.contains(':') || identity.contains('/') {
        return None;
    } else {
        identity.to_ascii_lowercase()
    };
    let host = host.trim_end_matches('.').to_owned();
    let label_ok = |l: &str| {
        !l.is_empty() && l.len() <= 63 && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
    };
    (host.contains('.') && host.len() <= 253 && host.split('.').all(label_ok)).then_some(host)
}

/// Whether an identity's domain and a publisher align: the same domain,
/// or one a subdomain of the other (an organisation's tree).
pub fn aligned(identity_domain: &str, publisher: &str) -> bool {
    let inside = |a: &str, b: &str| {
        a.len() > b.len() && a.ends_with(b) && a[..a.len() - b.len()].ends_with('.')
    };
    identity_domain == publisher
        || inside(identity_domain, publisher)
        || inside(publisher, identity_domain)
}

/// What a trust manifest's signature signs: the manifest without its
/// `signature` member, canonicalised with RFC 8785 (JCS).
pub fn signing_payload(manifest: &Value) -> Vec<u8> {
    let mut unsigned = manifest.as_object().cloned().unwrap_or_default();
    unsigned.remove("signature");
    serde_jcs::to_vec(&Value::Object(unsigned))
        .expect("a serde_json::Value has finite numbers and string keys, which JCS always encodes")
}

/// `manifest` with a detached `EdDSA` JWS by `key` over
/// [`signing_payload`] as its `signature`. For tests and the testbed.
pub fn sign(
    manifest: &Value,
    key: &ed25519_dalek::SigningKey,
    kid: &str,
    jku: Option<&str>,
) -> Value {
    let mut signed = manifest.as_object().cloned().unwrap_or_default();
    let jws = a2a::sign_detached(&signing_payload(manifest), key, kid, jku);
    signed.insert("signature".into(), Value::String(jws));
    Value::Object(signed)
}

/// Where the key of a manifest's signature is published, in the order
/// the crawler tries: the header's `jku` when it is an https URL on the
/// publisher's domain (or under it), else the `did.json` of a `did:web`
/// identity (`https://{host}/.well-known/did.json`, or
/// `https://{host}/{path}/did.json`).
///
/// # Errors
/// Why no key can be looked for: a `jku` elsewhere (the signer naming its
/// own trust root), or no `jku` and an identity that is not `did:web`.
pub fn key_source(manifest: &TrustManifest, publisher: &str) -> Result<KeySource, String> {
    let Some(jws) = &manifest.signature else {
        return Err("the manifest is not signed".into());
    };
    if let Some(jku) = &jws.header.jku {
        let url = url::Url::parse(jku).map_err(|e| format!("jku {jku:?}: {e}"))?;
        let host = url.host_str().unwrap_or_default().to_ascii_lowercase();
        let under = host == publisher || host.ends_with(&format!(".{publisher}"));
        if url.scheme() != "https" || !under {
            return Err(format!(
                "the key set {jku} is not on the publisher's domain {publisher} over HTTPS"
            ));
        }
        return Ok(KeySource::Jwks(url));
    }
    let rest = strip_prefix_ci(manifest.identity.trim(), "did:web:")
        .ok_or("the signature names no key set (jku) and the identity is not a did:web")?;
    let mut parts = rest.split(':');
    let host = parts
        .next()
        .unwrap_or_default()
        .replace("%3A", ":")
        .replace("%3a", ":");
    let path: Vec<&str> = parts.collect();
    let text = if path.is_empty() {
        format!("https://{host}/.well-known/did.json")
    } else {
        format!("https://{host}/{}/did.json", path.join("/"))
    };
    let url = url::Url::parse(&text).map_err(|e| format!("{text}: {e}"))?;
    Ok(KeySource::DidWeb(url))
}

/// Where a signature's key is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    /// A JWKS (`{"keys": [...]}`).
    Jwks(url::Url),
    /// A `did:web` DID document, whose verification methods carry
    /// `publicKeyJwk`s.
    DidWeb(url::Url),
}

/// The keys of a DID document as a JWKS: each `verificationMethod` with a
/// `publicKeyJwk`, under its `id` and under the id's fragment (a JWS `kid`
/// names either).
pub fn did_document_keys(doc: &Value) -> Value {
    let methods = doc
        .get("verificationMethod")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let keys: Vec<Value> = methods
        .iter()
        .take(MAX_CLAIMS)
        .filter_map(|m| {
            let id = m.get("id")?.as_str()?;
            let jwk = m.get("publicKeyJwk")?.as_object()?;
            let fragment = id.rsplit_once('#').map(|(_, f)| f);
            let named = |kid: &str| {
                let mut jwk = jwk.clone();
                jwk.insert("kid".into(), Value::String(kid.to_owned()));
                Value::Object(jwk)
            };
            Some(std::iter::once(named(id)).chain(fragment.map(named)))
        })
        .flatten()
        .collect();
    serde_json::json!({ "keys": keys })
}

/// Checks `manifest`'s (the raw member's) signature `jws` with `jwks`.
///
/// # Errors
/// As [`a2a::verify_jws`].
pub fn verify(
    manifest: &Value,
    jws: &DetachedJws,
    jwks: &Value,
) -> Result<(), a2a::SignatureError> {
    a2a::verify_jws(
        &jws.protected,
        &jws.header,
        &signing_payload(manifest),
        &jws.signature,
        jwks,
    )
}

/// Reads a compact detached JWS: three dot-separated parts, the middle
/// one empty.
fn parse_detached(jws: &str) -> Result<DetachedJws, String> {
    use base64::Engine as _;
    let mut parts = jws.trim().split('.');
    let (Some(protected), Some(""), Some(signature), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("not a detached JWS (header..signature)".into());
    };
    let header = a2a::parse_protected(protected)?;
    let signature = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(signature)
        .map_err(|_| "the signature part is not base64url".to_owned())?;
    Ok(DetachedJws {
        protected: protected.to_owned(),
        header,
        signature,
    })
}

fn strip_prefix_ci<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    (s.len() >= prefix.len() && s[..prefix.len()].eq_ignore_ascii_case(prefix))
        .then(|| &s[prefix.len()..])
}

/// The string member `key`, bounded to `max` characters.
fn text(
    object: &Map<String, Value>,
    key: &str,
    at: &str,
    max: usize,
) -> Result<Option<String>, FormatError> {
    match object.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.chars().count() <= max => Ok(Some(s.trim().to_owned())),
        Some(Value::String(_)) => Err(FormatError::new(
            Reason::CatalogEntryInvalid,
            format!("{at}/{key}: longer than {max} characters"),
        )),
        Some(_) => Err(FormatError::new(
            Reason::CatalogEntryInvalid,
            format!("{at}/{key}: not a string"),
        )),
    }
}

/// The array member `key` (empty when absent), at most [`MAX_CLAIMS`] long.
fn list<'a>(
    object: &'a Map<String, Value>,
    key: &str,
    at: &str,
) -> Result<&'a [Value], FormatError> {
    match object.get(key) {
        None | Some(Value::Null) => Ok(&[]),
        Some(Value::Array(items)) if items.len() <= MAX_CLAIMS => Ok(items),
        Some(Value::Array(_)) => Err(FormatError::new(
            Reason::CatalogEntryInvalid,
            format!("{at}/{key}: more than {MAX_CLAIMS} items"),
        )),
        Some(_) => Err(FormatError::new(
            Reason::CatalogEntryInvalid,
            format!("{at}/{key}: not an array"),
        )),
    }
}
