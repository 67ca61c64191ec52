use std::sync::Arc;
use std::time::Duration;

use ed25519_dalek::SigningKey;
use tokio::time::Instant;

use super::{answer, Budget};
use crate::issuer::{Durability, Issuer};
use crate::mesh::wire::{known_digest, SearchRequest};
use crate::record::SignedRecord;
use crate::registry::Registry;
use crate::store::{Expect, Origin, Store};
use crate::verify::Evidence;

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
            .descriptor(
                crate::record::tests::sample_descriptor(id),
                "{}".into(),
                Evidence::default(),
                Origin::Local,
                Expect::Any,
                Durability::Flushed,
            )
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
