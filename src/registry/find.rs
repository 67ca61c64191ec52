//! The registry's local search: what the records this node holds answer
//! to a [`SearchQuery`]. A query's text is understood first, then ranked
//! by the store's text index in three passes (its words inside the
//! narrowed filters, all its words as text, the agents nearest in
//! meaning); a query with no words walks the filters. The HTTP API's
//! local search and the mesh's search protocol both read from here.

use super::dense::Dense;
use super::explain::{self, Explain};
use super::placed::{Pass, Placed};
use super::signals::Signals;
use super::{Found, Page, Registry, RegistryError, SearchQuery};
use crate::descriptor;
use crate::record::RecordBody;
use crate::store::{BlockingStore, Filter, TextQuery};
use crate::trust::TrustLevel;
use crate::understand::{understand, Understood};

/// The picked records, best first.
type Scored = Vec<Placed>;

/// What a search picked: its records, the id to continue after
/// (filter-only searches), and each record's explanation when the query
/// asked for them.
pub(super) struct Picked {
    pub(super) placed: Scored,
    pub(super) next_after: Option<String>,
    pub(super) explained: Vec<Explain>,
}

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
                let picked = this.find_in(store, &q)?;
                let mut explained = picked.explained.into_iter();
                let mut items = Vec::with_capacity(picked.placed.len());
                for p in picked.placed {
                    let mut summary = this.summarise(store, p.agent, p.score)?;
                    summary.explain = explained.next();
                    items.push(summary);
                }
                Ok(Page {
                    items,
                    next_after: picked.next_after,
                })
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
                let picked = this.find_in(store, &q)?;
                let mut out = Vec::with_capacity(picked.placed.len());
                for p in picked.placed {
                    // Read as it is now: replaced or deleted since is
                    // answered as it stands, or left out.
                    if let Some(agent) = store.get(&p.agent.id)? {
                        if matches!(agent.body, RecordBody::Descriptor(_)) {
                            out.push((p.score, agent));
                        }
                    }
                }
                Ok((out, picked.next_after))
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
    /// order of first arrival. With `q.explain`, each record's
    /// explanation is made beside it ([`explain`]).
    fn find_in(&self, store: &BlockingStore, q: &SearchQuery) -> Result<Picked, RegistryError> {
        let Some(u) = q.query.as_deref().map(understand) else {
            return self.walk(store, q, None, None);
        };
        let narrowed = narrowed(&q.filter, &u);
        if u.terms.is_empty() {
            // Only languages or trust named ("agents in Chinese").
            let walked = SearchQuery {
                filter: narrowed,
                ..q.clone()
            };
            return self.walk(store, &walked, u.min_trust, Some(&u));
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
        settle(store, &mut out)?;
        let explained = if q.explain {
            explain::all(store, &out, &u, dense.as_ref())?
        } else {
            Vec::new()
        };
        Ok(Picked {
            placed: out,
            next_after: None,
            explained,
        })
    }

    /// The filter walk, in order of first arrival, from `q.after`; with
    /// `min_trust`, only the agents at that level or above. `u` is what
    /// was understood of a query with no word to rank with.
    fn walk(
        &self,
        store: &BlockingStore,
        q: &SearchQuery,
        min_trust: Option<TrustLevel>,
        u: Option<&Understood>,
    ) -> Result<Picked, RegistryError> {
        let (found, next_after) = store.walk(&q.filter, min_trust, q.after.as_deref(), q.limit)?;
        let placed: Scored = found
            .into_iter()
            .map(|a| Placed::new(None, a, Pass::Filters, None))
            .collect();
        let explained = if q.explain {
            let none = Understood::default();
            explain::all(store, &placed, u.unwrap_or(&none), None)?
        } else {
            Vec::new()
        };
        Ok(Picked {
            placed,
            next_after,
            explained,
        })
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
    for (i, filter) in attempts.iter().enumerate() {
        if out.len() >= limit {
            break;
        }
        let pass = if i == 0 {
            Pass::Words
        } else {
            Pass::WordsAnyLanguage
        };
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
        let mut bm25 = std::collections::HashMap::with_capacity(ranked.len());
        for (id, score) in ranked {
            if out.iter().any(|p| p.agent.id == id) {
                continue;
            }
            bm25.insert(id.clone(), score);
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
        out.extend(candidates.into_iter().take(room).map(|(agent, score)| {
            let text = bm25.get(&agent.id).copied();
            Placed::new(Some(score), agent, pass, text)
        }));
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
        if out.len() >= limit || out.iter().any(|p| p.agent.id == id) {
            continue;
        }
        if let Some(agent) = store.compact(&id)? {
            out.push(Placed::new(Some(score), agent, Pass::AllWords, Some(score)));
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
            |id| out.iter().any(|p| p.agent.id == id),
        )?;
        out.extend(
            near.into_iter()
                .map(|(agent, score)| Placed::new(Some(score), agent, Pass::Meaning, None)),
        );
    }
    Ok(())
}

/// Settles a ranked page, so the scores returned mean what the order
/// says: each score weighted by the agent's [`Signals`] (declared status,
/// counted trust, liveness, freshness), the agents that say they are not
/// serving moved after the others, each pass's agents re-ordered by their
/// weighted scores (the passes themselves keep their order: the query's
/// languages before the rest, words before meaning), then each score
/// capped by the one above it. The passes rank inside narrower filters
/// first, so a later pass may score an agent higher than an earlier one
/// placed above it; capped, the scores never rise down the page, all in
/// 0..1, and a client that sorts by score gets the node's order.
///
/// # Errors
/// [`RegistryError::Store`] from reading an agent's signals.
pub(super) fn settle(store: &BlockingStore, out: &mut Scored) -> Result<(), RegistryError> {
    for p in out.iter_mut() {
        let signals = Signals::of(store, &p.agent)?;
        if let Some(s) = &mut p.score {
            *s *= signals.weight();
        }
        p.signals = Some(signals);
    }
    out.sort_by(|a, b| {
        let serving = |p: &Placed| p.signals.as_ref().is_some_and(Signals::not_serving);
        serving(a)
            .cmp(&serving(b))
            .then(a.pass.cmp(&b.pass))
            .then(b.score.unwrap_or(0.0).total_cmp(&a.score.unwrap_or(0.0)))
    });
    never_rising(out.iter_mut().map(|p| &mut p.score));
    Ok(())
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
