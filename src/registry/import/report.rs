//! What an import reports: one [`LineResult`] per document line, the
//! [`ImportSummary`] of a run, and why a run stopped early ([`Stopped`]).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::aidip::FieldProblem;
use crate::formats::FormatError;
use crate::trust::Reason;

/// What became of one line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[schema(as = ImportOutcome)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// A new local registration (no live descriptor was held).
    Created,
    /// A live local registration was replaced (or re-signed).
    Updated,
    /// The document equals the one held; nothing was written.
    Unchanged,
    /// The line was not imported; `problems` says why.
    Refused,
    /// A server the registry deleted was held here and is now deleted
    /// (`mcp-registry`).
    Deleted,
    /// Nothing to do (`mcp-registry`: a deleted server not held here, a
    /// version that is not the latest, an item a later one supersedes);
    /// `problems` says why.
    Skipped,
}

impl Outcome {
    /// The outcome as it appears in results.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Created => "created",
            Self::Updated => "updated",
            Self::Unchanged => "unchanged",
            Self::Refused => "refused",
            Self::Deleted => "deleted",
            Self::Skipped => "skipped",
        }
    }
}

/// The result of one document line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct LineResult {
    /// Its line number, from 1 (for one JSON document: its item's number,
    /// from 1).
    pub line: u64,
    /// The agent id, when the line got as far as having one.
    pub id: Option<String>,
    /// What became of it.
    pub outcome: Outcome,
    /// Why it was refused or skipped (empty otherwise), each at its JSON
    /// pointer.
    pub problems: Vec<FieldProblem>,
    /// The reason code of a refusal, when the format has one
    /// (`mcp-registry`: `mcp_server_invalid`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<Reason>,
}

impl LineResult {
    /// A refused line, with its problems.
    pub(super) fn refused(line: u64, id: Option<String>, problems: Vec<FieldProblem>) -> Self {
        Self {
            line,
            id,
            outcome: Outcome::Refused,
            problems,
            reason: None,
        }
    }

    /// A refusal of a format's parser: its reason code, its message split
    /// into the member it names and what is wrong.
    pub(super) fn refused_as(line: u64, id: Option<String>, e: FormatError) -> Self {
        let problem = match e.message.split_once(": ") {
            Some((field, message)) if field.starts_with('/') => FieldProblem {
                field: field.into(),
                message: message.into(),
            },
            _ => FieldProblem {
                field: String::new(),
                message: e.message,
            },
        };
        Self {
            reason: Some(e.reason),
            ..Self::refused(line, id, vec![problem])
        }
    }

    /// A skipped line, and why.
    pub(super) fn skipped(line: u64, id: String, why: impl Into<String>) -> Self {
        Self {
            line,
            id: Some(id),
            outcome: Outcome::Skipped,
            problems: vec![FieldProblem {
                field: String::new(),
                message: why.into(),
            }],
            reason: None,
        }
    }

    /// A line done with `outcome`.
    pub(super) fn done(line: u64, id: String, outcome: Outcome) -> Self {
        Self {
            line,
            id: Some(id),
            outcome,
            problems: Vec::new(),
            reason: None,
        }
    }
}

/// Why an import stopped before the end of its input.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[schema(as = ImportStopped)]
#[serde(tag = "code", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Stopped {
    /// The input has more lines than [`ImportLimits::max_lines`].
    TooManyLines {
        /// The limit.
        max_lines: u64,
    },
    /// Reading the input failed.
    Read {
        /// The read error.
        message: String,
    },
    /// The store failed; lines from this one on were not imported.
    Store {
        /// The store error.
        message: String,
    },
    /// The input is not what its format reads (`mcp-registry`: neither
    /// one JSON document of a server list nor NDJSON of servers, or a
    /// document over [`MAX_DOCUMENT_BYTES`]); nothing was imported.
    Invalid {
        /// What is wrong.
        message: String,
    },
    /// Nobody takes the results any more (the client went away).
    Cancelled,
}

/// The counts of a finished import.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct ImportSummary {
    /// Lines read, blank ones included (for one JSON document: its
    /// items).
    pub lines: u64,
    /// Blank lines skipped.
    pub blank: u64,
    /// Agents created.
    pub created: u64,
    /// Agents updated.
    pub updated: u64,
    /// Documents already held as they are.
    pub unchanged: u64,
    /// Lines refused.
    pub refused: u64,
    /// Agents deleted (`mcp-registry`; left out when 0).
    #[serde(skip_serializing_if = "is_zero")]
    pub deleted: u64,
    /// Lines skipped (`mcp-registry`; left out when 0).
    #[serde(skip_serializing_if = "is_zero")]
    pub skipped: u64,
    /// The refused lines that carry a reason code, by code (left out
    /// when none does).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub refused_reasons: BTreeMap<Reason, u64>,
    /// Why the import stopped early; `None` when it read all its input.
    pub stopped: Option<Stopped>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl ImportSummary {
    /// The audit entry of a finished import by `actor` of `target` (a
    /// file, or the request): one entry for the whole import, `count`
    /// the agents it wrote (created, updated, deleted); `refused:lines_refused`
    /// when some lines were refused, `error:stopped` when it stopped early.
    pub fn audit_event(&self, actor: &str, target: &str) -> crate::store::AuditEvent {
        use crate::store::{AuditAction, AuditEvent, AuditOutcome};
        let outcome = if self.stopped.is_some() {
            AuditOutcome::Error("stopped".to_owned())
        } else if self.refused > 0 {
            AuditOutcome::Refused("lines_refused".to_owned())
        } else {
            AuditOutcome::Ok
        };
        let mut event = AuditEvent::new(actor, AuditAction::Import, target, outcome);
        event.count = self.created + self.updated + self.deleted;
        event
    }

    /// Counts one result.
    pub fn count(&mut self, r: &LineResult) {
        match r.outcome {
            Outcome::Created => self.created += 1,
            Outcome::Updated => self.updated += 1,
            Outcome::Unchanged => self.unchanged += 1,
            Outcome::Refused => {
                self.refused += 1;
                if let Some(reason) = r.reason {
                    *self.refused_reasons.entry(reason).or_default() += 1;
                }
            }
            Outcome::Deleted => self.deleted += 1,
            Outcome::Skipped => self.skipped += 1,
        }
    }
}
