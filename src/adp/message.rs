//! ADP `message` frames (ADP 6.2) as agentmesh profiles them for a call
//! through its gateway (docs/protocol.md#gateway-adp): the request the node
//! sends after the handshake, the agent's reply, and the signature both
//! carry. Both sides live here: the gateway's (`request`, `read_reply`)
//! and the agent's (`read_request`, `reply`, used by the testbed).
//!
//! A frame is a JSON object `{type: "message", id, timestamp, from, to,
//! payload, signature}`; a reply adds `in_reply_to`, the request's `id`.
//! `signature` is Ed25519, base64url without padding, over the UTF-8 bytes
//! of [`SIGNING_PREFIX`] followed by the JCS (RFC 8785) serialisation of
//! the frame as received, every member but `signature` (members this
//! profile does not name included, so nothing can be added unsigned).

use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use serde_json::{json, Map, Value};

use crate::identity;

/// The frame type.
pub const FRAME_TYPE: &str = "message";
/// What the signed bytes start with.
pub const SIGNING_PREFIX: &str = "ADP/1.0 message\n";
/// Longest `id`, `from`, `to`, `in_reply_to` or `timestamp` accepted,
/// characters.
pub const MAX_FIELD_CHARS: usize = 256;

/// Why a frame is not the message it should be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MessageError {
    /// Not a JSON object, not a `message` frame, or a member missing or
    /// of the wrong type.
    #[error("malformed message frame: {0}")]
    Malformed(String),
    /// No `signature`.
    #[error("the message frame is not signed")]
    Unsigned,
    /// The signature does not verify with the sender's key.
    #[error("the message frame's signature does not verify")]
    BadSignature,
    /// From or to someone else, or about another request.
    #[error("the message frame is {0}")]
    Misaddressed(String),
}

/// A message frame read and checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    /// Its `id`.
    pub id: String,
    /// Its `from`.
    pub from: String,
    /// Its `to`.
    pub to: String,
    /// Its `in_reply_to`, on a reply.
    pub in_reply_to: Option<String>,
    /// Its `payload`.
    pub payload: Value,
}

/// The bytes a frame's signature covers: [`SIGNING_PREFIX`], then the JCS
/// of every member but `signature`.
pub fn signing_input(frame: &Map<String, Value>) -> Vec<u8> {
    let mut unsigned = frame.clone();
    unsigned.remove("signature");
    let mut bytes = SIGNING_PREFIX.as_bytes().to_vec();
    bytes.extend(
        serde_jcs::to_vec(&unsigned)
            .expect("a serde_json map has string keys and finite numbers, which JCS encodes"),
    );
    bytes
}

/// `frame` with its `signature` by `key`.
pub fn sign(mut frame: Map<String, Value>, key: &SigningKey) -> Map<String, Value> {
    let signature = key.sign(&signing_input(&frame));
    frame.insert(
        "signature".into(),
        Value::String(identity::encode_bytes(&signature.to_bytes())),
    );
    frame
}

/// A fresh random UUID (version 4), lower-case.
pub fn uuid() -> String {
    let mut b: [u8; 16] = rand::random();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = hex::encode(b);
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// Now, RFC 3339 in UTC with milliseconds.
fn now() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}

/// The gateway's request: `payload` `{"capability", "input"}`, a fresh
/// `id`, signed by the node's `key`. The frame and its id.
pub fn request(
    from: &str,
    to: &str,
    capability: &str,
    input: &Value,
    key: &SigningKey,
) -> (Value, String) {
    let id = uuid();
    let frame = json!({
        "type": FRAME_TYPE,
        "id": id,
        "timestamp": now(),
        "from": from,
        "to": to,
        "payload": {"capability": capability, "input": input},
    });
    let Value::Object(frame) = frame else {
        unreachable!("json! of an object is an object")
    };
    (Value::Object(sign(frame, key)), id)
}

/// The agent's reply to the request `in_reply_to`, signed by its `key`.
pub fn reply(from: &str, to: &str, in_reply_to: &str, payload: Value, key: &SigningKey) -> Value {
    let frame = json!({
        "type": FRAME_TYPE,
        "id": uuid(),
        "timestamp": now(),
        "from": from,
        "to": to,
        "in_reply_to": in_reply_to,
        "payload": payload,
    });
    let Value::Object(frame) = frame else {
        unreachable!("json! of an object is an object")
    };
    Value::Object(sign(frame, key))
}

/// Reads a frame: a `message` frame with its string members, its
/// signature by `key` checked before anything of it is read further.
///
/// # Errors
/// [`MessageError::Malformed`], [`MessageError::Unsigned`],
/// [`MessageError::BadSignature`].
pub fn read(text: &[u8], key: &VerifyingKey) -> Result<Message, MessageError> {
    let malformed = |why: &str| MessageError::Malformed(why.to_owned());
    let value: Value = serde_json::from_slice(text).map_err(|_| malformed("not JSON"))?;
    let Value::Object(frame) = value else {
        return Err(malformed("not a JSON object"));
    };
    if frame.get("type").and_then(Value::as_str) != Some(FRAME_TYPE) {
        return Err(malformed("its type is not \"message\""));
    }
    let signature = match frame.get("signature") {
        None | Some(Value::Null) => return Err(MessageError::Unsigned),
        Some(Value::String(s)) => s,
        Some(_) => return Err(malformed("signature is not a string")),
    };
    let signature: [u8; 64] = identity::decode_bytes(signature)
        .ok()
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| malformed("signature is not 64 bytes of base64url"))?;
    key.verify_strict(&signing_input(&frame), &Signature::from_bytes(&signature))
        .map_err(|_| MessageError::BadSignature)?;
    let text = |name: &str, required: bool| -> Result<Option<String>, MessageError> {
        match frame.get(name) {
            Some(Value::String(s)) if !s.is_empty() && s.chars().count() <= MAX_FIELD_CHARS => {
                Ok(Some(s.clone()))
            }
            None if !required => Ok(None),
            _ => Err(MessageError::Malformed(format!(
                "{name} is not a string of 1 to {MAX_FIELD_CHARS} characters"
            ))),
        }
    };
    text("timestamp", true)?;
    Ok(Message {
        id: text("id", true)?.unwrap_or_default(),
        from: text("from", true)?.unwrap_or_default(),
        to: text("to", true)?.unwrap_or_default(),
        in_reply_to: text("in_reply_to", false)?,
        payload: frame.get("payload").cloned().unwrap_or(Value::Null),
    })
}

/// Reads the agent's reply to the request `request_id` the node `node`
/// sent to `agent`: signed by the agent's `key`, from `agent`, to
/// `node`, in reply to `request_id`.
///
/// # Errors
/// As [`read`]; [`MessageError::Misaddressed`] for a reply from or to
/// someone else, or about another request.
pub fn read_reply(
    text: &[u8],
    key: &VerifyingKey,
    agent: &str,
    node: &str,
    request_id: &str,
) -> Result<Message, MessageError> {
    let m = read(text, key)?;
    if m.from != agent {
        return Err(MessageError::Misaddressed(format!(
            "from {:?}, not {agent:?}",
            m.from
        )));
    }
    if m.to != node {
        return Err(MessageError::Misaddressed(format!(
            "to {:?}, not {node:?}",
            m.to
        )));
    }
    if m.in_reply_to.as_deref() != Some(request_id) {
        return Err(MessageError::Misaddressed(
            "not a reply to the request sent (in_reply_to)".into(),
        ));
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_reads_only_when_signed_by_the_agent_and_about_the_request() {
        let node = identity::generate();
        let agent = identity::generate();
        let (sent, id) = request("12D3node", "agent:a.test", "echo", &json!({"x": 1}), &node);
        let got = read(sent.to_string().as_bytes(), &node.verifying_key()).unwrap();
        assert_eq!(got.id, id);
        assert_eq!(
            got.payload,
            json!({"capability": "echo", "input": {"x": 1}})
        );
        assert_eq!(id.len(), 36);
        assert_eq!(&id[14..15], "4");

        let answer = reply(
            "agent:a.test",
            "12D3node",
            &id,
            json!({"output": 2}),
            &agent,
        );
        let bytes = answer.to_string();
        let ok = read_reply(
            bytes.as_bytes(),
            &agent.verifying_key(),
            "agent:a.test",
            "12D3node",
            &id,
        )
        .unwrap();
        assert_eq!(ok.payload, json!({"output": 2}));
        // Member order does not matter: the signature is over the JCS.
        let Value::Object(m) = answer.clone() else {
            panic!()
        };
        let reversed: Map<String, Value> = m.into_iter().rev().collect();
        let again = Value::Object(reversed).to_string();
        assert!(read_reply(
            again.as_bytes(),
            &agent.verifying_key(),
            "agent:a.test",
            "12D3node",
            &id
        )
        .is_ok());

        // Another key, a member changed or added, no signature, another id.
        assert_eq!(
            read(bytes.as_bytes(), &node.verifying_key()),
            Err(MessageError::BadSignature)
        );
        let mut changed = answer.clone();
        changed["payload"] = json!({"output": 3});
        assert_eq!(
            read(changed.to_string().as_bytes(), &agent.verifying_key()),
            Err(MessageError::BadSignature)
        );
        let mut added = answer.clone();
        added["extra"] = json!(true);
        assert_eq!(
            read(added.to_string().as_bytes(), &agent.verifying_key()),
            Err(MessageError::BadSignature)
        );
        let mut unsigned = answer.clone();
        unsigned.as_object_mut().unwrap().remove("signature");
        assert_eq!(
            read(unsigned.to_string().as_bytes(), &agent.verifying_key()),
            Err(MessageError::Unsigned)
        );
        assert!(matches!(
            read_reply(
                bytes.as_bytes(),
                &agent.verifying_key(),
                "agent:a.test",
                "12D3node",
                &uuid()
            ),
            Err(MessageError::Misaddressed(_))
        ));
        assert!(matches!(
            read(b"not json", &agent.verifying_key()),
            Err(MessageError::Malformed(_))
        ));
    }

    #[test]
    fn the_signed_bytes_are_the_prefix_and_the_jcs_of_the_frame_without_its_signature() {
        let frame = json!({"type": "message", "b": 1, "a": "x", "signature": "s"});
        let Value::Object(frame) = frame else {
            panic!()
        };
        assert_eq!(
            signing_input(&frame),
            b"ADP/1.0 message\n{\"a\":\"x\",\"b\":1,\"type\":\"message\"}".to_vec()
        );
    }
}
