//! The lexicon: the phrases [`crate::understand::understand`] knows, read
//! from a table of the shape of `src/understand/synonyms.toml` (the one
//! shipped is embedded at build time and parsed once).

use std::collections::{BTreeSet, HashMap};
use std::sync::OnceLock;

use serde::Deserialize;

use super::error::LexiconError;
use super::phrases::{Kind, Phrases, Target};
use super::words::{unspaced_script, words, WordLists};
use crate::descriptor;
use crate::trust::TrustLevel;

/// The lexicon shipped with the crate.
pub(super) const SYNONYMS: &str = include_str!("synonyms.toml");

/// The table as written in TOML.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Table {
    pub(super) capabilities: HashMap<String, Vec<String>>,
    #[serde(default)]
    pub(super) hints: HashMap<String, Vec<String>>,
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

/// The lexicon: the phrases [`crate::understand::understand`] knows.
#[derive(Debug)]
pub struct Lexicon {
    pub(super) capabilities: Phrases,
    pub(super) hints: Phrases,
    pub(super) subjects: Phrases,
    /// The subject words themselves (`legal`, `medical`).
    pub(super) subject_words: BTreeSet<String>,
    pub(super) translations: Phrases,
    pub(super) languages: Phrases,
    pub(super) trust: Phrases,
    /// Phrases in scripts without spaces, matched anywhere in the query.
    pub(super) unspaced: Vec<(String, Target)>,
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
        lexicon.add_capabilities(table.capabilities)?;
        lexicon.add_hints(table.hints)?;
        lexicon.add_subjects(table.subjects)?;
        lexicon.add_translations(table.translations)?;
        lexicon.add_languages(table.languages)?;
        lexicon.add_trust(table.trust)?;
        // Longest unspaced phrases first, so "简体中文" wins over "中文".
        lexicon.unspaced.sort_by(|a, b| {
            b.0.chars()
                .count()
                .cmp(&a.0.chars().count())
                .then(a.0.cmp(&b.0))
        });
        Ok(lexicon)
    }

    /// The `[capabilities]` table: each id names itself (`_` as a space)
    /// and is named by its phrases.
    fn add_capabilities(
        &mut self,
        table: HashMap<String, Vec<String>>,
    ) -> Result<(), LexiconError> {
        for (id, phrases) in sorted(table) {
            let id = descriptor::normalise_term(&id).ok_or_else(|| LexiconError::Empty {
                under: "capabilities".into(),
            })?;
            let own = id.replace('_', " ");
            for phrase in std::iter::once(&own).chain(&phrases) {
                self.add(
                    Kind::Capability,
                    phrase,
                    Target::Capability(id.clone()),
                    &id,
                )?;
            }
            self.vocabulary.push((id, phrases));
        }
        Ok(())
    }

    /// The `[hints]` table: phrases that name a capability weakly.
    fn add_hints(&mut self, table: HashMap<String, Vec<String>>) -> Result<(), LexiconError> {
        for (id, phrases) in sorted(table) {
            let id = descriptor::normalise_term(&id).ok_or_else(|| LexiconError::Empty {
                under: "hints".into(),
            })?;
            for phrase in &phrases {
                self.add(Kind::Hint, phrase, Target::Hint(id.clone()), &id)?;
            }
        }
        Ok(())
    }

    /// The `[subjects]` table: one subject word, the objects that imply it.
    fn add_subjects(&mut self, table: HashMap<String, Vec<String>>) -> Result<(), LexiconError> {
        for (word, phrases) in sorted(table) {
            let word = word.trim().to_lowercase();
            if words(&word).len() != 1 {
                return Err(LexiconError::Empty {
                    under: format!("subjects ({word:?} is not one word)"),
                });
            }
            for phrase in &phrases {
                self.add(Kind::Subject, phrase, Target::Subject(word.clone()), &word)?;
            }
            self.subject_words.insert(word);
        }
        Ok(())
    }

    /// The `[translations]` table: English words, the phrases of other
    /// languages that say them.
    fn add_translations(
        &mut self,
        table: HashMap<String, Vec<String>>,
    ) -> Result<(), LexiconError> {
        for (english, phrases) in sorted(table) {
            let english = words(&english.to_lowercase()).join(" ");
            if english.is_empty() {
                return Err(LexiconError::Empty {
                    under: "translations".into(),
                });
            }
            for phrase in &phrases {
                let target = Target::Translation(english.clone());
                self.add(Kind::Translation, phrase, target, &english)?;
            }
        }
        Ok(())
    }

    /// The `[languages.TAG]` tables: English names (of one word: a
    /// constraint in context only) and native names (always).
    fn add_languages(&mut self, table: HashMap<String, LanguageNames>) -> Result<(), LexiconError> {
        let mut sorted: Vec<_> = table.into_iter().collect();
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
                self.add(Kind::Language, name, target, &key)?;
            }
            for name in &names.native {
                let target = Target::Language {
                    tag: tag.clone(),
                    always: true,
                };
                self.add(Kind::Language, name, target, &key)?;
            }
        }
        Ok(())
    }

    /// The `[trust]` table: a trust level, the phrases that ask for it.
    fn add_trust(&mut self, table: HashMap<String, Vec<String>>) -> Result<(), LexiconError> {
        for (key, phrases) in sorted(table) {
            let level: TrustLevel = key.parse().map_err(|message| LexiconError::Trust {
                level: key.clone(),
                message,
            })?;
            for phrase in &phrases {
                self.add(Kind::Trust, phrase, Target::Trust(level), &key)?;
            }
        }
        Ok(())
    }

    /// Adds one phrase of `kind` naming `target`, listed under `under`:
    /// to the unspaced phrases when its script has no spaces, else to the
    /// table of its kind as its words (stop words aside, except for
    /// language and trust phrases).
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
                if *other != target && other.kind() == kind {
                    return Err(LexiconError::Ambiguous {
                        phrase: text,
                        first: other.name(),
                        second: target.name(),
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
            let lists = WordLists::builtin();
            w.retain(|w| !lists.is_stop(w));
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
}

/// A table's entries sorted by key, so a lexicon is read the same way
/// every time (the first of two ambiguous keys is always the same).
fn sorted(table: HashMap<String, Vec<String>>) -> Vec<(String, Vec<String>)> {
    let mut sorted: Vec<_> = table.into_iter().collect();
    sorted.sort();
    sorted
}
