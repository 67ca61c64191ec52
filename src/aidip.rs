//! The AIDIP agent metadata document (draft-cui-ai-agent-discovery-invocation,
//! "Agent Metadata Specification"): its typed form, schema validation
//! against `proto/aidip-agent.schema.json`, the mapping into a
//! [`Descriptor`], and the summary objects that searches answer.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::descriptor::{self, Descriptor, DocumentFormat};

/// The JSON Schema every registration is validated against.
pub const SCHEMA: &str = include_str!("../proto/aidip-agent.schema.json");

/// The AIDIP agent metadata document, every field of the draft; fields the
/// draft does not name are kept in `extra`, not dropped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentMetadata {
    /// Globally unique id; assigned by the registry when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Human-readable name.
    pub name: String,
    /// What the agent does, in natural language.
    pub description: String,
    /// Version of the agent or its metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The publishing organisation or developer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publisher: Option<String>,
    /// Capabilities clients filter by.
    pub capabilities: Vec<String>,
    /// Additional search tags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<Vec<String>>,
    /// Invocation endpoint URL.
    pub endpoint: String,
    /// Languages handled (BCP 47).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supported_languages: Option<Vec<String>>,
    /// How to authenticate to the agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentication: Option<Authentication>,
    /// `active`, `inactive`, `deprecated`, ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// The operations with their input and output schemas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operations: Option<Vec<Operation>>,
    /// Input schema of a single implied operation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs: Option<Value>,
    /// Output schema of a single implied operation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outputs: Option<Value>,
    /// Fields the draft leaves open (rate limits, pricing, docs...).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The `authentication` object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Authentication {
    /// `api_key`, `oauth2_bearer`, `mtls`, `none`, ...
    #[serde(rename = "type")]
    pub kind: String,
    /// How to obtain credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// OAuth 2.0 scopes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scopes: Option<Vec<String>>,
    /// Anything else.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One entry of `operations`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Operation {
    /// Operation name.
    pub name: String,
    /// What it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// JSON Schema of the input.
    pub inputs: Value,
    /// JSON Schema of the output.
    pub outputs: Value,
    /// Example input/output pairs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub examples: Option<Vec<Value>>,
    /// Anything else.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One problem found in a submitted document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct FieldProblem {
    /// JSON Pointer to the offending value (`""` for the document).
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

/// Validates documents against the AIDIP schema. Compiling the schema once
/// and sharing the validator is the cheap way to use it.
pub struct MetadataValidator {
    schema: jsonschema::Validator,
}

impl std::fmt::Debug for MetadataValidator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MetadataValidator")
    }
}

impl Default for MetadataValidator {
    fn default() -> Self {
        Self::new()
    }
}

/// Most problems reported for one document.
const MAX_PROBLEMS: usize = 32;

impl MetadataValidator {
    /// Compiles the built-in schema.
    pub fn new() -> Self {
        let schema: Value =
            serde_json::from_str(SCHEMA).expect("the built-in AIDIP schema is valid JSON");
        let schema = jsonschema::validator_for(&schema)
            .expect("the built-in AIDIP schema is a valid JSON Schema");
        Self { schema }
    }

    /// Validates `doc` and parses it; every problem is reported, not only
    /// the first (up to 32).
    ///
    /// # Errors
    /// The list of problems, each naming the field.
    pub fn parse(&self, doc: &Value) -> Result<AgentMetadata, Vec<FieldProblem>> {
        let mut problems: Vec<FieldProblem> = self
            .schema
            .iter_errors(doc)
            .take(MAX_PROBLEMS)
            .map(|e| problem_of(&e))
            .collect();
        if !problems.is_empty() {
            return Err(problems);
        }
        let meta: AgentMetadata = serde_json::from_value(doc.clone()).map_err(|e| {
            vec![FieldProblem {
                field: String::new(),
                message: e.to_string(),
            }]
        })?;
        if let Some(id) = &meta.id {
            if let Some(prefix) = descriptor::reserved_prefix(id) {
                problems.push(FieldProblem {
                    field: "/id".into(),
                    message: format!(
                        "ids starting with {prefix:?} are reserved for crawled and imported agents"
                    ),
                });
            }
        }
        for (i, tag) in meta.supported_languages.iter().flatten().enumerate() {
            if descriptor::normalise_language(tag).is_none() {
                problems.push(FieldProblem {
                    field: format!("/supported_languages/{i}"),
                    message: format!("{tag:?} is not a well-formed BCP 47 language tag"),
                });
            }
        }
        if problems.is_empty() {
            Ok(meta)
        } else {
            Err(problems)
        }
    }
}

/// Longest message kept for one problem; schema messages quote the value.
const MAX_MESSAGE_CHARS: usize = 300;

/// A schema error as a field problem: a missing property is reported at
/// its own pointer, and the document-level `anyOf` says what it wants
/// instead of quoting the whole document.
fn problem_of(e: &jsonschema::ValidationError<'_>) -> FieldProblem {
    use jsonschema::error::ValidationErrorKind as Kind;
    let path = e.instance_path.to_string();
    match &e.kind {
        Kind::Required { property } => {
            let name = property.as_str().unwrap_or_default();
            FieldProblem {
                field: format!("{path}/{name}"),
                message: format!("{name:?} is a required property"),
            }
        }
        Kind::AnyOf if path.is_empty() => FieldProblem {
            field: path,
            message: "an agent must describe its inputs and outputs: give \"operations\" \
                      or both top-level \"inputs\" and \"outputs\""
                .into(),
        },
        _ => {
            let mut message = e.to_string();
            if message.chars().count() > MAX_MESSAGE_CHARS {
                message = message.chars().take(MAX_MESSAGE_CHARS).collect::<String>() + "...";
            }
            FieldProblem {
                field: path,
                message,
            }
        }
    }
}

impl AgentMetadata {
    /// The normalised descriptor of this document under `id`.
    pub fn to_descriptor(&self, id: &str) -> Descriptor {
        let languages = self
            .supported_languages
            .iter()
            .flatten()
            .filter_map(|t| descriptor::normalise_language(t))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        Descriptor {
            id: id.to_owned(),
            name: self.name.clone(),
            description: self.description.clone(),
            version: self.version.clone(),
            publisher: self.publisher.clone(),
            endpoint: Some(self.endpoint.clone()),
            capabilities: descriptor::normalise_terms(self.capabilities.iter().map(String::as_str)),
            tags: descriptor::normalise_terms(self.tags.iter().flatten().map(String::as_str)),
            languages,
            status: self.status.as_ref().map(|s| s.trim().to_lowercase()),
            auth: self.authentication.as_ref().map(|a| a.kind.clone()),
            format: DocumentFormat::Aidip,
        }
    }
}

/// `doc` with `"id": id` as its first member (the stored form).
pub fn with_id(doc: &Value, id: &str) -> Value {
    let mut out = Map::new();
    out.insert("id".into(), Value::String(id.to_owned()));
    if let Value::Object(map) = doc {
        for (k, v) in map {
            if k != "id" {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests;
