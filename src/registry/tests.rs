use super::*;

#[tokio::test]
async fn summaries_show_the_reasons_of_the_latest_crawl() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), 8 << 20).unwrap();
    let key = std::sync::Arc::new(ed25519_dalek::SigningKey::from_bytes(&[6u8; 32]));
    let issuer = Issuer::new(store.clone(), key, std::time::Duration::from_secs(3600));
    let registry = Registry::new(issuer.clone());
    let id = "agent:a.test";
    let evidence = Evidence {
        fingerprint: true,
        ..Evidence::default()
    };
    let descriptor = crate::record::tests::sample_descriptor(id);
    issue(&issuer, descriptor, evidence, Origin::Remote).await;
    store
        .put_report(id, b"{}".to_vec(), vec![Reason::ChallengeNoAnswer])
        .await
        .unwrap();
    let summary = registry.summary(id).await.unwrap();
    assert_eq!(summary.source, Source::Crawl);
    assert_eq!(summary.trust.reasons, [Reason::ChallengeNoAnswer]);
    assert!(summary.trust.evidence.fingerprint && !summary.trust.evidence.challenge);
    let json = serde_json::to_value(&summary).unwrap();
    assert_eq!(
        json["trust"]["reasons"],
        serde_json::json!(["challenge_no_answer"])
    );
}

/// Issues `descriptor` as a registration of this node's, with no
/// evidence.
async fn register(issuer: &Issuer, descriptor: Descriptor) {
    issue(issuer, descriptor, Evidence::default(), Origin::Local).await;
}

/// Issues `descriptor` with `evidence`, from `origin`.
async fn issue(issuer: &Issuer, descriptor: Descriptor, evidence: Evidence, origin: Origin) {
    issuer
        .descriptor(crate::issuer::DescriptorIssue {
            descriptor,
            document: "{}".into(),
            evidence,
            origin,
            expect: Expect::Any,
            durability: Durability::Periodic,
        })
        .await
        .unwrap();
}

#[tokio::test]
async fn capability_words_also_find_records_without_capability_ids() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), 8 << 20).unwrap();
    let key = std::sync::Arc::new(ed25519_dalek::SigningKey::from_bytes(&[6u8; 32]));
    let issuer = Issuer::new(store.clone(), key, std::time::Duration::from_secs(3600));
    let registry = Registry::new(issuer.clone());
    let declared = Descriptor {
        name: "Painter".into(),
        description: "Makes pictures".into(),
        capabilities: vec!["image_generation".into()],
        ..crate::record::tests::sample_descriptor("agent:painter.test")
    };
    // An imported MCP server: no capability ids, only its words.
    let imported = Descriptor {
        name: "Flux images".into(),
        description: "Generate images from text prompts".into(),
        capabilities: Vec::new(),
        format: DocumentFormat::McpRegistry,
        ..crate::record::tests::sample_descriptor("mcp:io.example/flux")
    };
    let unrelated = Descriptor {
        name: "Weather".into(),
        description: "Forecasts".into(),
        capabilities: Vec::new(),
        ..crate::record::tests::sample_descriptor("mcp:io.example/weather")
    };
    for d in [declared, imported, unrelated] {
        register(&issuer, d).await;
    }
    store.flush().await.unwrap();
    let ids = |text: &str| {
        let registry = registry.clone();
        let q = SearchQuery {
            filter: Filter::default(),
            query: Some(text.into()),
            after: None,
            limit: 10,
            explain: false,
        };
        async move {
            let page = registry.search_local(&q).await.unwrap();
            page.items.into_iter().map(|s| s.id).collect::<Vec<_>>()
        }
    };
    // The declared capability first, then the words' match; never the
    // unrelated record.
    assert_eq!(
        ids("generate images").await,
        ["agent:painter.test", "mcp:io.example/flux"]
    );
    // A page the id matches fill is not padded.
    let one = SearchQuery {
        filter: Filter::default(),
        query: Some("generate images".into()),
        after: None,
        limit: 1,
        explain: false,
    };
    let page = registry.search_local(&one).await.unwrap();
    assert_eq!(page.items.len(), 1);
    assert_eq!(page.items[0].id, "agent:painter.test");
}

/// Random populations (a few words from a small vocabulary each, some
/// declaring a status) and random queries over the same words: every
/// ranked page's scores lie in 0..1 and never rise down the page, and no
/// agent that says it is not serving is placed above one that does not.
mod score_order {
    use super::*;
    use proptest::prelude::*;

    const WORDS: [&str; 10] = [
        "translate",
        "legal",
        "contracts",
        "summarize",
        "german",
        "weather",
        "images",
        "news",
        "aviation",
        "tutoring",
    ];
    const STATUSES: [Option<&str>; 5] = [
        None,
        Some("active"),
        Some("inactive"),
        Some("deprecated"),
        Some("maintenance"),
    ];

    fn agent_strategy() -> impl Strategy<Value = (Vec<usize>, Vec<usize>, usize)> {
        (
            proptest::collection::vec(0..WORDS.len(), 1..5),
            proptest::collection::vec(0..WORDS.len(), 0..2),
            0..STATUSES.len(),
        )
    }

    fn page(population: &[(Vec<usize>, Vec<usize>, usize)], query: &str) -> Vec<Summary> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let dir = tempfile::tempdir().unwrap();
            let store = Store::open(dir.path(), 8 << 20).unwrap();
            let key = Arc::new(ed25519_dalek::SigningKey::from_bytes(&[6u8; 32]));
            let issuer = Issuer::new(store.clone(), key, std::time::Duration::from_secs(3600));
            let registry = Registry::new(issuer.clone());
            for (i, (words, caps, status)) in population.iter().enumerate() {
                let text =
                    |ix: &[usize]| ix.iter().map(|w| WORDS[*w]).collect::<Vec<_>>().join(" ");
                let descriptor = Descriptor {
                    name: format!("agent {i}"),
                    description: text(words),
                    capabilities: caps.iter().map(|c| format!("{}_work", WORDS[*c])).collect(),
                    status: STATUSES[*status].map(str::to_owned),
                    ..crate::record::tests::sample_descriptor(&format!("agent-{i}"))
                };
                register(&issuer, descriptor).await;
            }
            store.flush().await.unwrap();
            let q = SearchQuery {
                filter: Filter::default(),
                query: Some(query.into()),
                after: None,
                limit: 20,
                explain: true,
            };
            registry.search_local(&q).await.unwrap().items
        })
    }

    fn serving(s: &Summary) -> bool {
        !matches!(s.status.as_deref(), Some("inactive" | "deprecated"))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        #[test]
        fn scores_never_rise_down_a_page_and_not_serving_comes_last(
            population in proptest::collection::vec(agent_strategy(), 1..30),
            query in proptest::collection::vec(0..WORDS.len(), 1..4),
        ) {
            let query = query.iter().map(|w| WORDS[*w]).collect::<Vec<_>>().join(" ");
            let items = page(&population, &query);
            let scores: Vec<f64> = items.iter().filter_map(|s| s.score).collect();
            prop_assert_eq!(scores.len(), items.len(), "a ranked page scores every item");
            for pair in scores.windows(2) {
                prop_assert!(pair[0] >= pair[1], "scores rise: {:?}", scores);
            }
            prop_assert!(scores.iter().all(|s| (0.0..=1.0).contains(s)), "{:?}", scores);
            let first_not_serving = items.iter().position(|s| !serving(s));
            if let Some(at) = first_not_serving {
                prop_assert!(items[at..].iter().all(|s| !serving(s)), "{:?}",
                    items.iter().map(|s| (&s.id, &s.status)).collect::<Vec<_>>());
            }
            // Each explanation adds up: the score answered is the
            // weighted one unless capped by the one above, and within
            // each group the passes keep their order.
            for s in &items {
                let e = s.explain.as_ref().expect("asked to explain");
                let weighted = e.weighted.expect("a ranked result");
                prop_assert!((weighted - e.ranked.unwrap() * e.signals.weight()).abs() < 1e-9);
                prop_assert_eq!(e.capped, s.score.unwrap() + 1e-12 < weighted, "{:?}", e);
                prop_assert!(s.score.unwrap() <= weighted + 1e-9);
            }
            for pair in items.windows(2) {
                let pass = |s: &Summary| s.explain.as_ref().map(|e| e.placed_by);
                if serving(&pair[0]) == serving(&pair[1]) {
                    prop_assert!(pass(&pair[0]) <= pass(&pair[1]), "{:?}", pair);
                }
            }
        }
    }
}

/// Trust and liveness weigh agents whose words match alike: an agent this
/// node proved comes before one nothing proves, one its probe found
/// unreachable after both; a better match by words still comes before a
/// proven weaker one, and a weak one after a strong match found
/// unreachable (a weight, not a filter). `explain` says what weighed each.
#[tokio::test]
async fn trust_and_liveness_weigh_equal_matches_and_explain_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), 8 << 20).unwrap();
    let key = Arc::new(ed25519_dalek::SigningKey::from_bytes(&[6u8; 32]));
    let issuer = Issuer::new(store.clone(), key, std::time::Duration::from_secs(3600));
    let registry = Registry::new(issuer.clone());
    let legal = |id: &str, description: &str| Descriptor {
        name: "Clerk".into(),
        description: description.into(),
        capabilities: vec!["summarization".into()],
        ..crate::record::tests::sample_descriptor(id)
    };
    let full = "Summarizes legal contracts";
    for id in ["agent-unproven", "agent-unreachable"] {
        register(&issuer, legal(id, full)).await;
    }
    for (id, description) in [
        ("agent-verified", full),
        ("agent-verified-weak", "Summaries"),
    ] {
        let evidence = Evidence {
            dnssec: true,
            ..Evidence::default()
        };
        issue(&issuer, legal(id, description), evidence, Origin::Remote).await;
    }
    let now = crate::record::unix_now();
    store
        .set_freshness(
            "agent-unreachable",
            crate::store::Freshness {
                state: crate::store::FreshState::Fresh,
                checked_at: now,
                seen_at: None,
                endpoint_ok: None,
                next_check_at: now + 3600,
                liveness: Some(crate::store::Liveness {
                    state: crate::store::LiveState::Unreachable,
                    checked_at: now,
                    rtt_ms: 5000,
                    protocol: crate::store::ProbeProtocol::Aidip,
                }),
            },
        )
        .await
        .unwrap();
    store.flush().await.unwrap();
    let q = SearchQuery {
        filter: Filter::default(),
        query: Some("summarize legal contracts".into()),
        after: None,
        limit: 10,
        explain: true,
    };
    let items = registry.search_local(&q).await.unwrap().items;
    let ids: Vec<&str> = items.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "agent-verified",
            "agent-unproven",
            "agent-unreachable",
            "agent-verified-weak"
        ],
        "{items:#?}"
    );
    let why = |id: &str| {
        items
            .iter()
            .find(|s| s.id == id)
            .and_then(|s| s.explain.clone())
            .expect("every result explained")
    };
    let proven = why("agent-verified");
    assert_eq!(proven.placed_by, Pass::Words);
    assert_eq!(proven.signals.trust, TrustLevel::DnsVerified);
    assert_eq!(proven.signals.trust_weight, 0.94);
    assert_eq!(
        proven.matched["description"],
        ["summar", "legal", "contract"]
    );
    assert_eq!(proven.matched["capabilities"], ["summar"]);
    assert!(proven.unmatched.is_empty(), "{proven:?}");
    assert!(proven
        .rules
        .iter()
        .any(|r| r.contains("capability summarization: the agent offers it")));
    let down = why("agent-unreachable");
    assert_eq!(
        down.signals.liveness,
        Some(crate::store::LiveState::Unreachable)
    );
    assert_eq!(down.signals.liveness_weight, 0.5);
    let weak = why("agent-verified-weak");
    assert!(weak.unmatched.contains(&"contract".to_owned()), "{weak:?}");
    for s in &items {
        let e = s.explain.as_ref().unwrap();
        let (score, ranked, weighted) = (s.score.unwrap(), e.ranked.unwrap(), e.weighted.unwrap());
        assert!(
            (weighted - ranked * e.signals.weight()).abs() < 1e-9,
            "{e:?}"
        );
        assert!(score <= weighted + 1e-9 && (e.capped == (score + 1e-12 < weighted)));
    }
    // Asked without `explain`, the same page says nothing more.
    let plain = SearchQuery {
        explain: false,
        ..q
    };
    let items = registry.search_local(&plain).await.unwrap().items;
    assert!(items.iter().all(|s| s.explain.is_none()));
}
