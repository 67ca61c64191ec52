//! The last phase of an ADP crawl: proof that the agent holds its key. A
//! held proof stands over an unchanged document until the challenge is
//! due ([`standing`]); otherwise the [`Prover`] challenges the agent's
//! `endpoints.chat` over WebSocket ([`super::challenge`] carries the
//! frames) and judges the answer with [`crate::adp::handshake`].

use std::net::IpAddr;
use std::sync::Arc;

use ed25519_dalek::SigningKey;
use serde_json::Value;
use url::Url;

use super::challenge::Challenger;
use super::document::{Checked, Held};
use super::error::CrawlError;
use super::report::{Run, StepName};
use crate::adp::handshake::{self, HandshakeFrame};
use crate::adp::AgentDocument;
use crate::identity;
use crate::record;
use crate::trust::ChallengeProof;

/// The held proof that stands for this visit, recording a passed
/// `challenge` step that says why; `None` when the agent must be
/// challenged. An unchanged document keeps its proof until the challenge
/// is due; one whose agent says it is offline or in maintenance keeps it
/// regardless (its endpoint is not expected to answer).
pub(super) fn standing(
    held: Option<&Held>,
    document: &AgentDocument,
    run: &mut Run,
) -> Option<ChallengeProof> {
    let resting = matches!(
        document
            .availability
            .status
            .trim()
            .to_ascii_lowercase()
            .as_str(),
        "offline" | "maintenance"
    );
    let proof = held
        .filter(|h| run.report.visit.unchanged && (!h.challenge_due || resting))
        .and_then(|h| h.challenge.clone())?;
    run.pass(
        StepName::Challenge,
        0.0,
        format!(
            "the proof of {} stands: the document is unchanged{}",
            proof.unix_ms,
            if resting {
                " and the agent says it is not online"
            } else {
                " and the challenge is not due"
            }
        ),
    );
    Some(proof)
}

/// The document's chat endpoint, the URL a challenge goes to.
///
/// # Errors
/// [`CrawlError::ChallengeUnavailable`] when it gives none.
pub(super) fn chat_endpoint(document: &AgentDocument) -> Result<&str, CrawlError> {
    document
        .endpoints
        .get("chat")
        .and_then(Value::as_str)
        .ok_or(CrawlError::ChallengeUnavailable)
}

/// Challenges agents in this node's name. Cheap to clone.
#[derive(Clone)]
pub(super) struct Prover {
    /// The WebSocket side of the exchange.
    pub(super) challenger: Challenger,
    /// The node's key, which signs the mutual half.
    pub(super) key: Arc<SigningKey>,
    /// The id the challenge names (the node's peer id).
    pub(super) verifier: String,
}

impl Prover {
    /// Challenges `domain`'s agent at `url` (resolved and checked to
    /// `ips`) to sign a nonce bound to the `checked` document, and judges
    /// its answer: a signature by the document's key (or, without
    /// `publicKey.full`, by a key that hashes to the DNS fingerprint).
    pub(super) async fn challenge(
        &self,
        domain: &str,
        url: &Url,
        ips: &[IpAddr],
        checked: &Checked,
    ) -> Result<ChallengeProof, CrawlError> {
        let unix_ms = record::next_seq(None);
        let rand: [u8; 16] = rand::random();
        let nonce = handshake::nonce(&checked.digest, &self.verifier, unix_ms, &rand);
        let frame = handshake::challenge(&self.verifier, &self.key.verifying_key(), &nonce);
        let agent_id = identity::AgentId::of_domain(domain);
        let judge = |answer: HandshakeFrame| {
            let key = answer_key(checked, &answer)?;
            let answered =
                handshake::check_answer(&answer, &nonce, agent_id.as_str(), &self.verifier, &key)?;
            // An agent that sent a nonce of its own gets the mutual half.
            let reply = answered.agent_nonce.as_deref().map(|theirs| {
                handshake::completion(&self.verifier, &self.key, &nonce, agent_id.as_str(), theirs)
            });
            Ok((answered.signature, reply))
        };
        let signature = self.challenger.exchange(url, ips, &frame, judge).await?;
        Ok(ChallengeProof {
            verifier: self.verifier.clone(),
            unix_ms,
            rand: rand.to_vec(),
            signature,
        })
    }
}

/// The key an answer must be signed with ([`handshake::answer_key`]):
/// the document's `publicKey.full`, or, without it, the answer's own key
/// if it hashes to the fingerprint DNS published.
fn answer_key(
    checked: &Checked,
    answer: &HandshakeFrame,
) -> Result<ed25519_dalek::VerifyingKey, CrawlError> {
    let fingerprint = &checked.document.identity.public_key.fingerprint;
    handshake::answer_key(checked.key, fingerprint, answer).map_err(|e| {
        CrawlError::ChallengeFailed {
            message: match e {
                handshake::HandshakeError::WrongKey => {
                    "the answer's key does not hash to the DNS fingerprint".into()
                }
                handshake::HandshakeError::Malformed { reason } => reason,
                other => other.to_string(),
            },
        }
    })
}
