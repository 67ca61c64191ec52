use serde_json::json;

use super::*;
use crate::descriptor::{Descriptor, DocumentFormat};
use crate::issuer::{DescriptorIssue, Durability, Issuer};
use crate::store::{Expect, Origin, Store};
use crate::trust::Evidence;

fn parse(body: Value) -> ResolveRequest {
    ResolveRequest::parse(&body).unwrap_or_else(|p| panic!("{body} refused: {p:?}"))
}

fn problems(body: Value) -> Vec<String> {
    ResolveRequest::parse(&body)
        .expect_err("the request is refused")
        .into_iter()
        .map(|p| p.field)
        .collect()
}

// ------------------------------------------------------------ the request

#[test]
fn a_full_request_parses() {
    let req = parse(json!({
        "intent": "  summarize legal documents  ",
        "context": {"language": "zh-hans", "domain": "legal", "session": "x"},
        "policy": {
            "min_trust": "dns-verified", "dnssec_required": true, "languages": ["ZH"],
            "protocols": ["A2A"], "interfaces": ["chat"], "jurisdiction": ["eu", "DE"],
            "max_price": {"amount": 0.01, "currency": "usd"}, "max_latency_ms": 500,
            "status": ["Active"], "exclude": ["agent-1"], "share_intent": true
        },
        "top": 3,
        "scope": "mesh"
    }));
    assert_eq!(req.intent, "summarize legal documents");
    assert_eq!(req.top, 3);
    assert_eq!(req.scope, Scope::Mesh);
    assert_eq!(req.context.languages, ["zh-Hans"]);
    assert_eq!(req.context.domain.as_deref(), Some("legal"));
    assert_eq!(req.context.ignored, ["session"]);
    let p = &req.policy;
    assert_eq!(p.min_trust, Some(TrustLevel::DnsVerified));
    assert!(p.dnssec_required && p.share_intent);
    assert_eq!(p.languages, ["zh"]);
    assert_eq!(p.protocols, ["a2a"]);
    assert_eq!(p.jurisdiction, ["EU", "DE"]);
    assert_eq!(
        p.max_price,
        Some(MaxPrice {
            amount: 0.01,
            currency: Some("USD".into())
        })
    );
    assert_eq!(p.status, ["active"]);
    assert_eq!(p.term_count(), 10);
}

#[test]
fn defaults_are_local_and_ten() {
    let req = parse(json!({"intent": "translate"}));
    assert_eq!((req.top, req.scope), (request::DEFAULT_TOP, Scope::Local));
    assert_eq!(req.policy, Policy::default());
}

#[test]
fn every_problem_is_reported_at_its_field() {
    let fields = problems(json!({
        "intent": "x".repeat(request::MAX_INTENT_BYTES + 1),
        "top": 51,
        "scope": "world",
        "extra": 1,
        "context": {"language": "not a tag", "domain": 3},
        "policy": {
            "min_trus": "key-verified",
            "min_trust": "trusted",
            "dnssec_required": "yes",
            "languages": ["en", "??"],
            "protocols": [],
            "status": ["ok", ""],
            "exclude": (0..33).map(|i| format!("a{i}")).collect::<Vec<_>>(),
            "jurisdiction": ["E U"],
            "max_price": {"amount": -1, "currency": "dollars", "per": "call"},
            "max_latency_ms": 0,
        }
    }));
    for expected in [
        "/intent",
        "/top",
        "/scope",
        "/extra",
        "/context/language",
        "/context/domain",
        "/policy/min_trus",
        "/policy/min_trust",
        "/policy/dnssec_required",
        "/policy/languages/1",
        "/policy/protocols",
        "/policy/status/1",
        "/policy/exclude",
        "/policy/jurisdiction/0",
        "/policy/max_price/amount",
        "/policy/max_price/currency",
        "/policy/max_price/per",
        "/policy/max_latency_ms",
    ] {
        assert!(
            fields.iter().any(|f| f == expected),
            "{expected} not in {fields:?}"
        );
    }
}

#[test]
fn an_intent_is_required_and_not_blank() {
    assert_eq!(problems(json!({})), ["/intent"]);
    assert_eq!(problems(json!({"intent": "   "})), ["/intent"]);
    assert_eq!(problems(json!({"intent": 3})), ["/intent"]);
    assert_eq!(problems(json!([1])), [""]);
    assert_eq!(problems(json!({"intent": "x", "policy": []})), ["/policy"]);
    assert_eq!(problems(json!({"intent": "x", "top": 0})), ["/top"]);
}

#[test]
fn a_bare_price_has_no_currency() {
    let req = parse(json!({"intent": "x", "policy": {"max_price": 0.5}}));
    assert_eq!(
        req.policy.max_price,
        Some(MaxPrice {
            amount: 0.5,
            currency: None
        })
    );
}

// ------------------------------------------------- what leaves for the mesh

#[test]
fn the_intent_text_goes_to_peers_only_when_the_policy_shares_it() {
    let intent = "summarize the merger agreement of ACME and Globex in Chinese";
    let private = Plan::new(parse(json!({
        "intent": intent, "policy": {"languages": ["zh"]}, "scope": "mesh"
    })));
    let q = private.mesh_query().expect("a capability is named");
    assert_eq!(q.query, None, "the text stays here");
    assert_eq!(q.filter.capabilities, ["summarization"]);
    assert_eq!(q.filter.languages, ["zh"]);
    assert!(q.filter.tags.is_empty());
    let view = private.mesh_view(true);
    assert!(!view.intent_shared);

    let shared = Plan::new(parse(json!({
        "intent": intent, "policy": {"share_intent": true}, "scope": "mesh"
    })));
    assert_eq!(shared.mesh_query().unwrap().query.as_deref(), Some(intent));
    assert!(shared.mesh_view(true).intent_shared);
}

#[test]
fn without_a_capability_or_sharing_peers_are_not_asked() {
    let plan = Plan::new(parse(json!({"intent": "something about ACME's merger"})));
    assert!(plan.understood.capabilities.is_empty());
    assert!(plan.mesh_query().is_none());
    let view = plan.mesh_view(false);
    assert!(!view.asked && view.note.is_some());
}

// ----------------------------------------------------------- policy terms

fn descriptor(id: &str, format: DocumentFormat) -> Descriptor {
    Descriptor {
        id: id.into(),
        name: id.into(),
        description: String::new(),
        version: None,
        publisher: None,
        endpoint: Some("https://a.example/x".into()),
        capabilities: vec!["summarization".into()],
        tags: vec![],
        languages: vec!["en".into(), "zh-Hant".into()],
        status: Some("active".into()),
        auth: None,
        format,
    }
}

fn check_with(
    policy: Value,
    d: &Descriptor,
    evidence: &Evidence,
    doc: &Value,
) -> Result<Vec<Reason>, ReasonCode> {
    let req = parse(json!({"intent": "summarize", "policy": policy}));
    policy::check(
        &req.policy,
        &policy::Agent {
            descriptor: d,
            evidence,
            document: doc,
            intent_capabilities: &["summarization".to_owned()],
            liveness: None,
            now: 1_000_000,
        },
    )
}

#[test]
fn alive_within_reads_the_last_probe() {
    use crate::store::{LiveState, Liveness, ProbeProtocol};
    let d = descriptor("a", DocumentFormat::Aidip);
    let req = parse(json!({"intent": "summarize", "policy": {"alive_within": 600}}));
    assert_eq!(req.policy.alive_within, Some(600));
    let probed = |state, checked_at| Liveness {
        state,
        checked_at,
        rtt_ms: 12,
        protocol: ProbeProtocol::Mcp,
    };
    let check = |l: Option<Liveness>| {
        policy::check(
            &req.policy,
            &policy::Agent {
                descriptor: &d,
                evidence: &Evidence::default(),
                document: &Value::Null,
                intent_capabilities: &[],
                liveness: l.as_ref(),
                now: 1_000_000,
            },
        )
    };
    let passed = check(Some(probed(LiveState::Alive, 999_500))).unwrap();
    assert_eq!(passed[0].code, ReasonCode::PolicyAlive);
    assert!(
        passed[0].detail.contains("500 s ago"),
        "{}",
        passed[0].detail
    );
    for refused in [
        None,
        Some(probed(LiveState::Alive, 999_399)),
        Some(probed(LiveState::AuthRequired, 999_900)),
        Some(probed(LiveState::NotProtocol, 999_900)),
    ] {
        assert_eq!(check(refused), Err(ReasonCode::PolicyAlive), "{refused:?}");
    }
    assert_eq!(ReasonCode::PolicyAlive.as_str(), "policy_alive");
}

#[test]
fn trust_terms_read_the_evidence() {
    let d = descriptor("a", DocumentFormat::Aidip);
    let none = Evidence::default();
    let dnssec = Evidence {
        dnssec: true,
        ..Evidence::default()
    };
    let doc = json!({});
    let min = json!({"min_trust": "dns-verified"});
    assert_eq!(
        check_with(min.clone(), &d, &none, &doc),
        Err(ReasonCode::PolicyMinTrust)
    );
    let ok = check_with(min, &d, &dnssec, &doc).unwrap();
    assert_eq!(ok[0].detail, "trust dns-verified ≥ dns-verified");
    let need = json!({"dnssec_required": true});
    assert_eq!(
        check_with(need.clone(), &d, &none, &doc),
        Err(ReasonCode::PolicyDnssec)
    );
    assert_eq!(
        check_with(need, &d, &dnssec, &doc).unwrap()[0].code,
        ReasonCode::PolicyDnssec
    );
}

#[test]
fn languages_accept_a_script_under_its_primary_tag() {
    let d = descriptor("a", DocumentFormat::Aidip);
    let e = Evidence::default();
    let ok = check_with(json!({"languages": ["zh", "en"]}), &d, &e, &json!({})).unwrap();
    assert_eq!(ok.len(), 2);
    assert_eq!(ok[1].detail, "language zh supported (zh-Hant)");
    assert_eq!(
        check_with(json!({"languages": ["zh-Hans"]}), &d, &e, &json!({})),
        Err(ReasonCode::PolicyLanguage)
    );
}

#[test]
fn declarations_are_read_from_aidip_documents() {
    let d = descriptor("a", DocumentFormat::Aidip);
    let e = Evidence::default();
    let doc = json!({
        "protocols": ["A2A"], "interfaces": {"chat": "https://a.example/chat"},
        "jurisdiction": "de", "latency_ms": 120,
        "pricing": {"model": "per_call", "details": {"amount": 0.002, "currency": "USD"}}
    });
    let policy = json!({
        "protocols": ["mcp", "a2a"], "interfaces": ["chat"], "jurisdiction": ["EU", "DE"],
        "max_latency_ms": 500, "max_price": {"amount": 0.01, "currency": "USD"}
    });
    let ok = check_with(policy, &d, &e, &doc).unwrap();
    let details: Vec<&str> = ok.iter().map(|r| r.detail.as_str()).collect();
    assert_eq!(
        details,
        [
            "offers a2a",
            "offers the chat interface",
            "declares DE, within EU, DE",
            "0.002 USD per call ≤ 0.01 USD",
            "declares 120 ms ≤ 500 ms",
        ]
    );
    // The implicit protocol and interface of an AIDIP agent.
    assert!(check_with(json!({"protocols": ["aidip"]}), &d, &e, &json!({})).is_ok());
    assert!(check_with(json!({"protocols": ["https"]}), &d, &e, &json!({})).is_ok());
    assert!(check_with(json!({"interfaces": ["api"]}), &d, &e, &json!({})).is_ok());
    assert_eq!(
        check_with(json!({"interfaces": ["api"]}), &d, &e, &doc),
        Err(ReasonCode::PolicyInterface),
        "an agent that lists its interfaces offers those"
    );
}

#[test]
fn an_agent_that_declares_nothing_fails_what_asks_for_it() {
    let d = descriptor("a", DocumentFormat::Aidip);
    let e = Evidence::default();
    let doc = json!({});
    for (policy, code) in [
        (
            json!({"jurisdiction": ["EU"]}),
            ReasonCode::PolicyJurisdiction,
        ),
        (json!({"max_price": 100}), ReasonCode::PolicyMaxPrice),
        (
            json!({"max_latency_ms": 10_000}),
            ReasonCode::PolicyMaxLatency,
        ),
        (json!({"protocols": ["a2a"]}), ReasonCode::PolicyProtocol),
    ] {
        assert_eq!(
            check_with(policy.clone(), &d, &e, &doc),
            Err(code),
            "{policy}"
        );
    }
    let mut no_status = d.clone();
    no_status.status = None;
    assert_eq!(
        check_with(json!({"status": ["active"]}), &no_status, &e, &doc),
        Err(ReasonCode::PolicyStatus)
    );
    // One declared jurisdiction outside the allowed ones is enough.
    assert_eq!(
        check_with(
            json!({"jurisdiction": ["DE"]}),
            &d,
            &e,
            &json!({"jurisdiction": ["DE", "US"]})
        ),
        Err(ReasonCode::PolicyJurisdiction)
    );
}

#[test]
fn prices_compare_in_one_currency_and_free_always_passes() {
    let d = descriptor("a", DocumentFormat::Aidip);
    let e = Evidence::default();
    let usd = json!({"max_price": {"amount": 0.01, "currency": "USD"}});
    let priced = |p: Value| json!({ "pricing": p });
    for (pricing, passes) in [
        (json!({"model": "free"}), true),
        (json!({"amount": 0, "currency": "EUR"}), true),
        (json!({"amount": 0.005, "currency": "usd"}), true),
        (
            json!({"model": "per_call", "details": {"amount": 0.05, "currency": "USD"}}),
            false,
        ),
        (json!({"amount": 0.005, "currency": "EUR"}), false),
        (json!({"amount": 0.005}), false),
        (
            json!({"model": "subscription", "details": {"monthly": 5, "currency": "USD"}}),
            false,
        ),
        (json!(0.001), false),
    ] {
        assert_eq!(
            check_with(usd.clone(), &d, &e, &priced(pricing.clone())).is_ok(),
            passes,
            "{pricing}"
        );
    }
    // Without a currency, amounts alone.
    assert!(check_with(json!({"max_price": 0.01}), &d, &e, &priced(json!(0.001))).is_ok());
    assert!(check_with(
        json!({"max_price": 0.01}),
        &d,
        &e,
        &priced(json!({"amount": 0.005, "currency": "EUR"}))
    )
    .is_ok());
}

#[test]
fn adp_declarations_come_from_its_blocks_and_named_capabilities() {
    let d = descriptor("agent:a.example", DocumentFormat::Adp);
    let e = Evidence::default();
    let doc = json!({
        "endpoints": {"chat": "wss://a.example/agent/chat", "tasks": "https://a.example/tasks"},
        "interfaces": {"api": "https://a.example/api"},
        "policies": {"jurisdiction": ["CH"]},
        "availability": {"status": "online", "latency_ms": 80},
        "security": {"authMethods": ["oauth2_bearer"]},
        "capabilities": [
            {"id": "summarization", "interfaces": ["webhook"], "input": ["text"],
             "pricing": {"model": "per_call", "details": {"amount": 0.001, "currency": "CHF"}}},
            {"id": "translation", "pricing": {"model": "subscription"}}
        ]
    });
    let policy = json!({
        "protocols": ["wss"], "interfaces": ["webhook"], "jurisdiction": ["CH"],
        "max_latency_ms": 100, "max_price": {"amount": 0.01, "currency": "CHF"}
    });
    assert!(check_with(policy, &d, &e, &doc).is_ok());
    assert!(policy::protocols(&d, &doc).contains("adp"));
    // The intent names summarization: translation's subscription does
    // not count; naming nothing, every capability's price must pass.
    let none: [String; 0] = [];
    assert_eq!(policy::prices(&d, &doc, &none).len(), 2);
    let inv = invocation::invocation(&d, &doc, &["summarize".into()]);
    assert_eq!(inv.protocol, "adp");
    assert_eq!(inv.operation.as_deref(), Some("summarization"));
    assert_eq!(inv.endpoint.as_deref(), Some("https://a.example/tasks"));
    assert_eq!(inv.auth, "oauth2_bearer");
    assert_eq!(inv.input_media, Some(json!(["text"])));
}

// ------------------------------------------------------------- invocation

#[test]
fn the_operation_is_the_one_that_shares_most_words_with_the_intent() {
    let d = descriptor("a", DocumentFormat::Aidip);
    let doc = json!({
        "authentication": {"type": "oauth2_bearer", "scopes": ["read"]},
        "operations": [
            {"name": "translateText", "description": "Translates text.", "inputs": {"a": 1}, "outputs": {}},
            {"name": "detectLanguage", "description": "Detects the language of a text.", "inputs": {"b": 2}, "outputs": {}}
        ]
    });
    let pick = |intent: &str| {
        let u = understand(intent);
        let mut words = invocation::words(&u.text);
        words.extend(u.capabilities.iter().flat_map(|c| invocation::words(c)));
        invocation::invocation(&d, &doc, &words)
    };
    let inv = pick("detect which language a message is written in");
    assert_eq!(inv.operation.as_deref(), Some("detectLanguage"));
    assert_eq!(inv.input_schema, Some(json!({"b": 2})));
    assert_eq!(inv.auth, "oauth2_bearer");
    assert_eq!(inv.auth_scopes, Some(json!(["read"])));
    assert_eq!((inv.protocol, inv.method), ("aidip", Some("POST")));
    assert_eq!(
        pick("translation into French").operation.as_deref(),
        Some("translateText")
    );
    assert_eq!(
        pick("weather").operation.as_deref(),
        Some("translateText"),
        "else the first"
    );
    let implied = invocation::invocation(&d, &json!({"inputs": {"c": 3}}), &[]);
    assert_eq!(implied.operation, None);
    assert_eq!(implied.input_schema, Some(json!({"c": 3})));
    assert_eq!(implied.auth, "none");
}

#[test]
fn words_split_camel_and_snake_case() {
    assert_eq!(invocation::words("translateText"), ["translate", "text"]);
    assert_eq!(
        invocation::words("speech_to_text"),
        ["speech", "to", "text"]
    );
    assert_eq!(invocation::words("HTMLParser v2"), ["htmlparser", "v2"]);
}

// ------------------------------------------------- over a store: DNSSEC

#[tokio::test]
async fn dnssec_and_trust_floors_answer_only_the_agents_that_prove_them() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), 8 << 20).unwrap();
    let key = std::sync::Arc::new(ed25519_dalek::SigningKey::from_bytes(&[9u8; 32]));
    let issuer = Issuer::new(store.clone(), key, std::time::Duration::from_secs(3600));
    let resolver = Resolver::new(Registry::new(issuer.clone()));
    for (id, dnssec, words) in [
        // The best match by far, but nothing proven.
        (
            "a-plain",
            false,
            "Summarizes legal contracts and legal documents, summaries",
        ),
        ("b-signed", true, "Summarizes documents"),
    ] {
        let mut d = descriptor(id, DocumentFormat::Aidip);
        d.description = words.into();
        issuer
            .descriptor(DescriptorIssue {
                descriptor: d,
                document: json!({"inputs": {}, "outputs": {}}).to_string(),
                evidence: Evidence {
                    dnssec,
                    ..Evidence::default()
                },
                origin: Origin::Remote,
                expect: Expect::Any,
                durability: Durability::Flushed,
            })
            .await
            .unwrap();
    }
    let ids = |r: &Resolution| {
        r.candidates
            .iter()
            .map(|c| c.id.clone())
            .collect::<Vec<_>>()
    };
    let open = Plan::new(parse(json!({"intent": "summarize legal contracts"})));
    let all = resolver.resolve(&open).await.unwrap();
    assert_eq!(ids(&all), ["a-plain", "b-signed"]);

    for policy in [
        json!({"dnssec_required": true}),
        json!({"min_trust": "dns-verified"}),
    ] {
        let plan = Plan::new(parse(
            json!({"intent": "summarize legal contracts", "policy": policy}),
        ));
        let r = resolver.resolve(&plan).await.unwrap();
        assert_eq!(ids(&r), ["b-signed"], "{policy}");
        assert!(r.candidates[0].reasons.iter().any(|x| matches!(
            x.code,
            ReasonCode::PolicyDnssec | ReasonCode::PolicyMinTrust
        )));
        assert!(r.candidates[0].trust.evidence.dnssec);
    }
}
