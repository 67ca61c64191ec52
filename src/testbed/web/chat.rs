//! The `/agent/chat` WebSocket: answers one `adp_handshake` frame with
//! [`handshake::answer`] and closes politely, or answers with a nonce of
//! its own and checks the verifier's closing frame
//! ([`Behaviour::ChallengeOwnNonce`]), or misbehaves as the site's
//! [`Behaviour`] says (bad signature, signed over another nonce, silence).
//!
//! Reached from [`super::front`] once the request head shows a WebSocket
//! upgrade of `/agent/chat` for a known site.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
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
use crate::identity;
use crate::testbed::population::Behaviour;

/// How long the responder waits for the upgrade, the challenge, and the
/// client's close.
const TIMEOUT: Duration = Duration::from_secs(10);
/// Largest message accepted (a challenge is well under 1 KiB).
const MAX_MESSAGE: usize = 4 * handshake::MAX_FRAME_BYTES;

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
    close(ws, CloseCode::Normal, "").await;
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
    match site.behaviour {
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
