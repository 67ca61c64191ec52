use std::sync::Arc;
use std::time::Duration;

use ed25519_dalek::SigningKey;
use tokio::time::Instant;

use super::{answer, Budget};
use crate::issuer::{DescriptorIssue, Durability, Issuer};
use crate::mesh::wire::{known_digest, SearchRequest};
use crate::record::SignedRecord;
use crate::registry::Registry;
use crate::store::{Expect, Origin, Store};
use crate::trust::Evidence;

#[test]
fn the_budget_shares_follow_each_other_and_end_at_the_deadline() {
    let start = Instant::now();
    let b = Budget::new(start, Duration::from_secs(2));
    let ms = |t: Instant| t.duration_since(start).as_millis();
    assert_eq!(ms(b.lookup_by()), 600);
    assert_eq!(ms(b.answers_by()), 1400);
    assert_eq!(ms(b.judged_by()), 1700);
    assert_eq!(ms(b.indexed_by()), 1800);
    assert_eq!(ms(b.deadline()), 2000);
}

/// A registry over a fresh store holding `ids` (all `translation`
/// agents), and the seq each was issued at.
async fn registry_with(dir: &std::path::Path, ids: &[&str]) -> (Registry, Vec<u64>) {
    let store = Store::open(dir, 8 << 20).unwrap();
    let key = Arc::new(SigningKey::from_bytes(&[9u8; 32]));
    let issuer = Issuer::new(store.clone(), key, Duration::from_secs(3600));
    let mut seqs = Vec::new();
    for id in ids {
        let issued = issuer
            .descriptor(DescriptorIssue {
                descriptor: crate::record::tests::sample_descriptor(id),
                document: "{}".into(),
                evidence: Evidence::default(),
                origin: Origin::Local,
                expect: Expect::Any,
                durability: Durability::Flushed,
            })
            .await
            .unwrap();
        seqs.push(issued.seq);
    }
    (Registry::new(issuer), seqs)
}

fn ids_of(response: &crate::mesh::wire::SearchResponse) -> Vec<String> {
    let mut ids: Vec<String> = response
        .records
        .iter()
        .map(|b| {
            let r = SignedRecord::decode(b).unwrap();
            r.body().unwrap().agent_id().to_owned()
        })
        .collect();
    ids.sort();
    ids
}

#[tokio::test]
async fn a_peer_is_answered_from_the_index_without_what_it_already_holds() {
    let dir = tempfile::tempdir().unwrap();
    let (registry, seqs) = registry_with(dir.path(), &["t-1", "t-2", "t-3"]).await;

    // Free text, ranked by the index.
    let text = SearchRequest {
        query: Some("translates".into()),
        limit: 10,
        ..SearchRequest::default()
    };
    assert_eq!(
        ids_of(&answer(&registry, &text).await),
        ["t-1", "t-2", "t-3"]
    );

    // The asker holds t-1 at its seq (left out) and t-2 at an older one
    // (sent).
    let request = SearchRequest {
        capabilities: vec!["translation".into()],
        limit: 10,
        known: vec![
            (known_digest("t-1"), seqs[0]),
            (known_digest("t-2"), seqs[1] - 1),
        ],
        ..SearchRequest::default()
    };
    let response = answer(&registry, &request).await;
    assert_eq!(ids_of(&response), ["t-2", "t-3"]);
    assert!(!response.truncated);

    // The limit holds, and says that more were left.
    let one = SearchRequest {
        limit: 1,
        ..request
    };
    let response = answer(&registry, &one).await;
    assert_eq!(response.records.len(), 1);
    assert!(response.truncated);

    // A language term this node cannot read: nothing, not an error.
    let bad = SearchRequest {
        languages: vec!["not a tag!".into()],
        limit: 10,
        ..SearchRequest::default()
    };
    assert!(answer(&registry, &bad).await.records.is_empty());
}

fn peers(n: usize) -> Vec<libp2p::PeerId> {
    (0..n).map(|_| libp2p::PeerId::random()).collect()
}

#[test]
fn a_search_asks_its_providers_and_a_quarter_more_peers_it_chose_itself() {
    use rand::SeedableRng;
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    // An eclipse: the lookup found 40 providers (Sybils, say); this node
    // is connected to 10 speakers, 2 of them trusted.
    let providers = peers(40);
    let speakers = peers(10);
    let trusted: std::collections::HashSet<_> = speakers[..2].iter().copied().collect();
    let chosen = super::ask::choose(&providers, &speakers, |p| trusted.contains(p), 16, &mut rng);
    assert_eq!(chosen.len(), 20, "16 providers and 4 more");
    let unique: std::collections::HashSet<_> = chosen.iter().collect();
    assert_eq!(unique.len(), 20, "each peer asked once");
    assert!(chosen[..16].iter().all(|p| providers.contains(p)));
    // Both trusted peers, then two more of this node's own connections.
    assert!(
        trusted.iter().all(|t| chosen[16..18].contains(t)),
        "{chosen:?}"
    );
    assert!(chosen[16..].iter().all(|p| speakers.contains(p)));
    // Not the first sixteen the lookup found, and not the same each time.
    let mut orders = std::collections::HashSet::new();
    for _ in 0..8 {
        let c = super::ask::choose(&providers, &speakers, |p| trusted.contains(p), 16, &mut rng);
        orders.insert(c[..16].to_vec());
    }
    assert!(
        orders.len() > 1,
        "the providers asked vary between searches"
    );
    assert!(!orders.contains(&providers[..16]));
}

#[test]
fn a_search_with_few_providers_asks_them_all_and_a_quarter_more() {
    use rand::SeedableRng;
    let mut rng = rand::rngs::StdRng::seed_from_u64(1);
    let providers = peers(3);
    let mut speakers = peers(20);
    // A provider this node is connected to is asked once, as a provider.
    speakers.push(providers[0]);
    let none: std::collections::HashSet<libp2p::PeerId> = std::collections::HashSet::new();
    let chosen = super::ask::choose(&providers, &speakers, |p| none.contains(p), 16, &mut rng);
    assert_eq!(chosen.len(), 7, "{chosen:?}");
    assert!(
        providers.iter().all(|p| chosen[..3].contains(p)),
        "{chosen:?}"
    );
    assert!(chosen[3..].iter().all(|p| !providers.contains(p)));

    // No provider: the connected speakers, trusted first, up to the fan-out.
    let trusted: std::collections::HashSet<_> = [speakers[5]].into_iter().collect();
    let chosen = super::ask::choose(&[], &speakers, |p| trusted.contains(p), 16, &mut rng);
    assert_eq!(chosen.len(), 16);
    assert_eq!(chosen[0], speakers[5]);
    assert!(chosen.iter().all(|p| speakers.contains(p)));
    // A fan-out of one: a provider, and a trusted peer besides.
    let chosen = super::ask::choose(&providers, &speakers, |p| trusted.contains(p), 1, &mut rng);
    assert_eq!(chosen.len(), 2);
    assert!(providers.contains(&chosen[0]));
    assert_eq!(chosen[1], speakers[5]);
}
