//! The store's errors: [`StoreError`], and how a batch that failed as a
//! whole answers each of its writes ([`failed_batch`]).

use crate::record::RecordError;

/// Errors from the store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The database failed.
    #[error("store I/O: {0}")]
    Sled(#[from] sled::Error),
    /// The record was refused (stale seq, malformed...).
    #[error(transparent)]
    Record(#[from] RecordError),
    /// The store could not be closed ([`Store::close`]).
    #[error("store not closed: {reason}")]
    Close {
        /// Why: other handles are still alive, or the data directory
        /// stayed locked.
        reason: String,
    },
    /// The data directory holds another layout version.
    #[error("store schema version {found} is not the supported version {expected}")]
    SchemaVersion {
        /// The version the data directory holds.
        found: u32,
        /// The version this build reads, [`SCHEMA_VERSION`].
        expected: u32,
    },
    /// The agent belongs to another registry and cannot be changed here.
    #[error("agent {agent_id} is not registered at this node")]
    NotLocal {
        /// The agent the write was for.
        agent_id: String,
    },
    /// The agent does not exist (or was deleted).
    #[error("agent {agent_id} not found")]
    NotFound {
        /// The agent the write was for.
        agent_id: String,
    },
    /// A stored value could not be read back.
    #[error("corrupt store entry for {key}: {reason}")]
    Corrupt {
        /// The agent id the entry is stored under.
        key: String,
        /// Why it could not be decoded.
        reason: String,
    },
    /// The text index failed.
    #[error("text index: {reason}")]
    Text {
        /// What tantivy (or the index's writer thread) said.
        reason: String,
    },
    /// A batch of writes failed as a whole (another write of the batch
    /// carries the cause).
    #[error("store batch failed: {reason}")]
    BatchFailed {
        /// The cause, as the batch's first write reports it.
        reason: String,
    },
    /// The store cannot take another agent.
    #[error("store full: {reason}")]
    Full {
        /// What ran out.
        reason: String,
    },
    /// A blocking store task did not complete: it panicked (a bug), or the
    /// runtime shut down before it ran. A write may or may not have
    /// happened.
    #[error("store task {operation} did not complete: {reason}")]
    TaskFailed {
        /// The store operation that ran in the task.
        operation: &'static str,
        /// The panic message, or why the task did not run.
        reason: String,
    },
    /// No room for the write: `store.max_bytes` reached (the disk being
    /// full comes as [`StoreError::Sled`]; [`StoreError::is_out_of_space`]
    /// tells both).
    #[error("store out of space: {reason}")]
    OutOfSpace {
        /// What is used, against what limit.
        reason: String,
    },
    /// The record was replaced since it was read
    /// ([`Expect::Held`](super::Expect::Held)).
    #[error("agent {agent_id} changed since seq {expected} was read")]
    Changed {
        /// The agent.
        agent_id: String,
        /// The seq that was expected to be held.
        expected: u64,
    },
}

/// The outcomes of a batch of writes that failed as a whole: the first
/// carries the cause, each of the others [`StoreError::BatchFailed`].
pub fn failed_batch<T, E: From<StoreError>>(cause: StoreError, count: usize) -> Vec<Result<T, E>> {
    let reason = cause.to_string();
    let mut out = Vec::with_capacity(count.max(1));
    out.push(Err(cause.into()));
    out.extend((1..count).map(|_| {
        Err(StoreError::BatchFailed {
            reason: reason.clone(),
        }
        .into())
    }));
    out
}

/// A stored value that could not be read back.
pub(super) fn corrupt(id: &str, reason: String) -> StoreError {
    StoreError::Corrupt {
        key: id.to_owned(),
        reason,
    }
}
