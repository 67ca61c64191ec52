//! The judge's rules for `liveness` records (docs/protocol.md#probe):
//! the signature checked first, the time window, only agents held and
//! shown at the probed seq or later, one result per signer (the newest),
//! at most [`MAX_CHECKS_PER_AGENT`] per agent with untrusted signers'
//! evicted first, and a tombstone dropping them all.

use super::*;
use crate::record::{LiveState, LivenessRecord, ProbeProtocol};
use crate::store::{Entitlement, Visibility, MAX_CHECKS_PER_AGENT};

const AGENT: &str = "live-agent";

/// A judge holding the AIDIP registration `AGENT` at seq 10, signed by
/// the trusted `friend` (so that its checks can be read back).
fn held(f: &Fixture) -> Judge {
    let judge = f.judge();
    let body = f.registration(AGENT, 10, "https://agent.example/");
    assert!(matches!(
        judge.judge(&f.signed(&body, &f.friend)),
        Judgement::Stored { .. }
    ));
    judge
}

fn result(agent: &str, seq: u64, state: LiveState, checked_at: u64) -> LivenessRecord {
    LivenessRecord {
        agent_id: agent.into(),
        seq,
        state,
        checked_at,
        rtt_ms: 12,
        protocol: ProbeProtocol::Aidip,
    }
}

fn signed(body: &LivenessRecord, key: &SigningKey) -> Vec<u8> {
    SignedRecord::sign_liveness(body, key).unwrap().encode()
}

/// The checks held of `AGENT`: (signer's first key byte, state, when, trusted).
fn checks(f: &Fixture) -> Vec<(u8, LiveState, u64, bool)> {
    let mut out: Vec<_> = f
        .store
        .blocking()
        .peer_checks(AGENT)
        .unwrap()
        .into_iter()
        .map(|(s, c)| (s[0], c.state, c.checked_at, c.trusted))
        .collect();
    out.sort();
    out
}

#[test]
fn a_result_is_kept_per_signer_and_only_the_newer_replaces_it() {
    let f = fixture();
    let judge = held(&f);
    let now = record::unix_now();
    let first = result(AGENT, 10, LiveState::Alive, now - 100);
    assert!(matches!(
        judge.judge(&signed(&first, &f.stranger)),
        Judgement::Stored { trusted: false, .. }
    ));
    assert_eq!(
        judge.judge(&signed(&first, &f.stranger)),
        Judgement::Duplicate
    );
    // An older result from the same signer does not replace the newer.
    let older = result(AGENT, 10, LiveState::Unreachable, now - 200);
    assert_eq!(judge.judge(&signed(&older, &f.stranger)), Judgement::Stale);
    let key = f.stranger.verifying_key().to_bytes()[0];
    assert_eq!(checks(&f), [(key, LiveState::Alive, now - 100, false)]);
    let newer = result(AGENT, 10, LiveState::Timeout, now - 50);
    assert!(matches!(
        judge.judge(&signed(&newer, &f.stranger)),
        Judgement::Stored { .. }
    ));
    assert_eq!(checks(&f), [(key, LiveState::Timeout, now - 50, false)]);
    // A trusted peer's result is marked so; this node's own is not kept
    // (it is in the agent's freshness).
    let by_friend = result(AGENT, 9, LiveState::Alive, now);
    assert!(matches!(
        judge.judge(&signed(&by_friend, &f.friend)),
        Judgement::Stored { trusted: true, .. }
    ));
    assert_eq!(
        judge.judge(&signed(&by_friend, &f.own)),
        Judgement::Duplicate
    );
    assert_eq!(checks(&f).len(), 2);
    assert_eq!(
        judge.liveness_counts(),
        LivenessCounts {
            received: 6,
            stored: 3,
            unknown_agent: 0
        }
    );
}

#[test]
fn a_tampered_result_is_refused_before_anything_reads_it() {
    let f = fixture();
    let judge = held(&f);
    let body = result(AGENT, 10, LiveState::Alive, record::unix_now());
    let mut bytes = signed(&body, &f.stranger);
    // The round trip, 12 ms, made 13 ms.
    let at = bytes
        .windows(7)
        .position(|w| w == b"rtt_ms\x0c")
        .expect("the payload carries rtt_ms");
    bytes[at + 6] = 0x0d;
    assert_eq!(
        judge.judge(&bytes),
        Judgement::Refused(Refusal::BadSignature)
    );
    assert!(checks(&f).is_empty());
    // Not counted as a liveness record: nothing read it.
    assert_eq!(judge.liveness_counts().received, 0);
}

#[test]
fn a_result_from_the_future_or_too_old_is_refused() {
    let f = fixture();
    let judge = held(&f);
    let now = record::unix_now();
    let ahead = result(AGENT, 10, LiveState::Alive, now + MAX_CLOCK_SKEW_SECS + 60);
    assert_eq!(
        judge.judge(&signed(&ahead, &f.stranger)),
        Judgement::Refused(Refusal::IssuedInFuture)
    );
    let old = result(
        AGENT,
        10,
        LiveState::Alive,
        now - MAX_LIVENESS_AGE_SECS - 60,
    );
    assert_eq!(
        judge.judge(&signed(&old, &f.stranger)),
        Judgement::Refused(Refusal::LivenessTooOld)
    );
    // Within the skew, and just within the age, it stands.
    let skewed = result(AGENT, 10, LiveState::Alive, now + 60);
    assert!(matches!(
        judge.judge(&signed(&skewed, &f.stranger)),
        Judgement::Stored { .. }
    ));
    assert_eq!(judge.refusals().get("liveness_too_old"), Some(&1));
    // As a DHT value it is under no agent's key.
    let fresh = result(AGENT, 10, LiveState::Alive, now);
    let key = crate::mesh::agent_key(AGENT);
    assert_eq!(
        judge.judge_under(&signed(&fresh, &f.friend), Some(key.as_slice())),
        Judgement::Refused(Refusal::WrongDhtKey)
    );
}

#[test]
fn a_result_about_an_agent_not_shown_here_is_ignored() {
    let f = fixture();
    let judge = held(&f);
    let now = record::unix_now();
    let unknown = result("not-held", 10, LiveState::Alive, now);
    assert_eq!(
        judge.judge(&signed(&unknown, &f.friend)),
        Judgement::Unverifiable(Refusal::LivenessUnknownAgent)
    );
    // Probed at a seq this node does not hold yet.
    let ahead = result(AGENT, 11, LiveState::Alive, now);
    assert_eq!(
        judge.judge(&signed(&ahead, &f.friend)),
        Judgement::Unverifiable(Refusal::LivenessUnknownAgent)
    );
    // A private or unlisted agent here: nothing about it is kept.
    let hidden = "hidden-agent";
    let body = f.registration(hidden, 10, "https://hidden.example/");
    assert!(matches!(
        judge.judge(&f.signed(&body, &f.friend)),
        Judgement::Stored { .. }
    ));
    for visibility in [Visibility::Private, Visibility::Unlisted] {
        let entitlement = Entitlement {
            visibility,
            clients: Vec::new(),
            scopes: Vec::new(),
            owner: None,
        };
        f.store
            .blocking()
            .set_entitlement(hidden, &entitlement)
            .unwrap();
        let about = result(hidden, 10, LiveState::Alive, now);
        assert_eq!(
            judge.judge(&signed(&about, &f.friend)),
            Judgement::Unverifiable(Refusal::LivenessUnknownAgent)
        );
    }
    assert!(f.store.blocking().peer_checks(hidden).unwrap().is_empty());
    assert!(checks(&f).is_empty());
    // Ignored, not refused: no fault of the sender.
    assert!(judge.refusals().is_empty(), "{:?}", judge.refusals());
    assert_eq!(judge.liveness_counts().unknown_agent, 4);
}

#[test]
fn the_per_agent_bound_evicts_untrusted_signers_first() {
    let f = fixture();
    let judge = held(&f);
    let now = record::unix_now();
    let strangers: Vec<SigningKey> = (0..MAX_CHECKS_PER_AGENT as u8)
        .map(|i| SigningKey::from_bytes(&[100 + i; 32]))
        .collect();
    // The friend's, then the strangers' (oldest first) until full.
    let by_friend = result(AGENT, 10, LiveState::Alive, now - 1000);
    assert!(matches!(
        judge.judge(&signed(&by_friend, &f.friend)),
        Judgement::Stored { .. }
    ));
    for (i, key) in strangers.iter().take(MAX_CHECKS_PER_AGENT - 1).enumerate() {
        let body = result(AGENT, 10, LiveState::Alive, now - 500 + i as u64);
        assert!(matches!(
            judge.judge(&signed(&body, key)),
            Judgement::Stored { .. }
        ));
    }
    assert_eq!(checks(&f).len(), MAX_CHECKS_PER_AGENT);
    // A new untrusted signer with a newer result evicts the oldest
    // untrusted one, never the trusted one (older still).
    let last = strangers.last().unwrap();
    let newest = result(AGENT, 10, LiveState::Alive, now);
    assert!(matches!(
        judge.judge(&signed(&newest, last)),
        Judgement::Stored { .. }
    ));
    let held = checks(&f);
    assert_eq!(held.len(), MAX_CHECKS_PER_AGENT);
    assert!(held.iter().any(|c| c.3 && c.2 == now - 1000), "{held:?}");
    assert!(!held.iter().any(|c| c.2 == now - 500), "{held:?}");
    // A new untrusted signer older than every untrusted result held
    // finds no room.
    let late = SigningKey::from_bytes(&[99; 32]);
    let stale = result(AGENT, 10, LiveState::Alive, now - 900);
    assert_eq!(
        judge.judge(&signed(&stale, &late)),
        Judgement::Refused(Refusal::LivenessFull)
    );
    assert_eq!(checks(&f).len(), MAX_CHECKS_PER_AGENT);
}

#[test]
fn a_tombstone_drops_the_agents_results_and_trusted_alive_ones_count() {
    let f = fixture();
    let judge = held(&f);
    let now = record::unix_now();
    let store = f.store.blocking();
    let alive_filter = |since: u64| crate::store::Filter {
        alive_since: Some(since),
        ..crate::store::Filter::default()
    };
    let by_stranger = result(AGENT, 10, LiveState::Alive, now);
    judge.judge(&signed(&by_stranger, &f.stranger));
    // An untrusted signer's `alive` does not count.
    assert!(store.matching(&alive_filter(now - 60), None).is_empty());
    let by_friend = result(AGENT, 10, LiveState::Alive, now - 10);
    judge.judge(&signed(&by_friend, &f.friend));
    assert_eq!(store.matching(&alive_filter(now - 60), None).len(), 1);
    assert!(store.matching(&alive_filter(now - 5), None).is_empty());
    assert_eq!(
        store.counted_liveness(AGENT).unwrap().map(|l| l.checked_at),
        Some(now - 10)
    );
    // The friend no longer trusted (the node restarted with other
    // `trusted_peers`): its result is shown, not counted.
    let vouched = [f.own.verifying_key().to_bytes()].into_iter().collect();
    store.reassess(&vouched).unwrap();
    assert!(store.matching(&alive_filter(now - 60), None).is_empty());
    assert!(checks(&f).iter().all(|c| !c.3));
    // Deleted by its owner: its results go with it.
    let gone = f.tombstone_of(AGENT, 11, &f.friend, record::TombstoneReason::Deleted);
    assert!(matches!(judge.judge(&gone), Judgement::Stored { .. }));
    assert!(checks(&f).is_empty());
    assert!(store.matching(&alive_filter(0), None).is_empty());
    assert_eq!(
        judge.judge(&signed(&by_friend, &f.stranger)),
        Judgement::Unverifiable(Refusal::LivenessUnknownAgent)
    );
}
