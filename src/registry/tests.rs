use super::*;

#[tokio::test]
async fn summaries_show_the_reasons_of_the_latest_crawl() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), 8 << 20).unwrap();
    let key = std::sync::Arc::new(ed25519_dalek::SigningKey::from_bytes(&[6u8; 32]));
    let issuer = Issuer::new(store.clone(), key, std::time::Duration::from_secs(3600));
    let registry = Registry::new(issuer.clone());
    let id = "agent:a.test";
    issuer
        .descriptor(crate::issuer::DescriptorIssue {
            descriptor: crate::record::tests::sample_descriptor(id),
            document: "{}".into(),
            evidence: Evidence {
                fingerprint: true,
                ..Evidence::default()
            },
            origin: Origin::Remote,
            expect: Expect::Any,
            durability: Durability::Periodic,
        })
        .await
        .unwrap();
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
    issuer
        .descriptor(crate::issuer::DescriptorIssue {
            descriptor,
            document: "{}".into(),
            evidence: Evidence::default(),
            origin: Origin::Local,
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
        }
    }
}
