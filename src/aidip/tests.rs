//! Tests of the AIDIP document: the examples in `proto/examples/aidip`
//! (each invalid one refused at the field `proto/examples/manifest.json`
//! names), the mapping into a descriptor, reserved ids and malformed
//! languages, and [`with_id`].

use super::*;

fn examples(kind: &str) -> Vec<(String, Value)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("proto/examples/aidip")
        .join(kind);
    let mut out: Vec<(String, Value)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| {
            let path = e.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            (
                path.file_name().unwrap().to_string_lossy().into_owned(),
                serde_json::from_str(&text).unwrap(),
            )
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    assert!(!out.is_empty(), "no examples in {}", dir.display());
    out
}

#[test]
fn the_drafts_examples_are_accepted() {
    let v = MetadataValidator::new();
    for (name, doc) in examples("valid") {
        let meta = v.parse(&doc).unwrap_or_else(|p| panic!("{name}: {p:?}"));
        assert!(!meta.capabilities.is_empty(), "{name}");
    }
}

#[test]
fn every_broken_variant_is_refused_at_its_field() {
    let manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/proto/examples/manifest.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let v = MetadataValidator::new();
    for (name, doc) in examples("invalid") {
        let problems = v
            .parse(&doc)
            .err()
            .unwrap_or_else(|| panic!("{name} was accepted"));
        let entry = &manifest["aidip"]["invalid"][&name];
        let expected = entry["instance_path"]
            .as_str()
            .unwrap_or_else(|| panic!("{name} is not in the manifest"));
        // A missing property is reported at its own pointer, below the
        // object the schema keyword applies to.
        let required = entry["keyword"] == "required";
        assert!(
            problems.iter().any(|p| p.field == expected
                || (required && p.field.starts_with(&format!("{expected}/")))),
            "{name}: expected a problem at {expected:?}, got {problems:?}"
        );
    }
}

#[test]
fn translator_example_maps_into_a_normalised_descriptor_keeping_extras() {
    let doc: Value = serde_json::from_str(include_str!(
        "../../proto/examples/aidip/valid/translator-draft-example.json"
    ))
    .unwrap();
    let meta = MetadataValidator::new().parse(&doc).unwrap();
    let d = meta.to_descriptor("agent-12345");
    assert_eq!(d.capabilities, vec!["translation"]);
    assert_eq!(d.languages, vec!["en", "zh"]);
    assert_eq!(d.tags, vec!["chinese", "cloud", "english", "nlp"]);
    assert_eq!(d.auth.as_deref(), Some("api_key"));
    assert_eq!(d.status.as_deref(), Some("active"));

    let mut extra = doc.clone();
    extra["rate_limit"] = serde_json::json!({"per_minute": 60});
    let meta = MetadataValidator::new().parse(&extra).unwrap();
    assert_eq!(meta.extra["rate_limit"]["per_minute"], 60);
    assert_eq!(
        serde_json::to_value(&meta).unwrap()["rate_limit"]["per_minute"],
        60
    );
}

#[test]
fn reserved_ids_and_malformed_languages_are_refused() {
    let mut doc: Value = serde_json::from_str(include_str!(
        "../../proto/examples/aidip/valid/translator-draft-example.json"
    ))
    .unwrap();
    doc["id"] = "agent:example.com".into();
    let problems = MetadataValidator::new().parse(&doc).unwrap_err();
    assert_eq!(problems[0].field, "/id", "{problems:?}");
    doc["id"] = "agent-1".into();
    doc["supported_languages"] = serde_json::json!(["en", "e1"]);
    let problems = MetadataValidator::new().parse(&doc).unwrap_err();
    assert_eq!(problems[0].field, "/supported_languages/1", "{problems:?}");
}

#[test]
fn with_id_puts_the_id_first_and_replaces_any_other() {
    let doc = serde_json::json!({"name": "x", "id": "old"});
    let out = with_id(&doc, "new");
    assert_eq!(out.as_object().unwrap().keys().next().unwrap(), "id");
    assert_eq!(out["id"], "new");
    assert_eq!(out["name"], "x");
}
