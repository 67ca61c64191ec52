//! The JSON bodies a stranger sends the open API, read as the handlers
//! read them. The first byte picks the body:
//! - 0..=95: `POST /agents` (and `PUT /agents/{id}`), an AIDIP registration:
//!   the JSON extractor, then what `Registry::prepare` does (the id put
//!   in, `MetadataValidator::parse` against the AIDIP schema, the
//!   descriptor, the document as stored);
//! - 96..=175: `POST /agents/search` (`api::parse_search_body`: the
//!   extractor, the filters, the bounds, the cursor);
//! - 176..: `POST /resolve` (`ResolveRequest::parse`, the intent
//!   understood, the query peers would be sent).
#![no_main]

use std::sync::OnceLock;

use agentmesh::aidip::{self, MetadataValidator};
use agentmesh::config::ApiConfig;
use agentmesh::resolve::{Plan, ResolveRequest};
use agentmesh_fuzz::selector;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fn validator() -> &'static MetadataValidator {
    static VALIDATOR: OnceLock<MetadataValidator> = OnceLock::new();
    VALIDATOR.get_or_init(MetadataValidator::new)
}

fuzz_target!(|data: &[u8]| {
    let Some((mode, body)) = selector(data) else {
        return;
    };
    match mode {
        0..=95 => {
            let Ok(doc) = serde_json::from_slice::<Value>(body) else {
                return;
            };
            if !doc.is_object() {
                return;
            }
            let id = match doc.get("id") {
                None | Some(Value::Null) => "agent-fuzz".to_owned(),
                Some(Value::String(id)) => id.clone(),
                Some(_) => return,
            };
            let doc = aidip::with_id(&doc, &id);
            if let Ok(meta) = validator().parse(&doc) {
                let _ = meta.to_descriptor(&id);
                let _ = serde_json::to_string(&doc).expect("a Value serialises");
            }
        }
        96..=175 => {
            let _ = agentmesh::api::parse_search_body(body, &ApiConfig::default());
        }
        _ => {
            let Ok(doc) = serde_json::from_slice::<Value>(body) else {
                return;
            };
            if let Ok(request) = ResolveRequest::parse(&doc) {
                let plan = Plan::new(request);
                let _ = (plan.budget(), plan.mesh_query(), plan.mesh_view(true));
            }
        }
    }
});
