//! The id an import gives a document without one: derived from the
//! document's canonical JSON, so the same document gets the same id on
//! every run.

use serde_json::Value;
use sha2::{Digest as _, Sha256};

use crate::registry::generated_id;

/// The id of a document given without one: `agent-` and the first 16
/// bytes of the SHA-256 of its canonical JSON (members sorted, the `id`
/// member left out).
pub(super) fn derived_id(doc: &Value) -> String {
    let mut canonical = Vec::new();
    match doc {
        Value::Object(map) => {
            let mut without_id = map.clone();
            without_id.remove("id");
            write_canonical(&Value::Object(without_id), &mut canonical);
        }
        other => write_canonical(other, &mut canonical),
    }
    let digest = Sha256::digest(&canonical);
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    generated_id(bytes)
}

/// JSON with object members in key order, no whitespace.
fn write_canonical(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Object(map) => {
            let mut members: Vec<_> = map.iter().collect();
            members.sort_by(|a, b| a.0.cmp(b.0));
            out.push(b'{');
            for (i, (k, v)) in members.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                serde_json::to_writer(&mut *out, k).expect("writing to a Vec cannot fail");
                out.push(b':');
                write_canonical(v, out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out);
            }
            out.push(b']');
        }
        scalar => serde_json::to_writer(&mut *out, scalar).expect("writing to a Vec cannot fail"),
    }
}
