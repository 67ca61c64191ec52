//! What weighs on a ranked result beside how well it matches: what the
//! agent says of itself (its declared `status`), the trust this node
//! counts for its record, what liveness probes found (this node's, or a
//! trusted peer's), and how fresh its last confirmation is. Each is a
//! weight in 0..1 its score is multiplied by; an agent whose status says
//! it is not serving also goes after every other on the page.

use serde::Serialize;
use utoipa::ToSchema;

use crate::store::{BlockingStore, CompactAgent, FreshState, LiveState, StoreError};
use crate::trust::TrustLevel;

/// The weights of one result, and what they were read from.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Signals {
    /// The agent's declared status, lower-cased, when it declares one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Its weight: 0.25 for a status that says the agent is not serving
    /// (`inactive`, `offline`, `deprecated`, `retired`, `disabled`,
    /// `deleted`, `suspended`, `decommissioned`; such agents also come
    /// after every other), 0.75 for `maintenance` and `degraded`, else 1.
    pub status_weight: f64,
    /// The trust level this node counts for the record.
    pub trust: TrustLevel,
    /// Its weight: 1 for `peer-verified`, 0.97 `key-verified`, 0.94
    /// `dns-verified`, 0.9 `unverified`.
    pub trust_weight: f64,
    /// What the newest counted liveness probe found (this node's, or a
    /// trusted peer's `alive`), when one was made.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub liveness: Option<LiveState>,
    /// Its weight: 1 unprobed, `alive` or `auth_required`; 0.6
    /// `not_protocol`; 0.5 `unreachable` or `timeout`.
    pub liveness_weight: f64,
    /// How fresh this node's last confirmation of a crawled agent is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub freshness: Option<FreshState>,
    /// Its weight: 0.75 when `stale` (answered only when asked for), else 1.
    pub freshness_weight: f64,
}

impl Signals {
    /// The signals of `agent` as `store` holds them now.
    ///
    /// # Errors
    /// [`StoreError`] from reading its freshness or liveness checks.
    pub(super) fn of(store: &BlockingStore, agent: &CompactAgent) -> Result<Self, StoreError> {
        Self::read(store, &agent.id, agent.status.as_deref(), agent.level)
    }

    /// The signals of agent `id`, whose document declares `status` and
    /// whose record this node counts at `level`, with what `store` holds
    /// of its freshness and liveness now.
    ///
    /// # Errors
    /// [`StoreError`] from reading its freshness or liveness checks.
    pub fn read(
        store: &BlockingStore,
        id: &str,
        status: Option<&str>,
        level: TrustLevel,
    ) -> Result<Self, StoreError> {
        let status = status.map(str::to_ascii_lowercase);
        let freshness = store.freshness(id)?.map(|f| f.state);
        let liveness = store.counted_liveness(id)?.map(|l| l.state);
        Ok(Self {
            status_weight: status_weight(status.as_deref()).1,
            status,
            trust: level,
            trust_weight: trust_weight(level),
            liveness,
            liveness_weight: liveness_weight(liveness),
            freshness,
            freshness_weight: match freshness {
                Some(FreshState::Stale | FreshState::Dropped) => 0.75,
                _ => 1.0,
            },
        })
    }

    /// The product of the weights: what the ranked score is multiplied by.
    pub fn weight(&self) -> f64 {
        self.status_weight * self.trust_weight * self.liveness_weight * self.freshness_weight
    }

    /// Whether the agent says it is not serving: it goes after the rest.
    pub fn not_serving(&self) -> bool {
        status_weight(self.status.as_deref()).0 > 0
    }
}

/// How an agent's declared status (AIDIP's `status`, lower-cased) weighs
/// on its place: one that says it is not serving ranks after every other
/// (the group, 1), one under maintenance keeps its place at a lower
/// score.
pub(super) fn status_weight(status: Option<&str>) -> (u8, f64) {
    match status {
        Some(
            "inactive" | "offline" | "deprecated" | "retired" | "disabled" | "deleted"
            | "suspended" | "decommissioned",
        ) => (1, 0.25),
        Some("maintenance" | "degraded") => (0, 0.75),
        _ => (0, 1.0),
    }
}

/// The weight of the trust this node counts: proof ranks a little above
/// a claim of the same relevance, never above a better match by much.
fn trust_weight(level: TrustLevel) -> f64 {
    match level {
        TrustLevel::PeerVerified => 1.0,
        TrustLevel::KeyVerified => 0.97,
        TrustLevel::DnsVerified => 0.94,
        TrustLevel::Unverified => 0.9,
    }
}

/// The weight of what the newest counted probe found.
fn liveness_weight(state: Option<LiveState>) -> f64 {
    match state {
        None | Some(LiveState::Alive | LiveState::AuthRequired) => 1.0,
        Some(LiveState::NotProtocol) => 0.6,
        Some(LiveState::Unreachable | LiveState::Timeout) => 0.5,
    }
}
