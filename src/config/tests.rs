//! Tests of the configuration: defaults, overrides in order, unknown
//! keys named, and every invariant `validate` checks.

use super::*;

fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn default_is_a_working_single_node() {
    let c = Config::default();
    c.validate().unwrap();
    assert_eq!(c.api.listen.to_string(), "127.0.0.1:7700");
    assert_eq!(c.data_dir, PathBuf::from("./agentmesh-data"));
    assert_eq!(c.p2p.listen[0], "/ip4/0.0.0.0/tcp/7701");
    assert!(!c.crawl.allow_private_addresses);
}

#[test]
fn file_then_environment_override() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.toml");
    std::fs::write(
        &path,
        "data_dir = \"/var/lib/am\"\n[api]\nlisten = \"127.0.0.1:9000\"\nmax_limit = 50\n[store]\nrecord_ttl = \"2h\"\n",
    )
    .unwrap();
    let c = Config::load(
        Some(&path),
        env(&[
            ("AGENTMESH_API__MAX_LIMIT", "70"),
            ("AGENTMESH_CRAWL__ALLOW_PRIVATE_ADDRESSES", "true"),
            ("OTHER__X", "1"),
        ]),
    )
    .unwrap();
    assert_eq!(c.data_dir, PathBuf::from("/var/lib/am"));
    assert_eq!(c.api.listen.port(), 9000);
    assert_eq!(c.api.max_limit, 70);
    assert_eq!(c.store.record_ttl, Duration::from_secs(7200));
    assert!(c.crawl.allow_private_addresses);
}

#[test]
fn a_semantic_model_needs_the_feature_and_a_path() {
    let c = Config::load(
        None,
        env(&[("AGENTMESH_SEARCH__SEMANTIC_MODEL", "/opt/model")]),
    );
    if cfg!(feature = "semantic") {
        let c = c.unwrap();
        assert_eq!(c.search.semantic_model, Some(PathBuf::from("/opt/model")));
    } else {
        let err = c.unwrap_err().to_string();
        assert!(err.contains("search.semantic_model"), "{err}");
        assert!(err.contains("--features semantic"), "{err}");
    }
    assert_eq!(Config::default().search.semantic_model, None);
    for bad in ["1.5", "-0.1", "nan"] {
        let err = Config::load(None, env(&[("AGENTMESH_SEARCH__SEMANTIC_WEIGHT", bad)]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("search.semantic_weight"), "{bad}: {err}");
    }
}

#[test]
fn unknown_keys_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.toml");
    std::fs::write(&path, "[api]\nlisten_addr = \"127.0.0.1:1\"\n").unwrap();
    let err = Config::load(Some(&path), vec![]).unwrap_err().to_string();
    assert!(err.contains("listen_addr"), "{err}");
    let err = Config::load(None, env(&[("AGENTMESH_API__BOGUS", "1")]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("bogus"), "{err}");
}

#[test]
fn a_value_that_reads_as_a_number_can_still_be_a_string() {
    let c = Config::load(
        None,
        env(&[
            ("AGENTMESH_API__ADMIN_TOKEN", "2718281828459045"),
            ("AGENTMESH_API__MAX_LIMIT", "70"),
        ]),
    )
    .unwrap();
    assert_eq!(c.api.admin_token.as_deref(), Some("2718281828459045"));
    assert_eq!(c.api.max_limit, 70);
}

#[test]
fn per_address_limits_are_read_and_checked() {
    let c = Config::load(
        None,
        env(&[
            ("AGENTMESH_CRAWL__PER_ADDRESS_CONCURRENCY", "16"),
            ("AGENTMESH_CRAWL__PER_ADDRESS_INTERVAL", "20ms"),
            ("AGENTMESH_CRAWL__PER_ADDRESS_BURST", "32"),
            ("AGENTMESH_CRAWL__PER_HOST_BURST", "1"),
        ]),
    )
    .unwrap();
    assert_eq!(c.crawl.per_address_burst, 32);
    assert_eq!(c.crawl.per_host_burst, 1);
    assert_eq!(c.crawl.per_address_concurrency, 16);
    assert_eq!(c.crawl.per_address_interval, Duration::from_millis(20));
    for (key, bad, named) in [
        (
            "AGENTMESH_CRAWL__PER_ADDRESS_CONCURRENCY",
            "0",
            "crawl.per_address_concurrency",
        ),
        (
            "AGENTMESH_CRAWL__PER_ADDRESS_CONCURRENCY",
            "257",
            "crawl.per_address_concurrency",
        ),
        (
            "AGENTMESH_CRAWL__PER_ADDRESS_INTERVAL",
            "61s",
            "crawl.per_address_interval",
        ),
        (
            "AGENTMESH_CRAWL__PER_ADDRESS_BURST",
            "0",
            "crawl.per_address_burst",
        ),
        (
            "AGENTMESH_CRAWL__PER_HOST_BURST",
            "0",
            "crawl.per_host_burst",
        ),
        (
            "AGENTMESH_CRAWL__PER_HOST_BURST",
            "65",
            "crawl.per_host_burst",
        ),
    ] {
        let err = Config::load(None, env(&[(key, bad)])).unwrap_err();
        assert!(
            matches!(err, ConfigError::Invalid { key, .. } if key == named),
            "{bad}: {err}"
        );
    }
}

#[test]
fn bad_values_are_refused() {
    let err = Config::load(None, env(&[("AGENTMESH_API__MAX_BODY_BYTES", "10")])).unwrap_err();
    assert!(
        matches!(
            err,
            ConfigError::Invalid {
                key: "api.max_body_bytes",
                ..
            }
        ),
        "{err}"
    );
    let err = Config::load(None, env(&[("AGENTMESH_API__LISTEN", "not-an-address")])).unwrap_err();
    assert!(err.to_string().contains("AGENTMESH_API__LISTEN"), "{err}");
    let missing = Config::load(Some(Path::new("/nonexistent/agentmesh.toml")), vec![]).unwrap_err();
    assert!(matches!(missing, ConfigError::Read { .. }));
}

#[test]
fn secrets_are_redacted_from_debug_and_read_from_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("token");
    std::fs::write(&file, "a-token-from-a-file-of-secrets\nignored\n").unwrap();
    let c = Config::load(
        None,
        [(
            "AGENTMESH_API__ADMIN_TOKEN_FILE".to_owned(),
            file.display().to_string(),
        )],
    )
    .unwrap();
    assert_eq!(
        c.api.admin_token.as_deref(),
        Some("a-token-from-a-file-of-secrets")
    );
    let shown = format!("{c:?}");
    assert!(!shown.contains("a-token-from-a-file"), "{shown}");
    assert!(shown.contains("<redacted>"), "{shown}");

    std::fs::write(&file, "\n").unwrap();
    let err = Config::load(
        None,
        [(
            "AGENTMESH_API__ADMIN_TOKEN_FILE".to_owned(),
            file.display().to_string(),
        )],
    )
    .unwrap_err();
    assert!(err.to_string().contains("api.admin_token_file"), "{err}");
    let missing = dir.path().join("missing");
    assert!(Config::load(
        None,
        [(
            "AGENTMESH_API__ADMIN_TOKEN_FILE".to_owned(),
            missing.display().to_string()
        )],
    )
    .is_err());
}

#[test]
fn jwt_settings_are_checked() {
    let load = |vars: &[(&str, &str)]| {
        Config::load(
            None,
            vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
        )
    };
    let base = [
        ("AGENTMESH_API__JWT__ISSUER", "https://login.test/"),
        ("AGENTMESH_API__JWT__AUDIENCE", "agentmesh"),
    ];
    let with = |extra: (&'static str, &'static str)| {
        let mut v = base.to_vec();
        v.push(extra);
        v
    };
    let ok = load(&with((
        "AGENTMESH_API__JWT__JWKS_URL",
        "https://login.test/jwks",
    )))
    .unwrap();
    let jwt = ok.api.jwt.unwrap();
    assert_eq!(jwt.scope_claim, "scope");
    assert_eq!(jwt.leeway, std::time::Duration::from_secs(60));
    for (vars, key) in [
        (
            with(("AGENTMESH_API__JWT__JWKS_URL", "http://login.test/jwks")),
            "api.jwt.jwks_url",
        ),
        (base.to_vec(), "api.jwt"),
    ] {
        let err = load(&vars).unwrap_err().to_string();
        assert!(err.contains(key), "{err}");
    }
}

#[test]
fn audit_retention_is_an_age_or_a_count() {
    use super::AuditRetention;
    let c = Config::load(
        None,
        env(&[("AGENTMESH_STORE__AUDIT_RETENTION", "\"90d\"")]),
    )
    .unwrap();
    assert_eq!(
        c.store.audit_retention,
        Some(AuditRetention::Age(Duration::from_secs(90 * 24 * 3600)))
    );
    let c = Config::load(None, env(&[("AGENTMESH_STORE__AUDIT_RETENTION", "1000")])).unwrap();
    assert_eq!(c.store.audit_retention, Some(AuditRetention::Entries(1000)));
    assert_eq!(Config::default().store.audit_retention, None);
    assert!(Config::load(
        None,
        env(&[("AGENTMESH_STORE__AUDIT_RETENTION", "\"soon\"")])
    )
    .is_err());
}

#[test]
fn serving_and_limit_keys_are_read_and_checked() {
    let config = Config::load(
        None,
        env(&[
            ("AGENTMESH_API__LIMITS__READS", "5"),
            ("AGENTMESH_API__LIMITS__WINDOW", "2s"),
            (
                "AGENTMESH_API__TRUSTED_PROXIES",
                "[\"10.0.0.0/8\", \"192.0.2.7\"]",
            ),
        ]),
    )
    .unwrap();
    assert_eq!(config.api.limits.reads, 5);
    assert_eq!(config.api.limits.window, Duration::from_secs(2));
    let shown: Vec<String> = config
        .api
        .trusted_proxies
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(shown, ["10.0.0.0/8", "192.0.2.7"]);
    for (name, value, key) in [
        ("AGENTMESH_API__LIMITS__READS", "0", "api.limits.reads"),
        ("AGENTMESH_API__LIMITS__IMPORT", "0", "api.limits.import"),
        ("AGENTMESH_API__LIMITS__WINDOW", "0s", "api.limits.window"),
        (
            "AGENTMESH_API__LIMITS__MAX_TRACKED",
            "0",
            "api.limits.max_tracked",
        ),
        (
            "AGENTMESH_API__HEADER_READ_TIMEOUT",
            "0s",
            "api.header_read_timeout",
        ),
        (
            "AGENTMESH_API__BODY_READ_TIMEOUT",
            "0s",
            "api.body_read_timeout",
        ),
        (
            "AGENTMESH_API__MAX_CONNECTIONS_PER_IP",
            "5000",
            "api.max_connections_per_ip",
        ),
    ] {
        match Config::load(None, env(&[(name, value)])) {
            Err(ConfigError::Invalid { key: k, .. }) => assert_eq!(k, key, "{name}={value}"),
            other => panic!("{name}={value}: {other:?}"),
        }
    }
    let err = Config::load(
        None,
        env(&[("AGENTMESH_API__TRUSTED_PROXIES", "[\"proxy.example\"]")]),
    )
    .unwrap_err();
    assert!(err.to_string().contains("proxy.example"), "{err}");
}

#[test]
fn tls_settings_read_from_toml_and_client_entries_need_a_ca() {
    let with_entries = |ca: &str| {
        format!(
            "[api.tls]\ncert_file = \"c.pem\"\nkey_file = \"k.pem\"\n{ca}\n\
             [[api.tls.clients]]\nname = \"east\"\nsubject = \"east.example\"\nscopes = [\"read\"]\n"
        )
    };
    let config: Config = toml::from_str(&with_entries("client_ca_files = [\"ca.pem\"]")).unwrap();
    config.validate().unwrap();
    let tls = config.api.tls.unwrap();
    assert_eq!(tls.client_ca_files, [std::path::PathBuf::from("ca.pem")]);
    assert_eq!(tls.clients[0].name, "east");
    assert_eq!(tls.clients[0].fingerprint, None);

    let without_ca: Config = toml::from_str(&with_entries("")).unwrap();
    let err = without_ca.validate().unwrap_err().to_string();
    assert!(
        err.contains("api.tls.clients") && err.contains("client_ca_files"),
        "{err}"
    );
    let typo = "[api.tls]\ncert_file = \"c\"\nkey_file = \"k\"\nclient_ca_file = \"ca\"\n";
    let err = toml::from_str::<Config>(typo).unwrap_err().to_string();
    assert!(err.contains("client_ca_file"), "{err}");
}
