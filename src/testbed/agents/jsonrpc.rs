//! JSON-RPC 2.0 framing shared by the MCP server and the A2A agent: a
//! body read into a [`Message`], and the result and error objects.

use serde_json::{json, Value};

/// Invalid JSON.
pub(super) const PARSE_ERROR: i64 = -32700;
/// Not a JSON-RPC 2.0 request.
pub(super) const INVALID_REQUEST: i64 = -32600;
/// No such method.
pub(super) const METHOD_NOT_FOUND: i64 = -32601;
/// Bad params.
pub(super) const INVALID_PARAMS: i64 = -32602;

/// What a client sent.
#[derive(Debug, PartialEq)]
pub(super) enum Message {
    /// A request: it has an id and wants an answer.
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    /// A notification: a method and no id.
    Notification { method: String },
    /// A response to something the server asked (neither method nor
    /// answer expected).
    Response,
}

/// Why a body is not a JSON-RPC message: the error code and its message.
#[derive(Debug, PartialEq)]
pub(super) struct Refused {
    pub(super) code: i64,
    pub(super) message: &'static str,
    /// The request's id, when one could be read.
    pub(super) id: Value,
}

/// Reads one JSON-RPC 2.0 message (batches are refused).
pub(super) fn parse(body: &[u8]) -> Result<Message, Refused> {
    let refused = |code, message, id| Refused { code, message, id };
    let value: Value = serde_json::from_slice(body).map_err(|_| {
        refused(
            PARSE_ERROR,
            "Parse error: the body is not JSON",
            Value::Null,
        )
    })?;
    let Value::Object(object) = value else {
        return Err(refused(
            INVALID_REQUEST,
            "Invalid Request: one JSON-RPC object expected (no batches)",
            Value::Null,
        ));
    };
    let id = object.get("id").cloned();
    let id_ok = matches!(id, None | Some(Value::String(_) | Value::Number(_)));
    let reply_id = if id_ok {
        id.clone().unwrap_or(Value::Null)
    } else {
        Value::Null
    };
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") || !id_ok {
        return Err(refused(
            INVALID_REQUEST,
            "Invalid Request: jsonrpc must be \"2.0\" and an id a string or a number",
            reply_id,
        ));
    }
    match (object.get("method"), id) {
        (Some(Value::String(method)), Some(id)) => Ok(Message::Request {
            id,
            method: method.clone(),
            params: object.get("params").cloned().unwrap_or(Value::Null),
        }),
        (Some(Value::String(method)), None) => Ok(Message::Notification {
            method: method.clone(),
        }),
        (None, Some(_)) if object.contains_key("result") || object.contains_key("error") => {
            Ok(Message::Response)
        }
        _ => Err(refused(
            INVALID_REQUEST,
            "Invalid Request: method must be a string",
            reply_id,
        )),
    }
}

/// `{"jsonrpc":"2.0","id":id,"result":result}`.
pub(super) fn result(id: &Value, result: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "result": result })
}

/// `{"jsonrpc":"2.0","id":id,"error":{"code","message"}}`.
pub(super) fn error(id: &Value, code: i64, message: &str) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_notifications_and_refusals() {
        let request = br#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#;
        assert_eq!(
            parse(request),
            Ok(Message::Request {
                id: json!(7),
                method: "ping".into(),
                params: Value::Null
            })
        );
        let note = br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        assert_eq!(
            parse(note),
            Ok(Message::Notification {
                method: "notifications/initialized".into()
            })
        );
        assert_eq!(
            parse(br#"{"jsonrpc":"2.0","id":"a","result":{}}"#),
            Ok(Message::Response)
        );
        assert_eq!(parse(b"{nope").unwrap_err().code, PARSE_ERROR);
        assert_eq!(parse(b"[]").unwrap_err().code, INVALID_REQUEST);
        let old = parse(br#"{"jsonrpc":"1.0","id":3,"method":"ping"}"#).unwrap_err();
        assert_eq!((old.code, old.id), (INVALID_REQUEST, json!(3)));
        let bad_id = parse(br#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#).unwrap_err();
        assert_eq!((bad_id.code, bad_id.id), (INVALID_REQUEST, Value::Null));
        let no_method = parse(br#"{"jsonrpc":"2.0","id":1}"#).unwrap_err();
        assert_eq!(no_method.code, INVALID_REQUEST);
    }
}
