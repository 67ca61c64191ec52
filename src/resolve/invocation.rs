//! Invocation metadata of a candidate: which operation to call, with its
//! input schema, the authentication it asks for and the protocol to use,
//! read from the agent's document.
//!
//! An AIDIP agent is called as the draft says (`POST` of a JSON body to
//! its endpoint, protocol `aidip`); the operation is the one of
//! `operations` whose name and description share the most words with the
//! intent (name words count twice; words match when equal or when both
//! have at least five letters and share their first five: "summarize"
//! and "summarization"); with no overlap, the first. A document with
//! top-level `inputs` instead has one implied operation (`operation`
//! null). `auth` is `authentication.type`, `none` when absent (the
//! draft's reading). An ADP agent (protocol `adp`) has capabilities, not
//! operations: the capability is picked the same way, its accepted media
//! are given instead of a schema, the endpoint is `endpoints.tasks`, else
//! `interfaces.api`, else the agent's endpoint, and `auth` is the first
//! of `security.authMethods` (`none` when it lists none).

use serde::Serialize;
use serde_json::Value;

use crate::descriptor::{Descriptor, DocumentFormat};

/// How to invoke a candidate.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Invocation {
    /// `aidip` (POST JSON to `endpoint`) or `adp`.
    pub protocol: &'static str,
    /// Where to send the call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// The HTTP method (`POST` for AIDIP).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub method: Option<&'static str>,
    /// The operation (AIDIP) or capability (ADP) chosen; `null` for an
    /// AIDIP agent with one implied operation.
    pub operation: Option<String>,
    /// What the operation does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// JSON Schema of the input (AIDIP).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_schema: Option<Value>,
    /// JSON Schema of the output (AIDIP).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// Accepted input media (ADP).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_media: Option<Value>,
    /// The authentication type (`api_key`, `oauth2_bearer`, `mtls`, `none`, ...).
    pub auth: String,
    /// OAuth 2.0 scopes, when the document lists them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth_scopes: Option<Value>,
}

/// Lower-case words of `text`, camelCase and snake_case split.
pub(super) fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut prev_lower = false;
    for c in text.chars() {
        if c.is_alphanumeric() {
            if c.is_uppercase() && prev_lower && !word.is_empty() {
                out.push(std::mem::take(&mut word));
            }
            prev_lower = c.is_lowercase();
            word.extend(c.to_lowercase());
        } else {
            prev_lower = false;
            if !word.is_empty() {
                out.push(std::mem::take(&mut word));
            }
        }
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

fn same_word(a: &str, b: &str) -> bool {
    a == b
        || (a.chars().count() >= 5
            && b.chars().count() >= 5
            && a.chars().take(5).eq(b.chars().take(5)))
}

/// How well `name` and `description` match the intent's words.
fn overlap(intent: &[String], name: &str, description: &str) -> usize {
    let count = |text: &str| {
        let ws = words(text);
        intent
            .iter()
            .filter(|i| ws.iter().any(|w| same_word(i, w)))
            .count()
    };
    2 * count(name) + count(description)
}

/// The index of the entry that best matches `intent`: most overlap, the
/// first of equals.
fn best<'a>(intent: &[String], entries: impl Iterator<Item = (&'a str, &'a str)>) -> usize {
    let mut best = (0, 0);
    for (i, (name, description)) in entries.enumerate() {
        let score = overlap(intent, name, description);
        if score > best.1 {
            best = (i, score);
        }
    }
    best.0
}

/// `v[key]` as a string, `""` when absent.
fn field<'v>(v: &'v Value, key: &str) -> &'v str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

fn str_of(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_owned)
}

/// The invocation metadata of an agent for an intent whose words are
/// `intent` (see the module documentation).
pub(super) fn invocation(d: &Descriptor, doc: &Value, intent: &[String]) -> Invocation {
    match d.format {
        DocumentFormat::Aidip => aidip(d, doc, intent),
        DocumentFormat::Adp => adp(d, doc, intent),
        other => from_descriptor(other, d),
    }
}

/// What the descriptor alone says, for formats whose documents name no
/// operations agentmesh reads (A2A skills, catalog entries, DNS records,
/// MCP servers): their protocol, endpoint and auth.
fn from_descriptor(format: DocumentFormat, d: &Descriptor) -> Invocation {
    Invocation {
        protocol: match format {
            DocumentFormat::McpRegistry => "mcp",
            other => other.as_str(),
        },
        endpoint: d.endpoint.clone(),
        method: None,
        operation: None,
        description: None,
        input_schema: None,
        output_schema: None,
        input_media: None,
        auth: d.auth.clone().unwrap_or_else(|| "none".into()),
        auth_scopes: None,
    }
}

fn aidip(d: &Descriptor, doc: &Value, intent: &[String]) -> Invocation {
    let auth = doc.get("authentication");
    let mut out = Invocation {
        protocol: "aidip",
        endpoint: d.endpoint.clone(),
        method: Some("POST"),
        operation: None,
        description: None,
        input_schema: doc.get("inputs").cloned(),
        output_schema: doc.get("outputs").cloned(),
        input_media: None,
        auth: auth
            .and_then(|a| str_of(a, "type"))
            .unwrap_or_else(|| "none".into()),
        auth_scopes: auth.and_then(|a| a.get("scopes")).cloned(),
    };
    let ops = doc
        .get("operations")
        .and_then(Value::as_array)
        .filter(|o| !o.is_empty());
    if let Some(ops) = ops {
        let i = best(
            intent,
            ops.iter()
                .map(|op| (field(op, "name"), field(op, "description"))),
        );
        let op = &ops[i];
        out.operation = str_of(op, "name");
        out.description = str_of(op, "description");
        out.input_schema = op.get("inputs").cloned();
        out.output_schema = op.get("outputs").cloned();
    }
    out
}

fn adp(d: &Descriptor, doc: &Value, intent: &[String]) -> Invocation {
    let endpoint = doc
        .get("endpoints")
        .and_then(|e| str_of(e, "tasks"))
        .or_else(|| doc.get("interfaces").and_then(|i| str_of(i, "api")))
        .or_else(|| d.endpoint.clone());
    let auth = doc
        .get("security")
        .and_then(|s| s.get("authMethods"))
        .and_then(Value::as_array)
        .and_then(|m| m.first())
        .and_then(Value::as_str)
        .unwrap_or("none")
        .to_owned();
    let caps: &[Value] = doc
        .get("capabilities")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice);
    let cap = (!caps.is_empty()).then(|| {
        &caps[best(
            intent,
            caps.iter().map(|c| {
                let name = if field(c, "name").is_empty() {
                    field(c, "id")
                } else {
                    field(c, "name")
                };
                (name, field(c, "description"))
            }),
        )]
    });
    Invocation {
        protocol: "adp",
        endpoint,
        method: None,
        operation: cap.and_then(|c| str_of(c, "id")),
        description: cap.and_then(|c| str_of(c, "description")),
        input_schema: None,
        output_schema: None,
        input_media: cap.and_then(|c| c.get("input")).cloned(),
        auth,
        auth_scopes: None,
    }
}
