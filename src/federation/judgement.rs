//! What became of a record the judge was shown.

use super::refusal::Refusal;

/// What happened to a remote record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Judgement {
    /// Stored (new or newer than what was held).
    Stored {
        /// The agent.
        agent_id: String,
        /// The signer is in `trusted_peers` (or is this node).
        trusted: bool,
        /// The domain to re-verify locally (an untrusted attester's ADP
        /// agent, or A2A or DNS-AID agent claiming a flag).
        reverify: Option<String>,
        /// The record's signer (whose share of re-verification it uses).
        signer: [u8; 32],
    },
    /// The record this node holds (same seq): nothing to do, not an
    /// offence.
    Duplicate,
    /// Valid, from a signer this node does not trust, about an ADP agent
    /// whose held record this node counts (it verified it, or a trusted
    /// peer attested it): kept out, not an offence. `reverify` names the
    /// domain when the document differs from the held one (the agent may
    /// have changed: this node looks for itself).
    Outranked {
        /// The domain to re-verify, when the documents differ.
        reverify: Option<String>,
        /// The record's signer.
        signer: [u8; 32],
    },
    /// Older than what this node holds (a replay or a late copy): not
    /// stored, counted as `stale_seq`, not penalised.
    Stale,
    /// Valid, about an agent this node does not hold, and not kept: the
    /// node caches only what it looked up
    /// ([`Replication::Lookups`](crate::config::Replication::Lookups)).
    NotKept,
    /// Cannot be checked here, through no fault of the sender: a tombstone
    /// for an agent this node does not hold (its signer can only be checked
    /// against the descriptor it replaces). Not stored, not counted as a
    /// refusal.
    Unverifiable(Refusal),
    /// Refused; the reason is counted.
    Refused(Refusal),
}
