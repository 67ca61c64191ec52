//! Federated search: one query answered from this node's text index and,
//! in mesh scope, from its peers' indexes. Both halves of the
//! `/agentmesh/search/1.0.0` protocol live here:
//!
//! - asking (`search/ask.rs`): [`FederatedSearch::search`] picks whom to
//!   ask (the providers of the rarest capability, else the connected peers
//!   that speak the protocol; nobody at all when there is nobody, without
//!   waiting), lists what this node already holds of the answer (`known`),
//!   fans the request out, hands every record that comes back to an
//!   [`Admit`] (the node's federation `Judge`: nothing from a peer is
//!   ranked before it is judged and stored), then ranks everything it
//!   holds with its own index ([`Registry::search_local`]). One `Budget` bounds
//!   the whole of it: each stage ends at its share of one deadline, and a
//!   peer that does not answer in time is reported, not waited for;
//! - answering ([`answer`], `search/answer.rs`): a peer's request is
//!   answered from [`Registry::find`], i.e. ranked by this node's text
//!   index inside the request's filters, as signed records the asker
//!   verifies itself.
//!
//! The HTTP API calls [`FederatedSearch::search`] and writes its headers
//! from the typed [`SearchOutcome`]; the federation's mesh handler calls
//! [`answer`]. What peers answer is judged through the [`Admit`] trait, so
//! this module sits below the federation (which implements it) and the
//! federation's handler can call the answering half.

mod answer;
mod ask;
#[cfg(test)]
mod tests;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use libp2p::PeerId;
use serde::Deserialize;
use tokio::time::Instant;

pub use answer::answer;
pub use ask::choose;

use crate::mesh::MeshClient;
use crate::metrics::Metrics;
use crate::registry::{Page, Registry, RegistryError, SearchQuery};

/// How widely a search looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// This node's records only.
    Local,
    /// This node's records and what its peers answer (first page only).
    #[default]
    Mesh,
}

/// Judges a record a peer sent in answer to a search, and stores it when
/// it is valid: the node's federation `Judge`. Nothing a peer sends is
/// ranked before it went through here.
///
/// Called on a blocking thread (signature checks and store writes block).
pub trait Admit: Send + Sync + 'static {
    /// Judges `record` (encoded `SignedRecord` bytes); true when it was
    /// stored (new, or newer than what this node held).
    fn admit(&self, record: &[u8]) -> bool;
}

/// The mesh side of a [`FederatedSearch`]: whom it asks through, how many
/// and for how long.
#[derive(Clone)]
pub struct MeshAsk {
    /// The mesh client the requests go out through.
    pub client: MeshClient,
    /// Judges (and stores) what peers answer.
    pub admit: Arc<dyn Admit>,
    /// Most providers one search asks, and a quarter as many peers of its
    /// own choice besides (`p2p.search_fanout`).
    pub fanout: usize,
    /// The peers of `p2p.trusted_peers`: when connected, a search asks
    /// them first among the slots it keeps for peers of its own choice.
    pub trusted: HashSet<PeerId>,
    /// The whole mesh search, end to end (`p2p.search_timeout`).
    pub budget: Duration,
    /// Stop waiting for peers once the answer is full
    /// (`p2p.search_ends_when_full`, [`SearchEnd::WhenFull`]).
    pub ends_when_full: bool,
}

impl std::fmt::Debug for MeshAsk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MeshAsk")
            .field("fanout", &self.fanout)
            .field("budget", &self.budget)
            .field("ends_when_full", &self.ends_when_full)
            .finish_non_exhaustive()
    }
}

/// Searches this node, and the mesh when asked to. Cheap to clone.
#[derive(Debug, Clone)]
pub struct FederatedSearch {
    registry: Registry,
    mesh: Option<MeshAsk>,
    metrics: Metrics,
}

/// What a search found, and, for a mesh search, how asking went.
#[derive(Debug, Clone)]
pub struct SearchOutcome {
    /// The ranked results (this node's index over everything it holds,
    /// what peers answered and it admitted included).
    pub page: Page,
    /// How asking the mesh went; `None` when the mesh was not asked (local
    /// scope, a later page, or a node without a mesh).
    pub mesh: Option<MeshReport>,
    /// The whole search, asking and ranking.
    pub elapsed: Duration,
}

/// Whom a mesh search asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asked {
    /// Nobody: no connected peer speaks the search protocol. The search
    /// did not look providers up nor wait for anything.
    Nobody,
    /// The providers of the query's rarest capability.
    Providers,
    /// The connected peers that speak the search protocol (no capability
    /// filter, or no provider found).
    Connected,
}

/// Why an asked peer is not among those that answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unanswered {
    /// It had not answered when the fan-out's share of the budget ran out.
    TimedOut,
    /// The request failed (dial or stream error, refused, the mesh shut
    /// down).
    Failed {
        /// What failed.
        reason: String,
    },
}

/// How asking the mesh went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MeshReport {
    /// Whom the search asked.
    pub whom: Asked,
    /// Peers asked.
    pub asked: usize,
    /// Peers that answered in time.
    pub answered: usize,
    /// The asked peers that did not answer, and why.
    pub unanswered: Vec<(PeerId, Unanswered)>,
    /// Asked peers not waited for: the answer was full before they
    /// answered (`p2p.search_ends_when_full`). Not a failure: the answer
    /// is not partial for them.
    pub not_waited: usize,
    /// Records the answers carried.
    pub records_received: usize,
    /// Of those, records the judge stored (new or newer than held).
    pub records_stored: usize,
    /// Records received but not judged because the budget ran out (not
    /// stored, not ranked).
    pub records_unjudged: usize,
    /// Some of the mesh's answer is missing: a peer did not answer, or
    /// records were left unjudged.
    pub partial: bool,
    /// The end-to-end budget the search had (`p2p.search_timeout`).
    pub budget: Duration,
    /// The budget cut something short: a peer still unanswered at the
    /// fan-out's share, records left unjudged, the text index not caught
    /// up in time, or the whole search finished past the budget.
    pub budget_exhausted: bool,
}

impl MeshReport {
    fn nobody(budget: Duration) -> Self {
        Self {
            whom: Asked::Nobody,
            asked: 0,
            answered: 0,
            unanswered: Vec::new(),
            not_waited: 0,
            records_received: 0,
            records_stored: 0,
            records_unjudged: 0,
            partial: false,
            budget,
            budget_exhausted: false,
        }
    }
}

impl FederatedSearch {
    /// Searches over `registry`, asking the mesh through `mesh` (none: a
    /// node without a mesh; every search is local).
    pub fn new(registry: Registry, mesh: Option<MeshAsk>) -> Self {
        Self {
            registry,
            mesh,
            metrics: Metrics::new(),
        }
    }

    /// Times each search into `metrics` (by scope: `mesh` when the mesh
    /// half ran, else `local`).
    #[must_use]
    pub fn with_metrics(mut self, metrics: Metrics) -> Self {
        self.metrics = metrics;
        self
    }

    /// The registry searched.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Runs `query`. In [`Scope::Mesh`], for a first page, the peers are
    /// asked first and what they send is judged and stored, all within
    /// [`MeshAsk::budget`] ([`FederatedSearch::ask`]); then this node's
    /// index ranks everything it holds. A peer that does not answer makes
    /// the outcome partial, never an error.
    ///
    /// # Errors
    /// [`RegistryError::Store`] when the local search fails.
    #[tracing::instrument(name = "search", skip_all, fields(scope = ?scope))]
    pub async fn search(
        &self,
        query: &SearchQuery,
        scope: Scope,
    ) -> Result<SearchOutcome, RegistryError> {
        let started = Instant::now();
        let mesh = match scope {
            Scope::Mesh if query.after.is_none() => self.ask(query).await,
            _ => None,
        };
        let page = self.registry.search_local(query).await?;
        let elapsed = started.elapsed();
        let mesh = mesh.map(|mut report| {
            report.budget_exhausted |= elapsed > report.budget;
            report
        });
        tracing::debug!(ms = elapsed.as_millis() as u64, "search answered");
        self.metrics.searched(mesh.is_some(), elapsed);
        Ok(SearchOutcome {
            page,
            mesh,
            elapsed,
        })
    }

    /// The asking half alone, for a caller that ranks on its own (`POST
    /// /resolve`): asks the mesh for `query` and stores what verifies,
    /// within all but the last tenth of [`MeshAsk::budget`] (left for the
    /// caller's ranking). `None` on a node without a mesh.
    pub async fn ask(&self, query: &SearchQuery) -> Option<MeshReport> {
        let mesh = self.mesh.as_ref()?;
        let budget = Budget::new(Instant::now(), mesh.budget);
        let mut report = ask::ask(&self.registry, mesh, query, budget).await;
        report.budget_exhausted |= Instant::now() > budget.deadline();
        Some(report)
    }
}

/// One deadline for a whole mesh search, and each stage's share of it:
/// the provider lookup (and the `known` list beside it) ends by 30 % of
/// the budget, the fan-out by 70 %, judging by 85 %, the text index's
/// catching up by 90 %; the last 10 % are left for ranking locally.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Budget {
    start: Instant,
    total: Duration,
}

impl Budget {
    /// A budget of `total` from `start`.
    pub(crate) fn new(start: Instant, total: Duration) -> Self {
        Self { start, total }
    }

    fn at(&self, percent: u32) -> Instant {
        self.start + self.total * percent / 100
    }

    /// When the provider lookup and the `known` list must be done.
    pub(crate) fn lookup_by(&self) -> Instant {
        self.at(30)
    }

    /// When the peers must have answered.
    pub(crate) fn answers_by(&self) -> Instant {
        self.at(70)
    }

    /// When judging stops (what is left is not stored).
    pub(crate) fn judged_by(&self) -> Instant {
        self.at(85)
    }

    /// How long to wait for the text index to take in what was stored.
    pub(crate) fn indexed_by(&self) -> Instant {
        self.at(90)
    }

    /// The end of the whole search.
    pub(crate) fn deadline(&self) -> Instant {
        self.at(100)
    }

    /// Time since the search started.
    pub(crate) fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }
}
