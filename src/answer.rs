//! Signed answers (docs/answers.md): an API answer wrapped with what lets
//! a client check it offline: the request it answers, the node's log
//! checkpoint, and for each agent the signed record held, its inclusion
//! proof in the node's transparency log, and the evidence its trust
//! level rests on. This module is pure: the envelope's shape, sealing a
//! payload with the node key, and [`check`](check::check), the offline
//! verifier `agentmesh verify-answer` runs. The API builds the payload
//! (`api/answers.rs`).

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64U;
use base64::Engine as _;
use ed25519_dalek::{Signer as _, SigningKey};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::tlog::RecordProof;

pub mod check;
mod dnssec;

pub use check::{check, CheckOptions, Failure, Report};
pub(crate) use dnssec::chain_stands;

/// The media type of a signed answer.
pub const MEDIA_TYPE: &str = "application/agentmesh-answer+json";

/// What an answer's signature covers before the payload bytes.
pub const SIGNING_PREFIX: &[u8] = b"agentmesh/answer/v1\n";

/// The envelope format's version.
pub const VERSION: u32 = 1;

/// The most bytes of a signed answer a checker reads (the envelope of an
/// 8 MiB payload, in base64url).
pub const MAX_ANSWER_BYTES: usize = 12 * 1024 * 1024;

/// The most agents one signed answer proves.
pub const MAX_RESULTS: usize = 1000;

/// The envelope: the payload's bytes, and the node's signature over them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Envelope {
    /// [`VERSION`].
    pub agentmesh_answer: u32,
    /// The payload's JSON bytes, base64url without padding.
    pub payload: String,
    /// The node's Ed25519 key, base64url without padding.
    pub signer: String,
    /// Ed25519 over [`SIGNING_PREFIX`] and the payload bytes, base64url.
    pub signature: String,
}

/// What an answer carries (docs/answers.md#the-payload).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Payload {
    /// The payload format's version, 1.
    pub v: u32,
    /// Who answered.
    pub node: NodeInfo,
    /// When, Unix seconds.
    pub time: u64,
    /// The request answered.
    pub request: RequestInfo,
    /// [`RequestInfo::hash`] of `request`.
    pub request_hash: String,
    /// The node's log checkpoint, a signed note.
    pub checkpoint: String,
    /// The keys whose evidence the node counts beside its own, base64url.
    pub trusted_signers: Vec<String>,
    /// The plain answer.
    pub answer: Value,
    /// One per agent of the answer, in its order.
    pub results: Vec<ResultProof>,
}

/// The answering node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeInfo {
    /// Its libp2p peer id.
    pub peer_id: String,
    /// Its transparency log's origin line.
    pub log_origin: String,
}

/// A request, as an answer names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestInfo {
    /// `GET`, `POST`.
    pub method: String,
    /// The path and query as sent, without the `proof` parameter.
    pub target: String,
    /// Hex SHA-256 of the body's bytes.
    pub body_sha256: String,
}

impl RequestInfo {
    /// The request `method target` with `body`.
    pub fn new(method: &str, target: &str, body: &[u8]) -> Self {
        Self {
            method: method.to_owned(),
            target: target.to_owned(),
            body_sha256: hex::encode(Sha256::digest(body)),
        }
    }

    /// Hex SHA-256 of `method || " " || target || "\n" || body_sha256`.
    pub fn hash(&self) -> String {
        let mut h = Sha256::new();
        h.update(self.method.as_bytes());
        h.update(b" ");
        h.update(self.target.as_bytes());
        h.update(b"\n");
        h.update(self.body_sha256.as_bytes());
        hex::encode(h.finalize())
    }
}

/// One agent of an answer and its proofs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResultProof {
    /// The agent's id.
    pub id: String,
    /// The signed record held, standard base64 of its encoded bytes.
    pub record: String,
    /// Its index in the node's log, when the checkpoint's tree holds it.
    pub log_index: Option<u64>,
    /// Its RFC 6962 audit path to the checkpoint's root, standard base64.
    pub inclusion: Option<Vec<String>>,
}

impl ResultProof {
    /// Agent `id`'s result: its record's encoded `bytes`, and its index
    /// and audit path in the node's log when the checkpoint's tree holds
    /// it.
    pub fn new(id: String, bytes: &[u8], proof: Option<(u64, RecordProof)>) -> Self {
        Self {
            id,
            record: base64::engine::general_purpose::STANDARD.encode(bytes),
            log_index: proof.as_ref().map(|(i, _)| *i),
            inclusion: proof.map(|(_, p)| p.iter().map(crate::tlog::encode_hash).collect()),
        }
    }
}

/// The agents of an answer to a request for `target`, in its order, each
/// with the trust level it is shown with (where the answer shows one):
/// an array's elements, a resolution's `candidates`, one object with an
/// `id`, or else, for `/agents/{id}`, the agent the target names.
pub fn answer_agents(answer: &Value, target: &str) -> Vec<(String, Option<String>)> {
    let items: Vec<&Value> = match answer {
        Value::Array(items) => items.iter().collect(),
        Value::Object(o) => match o.get("candidates") {
            Some(Value::Array(items)) => items.iter().collect(),
            _ if o.get("id").is_some_and(Value::is_string) => vec![answer],
            _ => {
                return agent_of_target(target)
                    .into_iter()
                    .map(|id| (id, None))
                    .collect()
            }
        },
        _ => Vec::new(),
    };
    items
        .into_iter()
        .filter_map(|item| {
            let id = item.get("id")?.as_str()?.to_owned();
            let level = item
                .pointer("/trust/level")
                .and_then(Value::as_str)
                .map(str::to_owned);
            Some((id, level))
        })
        .collect()
}

/// The agent id a target `/agents/{id}` names (percent-decoded).
fn agent_of_target(target: &str) -> Option<String> {
    let path = target.split('?').next()?;
    let id = path.strip_prefix("/agents/")?;
    if id.is_empty() || id.contains('/') {
        return None;
    }
    percent_encoding::percent_decode_str(id)
        .decode_utf8()
        .ok()
        .map(|s| s.into_owned())
}

/// `target` (a path and query) without its `proof` parameters, as an
/// answer names its request, and whether one of them asked for a signed
/// answer (`proof=true` or `proof=1`).
pub fn without_proof(target: &str) -> (String, bool) {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let mut asked = false;
    let kept: Vec<&str> = query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .filter(|pair| {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            if name != "proof" {
                return true;
            }
            asked |= value == "true" || value == "1";
            false
        })
        .collect();
    if kept.is_empty() {
        (path.to_owned(), asked)
    } else {
        (format!("{path}?{}", kept.join("&")), asked)
    }
}

/// Seals `payload` (its JSON bytes) with the node key.
pub fn seal(payload: &[u8], key: &SigningKey) -> Envelope {
    let mut signed = SIGNING_PREFIX.to_vec();
    signed.extend_from_slice(payload);
    Envelope {
        agentmesh_answer: VERSION,
        payload: B64U.encode(payload),
        signer: B64U.encode(key.verifying_key().as_bytes()),
        signature: B64U.encode(key.sign(&signed).to_bytes()),
    }
}

#[cfg(test)]
mod tests;
