//! The registry's local search: what the records this node holds answer
//! to a [`SearchQuery`]. A query's text is understood first, then ranked
//! by the store's text index in three passes (its words inside the
//! narrowed filters, all its words as text, the agents nearest in
//! meaning); a query with no words walks the filters. The HTTP API's
//! local search and the mesh's search protocol both read from here.

use super::dense::Dense;
use super::{Found, Page, Picked, Registry, RegistryError, SearchQuery};
use crate::descriptor;
use crate::record::RecordBody;
use crate::store::{BlockingStore, CompactAgent, Filter, TextQuery};
use crate::trust::TrustLevel;
use crate::understand::{understand, Understood};

/// The picked records, best first, with their scores.
type Scored = Vec<(Option<f64>, CompactAgent)>;

/// How one understood query is ranked by words: the text index's inputs
/// that stay the same across the filters tried.
struct ByWords<'a> {
    u: &'a Understood,
    /// The capability ids ranked as ids: those named, and with a semantic
    /// model those meant.
    capabilities: &'a [String],
    /// How many candidates to ask the text index for.
    pool: usize,
    now: u64,
}

impl Registry {
    /// Searches live agents held here: filters narrow, a free-text query
    /// ranks. The walk, the ranking and the summaries run on a blocking
    /// thread.
    ///
    /// # Errors
    /// [`RegistryError::Store`].
    pub async fn search_local(&self, q: &SearchQuery) -> Result<Page, RegistryError> {
        let (this, q) = (self.clone(), q.clone());
        self.store
            .run_blocking(move |store| {
                let (found, next_after) = this.find_in(store, &q)?;
                let items = found
                    .into_iter()
                    .map(|(score, a)| this.summarise(store, a, score))
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
            .run_blocking(move |store| -> Result<Found, RegistryError> {
                let (found, next_after) = this.find_in(store, &q)?;
                let mut out = Vec::with_capacity(found.len());
                for (score, compact) in found {
                    // Read as it is now: replaced or deleted since is
                    // answered as it stands, or left out.
                    if let Some(agent) = store.get(&compact.id)? {
                        if matches!(agent.body, RecordBody::Descriptor(_)) {
                            out.push((score, agent));
                        }
                    }
                }
                Ok((out, next_after))
            })
            .await?
    }

    /// [`Registry::find`] on this (blocking) thread. A query's text is
    /// understood first ([`understand`]): the languages it names narrow
    /// (when that leaves fewer results than asked for, the rest are
    /// filled without them, ranked after), the trust it asks for is a
    /// floor, and its words and the capability ids it names are ranked by
    /// the text index, inside the request's own filters (when that leaves
    /// fewer results than asked for, all its words ranked as text fill the
    /// rest, for the records that declare no capability ids). A query with no
    /// word to rank with (or none) walks the filter posting lists, in
    /// order of first arrival.
    fn find_in(&self, store: &BlockingStore, q: &SearchQuery) -> Result<Picked, RegistryError> {
        let Some(u) = q.query.as_deref().map(understand) else {
            return self.walk(store, q, None);
        };
        let narrowed = narrowed(&q.filter, &u);
        if u.terms.is_empty() {
            // Only languages or trust named ("agents in Chinese").
            let walked = SearchQuery {
                filter: narrowed,
                ..q.clone()
            };
            return self.walk(store, &walked, u.min_trust);
        }
        // The words that named no capability rank as text; the named
        // capabilities as ids (their words would count twice). With a
        // semantic model, a capability the query means without naming it
        // ranks too, and the best of a wider pool are re-ordered by
        // meaning.
        let now = crate::record::unix_now();
        let dense = self.dense(&u);
        let mut capabilities = u.capabilities.clone();
        let mut pool = q.limit;
        if let Some(d) = &dense {
            capabilities.extend(d.hints.iter().cloned());
            pool = Dense::pool(q.limit);
        }
        let mut attempts = vec![narrowed];
        if !u.languages.is_empty() {
            attempts.push(q.filter.clone());
        }
        let by_words = ByWords {
            u: &u,
            capabilities: &capabilities,
            pool,
            now,
        };
        let mut out: Scored = Vec::with_capacity(q.limit);
        rank_by_words(
            store,
            &by_words,
            &attempts,
            dense.as_ref(),
            q.limit,
            &mut out,
        )?;
        if out.len() < q.limit && !u.capabilities.is_empty() {
            fill_by_text(store, &u, &q.filter, now, q.limit, &mut out)?;
        }
        if let Some(d) = &dense {
            fill_by_meaning(store, d, (&attempts, u.min_trust), now, q.limit, &mut out)?;
        }
        settle(&mut out);
        Ok((out, None))
    }

    /// The filter walk, in order of first arrival, from `q.after`; with
    /// `min_trust`, only the agents at that level or above.
    fn walk(
        &self,
        store: &BlockingStore,
        q: &SearchQuery,
        min_trust: Option<TrustLevel>,
    ) -> Result<Picked, RegistryError> {
        let (found, next_after) = store.walk(&q.filter, min_trust, q.after.as_deref(), q.limit)?;
        Ok((found.into_iter().map(|a| (None, a)).collect(), next_after))
    }
}

/// The request's filter with the languages the query names added (the
/// request's own languages when the union is not well-formed).
fn narrowed(filter: &Filter, u: &Understood) -> Filter {
    let mut narrowed = filter.clone();
    narrowed.languages = descriptor::normalise_languages(
        filter
            .languages
            .iter()
            .chain(&u.languages)
            .map(String::as_str),
    )
    .unwrap_or_else(|_| filter.languages.clone());
    narrowed
}

/// The first pass: the words that named no capability and the capability
/// ids, ranked by the text index inside each of `attempts` in turn (the
/// narrowed filter, then the request's own) until `limit` are placed;
/// with a semantic model the candidates of each are re-ordered by
/// meaning.
fn rank_by_words(
    store: &BlockingStore,
    by: &ByWords<'_>,
    attempts: &[Filter],
    dense: Option<&Dense<'_>>,
    limit: usize,
    out: &mut Scored,
) -> Result<(), RegistryError> {
    for filter in attempts {
        if out.len() >= limit {
            break;
        }
        let ranked = store
            .text_search(&TextQuery {
                text: &by.u.rest,
                filter,
                limit: by.pool,
                now: by.now,
                min_trust: by.u.min_trust,
                capabilities: by.capabilities,
                subjects: &by.u.subjects,
            })?
            .unwrap_or_default();
        let mut candidates = Vec::with_capacity(ranked.len());
        for (id, score) in ranked {
            if out.iter().any(|(_, a)| a.id == id) {
                continue;
            }
            // The index may run a commit behind the store: what it
            // ranks is read back (its compact record), and only live
            // descriptors answered.
            if let Some(agent) = store.compact(&id)? {
                candidates.push((agent, score));
            }
        }
        if let Some(d) = dense {
            candidates = d.rank(candidates);
        }
        let room = limit - out.len();
        out.extend(
            candidates
                .into_iter()
                .take(room)
                .map(|(agent, score)| (Some(score), agent)),
        );
    }
    Ok(())
}

/// The second pass. The named capabilities rank by id, and records that
/// declare no capabilities (imported MCP servers, most crawled formats)
/// never match an id, so a query made only of capability words
/// ("generate images") would find nothing among them: fill what is left
/// of the page with all its words as text, inside the request's own
/// filters, after the matches by id.
fn fill_by_text(
    store: &BlockingStore,
    u: &Understood,
    filter: &Filter,
    now: u64,
    limit: usize,
    out: &mut Scored,
) -> Result<(), RegistryError> {
    let ranked = store
        .text_search(&TextQuery {
            text: &u.text,
            filter,
            limit,
            now,
            min_trust: u.min_trust,
            capabilities: &[],
            subjects: &u.subjects,
        })?
        .unwrap_or_default();
    for (id, score) in ranked {
        if out.len() >= limit || out.iter().any(|(_, a)| a.id == id) {
            continue;
        }
        if let Some(agent) = store.compact(&id)? {
            out.push((Some(score), agent));
        }
    }
    Ok(())
}

/// The third pass, with a semantic model: what the words left of the
/// page goes to the agents nearest in meaning, which may share no word
/// with the query (in the same order of filters), after every match by
/// words.
fn fill_by_meaning(
    store: &BlockingStore,
    dense: &Dense<'_>,
    (attempts, min_trust): (&[Filter], Option<TrustLevel>),
    now: u64,
    limit: usize,
    out: &mut Scored,
) -> Result<(), RegistryError> {
    for filter in attempts {
        if out.len() >= limit {
            break;
        }
        let near = dense.near(
            store,
            (filter, min_trust),
            now,
            (limit - out.len(), out.len()),
            |id| out.iter().any(|(_, a)| a.id == id),
        )?;
        out.extend(near.into_iter().map(|(agent, score)| (Some(score), agent)));
    }
    Ok(())
}

/// How an agent's declared status (AIDIP's `status`, lower-cased) weighs
/// on its place: one that says it is not serving ranks after every other,
/// one under maintenance keeps its place at a lower score.
fn status_weight(status: Option<&str>) -> (u8, f64) {
    match status {
        Some(
            "inactive" | "offline" | "deprecated" | "retired" | "disabled" | "deleted"
            | "suspended" | "decommissioned",
        ) => (1, 0.25),
        Some("maintenance" | "degraded") => (0, 0.75),
        _ => (0, 1.0),
    }
}

/// Settles a ranked page, so the scores returned mean what the order
/// says: each score weighted by the agent's declared status, the agents
/// that say they are not serving moved after the others (each group kept
/// in the order the passes placed it), then each score capped by the one
/// above it. The passes rank inside narrower filters first, so a later
/// pass may score an agent higher than an earlier one placed above it;
/// capped, the scores never rise down the page, all in 0..1, and a
/// client that sorts by score gets the node's order.
pub(super) fn settle(out: &mut Scored) {
    for (score, agent) in out.iter_mut() {
        if let Some(s) = score {
            *s *= status_weight(agent.status.as_deref()).1;
        }
    }
    out.sort_by_key(|(_, agent)| status_weight(agent.status.as_deref()).0);
    never_rising(out.iter_mut().map(|(score, _)| score));
}

/// Caps each score of a ranked list by the one above it, within 0..1 (a
/// score that is not a number counts as 0): the list's order is then its
/// scores' order. What a ranked search page and `/resolve` answer.
pub fn never_rising<'a>(scores: impl Iterator<Item = &'a mut Option<f64>>) {
    let mut cap = 1.0_f64;
    for s in scores.flatten() {
        *s = if s.is_nan() { 0.0 } else { s.clamp(0.0, cap) };
        cap = *s;
    }
}
