//! Intent resolution, `POST /resolve` (the AIDIP draft's Agent Semantic
//! Resolution): `(intent, context, policy) → candidates`, each with its
//! endpoint, invocation metadata (operation, input schema, auth,
//! protocol), score, and the reasons it was chosen. The API's handler
//! parses the request ([`ResolveRequest::parse`]), builds a [`Plan`], may
//! ask the mesh with [`Plan::mesh_query`], and calls
//! [`Resolver::resolve`].
//!
//! - **The intent ranks.** It is understood as a search query is
//!   ([`understand`]): its words and the capability ids it names are
//!   ranked by the store's text index; the languages it names, and
//!   `context.language(s)`, are preferred (agents supporting them are
//!   answered first, the others after); `context.domain`'s words join
//!   the ranking; the trust it names ("verified") is a floor, as in
//!   search. An intent with nothing to rank walks the filters in id
//!   order (no score).
//! - **The policy excludes.** Every term is a hard constraint: a
//!   candidate failing one never appears, however well it matches.
//!   `languages` and the trust floor are terms of the index query itself;
//!   every term (those two again, on the record as read back) is checked
//!   on each record examined, in rank order, until `top` pass or
//!   [`OVERFETCH`] × `top` records (at most [`MAX_EXAMINED`]) have been
//!   examined. [`Resolution::bound_reached`] says when that bound, not
//!   the index running out, ended the walk: more compliant agents may
//!   exist further down. What each term refused is counted in
//!   [`Resolution::refused`]. Where each term is read from in the
//!   documents is in [`policy`].
//! - **The intent stays here.** Asking the mesh sends peers the
//!   capability ids the intent names and the policy's languages, never
//!   the intent's text, unless `policy.share_intent` is true
//!   (REQ-CAP-5); with neither a capability nor sharing, peers are not
//!   asked.

pub mod invocation;
pub mod policy;
pub mod request;

use std::collections::{BTreeMap, HashSet};

use serde::Serialize;
use serde_json::Value;

pub use invocation::Invocation;
pub use policy::{Reason, ReasonCode};
pub use request::{Context, MaxPrice, Policy, ResolveRequest, Scope};

use crate::descriptor;
use crate::record::RecordBody;
use crate::registry::{
    Dense, Registry, RegistryError, SearchQuery, Signals, Source, TrustView, SEMANTIC_POOL,
};
use crate::store::{Audience, BlockingStore, Filter, StoredAgent, TextQuery};
use crate::trust::TrustLevel;
use crate::understand::{language_matches, understand, Understood};

/// Records examined per candidate asked for.
pub const OVERFETCH: usize = 10;
/// Most records one resolution examines.
pub const MAX_EXAMINED: usize = 1000;

/// A request with its intent understood: what is ranked locally and what
/// may be sent to peers.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The request.
    pub request: ResolveRequest,
    /// What the intent was understood as.
    pub understood: Understood,
    /// Whom the resolution answers: the hidden agents it may rank.
    pub audience: Audience,
}

impl Plan {
    /// Understands the request's intent.
    pub fn new(request: ResolveRequest) -> Self {
        let understood = understand(&request.intent);
        Self {
            request,
            understood,
            audience: Audience::Public,
        }
    }

    /// Most records this resolution examines.
    pub fn budget(&self) -> usize {
        (self.request.top * OVERFETCH).min(MAX_EXAMINED)
    }

    /// The search to send peers, if any: the capability ids the intent
    /// names and the policy's languages as filters; the intent's text
    /// only when `policy.share_intent` allows it. `None` when there is
    /// nothing to ask without the text (no capability named, no sharing).
    pub fn mesh_query(&self) -> Option<SearchQuery> {
        let share = self.request.policy.share_intent;
        if !share && self.understood.capabilities.is_empty() {
            return None;
        }
        Some(SearchQuery {
            filter: Filter {
                capabilities: self.understood.capabilities.clone(),
                tags: Vec::new(),
                languages: self.request.policy.languages.clone(),
                include_stale: false,
                min_trust: None,
                alive_since: None,
                audience: Audience::Public,
            },
            query: share.then(|| self.request.intent.clone()),
            after: None,
            limit: self.budget(),
            explain: false,
        })
    }

    /// What [`Plan::mesh_query`] sends, for the answer; `asked` says
    /// whether peers were asked.
    pub fn mesh_view(&self, asked: bool) -> MeshView {
        let query = self.mesh_query();
        MeshView {
            asked,
            intent_shared: query.as_ref().is_some_and(|q| q.query.is_some()),
            capabilities: query
                .as_ref()
                .map(|q| q.filter.capabilities.clone())
                .unwrap_or_default(),
            languages: query
                .as_ref()
                .map(|q| q.filter.languages.clone())
                .unwrap_or_default(),
            note: query.is_none().then(|| {
                "the intent names no capability, and policy.share_intent is not true: \
                 peers were not asked"
                    .to_owned()
            }),
        }
    }

    /// The languages to prefer: named in the intent or in the context.
    fn preferred_languages(&self) -> Vec<String> {
        descriptor::normalise_languages(
            self.understood
                .languages
                .iter()
                .chain(&self.request.context.languages)
                .map(String::as_str),
        )
        .unwrap_or_default()
    }

    /// The words that rank as text: those that named no capability (the
    /// named capabilities rank as ids), and the context's domain.
    fn ranked_text(&self) -> String {
        let mut text = self.understood.rest.clone();
        if let Some(domain) = &self.request.context.domain {
            text.push(' ');
            text.push_str(domain);
        }
        text
    }

    /// The lowest trust accepted: the policy's, or the intent's if higher.
    fn trust_floor(&self) -> Option<TrustLevel> {
        self.request.policy.min_trust.max(self.understood.min_trust)
    }
}

/// What was sent (or would have been sent) to peers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct MeshView {
    /// Whether peers were asked.
    pub asked: bool,
    /// Whether the intent's text went to them.
    pub intent_shared: bool,
    /// The capability filters sent.
    pub capabilities: Vec<String>,
    /// The language filters sent.
    pub languages: Vec<String>,
    /// Why peers were not asked, when they were not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// What the intent and context were understood as.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct UnderstoodView {
    /// The intent's words left to rank with.
    pub text: String,
    /// Capability ids the intent names.
    pub capabilities: Vec<String>,
    /// Languages the intent names.
    pub languages: Vec<String>,
    /// The trust the intent names, if any.
    pub min_trust: Option<TrustLevel>,
    /// Languages preferred in the ranking (intent and context).
    pub preferred_languages: Vec<String>,
    /// The context's subject area, ranked with the intent.
    pub domain: Option<String>,
    /// The lowest trust accepted (policy or intent).
    pub trust_floor: Option<TrustLevel>,
    /// Context members that were not understood (ignored).
    pub context_ignored: Vec<String>,
    /// Whether the intent was cut to the understood length.
    pub truncated: bool,
}

/// One candidate.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Candidate {
    /// Agent id.
    pub id: String,
    /// Name.
    pub name: String,
    /// Description.
    pub description: String,
    /// The agent's endpoint.
    pub endpoint: Option<String>,
    /// Normalised capability ids.
    pub capabilities: Vec<String>,
    /// Relevance to the intent, 0..1 (`null` when nothing was ranked).
    pub score: Option<f64>,
    /// Trust level and evidence.
    pub trust: TrustView,
    /// Where the record came from.
    pub source: Source,
    /// How to call it.
    pub invocation: Invocation,
    /// What matched and each policy term passed.
    pub reasons: Vec<Reason>,
}

/// The answer to a resolution.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Resolution {
    /// At most `top`, best first; every one passes the whole policy.
    pub candidates: Vec<Candidate>,
    /// What the intent was understood as.
    pub understood: UnderstoodView,
    /// Records examined.
    pub examined: usize,
    /// The most that could be examined ([`OVERFETCH`] × `top`, at most
    /// [`MAX_EXAMINED`]).
    pub examine_limit: usize,
    /// Whether the walk ended at `examine_limit` with fewer than `top`
    /// candidates while more records matched: compliant agents may exist
    /// beyond the bound.
    pub bound_reached: bool,
    /// Records examined and refused, by the policy term they failed.
    pub refused: BTreeMap<ReasonCode, usize>,
    /// What the mesh was sent, when `scope` was `mesh`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mesh: Option<MeshView>,
}

/// Resolves intents over a registry. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Resolver {
    registry: Registry,
}

impl Resolver {
    /// A resolver over `registry`'s store.
    pub fn new(registry: Registry) -> Self {
        Self { registry }
    }

    /// Resolves `plan` over what this node holds, on a blocking thread.
    ///
    /// # Errors
    /// [`RegistryError::Store`].
    pub async fn resolve(&self, plan: &Plan) -> Result<Resolution, RegistryError> {
        let (this, plan) = (self.clone(), plan.clone());
        self.registry
            .store()
            .run_blocking(move |store| this.resolve_in(store, &plan))
            .await?
    }

    /// [`Resolver::resolve`] on this (blocking) thread: the records the
    /// intent ranks (or, with nothing to rank with, the filter walk)
    /// examined against the policy, first inside the preferred languages,
    /// then inside the policy's own, until `top` pass or the budget is
    /// spent.
    fn resolve_in(&self, store: &BlockingStore, plan: &Plan) -> Result<Resolution, RegistryError> {
        let req = &plan.request;
        let u = &plan.understood;
        let budget = plan.budget();
        let preferred = plan.preferred_languages();
        let now = crate::record::unix_now();
        let alive_since = req.policy.alive_within.map(|s| now.saturating_sub(s));
        let attempts = attempts(
            &req.policy.languages,
            &preferred,
            &plan.audience,
            alive_since,
        );
        let text = plan.ranked_text();
        // With a semantic model: the capability the intent means without
        // naming it ranks too, and the best candidates are re-ordered by
        // meaning before the policy walks them.
        let dense = self.registry.dense(u);
        let mut capabilities = plan.understood.capabilities.clone();
        if let Some(d) = &dense {
            capabilities.extend(d.hints.iter().cloned());
        }
        let mut intent_words = invocation::words(&u.text);
        intent_words.extend(u.capabilities.iter().flat_map(|c| invocation::words(c)));
        let ranking = Ranking {
            text: &text,
            capabilities: &capabilities,
            dense: dense.as_ref(),
        };

        let mut walk = Walk {
            resolver: self,
            store,
            plan,
            preferred: &preferred,
            intent_words: &intent_words,
            now,
            seen: HashSet::new(),
            out: Vec::new(),
            places: Vec::new(),
            attempt: 0,
            examined: 0,
            budget,
            bound_reached: false,
            refused: BTreeMap::new(),
        };
        for (i, filter) in attempts.iter().enumerate() {
            if walk.out.len() >= req.top || walk.examined >= budget {
                break;
            }
            walk.attempt = i;
            let more_possible = match walk.ranked(filter, &ranking)? {
                Some(ranked) => walk.examine_ranked(ranked)?,
                None => walk.examine_walked(filter)?,
            };
            if walk.out.len() < req.top && more_possible {
                walk.bound_reached = true;
            }
        }
        Ok(walk.into_resolution())
    }
}

/// The filters a resolution tries in turn: the policy's languages with
/// the preferred ones added (when any are), then the policy's alone.
fn attempts(
    policy_languages: &[String],
    preferred: &[String],
    audience: &Audience,
    alive_since: Option<u64>,
) -> Vec<Filter> {
    let hard = Filter {
        capabilities: Vec::new(),
        tags: Vec::new(),
        languages: policy_languages.to_vec(),
        include_stale: false,
        min_trust: None,
        alive_since,
        audience: audience.clone(),
    };
    let mut attempts = Vec::new();
    if !preferred.is_empty() {
        let mut narrowed = hard.clone();
        narrowed.languages = descriptor::normalise_languages(
            hard.languages.iter().chain(preferred).map(String::as_str),
        )
        .unwrap_or_else(|_| hard.languages.clone());
        attempts.push(narrowed);
    }
    attempts.push(hard);
    attempts
}

/// What one resolution ranks with, the same for every filter it tries.
struct Ranking<'a> {
    /// The intent's text, with the context's domain.
    text: &'a str,
    /// The capability ids ranked as ids: those named, and with a semantic
    /// model those meant.
    capabilities: &'a [String],
    /// The query as the semantic model sees it, when there is one.
    dense: Option<&'a Dense<'a>>,
}

/// One resolution's walk over ranked records.
struct Walk<'a> {
    resolver: &'a Resolver,
    store: &'a BlockingStore,
    plan: &'a Plan,
    preferred: &'a [String],
    intent_words: &'a [String],
    now: u64,
    seen: HashSet<String>,
    out: Vec<Candidate>,
    /// Beside each candidate of `out`: whether its status says it is not
    /// serving, and the attempt that found it.
    places: Vec<(bool, usize)>,
    /// The attempt being walked (its index in `attempts`).
    attempt: usize,
    examined: usize,
    budget: usize,
    bound_reached: bool,
    refused: BTreeMap<ReasonCode, usize>,
}

impl Walk<'_> {
    /// The records the intent ranks inside `filter`, best first, with
    /// their scores; with a semantic model the best are re-ordered by
    /// meaning and the agents nearest in meaning follow. `None` when there
    /// is nothing to rank with.
    fn ranked(
        &self,
        filter: &Filter,
        by: &Ranking<'_>,
    ) -> Result<Option<Vec<(String, f64)>>, RegistryError> {
        let u = &self.plan.understood;
        let ranked = self.store.text_search(&TextQuery {
            text: by.text,
            filter,
            limit: self.budget,
            now: self.now,
            min_trust: self.plan.trust_floor(),
            capabilities: by.capabilities,
            subjects: &u.subjects,
        })?;
        let (mut ranked, d) = match (ranked, by.dense) {
            (Some(ranked), Some(d)) => (ranked, d),
            (ranked, _) => return Ok(ranked),
        };
        let tail = ranked.split_off(ranked.len().min(SEMANTIC_POOL));
        let mut head = d.rank_ids(self.store, ranked)?;
        head.extend(tail);
        // After every match by words, the agents nearest in
        // meaning inside the policy's filters.
        let room = self.budget.saturating_sub(head.len());
        let listed: HashSet<&str> = head.iter().map(|(id, _)| id.as_str()).collect();
        let placed = listed.len() + self.seen.len();
        let near = d.near(
            self.store,
            (filter, self.plan.trust_floor()),
            self.now,
            (room, placed),
            |id| listed.contains(id) || self.seen.contains(id),
        )?;
        head.extend(near.into_iter().map(|(a, score)| (a.id, score)));
        Ok(Some(head))
    }

    /// Examines the ranked records in order until no more are wanted;
    /// whether more may have matched than were ranked.
    fn examine_ranked(&mut self, ranked: Vec<(String, f64)>) -> Result<bool, RegistryError> {
        let more_possible = ranked.len() >= self.budget;
        for (id, score) in ranked {
            if self.seen.contains(&id) {
                continue;
            }
            if !self.wants_more() {
                break;
            }
            if let Some(agent) = self.store.get(&id)? {
                self.examine(&agent, Some(score))?;
            }
        }
        Ok(more_possible)
    }

    /// Nothing to rank with: examines the filter walk, in order of first
    /// arrival; whether more may have matched than were walked.
    fn examine_walked(&mut self, filter: &Filter) -> Result<bool, RegistryError> {
        let found = self.store.search(filter, None, self.budget)?;
        let more_possible = found.len() >= self.budget;
        for agent in found {
            if self.seen.contains(agent.body.agent_id()) {
                continue;
            }
            if !self.wants_more() {
                break;
            }
            self.examine(&agent, None)?;
        }
        Ok(more_possible)
    }

    /// The answer: the candidates, what the intent was understood as,
    /// and what the walk examined and refused.
    fn into_resolution(mut self) -> Resolution {
        // As a search page settles: agents not serving after the rest,
        // each attempt's candidates in the order of their weighted
        // scores; the attempts rank inside narrower filters first, so a
        // later one may score higher than what an earlier one placed
        // above it: capped.
        let mut placed: Vec<((bool, usize), Candidate)> =
            self.places.drain(..).zip(self.out.drain(..)).collect();
        placed.sort_by(|(a, ca), (b, cb)| {
            a.cmp(b)
                .then(cb.score.unwrap_or(0.0).total_cmp(&ca.score.unwrap_or(0.0)))
        });
        self.out = placed.into_iter().map(|(_, c)| c).collect();
        crate::registry::never_rising(self.out.iter_mut().map(|c| &mut c.score));
        let plan = self.plan;
        let (req, u) = (&plan.request, &plan.understood);
        let bound_reached = self.bound_reached && self.out.len() < req.top;
        Resolution {
            candidates: self.out,
            understood: UnderstoodView {
                text: u.text.clone(),
                capabilities: u.capabilities.clone(),
                languages: u.languages.clone(),
                min_trust: u.min_trust,
                preferred_languages: self.preferred.to_vec(),
                domain: req.context.domain.clone(),
                trust_floor: plan.trust_floor(),
                context_ignored: req.context.ignored.clone(),
                truncated: u.truncated,
            },
            examined: self.examined,
            examine_limit: self.budget,
            bound_reached,
            refused: self.refused,
            mesh: None,
        }
    }

    /// Whether another record may be examined: `top` not reached, and the
    /// budget not spent (when it is, the bound was reached).
    fn wants_more(&mut self) -> bool {
        if self.out.len() >= self.plan.request.top {
            return false;
        }
        if self.examined >= self.budget {
            self.bound_reached = true;
            return false;
        }
        true
    }

    /// Checks one record against the policy; a record that passes becomes
    /// a candidate.
    fn examine(&mut self, agent: &StoredAgent, score: Option<f64>) -> Result<(), RegistryError> {
        let RecordBody::Descriptor(body) = &agent.body else {
            return Ok(());
        };
        let d = &body.descriptor;
        self.seen.insert(d.id.clone());
        self.examined += 1;
        if body.expires_at < self.now {
            return Ok(());
        }
        let document: Value = serde_json::from_str(&body.document).unwrap_or(Value::Null);
        let u = &self.plan.understood;
        // Only what this node proved, or a trusted peer attested, counts:
        // a claimed proof is no proof for the policy.
        let evidence = agent.counted_evidence();
        // This node's probe, or a trusted peer's signed result: another
        // node's word counts only when this node trusts it.
        let liveness = match self.plan.request.policy.alive_within {
            Some(_) => self.store.counted_liveness(&d.id)?,
            None => None,
        };
        let checked = policy::check(
            &self.plan.request.policy,
            &policy::Agent {
                descriptor: d,
                evidence: &evidence,
                document: &document,
                intent_capabilities: &u.capabilities,
                liveness: liveness.as_ref(),
                now: self.now,
            },
        );
        // The intent's own trust words are a floor too (as in search).
        let checked = checked.and_then(|reasons| match u.min_trust {
            Some(min) if evidence.level() < min => Err(ReasonCode::PolicyMinTrust),
            _ => Ok(reasons),
        });
        let policy_reasons = match checked {
            Ok(r) => r,
            Err(code) => {
                *self.refused.entry(code).or_default() += 1;
                return Ok(());
            }
        };
        let mut reasons = Vec::new();
        if let Some(score) = score {
            reasons.push(Reason::new(
                ReasonCode::IntentMatched,
                format!("ranked {score:.2} for {:?}", self.plan.ranked_text()),
            ));
        }
        for cap in u.capabilities.iter().filter(|c| d.capabilities.contains(c)) {
            reasons.push(Reason::new(
                ReasonCode::CapabilityMatched,
                format!("capability {cap} matched"),
            ));
        }
        for lang in self.preferred {
            if let Some(tag) = d.languages.iter().find(|t| language_matches(lang, t)) {
                reasons.push(Reason::new(
                    ReasonCode::LanguageSupported,
                    format!("language {lang} supported ({tag})"),
                ));
            }
        }
        reasons.extend(policy_reasons);
        let summary = self
            .resolver
            .registry
            .summary_of(self.store, agent, score)?;
        let signals = Signals::read(
            self.store,
            &summary.id,
            summary.status.as_deref(),
            summary.trust.level,
        )?;
        self.places.push((signals.not_serving(), self.attempt));
        self.out.push(Candidate {
            invocation: invocation::invocation(d, &document, self.intent_words),
            id: summary.id,
            name: summary.name,
            description: summary.description,
            endpoint: summary.endpoint,
            capabilities: summary.capabilities,
            score: summary.score.map(|s| s * signals.weight()),
            trust: summary.trust,
            source: summary.source,
            reasons,
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests;
