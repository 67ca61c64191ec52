//! Tests of the testbed: the generated population and what it publishes
//! (here), and the running servers over real sockets ([`live`]).

mod live;

use std::collections::HashSet;

use super::web::{AgentSite, OVERSIZED_BYTES};
use super::*;
use crate::adp::{self, txt};
use crate::identity;

const PORTS: Ports = Ports {
    https: 8443,
    http: 8080,
};

pub(super) fn schema() -> jsonschema::Validator {
    let schema: serde_json::Value =
        serde_json::from_str(adp::SCHEMA).expect("the ADP schema is JSON");
    jsonschema::validator_for(&schema).expect("the ADP schema compiles")
}

fn joined(records: Vec<Vec<String>>) -> Vec<String> {
    records.into_iter().map(|r| r.concat()).collect()
}

#[test]
fn the_same_seed_gives_the_same_population() {
    let config = PopulationConfig::healthy(7, 60).with_every_misbehaviour();
    let (a, b) = (Population::generate(&config), Population::generate(&config));
    assert_eq!(a.len(), 60 + Behaviour::misbehaviours().count());
    for (x, y) in a.agents().iter().zip(b.agents()) {
        assert_eq!(x.domain, y.domain);
        assert_eq!(x.key.to_bytes(), y.key.to_bytes());
        assert_eq!(a.document(x, PORTS), b.document(y, PORTS));
        assert_eq!(a.txt_records(x, PORTS), b.txt_records(y, PORTS));
    }
    let other = Population::generate(&PopulationConfig { seed: 8, ..config });
    assert_ne!(a.agents()[0].domain, other.agents()[0].domain);
    assert_ne!(
        a.agents()[0].key.to_bytes(),
        other.agents()[0].key.to_bytes()
    );

    // Agent i does not depend on the population size.
    let small = Population::healthy(7, 10);
    assert_eq!(small.agents()[3].domain, a.agents()[3].domain);
    assert_eq!(
        small.agents()[3].key.to_bytes(),
        population::agent_key(7, 3).to_bytes()
    );
}

#[test]
fn domains_are_unique_lowercase_test_names_in_org_zones() {
    let p = Population::generate(&PopulationConfig::healthy(1, 120).with_every_misbehaviour());
    let domains: HashSet<&str> = p.agents().iter().map(|a| a.domain.as_str()).collect();
    assert_eq!(domains.len(), p.len());
    for a in p.agents() {
        assert_eq!(a.domain, a.domain.to_ascii_lowercase());
        assert!(
            a.domain.ends_with(&format!(".{}.test", a.org)),
            "{}",
            a.domain
        );
        assert_eq!(a.domain.split('.').count(), 3);
        assert!((1..=3).contains(&a.capabilities.len()));
        assert_eq!(p.get(&a.domain).map(|x| x.index), Some(a.index));
    }
    assert_eq!(p.zones().len(), p.len().div_ceil(50));
    let redirect = p.domain_of(Behaviour::RedirectLoop).unwrap();
    assert_eq!(p.behaviour_of(redirect), Some(Behaviour::RedirectLoop));
    assert_eq!(p.healthy_agents().count(), 120);
}

#[test]
fn every_document_of_a_500_agent_population_validates_against_the_schema() {
    let schema = schema();
    let p = Population::generate(&PopulationConfig::healthy(42, 500).with_every_misbehaviour());
    for agent in p.agents() {
        let doc = p.document(agent, PORTS);
        let value = serde_json::to_value(&doc).unwrap();
        let errors: Vec<String> = schema.iter_errors(&value).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{}: {errors:?}", agent.domain);
        let key = agent.verifying_key();
        assert_eq!(
            doc.identity.public_key.fingerprint,
            identity::fingerprint(&key)
        );
        let full = doc.identity.public_key.full.as_deref().unwrap();
        assert_eq!(identity::decode_public_key(full).unwrap(), key);
        assert_eq!(doc.identity.id, agent.id());
        let endpoints = &doc.endpoints;
        assert_eq!(
            endpoints["wellKnown"],
            format!("https://{}:8443/.well-known/agent.json", agent.domain)
        );
        assert_eq!(
            endpoints["chat"],
            format!("wss://{}:8443/agent/chat", agent.domain)
        );
        match agent.behaviour {
            Behaviour::WrongDomain => assert_ne!(doc.identity.domain, agent.domain),
            _ => assert_eq!(doc.identity.domain, agent.domain),
        }
    }
}

#[test]
fn relationships_have_mutual_pairs_one_way_peers_and_strangers() {
    let p = Population::healthy(3, 400);
    let pairs: Vec<(&str, &str)> = p.mutual_pairs().collect();
    assert_eq!(pairs.len(), 60, "30% of 400 healthy agents, in pairs");
    let lists = |a: &str, b: &str| {
        p.get(a).unwrap().relationships.iter().any(|r| {
            r.id == format!("agent:{b}")
                && r.kind == "peer"
                && r.trust.as_deref() == Some("verified")
        })
    };
    for (a, b) in &pairs {
        assert!(lists(a, b) && lists(b, a), "{a} <-> {b}");
        assert!(p.is_mutual(a, b) && p.is_mutual(b, a));
    }
    let mut one_way = 0;
    let mut strangers = 0;
    for a in p.agents() {
        for r in &a.relationships {
            let other = r.id.strip_prefix("agent:").unwrap();
            match p.get(other) {
                None => strangers += 1,
                Some(b) if !p.is_mutual(&a.domain, &b.domain) => {
                    one_way += 1;
                    assert!(!lists(&b.domain, &a.domain), "one-way edges stay one-way");
                }
                Some(_) => {}
            }
        }
    }
    assert!(
        one_way > 20 && strangers > 10,
        "{one_way} one-way, {strangers} strangers"
    );
}

#[test]
fn txt_records_carry_each_dns_misbehaviour() {
    let p = Population::generate(&PopulationConfig::healthy(5, 8).with_every_misbehaviour());
    let txt_of = |b: Behaviour| {
        let agent = p.with_behaviour(b).next().unwrap();
        (agent, joined(p.txt_records(agent, PORTS)))
    };
    for agent in p.healthy_agents() {
        let records = joined(p.txt_records(agent, PORTS));
        let parsed = txt::parse(&agent.domain, &records).unwrap();
        assert_eq!(parsed.fingerprint, agent.fingerprint());
        assert_eq!(parsed.well_known, p.well_known_url(agent, PORTS));
        assert_eq!(
            p.address(agent, publish::AGENT_ADDRESS),
            publish::AGENT_ADDRESS
        );
    }
    assert!(p
        .healthy_agents()
        .any(|a| p.txt_records(a, PORTS)[0].len() == 2));
    let reason = |b| {
        let (agent, records) = txt_of(b);
        txt::parse(&agent.domain, &records)
            .map(|_| ())
            .map_err(|e| e.reason().as_str())
    };
    assert_eq!(reason(Behaviour::TxtMissing), Err("txt_missing"));
    assert_eq!(reason(Behaviour::TxtMalformed), Err("txt_malformed"));
    assert_eq!(reason(Behaviour::TxtTwoRecords), Err("txt_multiple"));
    assert_eq!(
        reason(Behaviour::TxtWrongVersion),
        Err("txt_unsupported_version")
    );
    assert_eq!(reason(Behaviour::TxtLarge), Ok(()));
    let (_, large) = txt_of(Behaviour::TxtLarge);
    assert!(large.iter().map(String::len).sum::<usize>() > 1232);

    let (agent, records) = txt_of(Behaviour::FingerprintMismatch);
    let parsed = txt::parse(&agent.domain, &records).unwrap();
    assert_ne!(parsed.fingerprint, agent.fingerprint());
    let (agent, records) = txt_of(Behaviour::PlainHttp);
    let wk = txt::parse(&agent.domain, &records).unwrap().well_known;
    assert_eq!(
        wk,
        format!("http://{}:8080/.well-known/agent.json", agent.domain)
    );
    let (agent, records) = txt_of(Behaviour::LoopbackTarget);
    let wk = txt::parse(&agent.domain, &records).unwrap().well_known;
    assert_eq!(
        wk,
        format!(
            "https://127.0.0.1:8443/agents/{}/.well-known/agent.json",
            agent.domain
        )
    );
    let private = p.with_behaviour(Behaviour::PrivateTarget).next().unwrap();
    assert_eq!(
        p.address(private, publish::AGENT_ADDRESS),
        publish::PRIVATE_ADDRESS
    );

    // An advertised address moves every A record but the private one's;
    // the loopback target's wk host stays the literal loopback address.
    let advertised = std::net::Ipv4Addr::new(172, 29, 77, 53);
    let healthy = p.healthy_agents().next().unwrap();
    assert_eq!(p.address(healthy, advertised), advertised);
    assert_eq!(p.address(private, advertised), publish::PRIVATE_ADDRESS);
    let loopback = p.with_behaviour(Behaviour::LoopbackTarget).next().unwrap();
    assert_eq!(p.address(loopback, advertised), advertised);
    p.zone(PORTS, advertised).expect("the zone builds");
}

#[test]
fn site_bodies_carry_each_document_misbehaviour() {
    let p = Population::healthy(9, 1);
    let agent = &p.agents()[0];
    let doc = p.document(agent, PORTS);
    let site =
        |b| AgentSite::from_document(&agent.domain, &doc, agent.key.clone()).with_behaviour(b);
    let healthy = site(Behaviour::Healthy);
    let parsed: adp::AgentDocument = serde_json::from_slice(healthy.body()).unwrap();
    assert_eq!(parsed, doc);

    let oversized = site(Behaviour::Oversized);
    assert!(oversized.body().len() > 64 * 1024 && oversized.body().len() >= OVERSIZED_BYTES);
    let value: serde_json::Value = serde_json::from_slice(oversized.body()).unwrap();
    assert!(schema().is_valid(&value), "only the size is wrong");

    let deep = site(Behaviour::DeepNesting);
    assert!(
        deep.body().len() < healthy.body().len() + 2100,
        "deep but small"
    );
    let err = serde_json::from_slice::<serde_json::Value>(deep.body()).unwrap_err();
    assert!(err.to_string().contains("recursion limit"), "{err}");

    let invalid = site(Behaviour::InvalidJson);
    assert!(serde_json::from_slice::<serde_json::Value>(invalid.body()).is_err());
}

#[test]
fn behaviour_names_round_trip() {
    for b in Behaviour::ALL {
        assert_eq!(b.name().parse::<Behaviour>(), Ok(*b));
        assert_eq!(b.to_string(), b.name());
    }
    assert_eq!("slow-body".parse::<Behaviour>(), Ok(Behaviour::SlowBody));
    assert!("sleepy".parse::<Behaviour>().is_err());
    assert_eq!(Behaviour::misbehaviours().count(), Behaviour::ALL.len() - 1);
    let verifying: Vec<Behaviour> = Behaviour::ALL
        .iter()
        .copied()
        .filter(|b| b.verifies())
        .collect();
    assert_eq!(
        verifying,
        [
            Behaviour::Healthy,
            Behaviour::TxtLarge,
            Behaviour::ChallengeOwnNonce
        ]
    );
}
