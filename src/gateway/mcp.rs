//! Calling an MCP server's tool (streamable HTTP, MCP 2025-06-18): what
//! the gateway does for an agent imported from an MCP registry whose
//! remote is `streamable-http`. One session per call, all under the
//! call's one deadline:
//! 1. `initialize` (the server's `Mcp-Session-Id` kept, when it gives one);
//! 2. `notifications/initialized`;
//! 3. `tools/list`: the tool named (or the only one), its `inputSchema`
//!    checked against the input before it is called;
//! 4. `tools/call` with the input as `arguments`: the answer is its
//!    `structuredContent`, else `{"content": [...]}`, checked against the
//!    tool's `outputSchema` when it has one;
//! 5. the session ended (`DELETE` with its `Mcp-Session-Id`), whatever
//!    the answer, so that no server is left holding it: after the answer
//!    within [`END_TIMEOUT`], and for a call cut off by the deadline
//!    once the client has its 504, in the background.
//!
//! A server may answer a request with one JSON object or with a
//! `text/event-stream` carrying it, among other events (a tool's log
//! messages, pings), its lines ended by CRLF, LF or CR; both are read.
//! What does not speak JSON-RPC is `not_protocol`; a tool that reports
//! `isError` failed its task (never a 2xx); JSON-RPC's invalid-params
//! error is the client's (400).

use std::net::IpAddr;
use std::time::Duration;

use bytes::Bytes;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, ACCEPT};
use serde_json::{json, Value};
use tokio::time::Instant;
use url::Url;

use super::error::GatewayError;
use super::error::Violation;
use super::forward::{Answer, Upstream};
use super::operation;
use super::rpc;
use crate::crawl::fetch::event_data;

/// The protocol version the gateway asks for.
pub const PROTOCOL_VERSION: &str = "2025-06-18";
/// Most tools read from `tools/list`.
const MAX_TOOLS: usize = 1024;
/// The longest the session's `DELETE` is waited for.
pub const END_TIMEOUT: Duration = Duration::from_secs(5);
/// The tool's answer, and where it breaks the tool's output schema.
#[derive(Debug, Clone)]
pub struct ToolAnswer {
    /// The tool called.
    pub tool: String,
    /// Its structured content, or `{"content": [...]}`.
    pub output: Value,
    /// Where the output does not fit the tool's `outputSchema`.
    pub output_problems: Vec<Violation>,
}

/// One MCP session with a server.
struct Session<'a> {
    upstream: &'a Upstream,
    url: &'a Url,
    ips: &'a [IpAddr],
    /// The client's (or node's) credentials for the server, and the
    /// request id.
    base: HeaderMap,
    session: Option<HeaderValue>,
    next_id: u64,
}

/// Calls `tool` (or the server's only tool) with `input` as its
/// arguments, the session's requests within `deadline`.
///
/// # Errors
/// [`GatewayError`]: `AgentRefused` for the server's 4xx and for
/// invalid params, `UnknownOperation`, `InvalidInput`, `AgentFailed` for
/// a tool error or what is not MCP, `AgentBusy`, `Unreachable`.
pub async fn call(
    upstream: &Upstream,
    url: &Url,
    ips: &[IpAddr],
    headers: HeaderMap,
    tool: Option<&str>,
    input: &Value,
    deadline: Instant,
) -> Result<ToolAnswer, GatewayError> {
    let mut s = Session {
        upstream,
        url,
        ips,
        base: headers,
        session: None,
        next_id: 1,
    };
    match tokio::time::timeout_at(deadline, s.call_tool(tool, input)).await {
        Ok(called) => {
            let _ = tokio::time::timeout(END_TIMEOUT, s.end()).await;
            called
        }
        Err(_) => {
            s.end_later();
            Err(GatewayError::Timeout(upstream.timeout))
        }
    }
}

impl Session<'_> {
    /// The session's work: `initialize`, `tools/list`, the input
    /// checked, `tools/call`.
    async fn call_tool(
        &mut self,
        tool: Option<&str>,
        input: &Value,
    ) -> Result<ToolAnswer, GatewayError> {
        let init = self
            .request(
                "initialize",
                json!({
                    "protocolVersion": PROTOCOL_VERSION,
                    "capabilities": {},
                    "clientInfo": {"name": "agentmesh-gateway", "version": env!("CARGO_PKG_VERSION")},
                }),
            )
            .await?;
        if init
            .get("protocolVersion")
            .and_then(Value::as_str)
            .is_none()
        {
            return Err(not_mcp("its initialize result names no protocolVersion"));
        }
        self.notify("notifications/initialized").await?;
        let listed = self.request("tools/list", json!({})).await?;
        let tools: Vec<&Value> = listed
            .get("tools")
            .and_then(Value::as_array)
            .map(|t| t.iter().take(MAX_TOOLS).collect())
            .unwrap_or_default();
        let names: Vec<String> = tools
            .iter()
            .filter_map(|t| t.get("name").and_then(Value::as_str).map(str::to_owned))
            .collect();
        let chosen = match tool {
            Some(name) => tools
                .iter()
                .find(|t| t.get("name").and_then(Value::as_str) == Some(name)),
            None if tools.len() == 1 => tools.first(),
            None => None,
        };
        let Some(chosen) = chosen else {
            return Err(GatewayError::UnknownOperation {
                asked: tool.map(str::to_owned),
                known: names,
            });
        };
        let name = chosen
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        if let Some(schema) = chosen.get("inputSchema") {
            let found = operation::check(schema, input).map_err(GatewayError::BadSchema)?;
            if !found.is_empty() {
                return Err(GatewayError::InvalidInput(found));
            }
        }
        let result = self
            .request("tools/call", json!({"name": name, "arguments": input}))
            .await?;
        if result.get("isError").and_then(Value::as_bool) == Some(true) {
            return Err(GatewayError::AgentFailed(format!(
                "the tool {name} reported an error: {}",
                text_of(&result)
            )));
        }
        let output = match result.get("structuredContent") {
            Some(structured) => structured.clone(),
            None => {
                json!({"content": result.get("content").cloned().unwrap_or(Value::Array(Vec::new()))})
            }
        };
        let output_problems = match chosen.get("outputSchema") {
            Some(schema) => operation::check(schema, &output).unwrap_or_default(),
            None => Vec::new(),
        };
        Ok(ToolAnswer {
            tool: name,
            output,
            output_problems,
        })
    }

    /// Ends the session the server opened, if it did (`DELETE` with its
    /// `Mcp-Session-Id`), whatever became of the call: a server keeps a
    /// session a client leaves open until it times out, and refuses new
    /// ones when it holds too many. What the server answers (405 when it
    /// does not let clients end sessions) changes nothing.
    async fn end(&self) {
        if self.session.is_none() {
            return;
        }
        let _ = self
            .upstream
            .delete_once(self.url, self.ips, self.headers())
            .await;
    }

    /// As [`Session::end`], in a task of its own within [`END_TIMEOUT`]:
    /// for a call the deadline cut off, whose client is answered first.
    fn end_later(&self) {
        if self.session.is_none() {
            return;
        }
        let (upstream, url, ips) = (self.upstream.clone(), self.url.clone(), self.ips.to_vec());
        let headers = self.headers();
        tokio::spawn(async move {
            let ended = upstream.delete_once(&url, &ips, headers);
            let _ = tokio::time::timeout(END_TIMEOUT, ended).await;
        });
    }

    fn headers(&self) -> HeaderMap {
        let mut h = self.base.clone();
        h.insert(
            ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        h.insert(
            HeaderName::from_static("mcp-protocol-version"),
            HeaderValue::from_static(PROTOCOL_VERSION),
        );
        if let Some(id) = &self.session {
            h.insert(HeaderName::from_static("mcp-session-id"), id.clone());
        }
        h
    }

    /// A JSON-RPC request; its result.
    async fn request(&mut self, method: &str, params: Value) -> Result<Value, GatewayError> {
        let id = self.next_id;
        self.next_id += 1;
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let answer = self.send(&body).await?;
        if method == "initialize" {
            self.session = answer.headers.get("mcp-session-id").cloned();
        }
        let message = response_of(&answer, id)?;
        if let Some(error) = message.get("error") {
            return Err(rpc::error_of(method, error));
        }
        message
            .get("result")
            .cloned()
            .ok_or_else(|| not_mcp(&format!("its answer to {method} has no result")))
    }

    /// A JSON-RPC notification: 202 (or any 2xx) expected.
    async fn notify(&mut self, method: &str) -> Result<(), GatewayError> {
        let body = json!({"jsonrpc": "2.0", "method": method});
        self.send(&body).await.map(|_| ())
    }

    async fn send(&self, body: &Value) -> Result<Answer, GatewayError> {
        let bytes = Bytes::from(serde_json::to_vec(body).expect("a Value serialises"));
        let answer = self
            .upstream
            .post_once(self.url, self.ips, self.headers(), bytes)
            .await?;
        match rpc::status_failure(&answer, "the MCP server", "MCP") {
            Some(failure) => Err(failure),
            None => Ok(answer),
        }
    }
}

/// The JSON-RPC response with `id` in an answer: the JSON body, or the
/// first event carrying it in a `text/event-stream`.
fn response_of(answer: &Answer, id: u64) -> Result<Value, GatewayError> {
    let is_response = |v: &Value| v.get("id").and_then(Value::as_u64) == Some(id);
    match answer.content_type.as_deref() {
        Some("application/json") => {
            let v: Value = serde_json::from_slice(&answer.body)
                .map_err(|_| not_mcp("its answer is not JSON"))?;
            if is_response(&v) {
                Ok(v)
            } else {
                Err(not_mcp("its answer is not the JSON-RPC response asked for"))
            }
        }
        Some("text/event-stream") => {
            let text = String::from_utf8_lossy(&answer.body);
            event_data(&text)
                .iter()
                .filter_map(|data| serde_json::from_str::<Value>(data).ok())
                .find(is_response)
                .ok_or_else(|| not_mcp("its event stream carried no answer"))
        }
        _ => Err(not_mcp("it does not answer JSON")),
    }
}

/// The text contents of a tool result, joined, bounded.
fn text_of(result: &Value) -> String {
    let text: Vec<&str> = result
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c.get("text").and_then(Value::as_str))
        .collect();
    text.join(" ").chars().take(500).collect()
}

fn not_mcp(why: &str) -> GatewayError {
    rpc::not_protocol("MCP", why)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(content_type: &str, body: &str) -> Answer {
        Answer {
            status: 200,
            content_type: Some(content_type.into()),
            retry_after: None,
            headers: HeaderMap::new(),
            body: Bytes::from(body.to_owned()),
        }
    }

    #[test]
    fn a_response_is_read_from_json_or_from_an_event_stream_however_its_lines_end() {
        let json = answer(
            "application/json",
            r#"{"jsonrpc":"2.0","id":2,"result":{}}"#,
        );
        assert_eq!(response_of(&json, 2).unwrap()["result"], json!({}));
        assert!(response_of(&json, 3).is_err(), "another id");
        let sse = answer(
            "text/event-stream",
            "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\n\
             data: {\"jsonrpc\":\"2.0\",\n\
             data: \"id\":5,\"result\":{\"ok\":true}}\n\n",
        );
        assert_eq!(response_of(&sse, 5).unwrap()["result"]["ok"], true);
        // Lines ended by CRLF, as sse-starlette (the MCP Python SDK's)
        // writes them, and several events before the response.
        let crlf = answer(
            "text/event-stream",
            "event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\
             \"params\":{\"level\":\"info\",\"data\":\"working\"}}\r\n\r\n\
             : ping\r\n\r\n\
             event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"ok\":1}}\r\n\r\n",
        );
        assert_eq!(response_of(&crlf, 3).unwrap()["result"]["ok"], 1);
        // Lines ended by CR alone, and an event without a final blank line.
        let cr = answer(
            "text/event-stream",
            "id: 1\rdata:{\"jsonrpc\":\"2.0\",\"id\":4,\rdata:\"result\":{}}",
        );
        assert_eq!(response_of(&cr, 4).unwrap()["result"], json!({}));
        let html = answer("text/html", "<html></html>");
        assert!(matches!(
            response_of(&html, 1),
            Err(GatewayError::NotProtocol(_))
        ));
    }
}
