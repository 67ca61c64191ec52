//! Calling an ADP agent over its chat WebSocket (docs/protocol.md#gateway-adp):
//! the agent's `endpoints.chat` (wss only) opened under the crawler's
//! rules, the handshake the crawler's challenge does (the agent proves the
//! key this node counts for it), then one `message` frame signed by the
//! node's key, `payload` `{"capability", "input"}`, and one signed reply.
//!
//! What the agent answers becomes the call's outcome:
//! - a reply whose `payload` is `{"output": X}`: X;
//! - `{"error": {"code", "message"}}`: the agent's refusal, 400;
//! - a handshake that does not prove the key: `key_not_proven`, nothing of
//!   the call sent;
//! - a reply unsigned or not signed by that key: `bad_signature`, nothing
//!   of it passed on;
//! - a frame that is not a message frame (not JSON, another type) or a
//!   payload of neither shape: `not_protocol`; one too large, about
//!   another request, or the socket closed before a reply: `agent_failed`.
//!
//! The frames are [`crate::adp::handshake`]'s and [`crate::adp::message`]'s;
//! the socket is [`crate::crawl::challenge::upgrade`]'s.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use ed25519_dalek::{SigningKey, VerifyingKey};
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::{Error as WsError, Message as WsMessage};
use url::Url;

use super::error::GatewayError;
use super::forward::Upstream;
use super::refusal_body;
use crate::adp::handshake::{self, HandshakeFrame, MAX_FRAME_BYTES};
use crate::adp::message::{self, MessageError};
use crate::adp::AgentDocument;
use crate::crawl::challenge::{self, Socket};
use crate::crawl::CrawlError;
use crate::record;

/// The status an agent's error object is passed on with.
pub const REFUSAL_STATUS: u16 = 400;

/// Who the node is on the chat WebSocket: the id its challenges name (its
/// peer id) and the key that signs its frames.
#[derive(Clone)]
pub struct NodeSigner {
    /// The node's id, as its challenges name it.
    pub id: String,
    /// The node's key.
    pub key: Arc<SigningKey>,
}

impl std::fmt::Debug for NodeSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeSigner")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// What the node holds for the agent that the call is checked against.
#[derive(Debug)]
pub struct Held<'a> {
    /// The agent's id (`agent:{domain}`).
    pub agent: &'a str,
    /// Its document.
    pub document: &'a AgentDocument,
    /// The document's digest (bound into the handshake's nonce).
    pub doc_sha256: &'a [u8],
}

/// The ids of the document's capabilities offered over `chat`.
pub fn chat_capabilities(doc: &AgentDocument) -> Vec<String> {
    doc.capabilities
        .iter()
        .filter(|c| {
            c.interfaces
                .iter()
                .flatten()
                .any(|i| i.eq_ignore_ascii_case("chat"))
        })
        .map(|c| c.id.clone())
        .collect()
}

/// The capability a call names (or the document's only chat one).
///
/// # Errors
/// [`GatewayError::UnknownOperation`] naming the chat capabilities.
pub fn capability(doc: &AgentDocument, name: Option<&str>) -> Result<String, GatewayError> {
    let ids = chat_capabilities(doc);
    match (name, ids.as_slice()) {
        (Some(n), _) if ids.iter().any(|i| i == n) => Ok(n.to_owned()),
        (None, [only]) => Ok(only.clone()),
        (asked, _) => Err(GatewayError::UnknownOperation {
            asked: asked.map(str::to_owned),
            known: ids,
        }),
    }
}

/// Calls `capability` of the agent `held` at `url` (resolved and checked
/// to `ips`) with `input`, in the name of `signer`; the agent's output.
/// The caller holds the deadline.
///
/// # Errors
/// [`GatewayError`] as the module documentation maps it;
/// [`GatewayError::Unreachable`] when no address connects.
pub async fn call(
    upstream: &Upstream,
    signer: &NodeSigner,
    url: &Url,
    ips: &[IpAddr],
    held: &Held<'_>,
    capability: &str,
    input: &Value,
) -> Result<Value, GatewayError> {
    let mut ws = connect(upstream, url, ips).await?;
    let key = prove(&mut ws, signer, held).await?;
    let (request, id) = message::request(&signer.id, held.agent, capability, input, &signer.key);
    ws.send(WsMessage::text(request.to_string()))
        .await
        .map_err(|e| GatewayError::Unreachable(format!("sending the message: {e}")))?;
    let reply = next_data(&mut ws)
        .await
        .map_err(|e| too_large_or(e, upstream))?;
    // Whatever the reply, the node is done with the socket.
    let _ = ws.close(None).await;
    let Some(reply) = reply else {
        return Err(GatewayError::AgentFailed(
            "the agent closed the socket before answering".into(),
        ));
    };
    let reply =
        message::read_reply(&reply, &key, held.agent, &signer.id, &id).map_err(|e| match e {
            MessageError::Unsigned | MessageError::BadSignature => {
                GatewayError::BadSignature(e.to_string())
            }
            MessageError::Malformed(_) => not_adp(&e.to_string()),
            other => GatewayError::AgentFailed(other.to_string()),
        })?;
    outcome(reply.payload)
}

/// A reply's payload as the call's outcome.
///
/// # Errors
/// [`GatewayError::AgentRefused`] for an error object,
/// [`GatewayError::NotProtocol`] for a payload of neither shape.
pub fn outcome(payload: Value) -> Result<Value, GatewayError> {
    let Value::Object(mut payload) = payload else {
        return Err(not_adp("the reply's payload is not an object"));
    };
    if let Some(output) = payload.remove("output") {
        return Ok(output);
    }
    match payload.remove("error") {
        Some(Value::Object(error)) => {
            let text = |name: &str| {
                error
                    .get(name)
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .unwrap_or_default()
            };
            let told = json!({"error": {"code": text("code"), "message": text("message")}});
            Err(GatewayError::AgentRefused {
                status: REFUSAL_STATUS,
                body: refusal_body(told.to_string().as_bytes()),
            })
        }
        _ => Err(not_adp(
            "the reply's payload has neither an output nor an error object",
        )),
    }
}

/// The socket, on the first of `ips` that connects within
/// `gateway.connect_timeout`.
async fn connect(upstream: &Upstream, url: &Url, ips: &[IpAddr]) -> Result<Socket, GatewayError> {
    let port = url.port_or_known_default().unwrap_or(443);
    let largest = upstream.max_response_bytes.max(MAX_FRAME_BYTES);
    let mut last = "no address".to_owned();
    for ip in ips {
        let addr = SocketAddr::new(*ip, port);
        let stream =
            match tokio::time::timeout(upstream.connect_timeout, TcpStream::connect(addr)).await {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => {
                    last = e.to_string();
                    continue;
                }
                Err(_) => {
                    last = format!("connect to {addr} timed out");
                    continue;
                }
            };
        return challenge::upgrade(
            url,
            stream,
            upstream.tls.clone(),
            &upstream.user_agent,
            largest,
        )
        .await
        .map_err(|e| match e {
            CrawlError::BadUrl { .. } => GatewayError::EndpointRefused(e.to_string()),
            other => GatewayError::Unreachable(other.to_string()),
        });
    }
    Err(GatewayError::Unreachable(format!("{url}: {last}")))
}

/// The handshake, as the crawler's challenge does it: the agent signs a
/// nonce bound to the held document with the key this node counts for it
/// (its document's `publicKey.full`, or one that hashes to its
/// fingerprint); a mutual handshake is completed. The key it proved.
async fn prove(
    ws: &mut Socket,
    signer: &NodeSigner,
    held: &Held<'_>,
) -> Result<VerifyingKey, GatewayError> {
    let unproven = |why: String| GatewayError::KeyNotProven(why);
    let rand: [u8; 16] = rand::random();
    let nonce = handshake::nonce(held.doc_sha256, &signer.id, record::next_seq(None), &rand);
    let frame = handshake::challenge(&signer.id, &signer.key.verifying_key(), &nonce);
    let text = serde_json::to_string(&frame).expect("a handshake frame serialises");
    ws.send(WsMessage::text(text))
        .await
        .map_err(|e| GatewayError::Unreachable(format!("sending the handshake: {e}")))?;
    let answer = next_data(ws)
        .await
        .map_err(|e| unproven(format!("reading the handshake answer: {e}")))?
        .ok_or_else(|| unproven("the agent closed the socket without answering".into()))?;
    if answer.len() > MAX_FRAME_BYTES {
        return Err(unproven(format!(
            "the handshake answer is over {MAX_FRAME_BYTES} bytes"
        )));
    }
    let answer: HandshakeFrame = serde_json::from_slice(&answer)
        .map_err(|e| unproven(format!("the answer is not a handshake frame: {e}")))?;
    let fingerprint = &held.document.identity.public_key.fingerprint;
    let key = handshake::answer_key(held.document.proven_key(), fingerprint, &answer)
        .map_err(|e| unproven(e.to_string()))?;
    let checked = handshake::check_answer(&answer, &nonce, held.agent, &signer.id, &key)
        .map_err(|e| unproven(e.to_string()))?;
    if let Some(theirs) = checked.agent_nonce.as_deref() {
        let completion = handshake::completion(&signer.id, &signer.key, &nonce, held.agent, theirs);
        let text = serde_json::to_string(&completion).expect("a handshake frame serialises");
        ws.send(WsMessage::text(text))
            .await
            .map_err(|e| GatewayError::Unreachable(format!("completing the handshake: {e}")))?;
    }
    Ok(key)
}

/// The next text or binary message's bytes; `None` when the agent closes.
async fn next_data(ws: &mut Socket) -> Result<Option<Vec<u8>>, WsError> {
    while let Some(message) = ws.next().await {
        match message? {
            WsMessage::Text(t) => return Ok(Some(t.as_bytes().to_vec())),
            WsMessage::Binary(b) => return Ok(Some(b.to_vec())),
            WsMessage::Close(_) => return Ok(None),
            _ => {}
        }
    }
    Ok(None)
}

/// A read that failed: over the size limit, or the socket broke.
fn too_large_or(e: WsError, upstream: &Upstream) -> GatewayError {
    match e {
        WsError::Capacity(_) => GatewayError::AgentFailed(format!(
            "the agent's reply is over gateway.max_response_bytes ({} bytes)",
            upstream.max_response_bytes
        )),
        other => GatewayError::AgentFailed(format!("reading the reply: {other}")),
    }
}

fn not_adp(why: &str) -> GatewayError {
    GatewayError::NotProtocol(format!(
        "the agent's chat endpoint does not answer an ADP message: {why}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_payload_maps_to_its_outcome() {
        assert_eq!(
            outcome(json!({"output": {"text": "HI"}})).unwrap(),
            json!({"text": "HI"})
        );
        assert_eq!(outcome(json!({"output": null})).unwrap(), Value::Null);
        match outcome(json!({"error": {"code": "Refused", "message": "no", "x": 1}})) {
            Err(GatewayError::AgentRefused { status, body }) => {
                assert_eq!(status, REFUSAL_STATUS);
                assert_eq!(body, json!({"error": {"code": "Refused", "message": "no"}}));
            }
            other => panic!("{other:?}"),
        }
        for neither in [json!({"result": 1}), json!("text"), json!({"error": "no"})] {
            assert!(matches!(
                outcome(neither),
                Err(GatewayError::NotProtocol(_))
            ));
        }
    }

    #[test]
    fn only_capabilities_offered_over_chat_are_operations() {
        let doc: AgentDocument = serde_json::from_value(json!({
            "protocol": "ADP/1.0",
            "identity": {"id": "agent:a.test", "domain": "a.test", "name": "A",
                "publicKey": {"algorithm": "ed25519", "fingerprint": "00"}},
            "endpoints": {"chat": "wss://a.test/agent/chat"},
            "capabilities": [
                {"id": "translate", "interfaces": ["api", "chat"]},
                {"id": "summarise", "interfaces": ["api"]},
                {"id": "plain"}
            ],
            "security": {},
            "availability": {"status": "online"}
        }))
        .unwrap();
        assert_eq!(chat_capabilities(&doc), vec!["translate"]);
        assert_eq!(capability(&doc, None).unwrap(), "translate");
        assert_eq!(capability(&doc, Some("translate")).unwrap(), "translate");
        match capability(&doc, Some("summarise")) {
            Err(GatewayError::UnknownOperation { asked, known }) => {
                assert_eq!(asked.as_deref(), Some("summarise"));
                assert_eq!(known, vec!["translate"]);
            }
            other => panic!("{other:?}"),
        }
    }
}
