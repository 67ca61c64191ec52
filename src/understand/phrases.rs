//! The phrases of one kind (capabilities, languages, trust, ...) and how
//! a query's words are matched against them: exact, or one edit away for
//! long words.

use std::collections::{BTreeSet, HashMap};

use super::error::LexiconError;
use super::words::WordLists;
use crate::trust::TrustLevel;

/// What a phrase names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Target {
    Capability(String),
    Hint(String),
    /// A subject word (`medical`) that the phrase's objects imply.
    Subject(String),
    /// The English words (`web pages`) of a phrase in another language.
    Translation(String),
    /// A language tag; `always` when no context is needed.
    Language {
        tag: String,
        always: bool,
    },
    Trust(TrustLevel),
}

/// The kind of a phrase: which table of the lexicon it belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Capability,
    Hint,
    Subject,
    Translation,
    Language,
    Trust,
}

impl Target {
    /// The kind of phrase that names this.
    pub(super) fn kind(&self) -> Kind {
        match self {
            Target::Capability(_) => Kind::Capability,
            Target::Hint(_) => Kind::Hint,
            Target::Subject(_) => Kind::Subject,
            Target::Translation(_) => Kind::Translation,
            Target::Language { .. } => Kind::Language,
            Target::Trust(_) => Kind::Trust,
        }
    }

    /// The target as an error message names it (`capability summarization`).
    pub(super) fn name(&self) -> String {
        match self {
            Target::Capability(c) => format!("capability {c}"),
            Target::Hint(c) => format!("hint {c}"),
            Target::Subject(w) => format!("subject {w}"),
            Target::Translation(w) => format!("translation {w:?}"),
            Target::Language { tag, .. } => format!("language {tag}"),
            Target::Trust(l) => format!("trust {l}"),
        }
    }
}

/// Phrases of one kind, by their first word.
#[derive(Debug, Default)]
pub(super) struct Phrases {
    pub(super) by_first: HashMap<String, Vec<(Vec<String>, Target)>>,
    /// First words of five characters or more, for edit-distance lookups.
    long_firsts: Vec<String>,
}

impl Phrases {
    /// Adds a phrase (its words) naming `target`; the same phrase again
    /// for the same target is no change.
    ///
    /// # Errors
    /// [`LexiconError::Ambiguous`] when the phrase already names another
    /// target.
    pub(super) fn add(&mut self, words: Vec<String>, target: Target) -> Result<(), LexiconError> {
        let list = self.by_first.entry(words[0].clone()).or_default();
        if let Some((_, other)) = list.iter().find(|(w, _)| *w == words) {
            if *other != target {
                return Err(LexiconError::Ambiguous {
                    phrase: words.join(" "),
                    first: other.name(),
                    second: target.name(),
                });
            }
            return Ok(());
        }
        if list.is_empty() && words[0].chars().count() >= FUZZY_MIN_CHARS {
            self.long_firsts.push(words[0].clone());
        }
        list.push((words, target));
        Ok(())
    }

    /// Whether some phrase starts with the word `w`.
    pub(super) fn starts_with(&self, w: &str) -> bool {
        self.by_first.contains_key(w)
    }

    /// The longest phrase starting at `words[at]`, preferring exact
    /// matches: its length and target. `fuzzy` allows one edit per long
    /// word.
    pub(super) fn longest(
        &self,
        words: &[&str],
        at: usize,
        fuzzy: bool,
    ) -> Option<(usize, &Target)> {
        let not_fuzzy = &WordLists::builtin().not_fuzzy;
        let first = words[at];
        let mut candidates: Vec<&(Vec<String>, Target)> = Vec::new();
        if let Some(list) = self.by_first.get(first) {
            candidates.extend(list);
        }
        if fuzzy && long(first) && !not_fuzzy.contains(first) {
            for key in &self.long_firsts {
                if key != first && within_one_edit(first, key) {
                    candidates.extend(&self.by_first[key]);
                }
            }
        }
        let mut best: Option<(usize, usize, &Target)> = None; // (len, edits, target)
        for (phrase, target) in candidates {
            let Some(rest) = words.get(at..at + phrase.len()) else {
                continue;
            };
            let mut edits = 0;
            let all = phrase.iter().zip(rest).all(|(p, w)| {
                if p == w {
                    true
                } else if fuzzy
                    && long(p)
                    && long(w)
                    && !not_fuzzy.contains(*w)
                    && within_one_edit(p, w)
                {
                    edits += 1;
                    true
                } else {
                    false
                }
            });
            let better = match best {
                None => true,
                Some((len, e, _)) => phrase.len() > len || (phrase.len() == len && edits < e),
            };
            if all && better {
                best = Some((phrase.len(), edits, target));
            }
        }
        best.map(|(len, _, t)| (len, t))
    }

    /// The words (subject or English words) of the phrases of this table
    /// found in `words`, exact, longest first, each word used once, into
    /// `found`.
    pub(super) fn scan(&self, words: &[&str], found: &mut BTreeSet<String>) {
        let mut j = 0;
        while j < words.len() {
            match self.longest(words, j, false) {
                Some((len, Target::Subject(w) | Target::Translation(w))) => {
                    found.insert(w.clone());
                    j += len;
                }
                _ => j += 1,
            }
        }
    }
}

/// Words shorter than this only match exactly.
const FUZZY_MIN_CHARS: usize = 6;

fn long(w: &str) -> bool {
    w.chars().count() >= FUZZY_MIN_CHARS
}

/// Whether `a` becomes `b` with at most one insertion, deletion,
/// substitution, or swap of two neighbouring characters.
pub(super) fn within_one_edit(a: &str, b: &str) -> bool {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let (short, longer) = if a.len() <= b.len() {
        (&a, &b)
    } else {
        (&b, &a)
    };
    if longer.len() - short.len() > 1 {
        return false;
    }
    let prefix = short
        .iter()
        .zip(longer.iter())
        .take_while(|(x, y)| x == y)
        .count();
    if prefix == short.len() {
        return true;
    }
    if short.len() < longer.len() {
        return short[prefix..] == longer[prefix + 1..];
    }
    let substituted = short[prefix + 1..] == longer[prefix + 1..];
    let swapped = prefix + 1 < short.len()
        && short[prefix] == longer[prefix + 1]
        && short[prefix + 1] == longer[prefix]
        && short[prefix + 2..] == longer[prefix + 2..];
    substituted || swapped
}
