//! Query understanding: what a natural-language search query asks for.
//!
//! [`understand`] turns a free-text query ("I need an agent that can
//! summarize long legal documents in Chinese.") into an [`Understood`]:
//! language constraints (`zh`), the capability ids its words name
//! (`summarization`), a minimum trust level, and the text left to rank
//! with once those phrases and filler words are gone ("summarize long
//! legal documents"). It is pure: no I/O, no store; the ranking (the
//! registry's search, `/resolve`) decides what to do with each part.
//!
//! The words come from an editable lexicon, `src/understand/synonyms.toml`
//! (embedded at build time, parsed once): capability phrases and weaker
//! hints, language names, trust phrases. [`Lexicon::parse`] reads another
//! table of the same shape.
//!
//! # Rules
//!
//! - **Words.** The query is lower-cased and cut into words at every
//!   character that is not a letter or digit ("tl;dr" is "tl dr",
//!   "key-verified" is "key verified"). At most [`MAX_QUERY_BYTES`] bytes
//!   and [`MAX_QUERY_WORDS`] words are read; the rest is dropped and
//!   [`Understood::truncated`] says so.
//! - **Trust.** A trust phrase ("verified", "trusted", "key-verified",
//!   "peer verified") sets [`Understood::min_trust`] to the level the
//!   table gives it; of several, the highest. Exact words only.
//! - **Capabilities.** Capability phrases are matched on the words left
//!   after stop words ("a", "my", "to", ...) are set aside, longest phrase
//!   first, each word used once. A word of six letters or more also
//!   matches a phrase word of six letters or more one edit away (one
//!   letter added, dropped, changed, or two neighbours swapped:
//!   "summerize", "transalte"); at five letters too much is one edit
//!   away ("codes" and "coder"). Hints ("emails", "contracts") count only
//!   when no capability phrase matched, so "summarize my emails" asks for
//!   summarization alone.
//! - **Subjects.** The objects a query names imply its subject: "patient
//!   files" is medical work, "bank statements" financial. A subject
//!   phrase (exact words, stop words aside: "source" is not "course")
//!   adds its subject word
//!   (`medical`, `finance`) to [`Understood::text`] and
//!   [`Understood::rest`], after the query's own words, so agents that
//!   say they serve that subject (in their description or tags) rank
//!   higher; it narrows nothing. [`Understood::subjects`] lists it, with
//!   the subject words the query says itself ("legal"), for a ranker
//!   that weighs a subject found in an agent's tags more.
//! - **Translations.** The records a node holds are mostly written in
//!   English, so a query in another language would match few of them:
//!   a phrase of the translations table ("páginas web", "天气预报",
//!   "데이터베이스"; exact words, stop words aside, or anywhere in the
//!   query for scripts without spaces) adds its English words ("web
//!   pages", "weather forecast") to [`Understood::text`] and
//!   [`Understood::rest`] after the query's own words, which stay; it
//!   narrows nothing and names no capability.
//! - **Languages.** A language name in its own language or script
//!   ("中文", "français", "en español") and a name of two words
//!   ("traditional chinese") are always a constraint. A plain English name
//!   ("chinese", "french", "chinse") is a constraint when the
//!   context says a language is meant: after "in", "into", "to", "from",
//!   "speaks", "speaking", "supports", "native", "between" (an article
//!   in between is skipped), after another language constraint joined by
//!   "and"/"or", before another language name, at the end of the query,
//!   or right before a word that
//!   carries language (a text word like "documents" or "speakers", an
//!   agent word like "assistant", a subject like "legal", or a
//!   capability phrase). "Summarize an English document" asks for `en`;
//!   "german shepherd breeding" and "thai food recipes" do not. A
//!   primary tag (`zh`) stands for every script and region of it
//!   ([`language_matches`]).
//! - **Text.** [`Understood::text`] keeps the words in query order minus
//!   stop words, filler ("need", "agent", "please"), and the words of
//!   language and trust phrases (a language name that was not a
//!   constraint stays), then the subject words the objects imply. [`Understood::terms`] is the text's words plus
//!   each capability id, for a ranker that wants them (the id's own words
//!   are left out: "text" and "speech" of `speech_to_text` match too much).

use std::collections::{BTreeSet, HashMap};
use std::sync::OnceLock;

use serde::Deserialize;

use crate::descriptor;
use crate::verify::TrustLevel;

/// Most bytes of a query that are read (the rest is dropped).
pub const MAX_QUERY_BYTES: usize = 1024;
/// Most words of a query that are read (the rest is dropped).
pub const MAX_QUERY_WORDS: usize = 64;

/// The lexicon shipped with the crate.
const SYNONYMS: &str = include_str!("understand/synonyms.toml");

/// What a query asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Understood {
    /// The words left to rank with, in query order, separated by one
    /// space: stop words, filler, and language and trust phrases removed.
    pub text: String,
    /// Language constraints, canonical BCP 47, sorted and unique. A
    /// primary tag (`zh`) matches every tag with that primary subtag
    /// (`zh-Hans`, `zh-Hant`); see [`language_matches`].
    pub languages: Vec<String>,
    /// The capability ids the query names, sorted and unique. An agent
    /// offering all of them matches best.
    pub capabilities: Vec<String>,
    /// The lowest trust level the query accepts, when it names one.
    pub min_trust: Option<TrustLevel>,
    /// The words of `text` that did not name a capability (the subject,
    /// the objects: "legal", "contracts"), separated by one space. A
    /// ranker that matches [`Understood::capabilities`] as ids ranks these
    /// beside them, so a capability's own words do not count twice.
    pub rest: String,
    /// Terms for ranking: the words of `text`, then each capability id;
    /// unique, in that order.
    pub terms: Vec<String>,
    /// The subjects the query is about, as words of `text`: those its
    /// objects imply and subject words it says itself (`legal`), sorted.
    pub subjects: Vec<String>,
    /// Whether the query was longer than [`MAX_QUERY_BYTES`] or
    /// [`MAX_QUERY_WORDS`] and its tail was dropped.
    pub truncated: bool,
}

impl Understood {
    /// Whether nothing was understood and no text is left to rank with.
    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
            && self.languages.is_empty()
            && self.capabilities.is_empty()
            && self.min_trust.is_none()
    }
}

/// Understands `query` with the built-in lexicon ([`Lexicon::builtin`]).
pub fn understand(query: &str) -> Understood {
    Lexicon::builtin().understand(query)
}

/// Whether an agent's language tag satisfies a language constraint: the
/// constraint's subtags are a prefix of the tag's (`zh` matches `zh`,
/// `zh-Hans` and `zh-Hant-TW`; `zh-Hant` matches `zh-Hant-TW` but not
/// `zh-Hans`). Both are compared as canonical BCP 47; a malformed tag
/// matches nothing.
pub fn language_matches(constraint: &str, tag: &str) -> bool {
    let (Some(c), Some(t)) = (
        descriptor::normalise_language(constraint),
        descriptor::normalise_language(tag),
    ) else {
        return false;
    };
    t == c || t.strip_prefix(&c).is_some_and(|rest| rest.starts_with('-'))
}

/// Why a lexicon table was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LexiconError {
    /// Not TOML of the expected shape.
    #[error("the lexicon is not valid: {0}")]
    Toml(#[from] toml::de::Error),
    /// A language key is not a well-formed BCP 47 tag.
    #[error("{tag:?} is not a well-formed BCP 47 language tag")]
    Language {
        /// The key as written.
        tag: String,
    },
    /// A trust key is not a trust level.
    #[error("{level:?} is not a trust level: {message}")]
    Trust {
        /// The key as written.
        level: String,
        /// What the level parser said.
        message: String,
    },
    /// A phrase has no words.
    #[error("an empty phrase under {under}")]
    Empty {
        /// The key it is listed under.
        under: String,
    },
    /// One phrase names two different things of one kind.
    #[error("{phrase:?} is listed under both {first} and {second}")]
    Ambiguous {
        /// The phrase, as its words.
        phrase: String,
        /// One key.
        first: String,
        /// The other.
        second: String,
    },
}

/// The table as written in TOML.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Table {
    capabilities: HashMap<String, Vec<String>>,
    #[serde(default)]
    hints: HashMap<String, Vec<String>>,
    #[serde(default)]
    subjects: HashMap<String, Vec<String>>,
    #[serde(default)]
    translations: HashMap<String, Vec<String>>,
    languages: HashMap<String, LanguageNames>,
    trust: HashMap<String, Vec<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LanguageNames {
    names: Vec<String>,
    #[serde(default)]
    native: Vec<String>,
}

/// What a phrase names.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
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

/// Phrases of one kind, by their first word.
#[derive(Debug, Default)]
struct Phrases {
    by_first: HashMap<String, Vec<(Vec<String>, Target)>>,
    /// First words of five characters or more, for edit-distance lookups.
    long_firsts: Vec<String>,
}

impl Phrases {
    fn add(&mut self, words: Vec<String>, target: Target) -> Result<(), LexiconError> {
        let list = self.by_first.entry(words[0].clone()).or_default();
        if let Some((_, other)) = list.iter().find(|(w, _)| *w == words) {
            if *other != target {
                return Err(LexiconError::Ambiguous {
                    phrase: words.join(" "),
                    first: target_name(other),
                    second: target_name(&target),
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

    /// The longest phrase starting at `words[at]`, preferring exact
    /// matches: its length and target. `fuzzy` allows one edit per long
    /// word.
    fn longest(&self, words: &[&str], at: usize, fuzzy: bool) -> Option<(usize, &Target)> {
        let first = words[at];
        let mut candidates: Vec<&(Vec<String>, Target)> = Vec::new();
        if let Some(list) = self.by_first.get(first) {
            candidates.extend(list);
        }
        if fuzzy && long(first) && !NOT_FUZZY.contains(&first) {
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
                    && !NOT_FUZZY.contains(w)
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
}

impl Phrases {
    /// The words (subject or English words) of the phrases of this table
    /// found in `words`, exact, longest first, each word used once, into
    /// `found`.
    fn scan(&self, words: &[&str], found: &mut BTreeSet<String>) {
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

fn target_name(t: &Target) -> String {
    match t {
        Target::Capability(c) => format!("capability {c}"),
        Target::Hint(c) => format!("hint {c}"),
        Target::Subject(w) => format!("subject {w}"),
        Target::Translation(w) => format!("translation {w:?}"),
        Target::Language { tag, .. } => format!("language {tag}"),
        Target::Trust(l) => format!("trust {l}"),
    }
}

/// Words that never match a phrase word one edit away (a country is not
/// its language).
const NOT_FUZZY: &[&str] = &["germany"];

/// Words shorter than this only match exactly.
const FUZZY_MIN_CHARS: usize = 6;

fn long(w: &str) -> bool {
    w.chars().count() >= FUZZY_MIN_CHARS
}

/// Whether `a` becomes `b` with at most one insertion, deletion,
/// substitution, or swap of two neighbouring characters.
fn within_one_edit(a: &str, b: &str) -> bool {
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

/// Words that carry no meaning for ranking or matching.
const STOP_WORDS: &[&str] = &[
    "a", "about", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be", "but", "by",
    "can", "could", "do", "does", "for", "has", "have", "i", "if", "in", "into", "is", "it", "its",
    "me", "my", "of", "on", "or", "our", "out", "so", "some", "that", "the", "their", "them",
    "then", "these", "this", "those", "to", "us", "we", "what", "which", "who", "will", "with",
    "would", "you", "your", "should", "via", "than", "there", "where", "while", "whose",
];

/// Request filler: words that say a search is wanted, not what for. Not
/// stop words for phrases ("what to cook" keeps "what"), but dropped from
/// the text.
const FILLER: &[&str] = &[
    "need",
    "needs",
    "want",
    "wants",
    "looking",
    "look",
    "find",
    "finds",
    "agent",
    "agents",
    "please",
    "someone",
    "something",
    "anything",
    "help",
    "helps",
    "able",
    "get",
    "give",
    "show",
    "list",
    "any",
    "one",
    "ones",
    "only",
    "good",
    "best",
    "great",
    "really",
    "very",
    "just",
    "like",
    "would",
    "d",
    "s",
    "t",
    "ll",
    "m",
    "re",
    "ve",
    "hi",
    "hello",
    "thanks",
    "thank",
    "from",
    "recommend",
    "suggest",
    "which",
    "there",
    "exists",
    "exist",
    "capable",
];

/// Words before a language name that make it a constraint.
const LANGUAGE_CUES: &[&str] = &[
    "in",
    "into",
    "to",
    "from",
    "speaks",
    "speak",
    "speaking",
    "supports",
    "support",
    "supporting",
    "native",
    "between",
    "fluent",
    "using",
    "handles",
    "understands",
];

/// Words after a language name that make it a constraint (besides
/// capability phrases and hints).
const LANGUAGE_CARRIERS: &[&str] = &[
    "text",
    "texts",
    "document",
    "documents",
    "doc",
    "docs",
    "pdf",
    "pdfs",
    "content",
    "speech",
    "audio",
    "speaker",
    "speakers",
    "speaking",
    "speaking",
    "language",
    "languages",
    "version",
    "subtitles",
    "emails",
    "email",
    "contracts",
    "contract",
    "papers",
    "paper",
    "books",
    "book",
    "articles",
    "article",
    "news",
    "websites",
    "website",
    "pages",
    "voice",
    "voices",
    "recordings",
    "podcasts",
    "podcast",
    "transcripts",
    "tweets",
    "reviews",
    "messages",
    "customers",
    "users",
    "support",
    "input",
    "output",
    "documentation",
    "copy",
    "letters",
    "queries",
    "questions",
    "conversations",
    "chats",
    "calls",
    "meetings",
    "notes",
    "files",
    "agent",
    "agents",
    "bot",
    "bots",
    "assistant",
    "assistants",
    "tool",
    "tools",
    "service",
    "services",
    "model",
    "models",
    "app",
    "apps",
    "api",
    "legal",
    "medical",
    "financial",
    "technical",
    "business",
    "scientific",
    "academic",
    "marketing",
    "clinical",
    "law",
    "translation",
    "translations",
    "translator",
    "only",
    "speaking",
    "words",
    "sentences",
    "phrases",
    "literature",
    "poems",
    "poetry",
    "novel",
    "novels",
    "reports",
    "report",
    "speech",
    "lessons",
    "tutor",
    "teacher",
    "interface",
    "ui",
    "localization",
    "locale",
];

/// The lexicon: the phrases [`understand`] knows.
#[derive(Debug)]
pub struct Lexicon {
    capabilities: Phrases,
    hints: Phrases,
    subjects: Phrases,
    /// The subject words themselves (`legal`, `medical`).
    subject_words: BTreeSet<String>,
    translations: Phrases,
    languages: Phrases,
    trust: Phrases,
    /// Phrases in scripts without spaces, matched anywhere in the query.
    unspaced: Vec<(String, Target)>,
    /// Each capability id with the phrases listed for it, sorted by id.
    vocabulary: Vec<(String, Vec<String>)>,
}

impl Lexicon {
    /// The lexicon shipped in `src/understand/synonyms.toml`, parsed once.
    pub fn builtin() -> &'static Lexicon {
        static BUILTIN: OnceLock<Lexicon> = OnceLock::new();
        BUILTIN.get_or_init(|| {
            Lexicon::parse(SYNONYMS)
                .expect("the shipped synonyms.toml is valid (a unit test parses it)")
        })
    }

    /// Each capability id the lexicon knows, with the phrases that name it
    /// (besides the id itself), sorted by id.
    pub fn capabilities(&self) -> impl Iterator<Item = (&str, &[String])> {
        self.vocabulary
            .iter()
            .map(|(id, phrases)| (id.as_str(), phrases.as_slice()))
    }

    /// Reads a lexicon of the shape of `src/understand/synonyms.toml`.
    ///
    /// # Errors
    /// [`LexiconError`]: not TOML of that shape, a language key that is
    /// not BCP 47, a trust key that is not a level, an empty phrase, or a
    /// phrase listed under two keys of one kind.
    pub fn parse(toml_text: &str) -> Result<Self, LexiconError> {
        let table: Table = toml::from_str(toml_text)?;
        let mut lexicon = Lexicon {
            capabilities: Phrases::default(),
            hints: Phrases::default(),
            subjects: Phrases::default(),
            subject_words: BTreeSet::new(),
            translations: Phrases::default(),
            languages: Phrases::default(),
            trust: Phrases::default(),
            unspaced: Vec::new(),
            vocabulary: Vec::new(),
        };
        let mut sorted: Vec<_> = table.capabilities.into_iter().collect();
        sorted.sort();
        for (id, phrases) in sorted {
            let id = descriptor::normalise_term(&id).ok_or_else(|| LexiconError::Empty {
                under: "capabilities".into(),
            })?;
            let own = id.replace('_', " ");
            for phrase in std::iter::once(&own).chain(&phrases) {
                lexicon.add(
                    Kind::Capability,
                    phrase,
                    Target::Capability(id.clone()),
                    &id,
                )?;
            }
            lexicon.vocabulary.push((id, phrases));
        }
        let mut sorted: Vec<_> = table.hints.into_iter().collect();
        sorted.sort();
        for (id, phrases) in sorted {
            let id = descriptor::normalise_term(&id).ok_or_else(|| LexiconError::Empty {
                under: "hints".into(),
            })?;
            for phrase in &phrases {
                lexicon.add(Kind::Hint, phrase, Target::Hint(id.clone()), &id)?;
            }
        }
        let mut sorted: Vec<_> = table.subjects.into_iter().collect();
        sorted.sort();
        for (word, phrases) in sorted {
            let word = word.trim().to_lowercase();
            if words(&word).len() != 1 {
                return Err(LexiconError::Empty {
                    under: format!("subjects ({word:?} is not one word)"),
                });
            }
            for phrase in &phrases {
                lexicon.add(Kind::Subject, phrase, Target::Subject(word.clone()), &word)?;
            }
            lexicon.subject_words.insert(word);
        }
        let mut sorted: Vec<_> = table.translations.into_iter().collect();
        sorted.sort();
        for (english, phrases) in sorted {
            let english = words(&english.to_lowercase()).join(" ");
            if english.is_empty() {
                return Err(LexiconError::Empty {
                    under: "translations".into(),
                });
            }
            for phrase in &phrases {
                let target = Target::Translation(english.clone());
                lexicon.add(Kind::Translation, phrase, target, &english)?;
            }
        }
        let mut sorted: Vec<_> = table.languages.into_iter().collect();
        sorted.sort_by(|a, b| a.0.cmp(&b.0));
        for (key, names) in sorted {
            let tag = descriptor::normalise_language(&key)
                .ok_or_else(|| LexiconError::Language { tag: key.clone() })?;
            for name in &names.names {
                let always = words(name).len() > 1;
                let target = Target::Language {
                    tag: tag.clone(),
                    always,
                };
                lexicon.add(Kind::Language, name, target, &key)?;
            }
            for name in &names.native {
                let target = Target::Language {
                    tag: tag.clone(),
                    always: true,
                };
                lexicon.add(Kind::Language, name, target, &key)?;
            }
        }
        let mut sorted: Vec<_> = table.trust.into_iter().collect();
        sorted.sort();
        for (key, phrases) in sorted {
            let level: TrustLevel = key.parse().map_err(|message| LexiconError::Trust {
                level: key.clone(),
                message,
            })?;
            for phrase in &phrases {
                lexicon.add(Kind::Trust, phrase, Target::Trust(level), &key)?;
            }
        }
        // Longest unspaced phrases first, so "简体中文" wins over "中文".
        lexicon.unspaced.sort_by(|a, b| {
            b.0.chars()
                .count()
                .cmp(&a.0.chars().count())
                .then(a.0.cmp(&b.0))
        });
        Ok(lexicon)
    }

    fn add(
        &mut self,
        kind: Kind,
        phrase: &str,
        target: Target,
        under: &str,
    ) -> Result<(), LexiconError> {
        let lower = phrase.to_lowercase();
        if lower.chars().any(unspaced_script) {
            let text = lower.trim().to_owned();
            if let Some((_, other)) = self.unspaced.iter().find(|(p, _)| *p == text) {
                if *other != target && kind_of(other) == kind {
                    return Err(LexiconError::Ambiguous {
                        phrase: text,
                        first: target_name(other),
                        second: target_name(&target),
                    });
                }
            }
            self.unspaced.push((text, target));
            return Ok(());
        }
        let mut w: Vec<String> = words(&lower).into_iter().map(str::to_owned).collect();
        if matches!(
            kind,
            Kind::Capability | Kind::Hint | Kind::Subject | Kind::Translation
        ) {
            w.retain(|w| !STOP_WORDS.contains(&w.as_str()));
        }
        if w.is_empty() {
            return Err(LexiconError::Empty {
                under: under.to_owned(),
            });
        }
        let phrases = match kind {
            Kind::Capability => &mut self.capabilities,
            Kind::Hint => &mut self.hints,
            Kind::Subject => &mut self.subjects,
            Kind::Translation => &mut self.translations,
            Kind::Language => &mut self.languages,
            Kind::Trust => &mut self.trust,
        };
        phrases.add(w, target)
    }

    /// Understands `query` with this lexicon (see the module's rules).
    pub fn understand(&self, query: &str) -> Understood {
        let mut truncated = false;
        let mut end = query.len().min(MAX_QUERY_BYTES);
        while !query.is_char_boundary(end) {
            end -= 1;
        }
        if end < query.len() {
            truncated = true;
        }
        let mut lower = query[..end].to_lowercase();

        let mut capabilities = BTreeSet::new();
        let mut hints = BTreeSet::new();
        let mut subjects = BTreeSet::new();
        let mut translations = BTreeSet::new();
        let mut languages = BTreeSet::new();
        let mut min_trust: Option<TrustLevel> = None;

        // Phrases in scripts without spaces: anywhere. Language and trust
        // phrases are cut out of the text; capability phrases stay.
        for (phrase, target) in &self.unspaced {
            if !lower.contains(phrase.as_str()) {
                continue;
            }
            match target {
                Target::Capability(c) => {
                    capabilities.insert(c.clone());
                }
                Target::Hint(c) => {
                    hints.insert(c.clone());
                }
                Target::Subject(w) => {
                    subjects.insert(w.clone());
                }
                Target::Translation(w) => {
                    translations.insert(w.clone());
                }
                Target::Language { tag, .. } => {
                    languages.insert(tag.clone());
                    lower = lower.replace(phrase.as_str(), " ");
                }
                Target::Trust(level) => {
                    min_trust = min_trust.max(Some(*level));
                    lower = lower.replace(phrase.as_str(), " ");
                }
            }
        }

        let mut tokens = words(&lower);
        if tokens.len() > MAX_QUERY_WORDS {
            tokens.truncate(MAX_QUERY_WORDS);
            truncated = true;
        }
        let n = tokens.len();
        // Words used by a trust or language phrase (out of the text).
        let mut taken = vec![false; n];

        // Trust: exact phrases over all words.
        let mut i = 0;
        while i < n {
            match self.trust.longest(&tokens, i, false) {
                Some((len, Target::Trust(level))) => {
                    min_trust = min_trust.max(Some(*level));
                    taken[i..i + len].iter_mut().for_each(|t| *t = true);
                    i += len;
                }
                _ => i += 1,
            }
        }

        // Capabilities: over the content words (stop words aside), not
        // over words that are exactly a language name.
        let content: Vec<usize> = (0..n)
            .filter(|&i| !taken[i] && !STOP_WORDS.contains(&tokens[i]))
            .collect();
        let content_words: Vec<&str> = content.iter().map(|&i| tokens[i]).collect();
        let is_language_word = |w: &str| self.languages.by_first.contains_key(w);
        // Which word positions start a capability phrase or hint, and
        // which words a capability phrase (not a hint) used.
        let mut names_capability = vec![false; n];
        let mut in_capability = vec![false; n];
        for (phrases, found) in [
            (&self.capabilities, &mut capabilities),
            (&self.hints, &mut hints),
        ] {
            let mut used = vec![false; content.len()];
            let mut j = 0;
            while j < content.len() {
                if used[j] || is_language_word(content_words[j]) {
                    j += 1;
                    continue;
                }
                match phrases.longest(&content_words, j, true) {
                    Some((len, target @ (Target::Capability(c) | Target::Hint(c)))) => {
                        found.insert(c.clone());
                        names_capability[content[j]] = true;
                        used[j..j + len].iter_mut().for_each(|u| *u = true);
                        if matches!(target, Target::Capability(_)) {
                            content[j..j + len]
                                .iter()
                                .for_each(|&i| in_capability[i] = true);
                        }
                        j += len;
                    }
                    _ => j += 1,
                }
            }
        }
        if !capabilities.is_empty() {
            hints.clear();
        }
        capabilities.extend(hints);

        // Subjects: the objects a query names imply its subject ("patient
        // files": medical); translations: words of another language the
        // index's English records would not match ("correos", "páginas
        // web"). Both over the content words, exact, longest first.
        self.subjects.scan(&content_words, &mut subjects);
        self.translations.scan(&content_words, &mut translations);

        // Languages: over all words, with the context rule.
        let mut i = 0;
        let mut last_constraint_end: Option<usize> = None;
        while i < n {
            if taken[i] {
                i += 1;
                continue;
            }
            let Some((len, Target::Language { tag, always })) =
                self.languages.longest(&tokens, i, true)
            else {
                i += 1;
                continue;
            };
            let end = i + len;
            let meant = *always || {
                let mut before = i;
                while before > 0 && matches!(tokens[before - 1], "the" | "a" | "an") {
                    before -= 1;
                }
                let cue = before > 0 && LANGUAGE_CUES.contains(&tokens[before - 1]);
                let listed = before > 0
                    && matches!(tokens[before - 1], "and" | "or")
                    && last_constraint_end == Some(before - 1);
                let listed_bare = last_constraint_end == Some(i);
                let last = end == n;
                let carried = tokens
                    .get(end)
                    .is_some_and(|next| LANGUAGE_CARRIERS.contains(next) || names_capability[end]);
                // "english, spanish documents", "french or german speakers".
                let joined = match tokens.get(end) {
                    Some(&("and" | "or")) => tokens.get(end + 1),
                    next => next,
                };
                let before_another =
                    joined.is_some_and(|w| self.languages.by_first.contains_key(*w));
                cue || listed || listed_bare || last || carried || before_another
            };
            if meant {
                languages.insert(tag.clone());
                taken[i..end].iter_mut().for_each(|t| *t = true);
                last_constraint_end = Some(end);
            }
            i = end;
        }

        let text_words: Vec<&str> = (0..n)
            .filter(|&i| {
                !taken[i] && !STOP_WORDS.contains(&tokens[i]) && !FILLER.contains(&tokens[i])
            })
            .map(|i| tokens[i])
            .collect();
        let rest: Vec<&str> = (0..n)
            .filter(|&i| {
                !taken[i]
                    && !in_capability[i]
                    && !STOP_WORDS.contains(&tokens[i])
                    && !FILLER.contains(&tokens[i])
            })
            .map(|i| tokens[i])
            .collect();
        // A subject word the query says itself is a subject too.
        for &w in &text_words {
            if self.subject_words.contains(w) {
                subjects.insert(w.to_owned());
            }
        }
        // A subject the query implies but does not say ranks as a word.
        let mut text_words = text_words;
        let mut rest = rest;
        // So do the English words of what it says in another language.
        let english = translations.iter().flat_map(|t| words(t));
        for w in subjects.iter().map(String::as_str).chain(english) {
            if !text_words.contains(&w) {
                text_words.push(w);
            }
            if !rest.contains(&w) {
                rest.push(w);
            }
        }
        let capabilities: Vec<String> = capabilities.into_iter().collect();
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
            languages: languages.into_iter().collect(),
            capabilities,
            min_trust,
            terms,
            subjects: subjects.iter().cloned().collect(),
            truncated,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Capability,
    Hint,
    Subject,
    Translation,
    Language,
    Trust,
}

fn kind_of(t: &Target) -> Kind {
    match t {
        Target::Capability(_) => Kind::Capability,
        Target::Hint(_) => Kind::Hint,
        Target::Subject(_) => Kind::Subject,
        Target::Translation(_) => Kind::Translation,
        Target::Language { .. } => Kind::Language,
        Target::Trust(_) => Kind::Trust,
    }
}

/// The words of `s`: maximal runs of letters and digits.
fn words(s: &str) -> Vec<&str> {
    s.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect()
}

/// Characters of scripts written without spaces between words (Han,
/// kana, Hangul, Thai): phrases in them match anywhere.
fn unspaced_script(c: char) -> bool {
    matches!(c as u32,
        0x0E00..=0x0E7F        // Thai
        | 0x3040..=0x30FF      // Hiragana, Katakana
        | 0x3400..=0x4DBF      // CJK extension A
        | 0x4E00..=0x9FFF      // CJK unified ideographs
        | 0xAC00..=0xD7AF      // Hangul syllables
        | 0xF900..=0xFAFF      // CJK compatibility ideographs
    )
}

#[cfg(test)]
mod tests;
