use super::*;

#[test]
fn json_shape_limits() {
    assert!(
        check_json_shape(br#"{"a":[1,2,{"b":"[[[[[[[[["}]}"#).is_ok(),
        "brackets in strings do not count"
    );
    let deep = "[".repeat(MAX_JSON_DEPTH + 1);
    assert!(matches!(
        check_json_shape(deep.as_bytes()),
        Err(CrawlError::JsonTooDeep { .. })
    ));
    let wide = format!("[{}]", "1,".repeat(MAX_JSON_VALUES + 1));
    assert!(matches!(
        check_json_shape(wide.as_bytes()),
        Err(CrawlError::JsonTooLarge { .. })
    ));
    assert!(
        check_json_shape(br#"{"s":"a\"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["}"#).is_ok(),
        "escaped quotes stay in the string"
    );
}

#[test]
fn literal_internal_hosts_are_refused() {
    let strict = AddressPolicy::default();
    for url in [
        "https://127.0.0.1/a",
        "https://[::1]:8443/a",
        "https://10.0.0.1/",
        "https://169.254.169.254/latest",
    ] {
        let url = Url::parse(url).unwrap();
        assert!(
            matches!(
                check_literal_host(&url, strict),
                Err(CrawlError::AddressNotAllowed { .. })
            ),
            "{url}"
        );
    }
    assert!(check_literal_host(&Url::parse("https://93.184.216.34/").unwrap(), strict).is_ok());
    assert!(check_literal_host(&Url::parse("https://example.org/").unwrap(), strict).is_ok());
}

#[test]
fn only_443_and_the_configured_ports_are_allowed() {
    let default = super::super::AllowedPorts::default();
    for ok in [
        "https://a.test/.well-known/agent.json",
        "https://a.test:443/x",
        "wss://a.test/chat",
    ] {
        assert!(default.check(&Url::parse(ok).unwrap()).is_ok(), "{ok}");
    }
    for refused in [
        "https://a.test:25/",
        "wss://a.test:8443/chat",
        "https://10.0.0.1:22/",
    ] {
        assert!(
            matches!(
                default.check(&Url::parse(refused).unwrap()),
                Err(CrawlError::PortNotAllowed { .. })
            ),
            "{refused}"
        );
    }
    let configured = super::super::AllowedPorts::new([8443, 8443]);
    assert_eq!(configured.ports(), [443, 8443]);
    assert!(configured
        .check(&Url::parse("wss://a.test:8443/chat").unwrap())
        .is_ok());
    assert_eq!(
        CrawlError::PortNotAllowed {
            url: "https://a.test:25/".into(),
            port: 25
        }
        .reason(),
        crate::trust::Reason::PortNotAllowed
    );
}

#[tokio::test]
async fn a_fetch_or_a_redirect_to_a_port_not_allowed_is_refused() {
    let options = crate::crawl::CrawlerOptions::default();
    let fetcher = Fetcher::new(FetchOptions {
        policy: AddressPolicy {
            allow_private: true,
        },
        tls: options.tls_config().unwrap(),
        connect_timeout: Duration::from_secs(1),
        timeout: Duration::from_secs(1),
        limiter: HostLimiter::new(polite::Politeness::default()),
        user_agent: polite::USER_AGENT.into(),
        allowed_ports: super::super::AllowedPorts::default(),
    });
    let url = Url::parse("https://a.test:2525/.well-known/agent.json").unwrap();
    let ip: IpAddr = "127.0.0.1".parse().unwrap();
    assert!(matches!(
        fetcher.fetch(&url, &[ip], None).await,
        Err(CrawlError::PortNotAllowed { port: 2525, .. })
    ));
    let head = exchange::Ask {
        method: reqwest::Method::HEAD,
        headers: Vec::new(),
        body: None,
    };
    assert!(matches!(
        fetcher
            .exchange(&url, &[ip], &head, Duration::from_secs(1), |_, _| false)
            .await,
        Err(CrawlError::PortNotAllowed { port: 2525, .. })
    ));
    // A redirect hop is checked by the same function before it is
    // requested.
    assert!(matches!(
        fetcher.check_url(&url),
        Err(CrawlError::PortNotAllowed { .. })
    ));
}

#[test]
fn max_age_is_read_from_cache_control() {
    let mut h = HeaderMap::new();
    h.insert(CACHE_CONTROL, "public, max-age=300".parse().unwrap());
    assert_eq!(max_age(&h), Some(300));
    h.insert(CACHE_CONTROL, "no-store".parse().unwrap());
    assert_eq!(max_age(&h), None);
}
