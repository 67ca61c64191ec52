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
        issuer
            .descriptor(crate::issuer::DescriptorIssue {
                descriptor: d,
                document: "{}".into(),
                evidence: Evidence::default(),
                origin: Origin::Local,
                expect: Expect::Any,
                durability: Durability::Periodic,
            })
            .await
            .unwrap();
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
