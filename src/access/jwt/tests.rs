use std::io::Write;
use std::path::PathBuf;

use base64::Engine;
use ed25519_dalek::pkcs8::EncodePrivateKey;
use ed25519_dalek::SigningKey;
use jsonwebtoken::{EncodingKey, Header};
use serde_json::json;

use super::*;
use crate::access::Scope;

const ISSUER: &str = "https://issuer.test";
const AUDIENCE: &str = "agentmesh";

struct Issuer {
    _dir: tempfile::TempDir,
    jwks: PathBuf,
}

fn jwk(kid: &str, key: &SigningKey) -> Value {
    let x = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(key.verifying_key().as_bytes());
    json!({"kty": "OKP", "crv": "Ed25519", "x": x, "kid": kid, "alg": "EdDSA", "use": "sig"})
}

impl Issuer {
    fn new(keys: &[Value]) -> Issuer {
        let dir = tempfile::tempdir().unwrap();
        let jwks = dir.path().join("jwks.json");
        let me = Issuer { _dir: dir, jwks };
        me.publish(keys);
        me
    }

    fn publish(&self, keys: &[Value]) {
        let tmp = self.jwks.with_extension("tmp");
        let mut f = std::fs::File::create(&tmp).unwrap();
        f.write_all(json!({ "keys": keys }).to_string().as_bytes())
            .unwrap();
        std::fs::rename(tmp, &self.jwks).unwrap();
    }

    fn verifier(&self) -> JwtVerifier {
        JwtVerifier::new(JwtConfig {
            issuer: ISSUER.into(),
            audience: AUDIENCE.into(),
            jwks_url: None,
            jwks_file: Some(self.jwks.clone()),
            ca_files: vec![],
            scope_claim: "scope".into(),
            leeway: Duration::from_secs(5),
            refresh: Duration::from_secs(900),
        })
        .unwrap()
    }
}

fn now() -> u64 {
    crate::record::unix_now()
}

fn claims(sub: &str, scope: &str) -> Value {
    json!({"iss": ISSUER, "aud": AUDIENCE, "sub": sub, "exp": now() + 300, "scope": scope})
}

fn sign(kid: Option<&str>, key: &SigningKey, claims: &Value) -> String {
    let mut header = Header::new(Algorithm::EdDSA);
    header.kid = kid.map(str::to_owned);
    let der = key.to_pkcs8_der().unwrap();
    jsonwebtoken::encode(&header, claims, &EncodingKey::from_ed_der(der.as_bytes())).unwrap()
}

fn key(seed: u8) -> SigningKey {
    SigningKey::from_bytes(&[seed; 32])
}

#[tokio::test]
async fn a_token_from_the_issuer_grants_its_agentmesh_scopes() {
    let issuer = Issuer::new(&[jwk("k1", &key(1))]);
    let v = issuer.verifier();
    let token = sign(
        Some("k1"),
        &key(1),
        &claims("alice", "openid read register"),
    );
    assert_eq!(
        v.verify(&token).await.unwrap(),
        TokenGrant {
            subject: "alice".into(),
            scopes: Scopes::from_iter([Scope::Read, Scope::Register]),
        }
    );
    // The scp form: a list.
    let mut c = claims("bob", "");
    c["scope"] = json!(["crawl", "other"]);
    let token = sign(Some("k1"), &key(1), &c);
    assert_eq!(
        v.verify(&token).await.unwrap().scopes,
        Scopes::from_iter([Scope::Crawl])
    );
}

#[tokio::test]
async fn wrong_issuer_audience_expiry_subject_or_signature_is_refused() {
    let issuer = Issuer::new(&[jwk("k1", &key(1))]);
    let v = issuer.verifier();
    let mut cases: Vec<(&str, Value, SigningKey)> = Vec::new();
    let mut c = claims("alice", "read");
    c["iss"] = json!("https://other.test");
    cases.push(("issuer", c, key(1)));
    let mut c = claims("alice", "read");
    c["aud"] = json!("someone-else");
    cases.push(("audience", c, key(1)));
    let mut c = claims("alice", "read");
    c["exp"] = json!(now() - 60);
    cases.push(("expired", c, key(1)));
    let mut c = claims("alice", "read");
    c.as_object_mut().unwrap().remove("exp");
    cases.push(("no expiry", c, key(1)));
    let mut c = claims("alice", "read");
    c.as_object_mut().unwrap().remove("sub");
    cases.push(("no subject", c, key(1)));
    let mut c = claims("alice", "read");
    c["nbf"] = json!(now() + 600);
    cases.push(("not yet valid", c, key(1)));
    cases.push(("another key", claims("alice", "read"), key(2)));
    for (what, c, signer) in cases {
        let token = sign(Some("k1"), &signer, &c);
        assert!(
            matches!(v.verify(&token).await, Err(JwtError::Invalid(_))),
            "{what}: {:?}",
            v.verify(&token).await
        );
    }
}

#[tokio::test]
async fn hmac_none_and_malformed_tokens_are_refused() {
    // A JWKS that (wrongly) publishes a symmetric key: a token signed
    // with it must still be refused.
    let secret = b"a-shared-secret-that-is-public-now";
    let oct = json!({"kty": "oct", "kid": "h", "k": base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(secret)});
    let issuer = Issuer::new(&[jwk("k1", &key(1)), oct]);
    let v = issuer.verifier();
    let mut header = Header::new(Algorithm::HS256);
    header.kid = Some("h".into());
    let hs = jsonwebtoken::encode(
        &header,
        &claims("mallory", "admin"),
        &EncodingKey::from_secret(secret),
    )
    .unwrap();
    assert!(matches!(v.verify(&hs).await, Err(JwtError::Algorithm(_))));

    let b64 = |v: &Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    let none = format!(
        "{}.{}.",
        b64(&json!({"alg": "none", "kid": "k1"})),
        b64(&claims("mallory", "admin"))
    );
    assert!(v.verify(&none).await.is_err());
    for bad in ["a.b.c", "", "...", &"x".repeat(MAX_TOKEN_BYTES + 1)] {
        assert!(
            matches!(v.verify(bad).await, Err(JwtError::Malformed(_))),
            "{bad:.20}"
        );
    }
}

#[tokio::test]
async fn a_rotated_key_is_fetched_when_a_token_names_it_and_unknown_ids_are_refused() {
    let issuer = Issuer::new(&[jwk("k1", &key(1))]);
    let v = issuer.verifier();
    let first = sign(Some("k1"), &key(1), &claims("alice", "read"));
    v.verify(&first).await.unwrap();
    // The issuer rotates to k2; the node fetches again when a token
    // names it.
    issuer.publish(&[jwk("k1", &key(1)), jwk("k2", &key(2))]);
    let second = sign(Some("k2"), &key(2), &claims("alice", "read"));
    v.verify(&second).await.unwrap();
    // A made-up id is refused, and does not make the node fetch again
    // within MIN_REFETCH (the issuer now serves a k3 that it would find).
    issuer.publish(&[jwk("k3", &key(3))]);
    let made_up = sign(Some("k3"), &key(3), &claims("alice", "read"));
    assert!(matches!(
        v.verify(&made_up).await,
        Err(JwtError::UnknownKey(_))
    ));
}

#[tokio::test]
async fn a_jwks_without_a_usable_key_is_refused_with_its_reason() {
    let issuer = Issuer::new(&[json!({"kty": "oct", "k": "c2VjcmV0"})]);
    let err = issuer.verifier().fetch_now().await.unwrap_err();
    assert!(
        err.to_string().contains("no asymmetric signing key"),
        "{err}"
    );
    let issuer = Issuer::new(&[jwk("k1", &key(1))]);
    std::fs::write(&issuer.jwks, b"{\"keys\": 5}").unwrap();
    assert!(matches!(
        issuer.verifier().fetch_now().await,
        Err(JwksError::Invalid { .. })
    ));
}
