//! The reference parts of the documentation, derived from the code so
//! that a key, a route or a protocol constant changed in the code without
//! its document fails here: the README's configuration block (every key
//! with its default) and route table (the OpenAPI document's routes), and
//! the contract names and limits `docs/protocol.md` states.

use std::collections::{BTreeSet, HashMap};

use serde_json::Value;

use super::section_blocks;
use crate::common::repo_root;

/// The README section holding the configuration reference (its first
/// ```` ```toml ```` block).
const CONFIG_HEADING: &str = "## Configuration";
/// The README section holding the route table.
const ROUTES_HEADING: &str = "## The API";

/// The keys of a configuration, `section.key` (or `key` at the top),
/// with their values, from its JSON form (where an unset option is
/// `null`, so optional keys are listed too).
fn config_keys(config: &agentmesh::config::Config) -> Vec<(String, Value)> {
    let json = serde_json::to_value(config).expect("a Config serializes to JSON");
    let Value::Object(top) = json else {
        panic!("a Config serializes to a JSON object, got {json}");
    };
    let mut keys = Vec::new();
    flatten_keys("", top, &mut keys);
    keys
}

/// The keys of `table` under `prefix`, each table within it (`[api.limits]`)
/// walked in turn.
fn flatten_keys(
    prefix: &str,
    table: serde_json::Map<String, Value>,
    keys: &mut Vec<(String, Value)>,
) {
    for (name, value) in table {
        let key = if prefix.is_empty() {
            name
        } else {
            format!("{prefix}.{name}")
        };
        match value {
            Value::Object(inner) => flatten_keys(&key, inner, keys),
            other => keys.push((key, other)),
        }
    }
}

/// The README's configuration block: the TOML text with commented-out
/// keys (`# admin_token = "..."`, the options unset by default) switched
/// on, and the keys it names.
fn config_block(readme: &str) -> Result<(String, Vec<String>), String> {
    let block = section_blocks(readme, CONFIG_HEADING)?
        .into_iter()
        .find(|b| b.lang == "toml")
        .ok_or_else(|| format!("README.md's {CONFIG_HEADING:?} section has no ```toml block"))?;
    let mut text = String::new();
    let mut keys = Vec::new();
    let mut section = String::new();
    for line in &block.lines {
        let trimmed = line.trim_start();
        let uncommented = trimmed.strip_prefix("# ").unwrap_or(trimmed);
        let is_key = uncommented
            .split_once('=')
            .is_some_and(|(k, _)| !k.trim().is_empty() && !k.trim().contains(' '));
        if let Some(name) = trimmed.strip_prefix('[') {
            section = name.trim_end().trim_end_matches(']').to_owned();
            text.push_str(line);
        } else if is_key {
            let key = uncommented.split_once('=').expect("a key line").0.trim();
            keys.push(if section.is_empty() {
                key.to_owned()
            } else {
                format!("{section}.{key}")
            });
            text.push_str(uncommented);
        } else {
            text.push_str(line);
        }
        text.push('\n');
    }
    Ok((text, keys))
}

/// What differs between the README's configuration block and the
/// configuration the node accepts: keys missing from the block, and keys
/// whose value there is not the default. A key the node does not accept
/// fails the parse.
fn config_differences(readme: &str) -> Result<Vec<String>, String> {
    use agentmesh::config::Config;
    let (text, listed) = config_block(readme)?;
    let shown: Config = toml::from_str(&text)
        .map_err(|e| format!("README.md's configuration block is not a valid config: {e}"))?;
    let shown: HashMap<String, Value> = config_keys(&shown).into_iter().collect();
    let mut differences = Vec::new();
    for (key, default) in config_keys(&Config::default()) {
        if !listed.contains(&key) {
            differences.push(format!("{key} (default {default}) is not in the block"));
        } else if !default.is_null() && shown[&key] != default {
            differences.push(format!(
                "{key}: the block shows {}, the default is {default}",
                shown[&key]
            ));
        }
    }
    Ok(differences)
}

#[test]
fn readme_lists_every_config_key_with_its_default() {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).expect("README.md");
    let differences = config_differences(&readme).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        differences.is_empty(),
        "README.md's configuration block ({CONFIG_HEADING:?}) does not match \
         agentmesh::config::Config::default():\n  {}",
        differences.join("\n  ")
    );
}

#[test]
fn config_check_catches_missing_keys_and_wrong_defaults() {
    // The defaults as TOML: every key but the unset options.
    let defaults = toml::to_string(&agentmesh::config::Config::default()).expect("TOML");
    let sample = |toml: &str| format!("# x\n\n{CONFIG_HEADING}\n\n```toml\n{toml}```\n\n## Next\n");
    let mut differences = config_differences(&sample(&defaults)).unwrap();
    differences.sort();
    assert_eq!(differences.len(), 9, "{differences:?}");
    let options = [
        "api.admin_token",
        "api.admin_token_file",
        "api.jwt",
        "api.tls",
        "crawl.contact",
        "search.semantic_model",
        "store.audit_retention",
        "store.log_origin",
        "store.max_bytes",
    ];
    for (difference, key) in differences.iter().zip(options) {
        assert!(difference.starts_with(key), "{difference}");
    }
    // The options, commented out as the README shows them.
    let complete = defaults
        .replace(
            "[api]\n",
            "[api]\n# admin_token = \"t\"\n# admin_token_file = \"f\"\n# jwt = { issuer = \"i\", audience = \"a\", jwks_file = \"f\" }\n# tls = { cert_file = \"c\", key_file = \"k\" }\n",
        )
        .replace("[crawl]\n", "[crawl]\n# contact = \"c\"\n")
        .replace("[search]\n", "[search]\n# semantic_model = \"m\"\n")
        .replace(
            "[store]\n",
            "[store]\n# audit_retention = \"30d\"\n# log_origin = \"o\"\n# max_bytes = 1\n",
        );
    assert_eq!(config_differences(&sample(&complete)), Ok(vec![]));

    let without = complete.replace("default_limit = 20\n", "");
    let differences = config_differences(&sample(&without)).unwrap();
    assert!(
        differences == ["api.default_limit (default 20) is not in the block"],
        "{differences:?}"
    );
    let wrong = complete.replace("max_limit = 100\n", "max_limit = 99\n");
    let differences = config_differences(&sample(&wrong)).unwrap();
    assert!(
        differences == ["api.max_limit: the block shows 99, the default is 100"],
        "{differences:?}"
    );
    let unknown = complete.replace("max_limit = 100\n", "max_limit = 100\nno_such_key = 1\n");
    let err = config_differences(&sample(&unknown)).expect_err("an unknown key is refused");
    assert!(err.contains("no_such_key"), "{err}");
}

/// The `METHOD /path` pairs of the README's route table: each code span
/// of a row's first cell that starts with a method, query left out.
fn readme_routes(readme: &str) -> Result<BTreeSet<String>, String> {
    let lines: Vec<&str> = readme.lines().collect();
    let start = lines
        .iter()
        .position(|l| l.trim_end() == ROUTES_HEADING)
        .ok_or_else(|| format!("README.md has no {ROUTES_HEADING:?} section"))?;
    let mut routes = BTreeSet::new();
    for line in &lines[start + 1..] {
        if line.starts_with("## ") || line.starts_with("# ") || line.starts_with("### ") {
            break;
        }
        let Some(first) = line.strip_prefix('|').and_then(|l| l.split('|').next()) else {
            continue;
        };
        for span in first.split('`').skip(1).step_by(2) {
            let Some((method, path)) = span.split_once(' ') else {
                continue;
            };
            if ["GET", "POST", "PUT", "DELETE", "PATCH"].contains(&method) {
                let path = path.split('?').next().unwrap_or(path);
                routes.insert(format!("{method} {path}"));
            }
        }
    }
    if routes.is_empty() {
        return Err(format!(
            "README.md's {ROUTES_HEADING:?} section has no route table (rows whose first cell \
             holds `METHOD /path`)"
        ));
    }
    Ok(routes)
}

/// The `METHOD /path` pairs of an OpenAPI document.
fn document_routes(doc: &Value) -> BTreeSet<String> {
    let paths = doc["paths"].as_object().expect("the document has paths");
    paths
        .iter()
        .flat_map(|(path, item)| {
            let methods = item.as_object().expect("a path item is an object");
            methods
                .keys()
                .filter(|m| ["get", "post", "put", "delete", "patch"].contains(&m.as_str()))
                .map(move |m| format!("{} {path}", m.to_uppercase()))
        })
        .collect()
}

/// The routes the document has and the README's table lacks, and the
/// other way round.
fn route_differences(readme: &str, doc: &Value) -> Result<Vec<String>, String> {
    let table = readme_routes(readme)?;
    let served = document_routes(doc);
    let mut differences: Vec<String> = served
        .difference(&table)
        .map(|r| format!("{r} is served but not in the table"))
        .collect();
    differences.extend(
        table
            .difference(&served)
            .map(|r| format!("{r} is in the table but not in the OpenAPI document")),
    );
    Ok(differences)
}

#[test]
fn readme_route_table_is_the_openapi_document() {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).expect("README.md");
    let differences = route_differences(&readme, &agentmesh::api::openapi_document())
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        differences.is_empty(),
        "README.md's route table ({ROUTES_HEADING:?}) and the OpenAPI document differ:\n  {}",
        differences.join("\n  ")
    );
}

#[test]
fn route_check_catches_missing_and_extra_rows() {
    let text = "## The API\n\n| method and path | what |\n| --- | --- |\n\
        | `GET /a?x=1`, `POST /a` | both |\n| `DELETE /gone` | not served |\n\n## Next\n\
        | `GET /b` | another section |\n";
    let doc = serde_json::json!({"paths": {
        "/a": {"get": {}, "post": {}, "parameters": []},
        "/b": {"get": {}}
    }});
    let differences = route_differences(text, &doc).unwrap();
    assert_eq!(
        differences,
        [
            "GET /b is served but not in the table",
            "DELETE /gone is in the table but not in the OpenAPI document"
        ]
    );
    let err = route_differences("## The API\n\nno table\n", &doc).expect_err("no table");
    assert!(err.contains("no route table"), "{err}");
}

/// The contract names and limits `docs/protocol.md` states, each as the
/// document spells it, from the constants the node uses.
fn protocol_facts() -> Vec<String> {
    use agentmesh::{adp, federation, identity, mesh, record, trust};
    let text = |bytes: &[u8]| String::from_utf8(bytes.to_vec()).expect("a UTF-8 prefix");
    let quoted = |s: &str| format!("\"{}\"", s.escape_default());
    let mut facts = vec![
        format!("`{}`", mesh::KAD_PROTOCOL),
        format!("`{}`", mesh::SEARCH_PROTOCOL),
        format!("`{}`", mesh::RECORDS_TOPIC),
        format!("`{}`", mesh::IDENTIFY_PROTOCOL),
        format!("shard count S ({})", mesh::MeshConfig::default().shards),
        quoted(&text(record::SIGNING_CONTEXT)),
        quoted(&text(record::TRANSFER_CONTEXT)),
        quoted(adp::handshake::SIGNING_PREFIX),
        quoted(adp::rotation::SIGNING_PREFIX),
        format!("{} bytes", record::MAX_RECORD_BYTES),
        format!("{} characters in all", identity::FINGERPRINT_LEN),
        format!(
            "more than {} s in the future",
            federation::MAX_CLOCK_SKEW_SECS
        ),
        format!(
            "at most {} hours old",
            federation::MAX_LIVENESS_AGE_SECS / 3600
        ),
        format!(
            "{} per agent (`store::MAX_CHECKS_PER_AGENT`)",
            agentmesh::store::MAX_CHECKS_PER_AGENT
        ),
        format!("at most {} bytes", record::MAX_LIVENESS_PAYLOAD_BYTES),
    ];
    facts.extend(trust::TrustLevel::ALL.map(|l| format!("| `{}` |", l.as_str())));
    facts
}

#[test]
fn protocol_doc_states_the_constants_the_node_uses() {
    let path = repo_root().join("docs/protocol.md");
    let doc = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let missing: Vec<String> = protocol_facts()
        .into_iter()
        .filter(|fact| !doc.contains(fact.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/protocol.md does not state what the code does; not found:\n  {}",
        missing.join("\n  ")
    );
}
