//! Reading one query with a lexicon, [`Lexicon::understand`], in the
//! order of the module's rules: the byte bound, phrases in scripts
//! without spaces, the word bound, trust, capabilities and hints,
//! subjects and translations, languages in context, then the text left.

use std::collections::BTreeSet;

use super::lexicon::Lexicon;
use super::phrases::Target;
use super::understood::{Understood, MAX_QUERY_BYTES, MAX_QUERY_WORDS};
use super::words::{words, WordLists};
use crate::trust::TrustLevel;

/// What the phrases of a query named so far.
#[derive(Default)]
struct Found {
    capabilities: BTreeSet<String>,
    hints: BTreeSet<String>,
    subjects: BTreeSet<String>,
    translations: BTreeSet<String>,
    languages: BTreeSet<String>,
    min_trust: Option<TrustLevel>,
}

/// The query's words and what each was used for.
struct Tokens<'q> {
    words: Vec<&'q str>,
    /// Words used by a trust or language phrase (out of the text).
    taken: Vec<bool>,
    /// Words that start a capability phrase or hint.
    names_capability: Vec<bool>,
    /// Words a capability phrase (not a hint) used.
    in_capability: Vec<bool>,
}

impl<'q> Tokens<'q> {
    fn new(words: Vec<&'q str>) -> Self {
        let n = words.len();
        Tokens {
            words,
            taken: vec![false; n],
            names_capability: vec![false; n],
            in_capability: vec![false; n],
        }
    }
}

impl Lexicon {
    /// Understands `query` with this lexicon (see the module's rules).
    pub fn understand(&self, query: &str) -> Understood {
        let (mut lower, mut truncated) = lower_within_bytes(query);
        let mut found = Found::default();
        self.match_unspaced(&mut lower, &mut found);

        let mut words = words(&lower);
        if words.len() > MAX_QUERY_WORDS {
            words.truncate(MAX_QUERY_WORDS);
            truncated = true;
        }
        let mut tokens = Tokens::new(words);
        self.match_trust(&mut tokens, &mut found);

        // Capabilities, subjects and translations: over the content words
        // (stop words aside), not over the words of a trust phrase.
        let lists = WordLists::builtin();
        let content: Vec<usize> = (0..tokens.words.len())
            .filter(|&i| !tokens.taken[i] && !lists.is_stop(tokens.words[i]))
            .collect();
        let content_words: Vec<&str> = content.iter().map(|&i| tokens.words[i]).collect();
        self.match_capabilities(&mut tokens, &content, &content_words, &mut found);
        // Subjects: the objects a query names imply its subject ("patient
        // files": medical); translations: words of another language the
        // index's English records would not match ("correos", "páginas
        // web"). Both exact, longest first.
        self.subjects.scan(&content_words, &mut found.subjects);
        self.translations
            .scan(&content_words, &mut found.translations);

        self.match_languages(&mut tokens, &mut found);
        self.assemble(&tokens, found, truncated)
    }

    /// Phrases in scripts without spaces: anywhere. Language and trust
    /// phrases are cut out of the text; capability phrases stay.
    fn match_unspaced(&self, lower: &mut String, found: &mut Found) {
        for (phrase, target) in &self.unspaced {
            if !lower.contains(phrase.as_str()) {
                continue;
            }
            match target {
                Target::Capability(c) => {
                    found.capabilities.insert(c.clone());
                }
                Target::Hint(c) => {
                    found.hints.insert(c.clone());
                }
                Target::Subject(w) => {
                    found.subjects.insert(w.clone());
                }
                Target::Translation(w) => {
                    found.translations.insert(w.clone());
                }
                Target::Language { tag, .. } => {
                    found.languages.insert(tag.clone());
                    *lower = lower.replace(phrase.as_str(), " ");
                }
                Target::Trust(level) => {
                    found.min_trust = found.min_trust.max(Some(*level));
                    *lower = lower.replace(phrase.as_str(), " ");
                }
            }
        }
    }

    /// Trust: exact phrases over all words; their words leave the text.
    fn match_trust(&self, tokens: &mut Tokens<'_>, found: &mut Found) {
        let mut i = 0;
        while i < tokens.words.len() {
            match self.trust.longest(&tokens.words, i, false) {
                Some((len, Target::Trust(level))) => {
                    found.min_trust = found.min_trust.max(Some(*level));
                    tokens.taken[i..i + len].iter_mut().for_each(|t| *t = true);
                    i += len;
                }
                _ => i += 1,
            }
        }
    }

    /// Capability phrases, then hints, over the content words (at
    /// `content` in the query), each word used once and none that is
    /// exactly a language name; hints count only when no capability
    /// phrase matched.
    fn match_capabilities(
        &self,
        tokens: &mut Tokens<'_>,
        content: &[usize],
        content_words: &[&str],
        found: &mut Found,
    ) {
        for (phrases, into) in [
            (&self.capabilities, &mut found.capabilities),
            (&self.hints, &mut found.hints),
        ] {
            let mut used = vec![false; content.len()];
            let mut j = 0;
            while j < content.len() {
                if used[j] || self.languages.starts_with(content_words[j]) {
                    j += 1;
                    continue;
                }
                match phrases.longest(content_words, j, true) {
                    Some((len, target @ (Target::Capability(c) | Target::Hint(c)))) => {
                        into.insert(c.clone());
                        tokens.names_capability[content[j]] = true;
                        used[j..j + len].iter_mut().for_each(|u| *u = true);
                        if matches!(target, Target::Capability(_)) {
                            content[j..j + len]
                                .iter()
                                .for_each(|&i| tokens.in_capability[i] = true);
                        }
                        j += len;
                    }
                    _ => j += 1,
                }
            }
        }
        if !found.capabilities.is_empty() {
            found.hints.clear();
        }
        let hints = std::mem::take(&mut found.hints);
        found.capabilities.extend(hints);
    }

    /// Languages: over all words not taken, a name with the context rule
    /// (or one that needs no context); its words leave the text.
    fn match_languages(&self, tokens: &mut Tokens<'_>, found: &mut Found) {
        let n = tokens.words.len();
        let mut i = 0;
        let mut last_constraint_end: Option<usize> = None;
        while i < n {
            if tokens.taken[i] {
                i += 1;
                continue;
            }
            let Some((len, Target::Language { tag, always })) =
                self.languages.longest(&tokens.words, i, true)
            else {
                i += 1;
                continue;
            };
            let end = i + len;
            if *always || self.language_meant(tokens, i, end, last_constraint_end) {
                found.languages.insert(tag.clone());
                tokens.taken[i..end].iter_mut().for_each(|t| *t = true);
                last_constraint_end = Some(end);
            }
            i = end;
        }
    }

    /// Whether the language name at `start..end` of the words is meant as
    /// a language by its context: a cue before it, a list of constraints
    /// it joins, the end of the query, a word after it that carries
    /// language, or another language name after it.
    fn language_meant(
        &self,
        tokens: &Tokens<'_>,
        start: usize,
        end: usize,
        last_constraint_end: Option<usize>,
    ) -> bool {
        let lists = WordLists::builtin();
        let words = &tokens.words;
        let mut before = start;
        while before > 0 && lists.articles.contains(words[before - 1]) {
            before -= 1;
        }
        let cue = before > 0 && lists.language_cues.contains(words[before - 1]);
        let listed = before > 0
            && lists.joiners.contains(words[before - 1])
            && last_constraint_end == Some(before - 1);
        let listed_bare = last_constraint_end == Some(start);
        let last = end == words.len();
        let carried = words.get(end).is_some_and(|next| {
            lists.language_carriers.contains(*next) || tokens.names_capability[end]
        });
        // "english, spanish documents", "french or german speakers".
        let joined = match words.get(end) {
            Some(w) if lists.joiners.contains(*w) => words.get(end + 1),
            next => next,
        };
        let before_another = joined.is_some_and(|w| self.languages.starts_with(w));
        cue || listed || listed_bare || last || carried || before_another
    }

    /// The text, the rest and the terms from the words left, with the
    /// subject and English words the phrases added.
    fn assemble(&self, tokens: &Tokens<'_>, mut found: Found, truncated: bool) -> Understood {
        let lists = WordLists::builtin();
        let kept = |i: usize| !tokens.taken[i] && !lists.is_dropped(tokens.words[i]);
        let n = tokens.words.len();
        let mut text_words: Vec<&str> = (0..n)
            .filter(|&i| kept(i))
            .map(|i| tokens.words[i])
            .collect();
        let mut rest: Vec<&str> = (0..n)
            .filter(|&i| kept(i) && !tokens.in_capability[i])
            .map(|i| tokens.words[i])
            .collect();
        // A subject word the query says itself is a subject too.
        for &w in &text_words {
            if self.subject_words.contains(w) {
                found.subjects.insert(w.to_owned());
            }
        }
        // A subject the query implies but does not say ranks as a word.
        // So do the English words of what it says in another language.
        let english = found.translations.iter().flat_map(|t| words(t));
        for w in found.subjects.iter().map(String::as_str).chain(english) {
            if !text_words.contains(&w) {
                text_words.push(w);
            }
            if !rest.contains(&w) {
                rest.push(w);
            }
        }
        let capabilities: Vec<String> = found.capabilities.into_iter().collect();
        let mut terms: Vec<String> = Vec::new();
        let mut push = |t: &str| {
            if !terms.iter().any(|x| x == t) {
                terms.push(t.to_owned());
            }
        };
        text_words.iter().for_each(|w| push(w));
        capabilities.iter().for_each(|c| push(c));
        Understood {
            text: text_words.join(" "),
            rest: rest.join(" "),
            languages: found.languages.into_iter().collect(),
            capabilities,
            min_trust: found.min_trust,
            terms,
            subjects: found.subjects.iter().cloned().collect(),
            truncated,
        }
    }
}

/// The query lower-cased, cut at [`MAX_QUERY_BYTES`] on a character
/// boundary, and whether anything was cut.
fn lower_within_bytes(query: &str) -> (String, bool) {
    let mut end = query.len().min(MAX_QUERY_BYTES);
    while !query.is_char_boundary(end) {
        end -= 1;
    }
    (query[..end].to_lowercase(), end < query.len())
}
