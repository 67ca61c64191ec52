//! The registry service: AIDIP registration, update, deletion, lookup and
//! search over the store. The HTTP API and the demo call this; it owns no
//! transport. Each acknowledged write is flushed to disk before it returns.
//! Searches (the store walk, decoding, scoring, summaries) run as one
//! blocking task, off the runtime's workers.

use std::sync::Arc;
use std::time::Duration;

use ed25519_dalek::SigningKey;
use serde::Serialize;
use serde_json::Value;

use crate::aidip::{self, FieldProblem, MetadataValidator};
use crate::identity;
use crate::record::{
    self, DescriptorRecord, RecordBody, RecordError, SignedRecord, TombstoneReason, TombstoneRecord,
};
use crate::store::{
    BlockingStore, Expect, Filter, Origin, PutOutcome, Store, StoreError, StoredAgent,
};
use crate::verify::{Evidence, TrustLevel};

/// Errors from registry operations.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// The document or query is invalid; each problem names its field.
    #[error("invalid input: {message}{}", problems.first().map(|p| format!(": {} {}", p.field, p.message)).unwrap_or_default())]
    Invalid {
        message: String,
        problems: Vec<FieldProblem>,
    },
    /// No live agent with this id.
    #[error("agent {id} not found")]
    NotFound { id: String },
    /// The agent is owned by another registry or was crawled.
    #[error("agent {id} is not registered at this node; only its own registry can change it")]
    NotLocal { id: String },
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

impl RegistryError {
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// Registered through this node's API.
    Local,
    /// Crawled and verified by this node.
    Crawl,
    /// Attested by another node.
    Mesh,
}

/// The evidence flags of a result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EvidenceFlags {
    /// DNSSEC-validated TXT record.
    pub dnssec: bool,
    /// Fingerprint chain checked.
    pub fingerprint: bool,
    /// Challenge signed by the agent key.
    pub challenge: bool,
    /// Mutual verified peers.
    pub mutual_peer: bool,
}

/// The `trust` member of results.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TrustView {
    /// The level the evidence proves.
    pub level: TrustLevel,
    /// What was proven.
    pub evidence: EvidenceFlags,
    /// Fingerprints of the keys that signed the record.
    pub attested_by: Vec<String>,
    /// Reason codes of what did not verify in this node's latest crawl.
    pub reasons: Vec<String>,
}

/// An AIDIP summary object, with agentmesh's `score`, `trust`, `source`.
#[derive(Debug, Clone, PartialEq, Serialize)]
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

/// The registry. Cheap to clone.
#[derive(Clone)]
pub struct Registry {
    store: Store,
    key: Arc<SigningKey>,
    validator: Arc<MetadataValidator>,
    ttl: Duration,
    max_scan: usize,
    /// Striped per-agent locks: a local write reads the held seq, signs
    /// and stores under its agent's lock, so concurrent writes to one
    /// agent get increasing seqs instead of refusing each other.
    write_locks: Arc<[tokio::sync::Mutex<()>]>,
    /// Where stored records go to be published on the mesh.
    outbox: Option<crate::federation::outbox::Outbox>,
}

/// Number of write-lock stripes.
const WRITE_LOCK_STRIPES: usize = 64;

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("store", &self.store)
            .finish()
    }
}

/// Most records a free-text query without filters looks at.
pub const DEFAULT_MAX_SCAN: usize = 200_000;

impl Registry {
    /// A registry over `store` that signs with `key`; records it issues
    /// are valid for `ttl`.
    pub fn new(store: Store, key: Arc<SigningKey>, ttl: Duration) -> Self {
        Self {
            store,
            key,
            validator: Arc::new(MetadataValidator::new()),
            ttl,
            max_scan: DEFAULT_MAX_SCAN,
            outbox: None,
            write_locks: (0..WRITE_LOCK_STRIPES)
                .map(|_| tokio::sync::Mutex::new(()))
                .collect(),
        }
    }

    async fn lock_agent(&self, id: &str) -> tokio::sync::MutexGuard<'_, ()> {
        use std::hash::{BuildHasher, BuildHasherDefault};
        let hash =
            BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default().hash_one(id);
        self.write_locks[(hash % WRITE_LOCK_STRIPES as u64) as usize]
            .lock()
            .await
    }

    /// Publishes every record this registry stores through `outbox`.
    #[must_use]
    pub fn with_outbox(mut self, outbox: crate::federation::outbox::Outbox) -> Self {
        self.outbox = Some(outbox);
        self
    }

    fn publish(&self, record: &SignedRecord, body: &RecordBody) {
        if let Some(outbox) = &self.outbox {
            outbox.send(crate::federation::outbox::Published::of(record, body));
        }
    }

    /// The underlying store.
    pub fn store(&self) -> &Store {
        &self.store
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
            None | Some(Value::Null) => {
                format!("agent-{}", hex::encode(rand::random::<[u8; 16]>()))
            }
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
        if !doc.is_object() {
            return Err(RegistryError::invalid(
                "",
                "the agent metadata document must be a JSON object",
            ));
        }
        let doc = aidip::with_id(&doc, id);
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
        let guard = self.lock_agent(id).await;
        let held = self.store.get(id).await?.map(|a| a.body.seq());
        let body = DescriptorRecord::new(
            descriptor,
            document,
            record::next_seq(held),
            record::unix_now(),
            self.ttl.as_secs(),
            Evidence::default(),
        );
        let signed =
            SignedRecord::sign_descriptor(&body, &self.key).map_err(RegistryError::TooLarge)?;
        let body = RecordBody::Descriptor(Box::new(body));
        let outcome = self
            .store
            .put(&signed, &body, Origin::Local, expect)
            .await?;
        drop(guard);
        self.store.flush().await.map_err(RegistryError::Store)?;
        self.publish(&signed, &body);
        Ok((outcome, doc))
    }

    /// Deletes an agent registered here, leaving a signed tombstone.
    ///
    /// # Errors
    /// [`RegistryError::NotFound`], [`RegistryError::NotLocal`],
    /// [`RegistryError::Store`].
    pub async fn delete(&self, id: &str) -> Result<(), RegistryError> {
        let guard = self.lock_agent(id).await;
        let held = self.store.get(id).await?.map(|a| a.body.seq());
        let body = TombstoneRecord {
            agent_id: id.to_owned(),
            seq: record::next_seq(held),
            issued_at: record::unix_now(),
            reason: TombstoneReason::Deleted,
        };
        let signed =
            SignedRecord::sign_tombstone(&body, &self.key).map_err(RegistryError::TooLarge)?;
        let body = RecordBody::Tombstone(body);
        self.store
            .put(&signed, &body, Origin::Local, Expect::LocalLive)
            .await?;
        drop(guard);
        self.store.flush().await.map_err(RegistryError::Store)?;
        self.publish(&signed, &body);
        Ok(())
    }

    /// The stored document of a live agent, as the JSON text it was
    /// stored as (no re-encoding on the read path).
    ///
    /// # Errors
    /// [`RegistryError::NotFound`] for unknown or deleted ids.
    pub async fn document(&self, id: &str) -> Result<String, RegistryError> {
        match self.store.get(id).await?.map(|a| a.body) {
            Some(RecordBody::Descriptor(body)) => Ok(body.document),
            _ => Err(RegistryError::NotFound { id: id.to_owned() }),
        }
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
                    .get(&id)?
                    .ok_or_else(|| RegistryError::NotFound { id: id.clone() })?;
                this.summarise(store, &agent, None)
            })
            .await?
    }

    /// Searches live agents: filters narrow, a free-text query ranks. The
    /// walk, the ranking and the summaries run on a blocking thread.
    ///
    /// # Errors
    /// [`RegistryError::Store`].
    pub async fn search(&self, q: &SearchQuery) -> Result<Page, RegistryError> {
        let (this, q) = (self.clone(), q.clone());
        self.store
            .run_blocking(move |store| {
                let (found, next_after) = this.find_in(store, &q)?;
                let items = found
                    .iter()
                    .map(|(score, a)| this.summarise(store, a, *score))
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(Page { items, next_after })
            })
            .await?
    }

    /// The records a search selects, best first, with their scores (when a
    /// query ranks them) and the id to continue after (filter-only
    /// searches). What the mesh's search protocol answers peers with. The
    /// walk and the ranking run on a blocking thread.
    ///
    /// # Errors
    /// [`RegistryError::Store`].
    pub async fn find(&self, q: &SearchQuery) -> Result<Found, RegistryError> {
        let (this, q) = (self.clone(), q.clone());
        self.store
            .run_blocking(move |store| this.find_in(store, &q))
            .await?
    }

    /// [`Registry::find`] on this (blocking) thread.
    fn find_in(&self, store: &BlockingStore, q: &SearchQuery) -> Result<Found, RegistryError> {
        let terms = q.query.as_deref().map(query_terms).unwrap_or_default();
        if terms.is_empty() {
            let found = store.search(&q.filter, q.after.as_deref(), q.limit)?;
            let next_after = (found.len() == q.limit && q.limit > 0)
                .then(|| found[found.len() - 1].body.agent_id().to_owned());
            return Ok((found.into_iter().map(|a| (None, a)).collect(), next_after));
        }
        let candidates = store.search(&q.filter, None, self.max_scan)?;
        let mut scored: Vec<(f64, StoredAgent)> = candidates
            .into_iter()
            .filter_map(|a| {
                let s = match &a.body {
                    RecordBody::Descriptor(d) => lexical_score(&terms, &d.descriptor),
                    RecordBody::Tombstone(_) => 0.0,
                };
                (s > 0.0).then_some((s, a))
            })
            .collect();
        scored.sort_by(|a, b| {
            b.0.total_cmp(&a.0)
                .then_with(|| a.1.body.agent_id().cmp(b.1.body.agent_id()))
        });
        scored.truncate(q.limit);
        Ok((
            scored.into_iter().map(|(s, a)| (Some(s), a)).collect(),
            None,
        ))
    }

    /// The summary of `agent`, on this (blocking) thread.
    fn summarise(
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
        let d = &body.descriptor;
        let e = &body.evidence;
        let source = if store.is_local(&d.id)? {
            Source::Local
        } else if agent.record.signer() == &self.key.verifying_key() {
            Source::Crawl
        } else {
            Source::Mesh
        };
        let reasons = match store.report(&d.id)? {
            Some(json) => serde_json::from_slice::<ReportReasons>(&json)
                .map(|r| r.reasons)
                .unwrap_or_default(),
            None => Vec::new(),
        };
        Ok(Summary {
            id: d.id.clone(),
            name: d.name.clone(),
            description: d.description.clone(),
            endpoint: d.endpoint.clone(),
            capabilities: d.capabilities.clone(),
            score,
            trust: TrustView {
                level: e.level(),
                evidence: EvidenceFlags {
                    dnssec: e.dnssec,
                    fingerprint: e.fingerprint,
                    challenge: e.challenge.is_some(),
                    mutual_peer: e.mutual_peer,
                },
                attested_by: vec![identity::fingerprint(agent.record.signer())],
                reasons,
            },
            source,
        })
    }
}

/// The one field of a stored crawl report that summaries show (the rest,
/// steps included, is skipped without being built).
#[derive(serde::Deserialize)]
struct ReportReasons {
    #[serde(default)]
    reasons: Vec<String>,
}

/// Lower-cased word tokens of a query, words under 2 characters dropped.
fn query_terms(q: &str) -> Vec<String> {
    let mut terms: Vec<String> = q
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() >= 2)
        .map(str::to_lowercase)
        .collect();
    terms.sort();
    terms.dedup();
    terms
}

/// The share of query terms the descriptor mentions, weighting a match in
/// capabilities or tags (1.0) over the name (0.8) over the description
/// (0.5). 0 when nothing matches.
fn lexical_score(terms: &[String], d: &crate::descriptor::Descriptor) -> f64 {
    let name = d.name.to_lowercase();
    let description = d.description.to_lowercase();
    let mut total = 0.0;
    for t in terms {
        let in_terms = d
            .capabilities
            .iter()
            .chain(&d.tags)
            .any(|c| c.split('_').any(|w| w == t) || c == t);
        total += if in_terms {
            1.0
        } else if name.contains(t.as_str()) {
            0.8
        } else if description.contains(t.as_str()) {
            0.5
        } else {
            0.0
        };
    }
    total / terms.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_terms_are_words() {
        assert_eq!(
            query_terms("Summarize LEGAL documents, in Chinese!"),
            vec!["chinese", "documents", "in", "legal", "summarize"]
        );
    }

    #[test]
    fn lexical_score_prefers_capability_matches() {
        let mut d = crate::record::tests::sample_descriptor("a");
        d.description = "Turns legal text into short notes".into();
        let translation = lexical_score(&["translation".into()], &d);
        let legal = lexical_score(&["legal".into()], &d);
        let none = lexical_score(&["weather".into()], &d);
        assert!(translation > legal && legal > none);
        assert_eq!(none, 0.0);
    }
}
