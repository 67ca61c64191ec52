//! The mesh half of a node, one assembly for the node and the simulator
//! (which runs hundreds of them in one process): the judge of what peers
//! send, the re-verifier its claims go to, the handler, the mesh itself,
//! the publisher of what the issuer signs, the republisher, and the
//! federated search over them. A change here is what the simulator
//! measures.

use std::collections::HashSet;
use std::sync::Arc;

use ed25519_dalek::{SigningKey, VerifyingKey};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::error::NodeError;
use crate::config::{OnEquivocation, P2pConfig};
use crate::crawl::queue::CrawlQueue;
use crate::federation::handler::{NodeHandler, SharedHandler};
use crate::federation::reverify::{Reverifier, ReverifyLimits};
use crate::federation::{ClaimQuotas, Judge};
use crate::identity;
use crate::issuer::{outbox, republish, Published};
use crate::mesh::{Mesh, MeshClient, MeshConfig};
use crate::registry::Registry;
use crate::search::{FederatedSearch, MeshAsk};
use crate::store::Store;
use crate::witness::{Witness, WitnessOptions};

/// What the mesh half is built from.
pub struct MeshWiring<'a> {
    /// The `[p2p]` section: trusted peers, replication, the judge's
    /// limits, the re-verifier's rates, the search fan-out and budget.
    pub p2p: &'a P2pConfig,
    /// The swarm's configuration (the node's from `p2p`; the simulator's
    /// memory transport and limits).
    pub mesh: MeshConfig,
    /// The node key: its libp2p identity and what it signs with.
    pub key: &'a Arc<SigningKey>,
    /// Where judged records go.
    pub store: &'a Store,
    /// What peers' searches are answered from.
    pub registry: &'a Registry,
    /// Where claimed ADP agents are re-verified (none: not re-verified,
    /// as in the simulator, which crawls nothing).
    pub crawl_queue: Option<CrawlQueue>,
    /// What the issuer signs, on its way to the mesh.
    pub outbox: tokio::sync::mpsc::Receiver<Published>,
    /// Put this node's records back in the DHT (after a start on a store
    /// that holds them).
    pub republish: bool,
    /// Witnesses peers' logs and publishes this node's checkpoints (none
    /// in the simulator).
    pub witness: Option<Arc<Witness>>,
    /// Ends every task started here.
    pub cancel: CancellationToken,
}

/// The running mesh half.
pub struct MeshParts {
    /// The mesh client.
    pub mesh: MeshClient,
    /// The judge of what peers send (and what searches bring back).
    pub judge: Arc<Judge>,
    /// Where claims go to be verified again.
    pub reverify: Arc<Reverifier>,
    /// Local search, and the mesh within `p2p.search_timeout`.
    pub search: FederatedSearch,
    /// The mesh's event loop: it ends when `cancel` does.
    pub event_loop: JoinHandle<()>,
    /// The publisher and, if asked, the republisher, by name.
    pub tasks: Vec<(&'static str, JoinHandle<()>)>,
}

/// Starts the mesh half of a node.
///
/// # Errors
/// [`NodeError::Mesh`] when the swarm cannot start (an address, a
/// listener).
pub async fn start_mesh(w: MeshWiring<'_>) -> Result<MeshParts, NodeError> {
    let p2p = w.p2p;
    let judge = Judge::new(
        w.store.clone(),
        w.key.verifying_key(),
        trusted_keys(&p2p.trusted_peers),
    )
    .with_replication(p2p.replication)
    .with_max_lifetime(p2p.max_record_lifetime)
    .with_claim_quotas(ClaimQuotas {
        per_signer: p2p.max_claims_per_signer,
        total: p2p.max_claims,
    });
    let judge = Arc::new(match (&w.witness, p2p.on_equivocation) {
        (Some(witness), OnEquivocation::Distrust) => judge.distrusting(witness.clone()),
        _ => judge,
    });
    let reverify = Arc::new(Reverifier::new(
        w.crawl_queue,
        ReverifyLimits {
            per_minute: p2p.reverify_per_minute,
            per_peer_per_minute: p2p.reverify_per_peer_per_minute,
            per_signer_per_minute: p2p.reverify_per_signer_per_minute,
            ..ReverifyLimits::default()
        },
    ));
    let handler = Arc::new(
        NodeHandler::new(judge.clone(), w.registry.clone(), reverify.clone())
            .with_witness(w.witness.clone())
            .dropping_offered(drop_hook()),
    );
    if let Some(witness) = &w.witness {
        witness.set_repair(repair_through(&handler));
    }
    let (mesh, event_loop) = Mesh::spawn(
        w.mesh,
        identity::libp2p_keypair(w.key),
        Arc::new(SharedHandler(handler)),
        w.cancel.clone(),
    )
    .await?;
    let mut tasks = vec![(
        "publisher",
        outbox::spawn_publisher(mesh.clone(), w.outbox, w.cancel.clone()),
    )];
    if let Some(witness) = &w.witness {
        witness.set_mesh(mesh.clone());
        tasks.push(("witness", witness.spawn_publisher(w.cancel.clone())));
    }
    if w.republish {
        tasks.push((
            "republisher",
            republish::spawn_republisher(
                w.store.clone(),
                mesh.clone(),
                w.key.verifying_key(),
                w.cancel,
            ),
        ));
    }
    let search = FederatedSearch::new(
        w.registry.clone(),
        Some(MeshAsk {
            client: mesh.clone(),
            admit: judge.clone(),
            fanout: p2p.search_fanout,
            trusted: trusted_peer_ids(&p2p.trusted_peers),
            budget: p2p.search_timeout,
            ends_when_full: p2p.search_ends_when_full,
        }),
    );
    Ok(MeshParts {
        mesh,
        judge,
        reverify,
        search,
        event_loop,
        tasks,
    })
}

/// The witness of peers' logs, publishing this node's checkpoints
/// (docs/protocol.md#witnessing).
///
/// # Errors
/// The store's, reading what the witness kept.
pub(super) fn build_witness(
    p2p: &P2pConfig,
    store: &Store,
    notary: &Arc<crate::tlog::Notary>,
) -> Result<Arc<Witness>, NodeError> {
    let options = WitnessOptions {
        interval: p2p.witness_interval,
        split_view: test_hook("AGENTMESH_TEST_SPLIT_VIEW"),
    };
    Ok(Arc::new(Witness::new(
        store.clone(),
        notary.clone(),
        options,
    )?))
}

/// Whether the test hook `name` is on (`<name>=1`, builds with the
/// `testbed` feature only): `AGENTMESH_TEST_SPLIT_VIEW` (this node's log
/// shows two histories). `AGENTMESH_TEST_DROP_OFFERED` is [`drop_hook`].
fn test_hook(name: &str) -> bool {
    cfg!(feature = "testbed") && std::env::var(name).as_deref() == Ok("1")
}

/// The share of offered records the test hook `AGENTMESH_TEST_DROP_OFFERED`
/// drops, in percent (builds with the `testbed` feature only): `1` drops
/// every one, `P%` that share.
fn drop_hook() -> u8 {
    if !cfg!(feature = "testbed") {
        return 0;
    }
    match std::env::var("AGENTMESH_TEST_DROP_OFFERED").as_deref() {
        Ok("1") => 100,
        Ok(v) => v
            .strip_suffix('%')
            .and_then(|p| p.parse::<u8>().ok())
            .map_or(0, |p| p.min(100)),
        Err(_) => 0,
    }
}

/// Judges records repaired from peers' logs through `handler`, off the
/// async workers. The witness holds this and the handler holds the
/// witness: the handler is held weakly, so that dropping the node drops
/// both (and its store).
fn repair_through(handler: &Arc<NodeHandler>) -> crate::witness::Repair {
    let handler = Arc::downgrade(handler);
    Arc::new(move |bytes, from| {
        let handler = handler.clone();
        Box::pin(async move {
            let Some(handler) = handler.upgrade() else {
                return;
            };
            let judged = tokio::task::spawn_blocking(move || handler.repaired(&bytes, from)).await;
            if let Ok(verdict) = judged {
                tracing::debug!(%from, ?verdict, "a record repaired from a peer's log");
            }
        })
    })
}

/// The peer ids of `p2p.trusted_peers` (config validation refused any
/// that does not parse).
fn trusted_peer_ids(peers: &[String]) -> HashSet<libp2p::PeerId> {
    peers.iter().filter_map(|p| p.parse().ok()).collect()
}

/// The Ed25519 keys of `peers` (peer ids of Ed25519 keys embed the key);
/// ids of other key types are skipped with a warning.
pub(super) fn trusted_keys(peers: &[String]) -> Vec<VerifyingKey> {
    peers
        .iter()
        .filter_map(|p| {
            let key = identity::key_of_peer_id(p);
            if key.is_none() {
                tracing::warn!(peer = %p, "trusted peer is not an Ed25519 peer id; ignored");
            }
            key
        })
        .collect()
}
