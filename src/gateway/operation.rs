//! Which operation of an AIDIP agent a call names, and whether a value
//! fits one of its schemas. An AIDIP document lists `operations` (each a
//! `name` with `inputs` and `outputs` JSON Schemas), or has top-level
//! `inputs` and `outputs`: one implied operation, which has no name.
//!
//! The schemas are the publisher's: they are compiled with the linear-time
//! `regex` engine (never a backtracking one), references to anything
//! outside the schema are not fetched, and a schema that does not compile
//! answers as the agent's fault, not the client's.

use serde_json::Value;

use super::error::{GatewayError, Violation};

/// Most violations reported for one value.
pub const MAX_VIOLATIONS: usize = 32;
/// Longest message kept for one violation, characters.
const MAX_MESSAGE_CHARS: usize = 300;

/// One operation of an agent.
#[derive(Debug, Clone, PartialEq)]
pub struct Operation {
    /// Its name; `None` for the single implied operation.
    pub name: Option<String>,
    /// JSON Schema of its input.
    pub input: Option<Value>,
    /// JSON Schema of its output.
    pub output: Option<Value>,
}

/// The operations `doc` declares, in order.
pub fn operations(doc: &Value) -> Vec<Operation> {
    if let Some(ops) = doc.get("operations").and_then(Value::as_array) {
        return ops
            .iter()
            .map(|op| Operation {
                name: op.get("name").and_then(Value::as_str).map(str::to_owned),
                input: op.get("inputs").cloned(),
                output: op.get("outputs").cloned(),
            })
            .collect();
    }
    if doc.get("inputs").is_some() || doc.get("outputs").is_some() {
        return vec![Operation {
            name: None,
            input: doc.get("inputs").cloned(),
            output: doc.get("outputs").cloned(),
        }];
    }
    Vec::new()
}

/// The operation a call names: `name` among `doc`'s operations, or, with
/// no name, the only one.
///
/// # Errors
/// [`GatewayError::UnknownOperation`] for a name the agent does not
/// declare, or no name when it declares several;
/// [`GatewayError::NoOperations`] for an agent that declares none.
pub fn choose(doc: &Value, name: Option<&str>) -> Result<Operation, GatewayError> {
    let ops = operations(doc);
    let names = || -> Vec<String> { ops.iter().filter_map(|o| o.name.clone()).collect() };
    match name {
        Some(wanted) => ops
            .iter()
            .find(|o| o.name.as_deref() == Some(wanted))
            .cloned()
            .ok_or_else(|| GatewayError::UnknownOperation {
                asked: Some(wanted.to_owned()),
                known: names(),
            }),
        None => match ops.as_slice() {
            [] => Err(GatewayError::NoOperations),
            [only] => Ok(only.clone()),
            _ => Err(GatewayError::UnknownOperation {
                asked: None,
                known: names(),
            }),
        },
    }
}

/// Most compiled schemas kept; past it the cache starts again.
const MAX_COMPILED: usize = 1024;

/// Compiled schemas by the SHA-256 of their JSON text: a schema is
/// compiled once however many calls check against it. Cheap to clone.
#[derive(Clone, Default)]
pub struct Compiled(
    std::sync::Arc<
        std::sync::Mutex<
            std::collections::HashMap<[u8; 32], std::sync::Arc<jsonschema::Validator>>,
        >,
    >,
);

impl std::fmt::Debug for Compiled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compiled").finish_non_exhaustive()
    }
}

impl Compiled {
    /// As [`check`], with the compiled schema kept for the next call.
    ///
    /// # Errors
    /// The schema's own problem, when it does not compile.
    pub fn check(&self, schema: &Value, value: &Value) -> Result<Vec<Violation>, String> {
        use sha2::{Digest as _, Sha256};
        let digest: [u8; 32] = Sha256::digest(schema.to_string().as_bytes()).into();
        let lock = || {
            self.0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        };
        let kept = lock().get(&digest).cloned();
        let validator = match kept {
            Some(v) => v,
            None => {
                let v = std::sync::Arc::new(compile(schema)?);
                let mut map = lock();
                if map.len() >= MAX_COMPILED {
                    map.clear();
                }
                map.insert(digest, v.clone());
                v
            }
        };
        Ok(violations(&validator, value))
    }
}

/// Whether `schema` (the publisher's) compiles.
fn compile(schema: &Value) -> Result<jsonschema::Validator, String> {
    jsonschema::options()
        .with_pattern_options(jsonschema::PatternOptions::regex().size_limit(1 << 20))
        .build(schema)
        .map_err(|e| e.to_string())
}

/// Checks `value` against `schema`: every violation (up to
/// [`MAX_VIOLATIONS`]), in the order found; none when it fits.
///
/// # Errors
/// The schema's own problem, when it does not compile.
pub fn check(schema: &Value, value: &Value) -> Result<Vec<Violation>, String> {
    Ok(violations(&compile(schema)?, value))
}

/// The violations of `value` against a compiled schema.
fn violations(validator: &jsonschema::Validator, value: &Value) -> Vec<Violation> {
    validator
        .iter_errors(value)
        .take(MAX_VIOLATIONS)
        .map(|e| {
            let mut message = e.to_string();
            if message.chars().count() > MAX_MESSAGE_CHARS {
                message = message.chars().take(MAX_MESSAGE_CHARS).collect::<String>() + "...";
            }
            Violation {
                field: e.instance_path.to_string(),
                message,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn two_operations() -> Value {
        json!({"operations": [
            {"name": "echo", "inputs": {"type": "object", "required": ["text"],
                "properties": {"text": {"type": "string"}, "times": {"type": "integer", "maximum": 5}}},
             "outputs": {"type": "object"}},
            {"name": "count", "inputs": {"type": "object"}, "outputs": {"type": "object"}},
        ]})
    }

    #[test]
    fn an_operation_is_chosen_by_name_or_as_the_only_one() {
        let doc = two_operations();
        assert_eq!(
            choose(&doc, Some("count")).unwrap().name.as_deref(),
            Some("count")
        );
        match choose(&doc, Some("translate")) {
            Err(GatewayError::UnknownOperation { asked, known }) => {
                assert_eq!(asked.as_deref(), Some("translate"));
                assert_eq!(known, ["echo", "count"]);
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            choose(&doc, None),
            Err(GatewayError::UnknownOperation { asked: None, .. })
        ));
        let implied = json!({"inputs": {"type": "object"}, "outputs": {"type": "object"}});
        assert_eq!(choose(&implied, None).unwrap().name, None);
        assert!(matches!(
            choose(&json!({"name": "x"}), None),
            Err(GatewayError::NoOperations)
        ));
    }

    #[test]
    fn each_violation_is_named_at_its_pointer() {
        let schema = choose(&two_operations(), Some("echo"))
            .unwrap()
            .input
            .unwrap();
        assert!(check(&schema, &json!({"text": "hi"})).unwrap().is_empty());
        let found = check(&schema, &json!({"times": 9})).unwrap();
        let fields: Vec<&str> = found.iter().map(|v| v.field.as_str()).collect();
        assert!(fields.contains(&""), "the missing text: {found:?}");
        assert!(fields.contains(&"/times"), "the too large times: {found:?}");
    }

    #[test]
    fn a_schema_is_compiled_once_and_checks_as_before() {
        let compiled = Compiled::default();
        let schema = choose(&two_operations(), Some("echo"))
            .unwrap()
            .input
            .unwrap();
        for value in [json!({"text": "hi"}), json!({"times": 9}), json!(3)] {
            assert_eq!(
                compiled.check(&schema, &value).unwrap(),
                check(&schema, &value).unwrap()
            );
        }
        assert_eq!(
            compiled.0.lock().unwrap().len(),
            1,
            "one schema, compiled once"
        );
        assert!(compiled.check(&json!({"type": 7}), &json!(1)).is_err());
    }

    #[test]
    fn a_publisher_s_pathological_pattern_is_matched_in_linear_time() {
        // Catastrophic for a backtracking engine; the regex crate runs it
        // in linear time (or refuses it), never for minutes.
        let schema = json!({"type": "string", "pattern": "^(a+)+$"});
        let value = json!(format!("{}b", "a".repeat(5000)));
        let found = check(&schema, &value).unwrap();
        assert_eq!(found.len(), 1);
        // A schema that does not compile is the publisher's problem.
        assert!(check(&json!({"type": 7}), &json!(1)).is_err());
    }
}
