//! The `/agent/chat` WebSocket: answers one `adp_handshake` frame with
//! [`handshake::answer`] and closes politely, or answers with a nonce of
//! its own and checks the verifier's closing frame
//! ([`Behaviour::ChallengeOwnNonce`]), or misbehaves as the site's
//! [`Behaviour`] says (bad signature, signed over another nonce, silence).
//!
//! After the handshake the socket stays open for one ADP `message` frame
//! (a call through a node's gateway, docs/protocol.md#gateway-adp): its
//! signature is checked against the key the handshake's challenge
//! carried, and it is answered, signed by the agent's key, with
//! `{"output": {"capability", "echo": input}}`, or with an error object
//! when the frame does not check. An input object with a `misbehave`
//! member asks for a [`Misbehave`] instead. A verifier that closes after
//! the handshake (the crawler) sees the challenge as before.
//!
//! Reached from [`super::front`] once the request head shows a WebSocket
//! upgrade of `/agent/chat` for a known site.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::json;
use sha2::{Digest, Sha256};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, WebSocketConfig};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;
use tokio_util::sync::CancellationToken;
use tracing::debug;

use super::AgentSite;
use crate::adp::handshake::{self, HandshakeFrame};
use crate::adp::message;
use crate::identity;
use crate::testbed::population::Behaviour;

/// How long the responder waits for the upgrade, the challenge, and the
/// client's close.
const TIMEOUT: Duration = Duration::from_secs(10);
/// Largest message accepted (a challenge is well under 1 KiB; a
/// gateway's message frame carries its client's input).
const MAX_MESSAGE: usize = 1 << 20;
/// The size of the `huge` misbehaviour's reply: over the gateway's
/// default `gateway.max_response_bytes` (4 MiB).
const HUGE_REPLY: usize = 5 << 20;

/// How a testbed agent answers a message frame whose input object has a
/// `misbehave` member naming one of these; any other input is echoed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Misbehave {
    /// `bad_signature`: the reply is signed by another key.
    BadSignature,
    /// `unsigned`: the reply has no signature.
    Unsigned,
    /// `silent`: no reply; the socket stays open until the client goes.
    Silent,
    /// `close`: the socket is closed without a reply.
    Close,
    /// `error`: the reply is an error object
    /// `{"code": "Refused", "message": ...}`.
    Error,
    /// `huge`: a reply of 5 MiB.
    Huge,
    /// `other_id`: a reply to another request id.
    OtherId,
    /// `not_json`: a text frame that is not JSON.
    NotJson,
}

impl Misbehave {
    /// The mode an input asks for.
    pub(super) fn of(input: &serde_json::Value) -> Option<Self> {
        Some(match input.get("misbehave")?.as_str()? {
            "bad_signature" => Self::BadSignature,
            "unsigned" => Self::Unsigned,
            "silent" => Self::Silent,
            "close" => Self::Close,
            "error" => Self::Error,
            "huge" => Self::Huge,
            "other_id" => Self::OtherId,
            "not_json" => Self::NotJson,
            _ => return None,
        })
    }
}

/// Runs one challenge session on an upgraded-to-be connection.
pub(super) async fn serve<S>(stream: S, site: Arc<AgentSite>, shutdown: CancellationToken)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let config = WebSocketConfig::default()
        .max_message_size(Some(MAX_MESSAGE))
        .max_frame_size(Some(MAX_MESSAGE));
    let logged = site.clone();
    // tungstenite's callback type: its error is a whole HTTP response.
    #[allow(clippy::result_large_err)]
    let log = move |request: &tokio_tungstenite::tungstenite::handshake::server::Request,
                    response| {
        logged.log("chat", request.headers());
        Ok(response)
    };
    let accept = tokio_tungstenite::accept_hdr_async_with_config(stream, log, Some(config));
    let mut ws = match tokio::time::timeout(TIMEOUT, accept).await {
        Ok(Ok(ws)) => ws,
        Ok(Err(error)) => return debug!(%error, "WebSocket upgrade failed"),
        Err(_) => return debug!("WebSocket upgrade timed out"),
    };
    site.counters.chat.fetch_add(1, Ordering::Relaxed);
    if site.behaviour == Behaviour::ChallengeSilent || site.chat_down() {
        // Read and ignore everything until the client gives up.
        tokio::select! {
            () = shutdown.cancelled() => {}
            () = async { while let Some(Ok(_)) = ws.next().await {} } => {}
        }
        return;
    }
    let challenge = tokio::select! {
        () = shutdown.cancelled() => return,
        c = tokio::time::timeout(TIMEOUT, first_text(&mut ws)) => c,
    };
    let challenge = match challenge {
        Ok(Some(text)) => serde_json::from_str::<HandshakeFrame>(&text).ok(),
        Ok(None) => return,
        Err(_) => return close(ws, CloseCode::Policy, "no challenge within 10 s").await,
    };
    let Some(challenge) = challenge.filter(|c| c.kind == handshake::FRAME_TYPE) else {
        return close(ws, CloseCode::Policy, "expected an adp_handshake frame").await;
    };
    let answer = respond(&site, &challenge);
    let text = serde_json::to_string(&answer).expect("a handshake frame serialises to JSON");
    if let Err(error) = ws.send(Message::text(text)).await {
        return debug!(%error, "cannot send the handshake answer");
    }
    if site.behaviour == Behaviour::ChallengeOwnNonce {
        let closing = tokio::select! {
            () = shutdown.cancelled() => return,
            c = tokio::time::timeout(TIMEOUT, first_text(&mut ws)) => c,
        };
        let Ok(Some(text)) = closing else {
            return debug!("no closing frame from the verifier");
        };
        if completes(&challenge, &answer, &text) {
            site.counters.mutual.fetch_add(1, Ordering::Relaxed);
        } else {
            debug!("the verifier's closing frame does not check");
        }
    }
    // A message frame, if the client sends one; the crawler closes.
    let next = tokio::select! {
        () = shutdown.cancelled() => return,
        n = tokio::time::timeout(TIMEOUT, first_text(&mut ws)) => n,
    };
    if let Ok(Some(text)) = next {
        converse(&mut ws, &site, &challenge, &text, &shutdown).await;
    }
    close(ws, CloseCode::Normal, "").await;
}

/// Answers the message frame `text` from the client that sent
/// `challenge`, as the module documentation says.
async fn converse<S>(
    ws: &mut WebSocketStream<S>,
    site: &AgentSite,
    challenge: &HandshakeFrame,
    text: &str,
    shutdown: &CancellationToken,
) where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let raw: serde_json::Value = serde_json::from_str(text).unwrap_or_default();
    let request_id = raw
        .get("id")
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let checked = identity::decode_public_key(&challenge.public_key)
        .map_err(|e| e.to_string())
        .and_then(|key| message::read(text.as_bytes(), &key).map_err(|e| e.to_string()))
        .and_then(|m| {
            if m.from != challenge.agent_id || m.to != site.agent_id {
                Err(format!(
                    "from {} to {}: not the verifier to this agent",
                    m.from, m.to
                ))
            } else {
                Ok(m)
            }
        });
    let (payload, mode) = match checked {
        Ok(m) => {
            site.counters.messages.fetch_add(1, Ordering::Relaxed);
            let input = m.payload.get("input").cloned().unwrap_or_default();
            let capability = m.payload.get("capability").cloned().unwrap_or_default();
            let mode = Misbehave::of(&input);
            let payload = match mode {
                Some(Misbehave::Error) => json!({"error": {"code": "Refused",
                    "message": "the testbed agent was asked to refuse"}}),
                Some(Misbehave::Huge) => json!({"output": {"padding": "x".repeat(HUGE_REPLY)}}),
                _ => json!({"output": {"capability": capability, "echo": input}}),
            };
            (payload, mode)
        }
        Err(why) => (
            json!({"error": {"code": "BadMessage", "message": why}}),
            None,
        ),
    };
    let to = &challenge.agent_id;
    let text = match mode {
        Some(Misbehave::Silent) => {
            tokio::select! {
                () = shutdown.cancelled() => {}
                () = async { while let Some(Ok(_)) = ws.next().await {} } => {}
            }
            return;
        }
        Some(Misbehave::Close) => return,
        Some(Misbehave::NotJson) => "this is not JSON".to_owned(),
        Some(Misbehave::BadSignature) => {
            let impostor = site.impostor.clone().unwrap_or_else(identity::generate);
            message::reply(&site.agent_id, to, &request_id, payload, &impostor).to_string()
        }
        Some(Misbehave::Unsigned) => {
            let mut reply = message::reply(&site.agent_id, to, &request_id, payload, &site.key);
            if let Some(m) = reply.as_object_mut() {
                m.remove("signature");
            }
            reply.to_string()
        }
        Some(Misbehave::OtherId) => {
            message::reply(&site.agent_id, to, &message::uuid(), payload, &site.key).to_string()
        }
        _ => message::reply(&site.agent_id, to, &request_id, payload, &site.key).to_string(),
    };
    if let Err(error) = ws.send(Message::text(text)).await {
        debug!(%error, "cannot send the message reply");
    }
}

/// Whether `text` is the verifier's closing frame: from the challenge's
/// sender, with its key, signed over the nonce our `answer` carried.
fn completes(challenge: &HandshakeFrame, answer: &HandshakeFrame, text: &str) -> bool {
    let Ok(frame) = serde_json::from_str::<HandshakeFrame>(text) else {
        return false;
    };
    let Ok(key) = identity::decode_public_key(&challenge.public_key) else {
        return false;
    };
    handshake::check_answer(
        &frame,
        &answer.nonce,
        &challenge.agent_id,
        &answer.agent_id,
        &key,
    )
    .is_ok()
}

/// The answer the site gives to `challenge`.
fn respond(site: &AgentSite, challenge: &HandshakeFrame) -> HandshakeFrame {
    let behaviour = if site.handshake_forged() {
        Behaviour::ChallengeBadSignature
    } else {
        site.behaviour
    };
    match behaviour {
        Behaviour::ChallengeBadSignature => {
            let impostor = site.impostor.clone().unwrap_or_else(identity::generate);
            let mut answer = handshake::answer(challenge, &site.agent_id, &impostor);
            answer.public_key = identity::encode_public_key(&site.key.verifying_key());
            answer
        }
        Behaviour::ChallengeOwnNonce => {
            let own = hex::encode(rand::random::<[u8; 32]>());
            handshake::answer_with_nonce(challenge, &site.agent_id, &site.key, &own)
        }
        Behaviour::ChallengeWrongNonce => {
            let mut other = challenge.clone();
            other.nonce = hex::encode(Sha256::digest(challenge.nonce.as_bytes()));
            handshake::answer(&other, &site.agent_id, &site.key)
        }
        _ => handshake::answer(challenge, &site.agent_id, &site.key),
    }
}

/// The first text (or UTF-8 binary) message; `None` when the client
/// closes first.
async fn first_text<S>(ws: &mut WebSocketStream<S>) -> Option<String>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    while let Some(message) = ws.next().await {
        match message.ok()? {
            Message::Text(text) => return Some(text.as_str().to_owned()),
            Message::Binary(bytes) => return String::from_utf8(bytes.to_vec()).ok(),
            Message::Close(_) => return None,
            _ => {}
        }
    }
    None
}

/// Sends a close frame and waits (bounded) for the client's.
async fn close<S>(mut ws: WebSocketStream<S>, code: CloseCode, reason: &str)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let frame = CloseFrame {
        code,
        reason: reason.to_owned().into(),
    };
    if ws.close(Some(frame)).await.is_err() {
        return;
    }
    let drain = async { while let Some(Ok(_)) = ws.next().await {} };
    let _ = tokio::time::timeout(TIMEOUT, drain).await;
}
