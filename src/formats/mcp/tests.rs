use serde_json::json;

use super::*;

/// R@419f3c5d:docs/reference/server-json/examples/valid/with-remote.json.
fn with_remote() -> Value {
    json!({
      "$schema": "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json",
      "name": "io.github.user/remote-weather",
      "description": "Remote MCP server reachable over streamable HTTP.",
      "version": "2.1.0",
      "title": "Remote Weather",
      "websiteUrl": "https://modelcontextprotocol.io/examples",
      "repository": {
        "url": "https://github.com/modelcontextprotocol/servers",
        "source": "github",
        "subfolder": "src/weather"
      },
      "icons": [{"src": "https://example.com/icon.png", "mimeType": "image/png", "sizes": ["48x48", "96x96"]}],
      "remotes": [{
          "type": "streamable-http",
          "url": "https://{host}/mcp",
          "headers": [{ "name": "Authorization", "isSecret": true, "isRequired": true }],
          "variables": {"host": { "description": "API host", "default": "api.example.com" }}
      }]
    })
}

/// R@419f3c5d:docs/reference/server-json/examples/valid/with-package.json.
fn with_package() -> Value {
    json!({
      "$schema": "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json",
      "name": "io.github.user/local-weather",
      "description": "Local MCP server distributed as an npm package.",
      "version": "1.0.0",
      "packages": [{
          "registryType": "npm",
          "identifier": "@modelcontextprotocol/server-weather",
          "version": "1.0.0",
          "transport": { "type": "stdio" },
          "runtimeHint": "npx",
          "environmentVariables": [{ "name": "API_KEY", "isSecret": true, "isRequired": true }]
      }]
    })
}

fn official(status: &str) -> Value {
    json!({OFFICIAL_META: {"status": status, "publishedAt": "2025-01-01T10:30:00Z", "isLatest": true}})
}

fn with(mut v: Value, key: &str, value: Value) -> Value {
    v[key] = value;
    v
}

fn refusal(server: Value) -> FormatError {
    let err = parse_server(&server, None).unwrap_err();
    assert_eq!(err.reason, Reason::McpServerInvalid, "{err}");
    err
}

#[test]
fn the_examples_read_and_map() {
    let s = parse_server(&with_remote(), None).unwrap();
    assert_eq!(s.id(), "mcp:io.github.user/remote-weather");
    assert_eq!(
        s.remotes,
        [Remote {
            kind: RemoteKind::StreamableHttp,
            url: "https://{host}/mcp".into()
        }]
    );
    assert_eq!(
        s.repository_url.as_deref(),
        Some("https://github.com/modelcontextprotocol/servers")
    );
    assert_eq!(s.status, Status::Active);
    assert_eq!(
        s.to_descriptor(),
        Descriptor {
            id: "mcp:io.github.user/remote-weather".into(),
            name: "Remote Weather".into(),
            description: "Remote MCP server reachable over streamable HTTP.".into(),
            version: Some("2.1.0".into()),
            publisher: Some("io.github.user".into()),
            endpoint: Some("https://{host}/mcp".into()),
            capabilities: Vec::new(),
            tags: vec!["mcp".into(), "streamable-http".into()],
            languages: Vec::new(),
            status: Some("active".into()),
            auth: None,
            format: DocumentFormat::McpRegistry,
        }
    );

    let s = parse_server(&with_package(), None).unwrap();
    assert_eq!(
        s.packages,
        [Package {
            registry_type: "npm".into(),
            identifier: "@modelcontextprotocol/server-weather".into(),
            version: Some("1.0.0".into()),
            transport: Some("stdio".into()),
        }]
    );
    let d = s.to_descriptor();
    // No title: the name is the name.
    assert_eq!(d.name, "io.github.user/local-weather");
    assert_eq!(d.endpoint, None);
    assert_eq!(d.tags, ["mcp", "npm"]);
}

#[test]
fn status_comes_from_the_registry_metadata() {
    for (status, expected, descriptor_status) in [
        ("active", Status::Active, "active"),
        ("deprecated", Status::Deprecated, "deprecated"),
        ("deleted", Status::Deleted, "deleted"),
    ] {
        let s = parse_server(&with_remote(), Some(&official(status))).unwrap();
        assert_eq!(s.status, expected);
        assert_eq!(s.is_latest, Some(true));
        assert_eq!(s.to_descriptor().status.as_deref(), Some(descriptor_status));
    }
    let meta = json!({OFFICIAL_META: {"status": "deprecated", "statusMessage": " Use 2.0. "}});
    let s = parse_server(&with_remote(), Some(&meta)).unwrap();
    assert_eq!(s.status_message.as_deref(), Some("Use 2.0."));
    assert_eq!(s.is_latest, None);
    // No metadata, or other keys only: active.
    let other = json!({"com.example/other": {"status": "deleted"}});
    assert_eq!(
        parse_server(&with_remote(), Some(&other)).unwrap().status,
        Status::Active
    );
    for (meta, says) in [
        (
            official("suspended"),
            "/_meta/io.modelcontextprotocol.registry~1official/status: \"suspended\"",
        ),
        (
            json!({OFFICIAL_META: "active"}),
            "/_meta/io.modelcontextprotocol.registry~1official: not an object",
        ),
        (
            json!({OFFICIAL_META: {"isLatest": "yes"}}),
            "/_meta/io.modelcontextprotocol.registry~1official/isLatest: not a boolean",
        ),
    ] {
        let err = parse_server(&with_remote(), Some(&meta)).unwrap_err();
        assert_eq!(err.reason, Reason::McpServerInvalid);
        assert!(err.message.starts_with(says), "{err} should start {says:?}");
    }
}

#[test]
fn bad_servers_are_refused_naming_the_member() {
    let remote = |r: Value| with(with_remote(), "remotes", json!([r]));
    let package = |p: Value| with(with_package(), "packages", json!([p]));
    let many_remotes: Vec<Value> = (0..=MAX_REMOTES)
        .map(|i| json!({"type": "sse", "url": format!("https://example.com/{i}")}))
        .collect();
    let many_packages: Vec<Value> = (0..=MAX_PACKAGES)
        .map(|i| json!({"registryType": "npm", "identifier": format!("p{i}")}))
        .collect();
    let cases = [
        (json!("io.github.user/x"), "the server is not an object"),
        (with(with_remote(), "name", Value::Null), "/name: missing"),
        (with(with_remote(), "name", json!(1)), "/name: not a string"),
        (
            with(with_remote(), "name", json!("a/")),
            "/name: 2 characters",
        ),
        (
            with(
                with_remote(),
                "name",
                json!(format!("a/{}", "b".repeat(199))),
            ),
            "/name: 201 characters",
        ),
        (
            with(with_remote(), "name", json!("io.github.user")),
            "/name: not namespace/name",
        ),
        (
            with(with_remote(), "name", json!("io.github/user/x")),
            "/name: not namespace/name",
        ),
        (
            with(with_remote(), "name", json!("io_github/x")),
            "/name: not namespace/name",
        ),
        (
            with(with_remote(), "name", json!("io.github/x y")),
            "/name: not namespace/name",
        ),
        (
            with(with_remote(), "description", Value::Null),
            "/description: missing",
        ),
        (
            with(with_remote(), "description", json!(" ")),
            "/description: missing or empty",
        ),
        (
            with(with_remote(), "description", json!("d".repeat(101))),
            "/description: longer than 100",
        ),
        (
            with(with_remote(), "version", Value::Null),
            "/version: missing",
        ),
        (
            with(with_remote(), "version", json!("1".repeat(256))),
            "/version: longer than 255",
        ),
        (
            with(with_remote(), "title", json!(false)),
            "/title: not a string",
        ),
        (
            with(with_remote(), "repository", json!("https://github.com/x")),
            "/repository: not an object",
        ),
        (
            with(with_remote(), "remotes", json!({})),
            "/remotes: not an array",
        ),
        (
            with(with_remote(), "remotes", json!(many_remotes)),
            "/remotes: 33 items",
        ),
        (
            remote(json!("https://example.com")),
            "/remotes/0: the remote is not an object",
        ),
        (
            remote(json!({"type": "stdio", "url": "https://example.com"})),
            "/remotes/0/type: \"stdio\" is not",
        ),
        (
            remote(json!({"url": "https://example.com"})),
            "/remotes/0/type: missing",
        ),
        (remote(json!({"type": "sse"})), "/remotes/0/url: missing"),
        (
            remote(json!({"type": "sse", "url": "http://example.com/sse"})),
            "/remotes/0/url: not an https URL",
        ),
        (
            remote(json!({"type": "sse", "url": "https://"})),
            "/remotes/0/url: not an https URL",
        ),
        (
            remote(json!({"type": "sse", "url": "https://example.com/a b"})),
            "/remotes/0/url: not an https URL",
        ),
        (
            remote(
                json!({"type": "sse", "url": format!("https://example.com/{}", "a".repeat(MAX_URL_CHARS))}),
            ),
            "/remotes/0/url: longer than",
        ),
        (
            with(with_package(), "packages", json!(many_packages)),
            "/packages: 33 items",
        ),
        (
            package(json!({"identifier": "x"})),
            "/packages/0/registryType: missing",
        ),
        (
            package(json!({"registryType": "npm"})),
            "/packages/0/identifier: missing",
        ),
        (
            package(json!({"registryType": "npm", "identifier": "x", "transport": "stdio"})),
            "/packages/0/transport: not an object",
        ),
    ];
    for (server, says) in cases {
        let err = refusal(server);
        assert!(err.message.starts_with(says), "{err} should start {says:?}");
    }
}

#[test]
fn the_three_list_shapes_read() {
    let deleted = with(with_package(), "name", json!("io.github.user/gone"));
    let response = json!({
        "servers": [
            {"server": with_remote(), "_meta": official("active")},
            {"server": with_package(), "_meta": official("deprecated")},
            {"server": deleted, "_meta": official("deleted")},
        ],
        "metadata": {"count": 3, "nextCursor": "io.github.user/gone:1.0.0"}
    });
    let statuses = |list: Vec<Result<McpServer, FormatError>>| -> Vec<(String, Status)> {
        list.into_iter()
            .map(|s| s.unwrap())
            .map(|s| (s.name, s.status))
            .collect()
    };
    let expected = vec![
        ("io.github.user/remote-weather".to_string(), Status::Active),
        (
            "io.github.user/local-weather".to_string(),
            Status::Deprecated,
        ),
        ("io.github.user/gone".to_string(), Status::Deleted),
    ];
    assert!(is_list(&response));
    assert_eq!(statuses(parse_list(&response).unwrap()), expected);
    let items = response["servers"].clone();
    assert!(is_list(&items));
    assert_eq!(statuses(parse_list(&items).unwrap()), expected);
    // The seed file: bare server.json objects, no status (active).
    let seed = json!([with_remote(), with_package()]);
    let servers = statuses(parse_list(&seed).unwrap());
    assert_eq!(servers.len(), 2);
    assert!(servers.iter().all(|(_, s)| *s == Status::Active));
    // What an item holds is its server.json.
    assert_eq!(server_of(&items[0]), &with_remote());
    assert_eq!(server_of(&seed[1]), &with_package());
    assert_eq!(item_name(&items[2]), Some("io.github.user/gone"));
    assert_eq!(item_is_latest(&items[2]), Some(true));
    assert_eq!(item_is_latest(&seed[0]), None);
    let taken = into_list_items(response.clone()).unwrap();
    assert_eq!(taken.as_slice(), list_items(&response).unwrap());
    assert_eq!(into_list_items(seed.clone()).unwrap().len(), 2);
    assert!(into_list_items(with_remote()).is_err());
    assert!(!is_list(&with_remote()) && !is_list(&items[0]));
}

#[test]
fn one_bad_server_leaves_the_others_and_is_named_from_the_root() {
    let bad = with(with_remote(), "description", Value::Null);
    let response = json!({"servers": [{"server": with_package()}, {"server": bad}]});
    let list = parse_list(&response).unwrap();
    assert!(list[0].is_ok());
    let err = list[1].as_ref().unwrap_err();
    assert_eq!(err.reason, Reason::McpServerInvalid);
    assert!(
        err.message
            .starts_with("/servers/1/server/description: missing"),
        "{err}"
    );
    let list = parse_list(&json!([with_package(), {"name": "x"}, 7])).unwrap();
    assert_eq!(
        list[2].as_ref().unwrap_err().message,
        "/2: the server is not an object"
    );
    assert!(list[1]
        .as_ref()
        .unwrap_err()
        .message
        .starts_with("/1/name: 1 characters"));
    let list = parse_list(&json!([{"server": with_package(), "_meta": official("gone")}])).unwrap();
    assert!(list[0]
        .as_ref()
        .unwrap_err()
        .message
        .starts_with("/0/_meta/io.modelcontextprotocol.registry~1official/status"));
}

#[test]
fn what_is_not_a_list_is_refused() {
    let too_many = Value::Array(vec![Value::Null; MAX_LIST_ITEMS + 1]);
    for (doc, says) in [
        (json!("servers"), "neither an array nor an object"),
        (json!(7), "neither an array nor an object"),
        (with_remote(), "an object without servers"),
        (json!({"servers": {}}), "/servers is not an array"),
        (too_many, "at most 100000"),
    ] {
        let err = parse_list(&doc).unwrap_err();
        assert_eq!(err.reason, Reason::McpServerInvalid);
        assert!(err.message.contains(says), "{err} should say {says:?}");
    }
}

#[test]
fn unknown_members_are_ignored_and_names_are_checked_by_hand() {
    let s = parse_server(&with(with_package(), "x-extra", json!({"a": 1})), None).unwrap();
    assert_eq!(s.name, "io.github.user/local-weather");
    for ok in ["a/b", "com.example-x/my_server.v2", "A.B/C-D"] {
        assert!(is_server_name(ok), "{ok}");
    }
    for bad in ["/b", "a/", "a_b/c", "a/b/c", "a/b c", "a/ü"] {
        assert!(!is_server_name(bad), "{bad}");
    }
    assert!(is_https_template("HTTPS://{host}/mcp"));
    assert!(!is_https_template("https:///path"));
}
