//! The registry service: AIDIP registration, update, deletion, lookup and
//! search over the store. The HTTP API and the demo call this; it owns no
//! transport. Each acknowledged write is flushed to disk before it returns.
//! Searches (the store walk, decoding, scoring, summaries) run as one
//! blocking task, off the runtime's workers.

use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

mod dense;
mod explain;
mod find;
pub mod import;
mod mcp_served;
mod placed;
mod signals;
mod transfer;
mod vectors;
mod visibility;

pub(crate) use dense::Dense;
use dense::SemanticRanking;
pub use dense::{load_semantic, HINT_MIN_COSINE, NEAR_MIN_COSINE, SEMANTIC_POOL};
pub use explain::Explain;
pub use find::never_rising;
pub use mcp_served::{McpPage, McpQuery};
pub use placed::Pass;
pub use signals::Signals;

use crate::aidip::{self, FieldProblem, MetadataValidator};
use crate::descriptor::{Descriptor, DocumentFormat};
use crate::formats::mcp::McpServer;
use crate::identity;
use crate::issuer::{DescriptorIssue, Durability, IssueError, Issuer};
use crate::record::{RecordBody, RecordError, TombstoneReason};
use crate::semantic::Semantic;
use crate::store::{
    BlockingStore, CompactAgent, Expect, Filter, Freshness, LiveState, Liveness, Origin,
    ProbeProtocol, PutOutcome, Store, StoreError, StoredAgent,
};
use crate::trust::{Evidence, EvidenceFlags, Reason, TrustLevel};
use crate::understand::Understood;

/// Errors from registry operations.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// The document or query is invalid; each problem names its field.
    #[error("invalid input: {message}{}", problems.first().map(|p| format!(": {} {}", p.field, p.message)).unwrap_or_default())]
    Invalid {
        /// What is wrong, in one sentence (the API's `message`).
        message: String,
        /// Each problem with the field it names (the API's `details`).
        problems: Vec<FieldProblem>,
    },
    /// No live agent with this id.
    #[error("agent {id} not found")]
    NotFound {
        /// The agent id asked for.
        id: String,
    },
    /// The agent is owned by another registry or was crawled.
    #[error("agent {id} is not registered at this node; only its own registry can change it")]
    NotLocal {
        /// The agent id asked for.
        id: String,
    },
    /// A transfer that does not hand the id to this node
    /// ([`Registry::take_over`]).
    #[error("the transfer of {id} is refused: {reason}")]
    TransferRefused {
        /// The agent id.
        id: String,
        /// Why.
        reason: String,
    },
    /// The agent was registered here by another client: only it and the
    /// operator may change it.
    #[error("agent {id} was registered by another client; only it and the operator may change it")]
    NotOwner {
        /// The agent id asked for.
        id: String,
    },
    /// Peers already hold the agent as public: it cannot be hidden again.
    #[error("agent {id} is public and peers hold it: delete it (the deletion reaches them) and register it again as unlisted or private")]
    AlreadyPublished {
        /// The agent id asked for.
        id: String,
    },
    /// The signed record would be over the size limit.
    #[error("document too large: {0}")]
    TooLarge(RecordError),
    /// The store failed.
    #[error(transparent)]
    Store(StoreError),
}

impl From<StoreError> for RegistryError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound { agent_id } => Self::NotFound { id: agent_id },
            StoreError::NotLocal { agent_id } => Self::NotLocal { id: agent_id },
            other => Self::Store(other),
        }
    }
}

impl From<IssueError> for RegistryError {
    fn from(e: IssueError) -> Self {
        match e {
            IssueError::TooLarge(e) => Self::TooLarge(e),
            IssueError::Store(e) => e.into(),
        }
    }
}

impl RegistryError {
    /// Invalid input with several problems, each `(JSON pointer, message)`.
    fn invalid_all(message: &str, problems: Vec<(String, String)>) -> Self {
        Self::Invalid {
            message: message.to_owned(),
            problems: problems
                .into_iter()
                .map(|(field, message)| FieldProblem { field, message })
                .collect(),
        }
    }

    fn invalid(field: &str, message: impl Into<String>) -> Self {
        let message = message.into();
        Self::Invalid {
            problems: vec![FieldProblem {
                field: field.into(),
                message: message.clone(),
            }],
            message,
        }
    }
}

/// Where a result came from, from this node's point of view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// Registered through this node's API.
    Local,
    /// Crawled and verified by this node.
    Crawl,
    /// Attested by another node.
    Mesh,
}

/// The `trust` member of results.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct TrustView {
    /// The level the evidence proves.
    pub level: TrustLevel,
    /// What was proven.
    pub evidence: EvidenceFlags,
    /// Fingerprints of the keys that signed the record.
    pub attested_by: Vec<String>,
    /// Reason codes of what did not verify in this node's latest crawl.
    pub reasons: Vec<Reason>,
    /// Evidence the record's signer claims and this node has not proven
    /// (the signer is not in `p2p.trusted_peers` and this node has not
    /// verified the agent itself): shown, never counted by `level`,
    /// `min_trust`, ranking or `/resolve`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub claimed: Option<ClaimView>,
}

/// What a record's signer claims about an agent, unproven here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct ClaimView {
    /// The level the claimed evidence would prove.
    pub level: TrustLevel,
    /// The claimed evidence.
    pub evidence: EvidenceFlags,
    /// Fingerprint of the key that claims it.
    pub by: String,
}

/// Another node's signed probe result of an agent (`checked_by` in
/// results; docs/protocol.md#probe): "checked live by node X at T".
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct CheckView {
    /// The peer id of the node that probed and signed it.
    pub node: String,
    /// What its probe found.
    pub state: LiveState,
    /// When, Unix seconds.
    pub checked_at: u64,
    /// How long the agent took to answer, milliseconds.
    pub rtt_ms: u64,
    /// The protocol it spoke.
    pub protocol: ProbeProtocol,
    /// Whether the node is one of this node's `p2p.trusted_peers`: only
    /// a trusted node's result counts for `alive_within`.
    pub trusted: bool,
}

/// An AIDIP summary object, with agentmesh's `score`, `trust`, `source`.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Summary {
    /// Agent id.
    pub id: String,
    /// Name.
    pub name: String,
    /// Description.
    pub description: String,
    /// Invocation endpoint.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// Normalised capability ids.
    pub capabilities: Vec<String>,
    /// Relevance to the query, 0..1, when a query was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
    /// Trust level and evidence.
    pub trust: TrustView,
    /// Where the record came from.
    pub source: Source,
    /// The format the agent was published in (`adp`, `aidip`, `a2a`,
    /// `ard`, `dns-aid`, `aid`, `mcp-registry`).
    pub source_format: DocumentFormat,
    /// The agent's declared availability (`online`, `offline`,
    /// `maintenance`), when its document declares one. Offline and
    /// maintenance agents are answered, marked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// For agents this node crawls: how fresh its last confirmation is,
    /// when its endpoint last answered, and when it looks again.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub freshness: Option<Freshness>,
    /// For agents this node probes (`crawl.probe_registered`): what the
    /// last probe found, when, how long the agent took, and the protocol
    /// it was asked in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub liveness: Option<Liveness>,
    /// What other nodes' probes found, as they signed it (newest first,
    /// at most `store::MAX_CHECKS_PER_AGENT`); absent when none did.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub checked_by: Vec<CheckView>,
    /// Why it stands where it does, when the search asked
    /// (`explain: true`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub explain: Option<Explain>,
}

/// A search request, already bounded by the caller.
#[derive(Debug, Clone, Default)]
pub struct SearchQuery {
    /// Filter terms.
    pub filter: Filter,
    /// Free-text query, ranked lexically.
    pub query: Option<String>,
    /// Continue after this agent id (filter-only searches).
    pub after: Option<String>,
    /// Most results.
    pub limit: usize,
    /// Explain each result (the search page's `explain`).
    pub explain: bool,
}

/// What [`Registry::find`] selects: scored records, and the id to
/// continue after.
pub type Found = (Vec<(Option<f64>, StoredAgent)>, Option<String>);

/// One page of results.
#[derive(Debug, Clone)]
pub struct Page {
    /// The results.
    pub items: Vec<Summary>,
    /// The id to continue after, when more may follow.
    pub next_after: Option<String>,
}

/// A validated registration, ready to be issued.
struct Prepared {
    /// The normalised descriptor.
    descriptor: Descriptor,
    /// The stored JSON text of `doc`.
    document: String,
    /// The document with its id.
    doc: Value,
}

impl Prepared {
    /// The registration of an MCP Registry server (the bulk import's
    /// `mcp-registry` input): its descriptor under `mcp:{name}`, its
    /// `server.json` (`json`, what `server` was read from) as the
    /// document, in compact text.
    fn mcp_server(server: &McpServer, json: &Value) -> Self {
        Self {
            descriptor: server.to_descriptor(),
            document: serde_json::to_string(json).expect("a serde_json::Value always serialises"),
            doc: json.clone(),
        }
    }
}

/// The id given to a document registered without one: `agent-` and 32
/// hex digits (random for `POST /agents`, derived from the document by
/// the bulk import).
fn generated_id(bytes: [u8; 16]) -> String {
    format!("agent-{}", hex::encode(bytes))
}

/// The registry. Cheap to clone.
#[derive(Clone)]
pub struct Registry {
    store: Store,
    issuer: Issuer,
    validator: Arc<MetadataValidator>,
    /// Finds and re-ranks free-text results by meaning, when configured.
    semantic: Option<Arc<SemanticRanking>>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("store", &self.store)
            .finish()
    }
}

impl Registry {
    /// A registry over the issuer's store; what it registers is signed,
    /// stored and published by `issuer`.
    pub fn new(issuer: Issuer) -> Self {
        Self {
            store: issuer.store().clone(),
            issuer,
            validator: Arc::new(MetadataValidator::new()),
            semantic: None,
        }
    }

    /// The underlying store.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The public key this node signs its records with.
    pub fn node_key(&self) -> ed25519_dalek::VerifyingKey {
        self.issuer.key().verifying_key()
    }

    /// Registers an AIDIP document; assigns an id when it has none. A
    /// document whose id is already registered here updates it.
    ///
    /// # Errors
    /// [`RegistryError::Invalid`] with every problem found,
    /// [`RegistryError::NotLocal`] when the id belongs to another registry,
    /// [`RegistryError::TooLarge`], [`RegistryError::Store`].
    pub async fn register(&self, doc: Value) -> Result<(PutOutcome, Value), RegistryError> {
        let id = match doc.get("id") {
            None | Some(Value::Null) => generated_id(rand::random()),
            Some(Value::String(id)) => id.clone(),
            Some(_) => return Err(RegistryError::invalid("/id", "id must be a string")),
        };
        self.write(&id, doc, Expect::LocalOrAbsent).await
    }

    /// Replaces the document of an agent registered here.
    ///
    /// # Errors
    /// As [`Registry::register`]; [`RegistryError::NotFound`] for an
    /// unknown id; [`RegistryError::Invalid`] when the body names another id.
    pub async fn update(&self, id: &str, doc: Value) -> Result<Value, RegistryError> {
        match doc.get("id") {
            None => {}
            Some(Value::String(body_id)) if body_id == id => {}
            Some(_) => {
                return Err(RegistryError::invalid(
                    "/id",
                    format!("the body's id differs from the path's id {id:?}"),
                ));
            }
        }
        self.write(id, doc, Expect::LocalLive)
            .await
            .map(|(_, doc)| doc)
    }

    async fn write(
        &self,
        id: &str,
        doc: Value,
        expect: Expect,
    ) -> Result<(PutOutcome, Value), RegistryError> {
        let prepared = self.prepare(id, &doc)?;
        let issued = self
            .issuer
            .descriptor(DescriptorIssue {
                descriptor: prepared.descriptor,
                document: prepared.document,
                evidence: Evidence::default(),
                origin: Origin::Local,
                expect,
                durability: Durability::Flushed,
            })
            .await?;
        Ok((issued.outcome, prepared.doc))
    }

    /// Validates `doc` as a registration of `id` (the AIDIP schema, every
    /// problem reported) and maps it to what is signed. What `POST /agents`
    /// and the bulk import both do before issuing.
    fn prepare(&self, id: &str, doc: &Value) -> Result<Prepared, RegistryError> {
        if !doc.is_object() {
            return Err(RegistryError::invalid(
                "",
                "the agent metadata document must be a JSON object",
            ));
        }
        let doc = aidip::with_id(doc, id);
        let meta = self
            .validator
            .parse(&doc)
            .map_err(|problems| RegistryError::Invalid {
                message: format!(
                    "the document does not match the AIDIP agent schema ({} problems)",
                    problems.len()
                ),
                problems,
            })?;
        let descriptor = meta.to_descriptor(id);
        let document = serde_json::to_string(&doc).expect("a serde_json::Value always serialises");
        Ok(Prepared {
            descriptor,
            document,
            doc,
        })
    }

    /// Deletes an agent registered here, leaving a signed tombstone.
    ///
    /// # Errors
    /// [`RegistryError::NotFound`], [`RegistryError::NotLocal`],
    /// [`RegistryError::Store`].
    pub async fn delete(&self, id: &str) -> Result<(), RegistryError> {
        self.delete_with(id, Durability::Flushed).await
    }

    /// [`Registry::delete`], on disk as `durability` says (the bulk
    /// import: [`Durability::Periodic`], flushed once per batch).
    async fn delete_with(&self, id: &str, durability: Durability) -> Result<(), RegistryError> {
        self.issuer
            .tombstone(
                id,
                TombstoneReason::Deleted,
                Origin::Local,
                Expect::LocalLive,
                durability,
            )
            .await?;
        Ok(())
    }

    /// The stored document of a live agent, as the JSON text it was
    /// stored as (no re-encoding on the read path).
    ///
    /// # Errors
    /// [`RegistryError::NotFound`] for unknown or deleted ids.
    pub async fn document(&self, id: &str) -> Result<String, RegistryError> {
        self.store
            .document(id)
            .await?
            .ok_or_else(|| RegistryError::NotFound { id: id.to_owned() })
    }

    /// The summary of a live agent (what searches answer for it).
    ///
    /// # Errors
    /// [`RegistryError::NotFound`] for unknown or deleted ids.
    pub async fn summary(&self, id: &str) -> Result<Summary, RegistryError> {
        let (this, id) = (self.clone(), id.to_owned());
        self.store
            .run_blocking(move |store| {
                let agent = store
                    .compact(&id)?
                    .ok_or_else(|| RegistryError::NotFound { id: id.clone() })?;
                this.summarise(store, agent, None)
            })
            .await?
    }

    /// The summary of a stored live descriptor, on this (blocking) thread:
    /// what a search answers for it. For services that select records
    /// themselves (the resolver).
    ///
    /// # Errors
    /// [`RegistryError::NotFound`] for a tombstone, [`RegistryError::Store`].
    pub fn summary_of(
        &self,
        store: &BlockingStore,
        agent: &StoredAgent,
        score: Option<f64>,
    ) -> Result<Summary, RegistryError> {
        let RecordBody::Descriptor(body) = &agent.body else {
            return Err(RegistryError::NotFound {
                id: agent.body.agent_id().to_owned(),
            });
        };
        let local = store.is_local(&body.agent_id)?;
        self.summarise(
            store,
            CompactAgent::of(&agent.record, body, local, agent.claimed),
            score,
        )
    }

    /// The same registry, ranking free text with `model` as well, the
    /// text index's order weighing `lexical_weight` (0..1, clamped) in
    /// the fusion. Starts the vector index, which reads the store's agents
    /// on a thread of its own (see [`Registry::semantic_ready`]).
    #[must_use]
    pub fn with_semantic(mut self, model: Arc<Semantic>, lexical_weight: f64) -> Self {
        let ranking = SemanticRanking::start(self.store.blocking(), model, lexical_weight);
        self.semantic = Some(Arc::new(ranking));
        self
    }

    /// The semantic model, when one is configured.
    pub fn semantic(&self) -> Option<&Arc<Semantic>> {
        self.semantic.as_ref().map(|s| s.model())
    }

    /// Whether the vector index has read the store whole since the model
    /// was given (`None` without a model). Until then, searches find by
    /// meaning among the agents read so far.
    pub fn semantic_ready(&self) -> Option<bool> {
        self.semantic.as_ref().map(|s| s.vectors().ready())
    }

    /// Whether the vector index stopped following the store (its thread
    /// panicked; `None` without a model): searches by meaning answer from
    /// what it held until the node restarts.
    pub fn semantic_stopped(&self) -> Option<bool> {
        self.semantic.as_ref().map(|s| s.vectors().stopped())
    }

    /// How many agents the vector index holds (`None` without a model).
    pub fn semantic_agents(&self) -> Option<u64> {
        self.semantic.as_ref().map(|s| s.vectors().len())
    }

    /// What the model makes of `u`, when there is a model and `u` has
    /// words it knows.
    pub(crate) fn dense(&self, u: &Understood) -> Option<Dense<'_>> {
        self.semantic.as_deref()?.dense(u)
    }

    /// The summary of `agent`, on this (blocking) thread: its compact
    /// record, where it came from, and the reasons of its latest crawl.
    fn summarise(
        &self,
        store: &BlockingStore,
        agent: CompactAgent,
        score: Option<f64>,
    ) -> Result<Summary, RegistryError> {
        let source = if agent.local {
            Source::Local
        } else if agent.signer == self.issuer.key().verifying_key().as_bytes() {
            Source::Crawl
        } else {
            Source::Mesh
        };
        let reasons = store.reasons(&agent.id)?;
        let attested_by = match ed25519_dalek::VerifyingKey::try_from(agent.signer.as_slice()) {
            Ok(key) => vec![identity::fingerprint(&key)],
            Err(_) => Vec::new(),
        };
        // A claim of nothing (a registration from another registry) is
        // not worth saying.
        let claimed = agent
            .claimed
            .filter(|c| c.level > TrustLevel::Unverified || c.evidence != EvidenceFlags::default())
            .map(|c| ClaimView {
                level: c.level,
                evidence: c.evidence,
                by: attested_by.first().cloned().unwrap_or_default(),
            });
        let source_format = agent.source_format();
        let mut freshness = store.freshness(&agent.id)?;
        let liveness = freshness.as_mut().and_then(|f| f.liveness.take());
        let checked_by = store
            .peer_checks(&agent.id)?
            .into_iter()
            .filter_map(|(signer, c)| {
                let key = ed25519_dalek::VerifyingKey::from_bytes(&signer).ok()?;
                Some(CheckView {
                    node: identity::peer_id_of_public(&key),
                    state: c.state,
                    checked_at: c.checked_at,
                    rtt_ms: c.rtt_ms,
                    protocol: c.protocol,
                    trusted: c.trusted,
                })
            })
            .collect();
        Ok(Summary {
            checked_by,
            explain: None,
            source_format,
            status: agent.status,
            freshness,
            liveness,
            id: agent.id,
            name: agent.name,
            description: agent.description,
            endpoint: agent.endpoint,
            capabilities: agent.capabilities,
            score,
            trust: TrustView {
                level: agent.level,
                evidence: agent.evidence,
                attested_by,
                reasons,
                claimed,
            },
            source,
        })
    }
}

#[cfg(test)]
mod tests;
