//! The word lists of query understanding and how a query is cut into
//! words.
//!
//! The lists (stop words, request filler, the words around a language
//! name that say a language is meant) are data, `src/understand/words.toml`,
//! embedded at build time and parsed once by [`WordLists::builtin`]; the
//! lexicon and the reading of a query ask them whether a word is one of
//! theirs.

use std::collections::HashSet;
use std::sync::OnceLock;

use serde::Deserialize;

/// The word lists shipped with the crate.
const WORDS: &str = include_str!("words.toml");

/// Why a word-list file was refused.
#[derive(Debug, thiserror::Error)]
pub(super) enum WordsError {
    /// Not TOML of the expected shape (a list missing, an unknown key).
    #[error("the word lists are not valid: {0}")]
    Toml(#[from] toml::de::Error),
    /// An entry is not one lower-case word as a query is cut into words.
    #[error("{word:?} in {list} is not one lower-case word")]
    NotOneWord {
        /// The list it is in.
        list: &'static str,
        /// The entry as written.
        word: String,
    },
}

/// The file as written in TOML.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    stop: Vec<String>,
    filler: Vec<String>,
    language_cues: Vec<String>,
    language_carriers: Vec<String>,
    articles: Vec<String>,
    joiners: Vec<String>,
    not_fuzzy: Vec<String>,
}

/// The word lists, each a set of lower-case words.
#[derive(Debug)]
pub(super) struct WordLists {
    /// Words that carry no meaning for ranking or matching.
    pub(super) stop: HashSet<String>,
    /// Words that say a search is wanted, not what for: out of the text.
    pub(super) filler: HashSet<String>,
    /// Words before a language name that make it a constraint.
    pub(super) language_cues: HashSet<String>,
    /// Words after a language name that make it a constraint.
    pub(super) language_carriers: HashSet<String>,
    /// Articles skipped between a cue and a language name.
    pub(super) articles: HashSet<String>,
    /// Words that join language names into a list.
    pub(super) joiners: HashSet<String>,
    /// Words that never match a phrase word one edit away.
    pub(super) not_fuzzy: HashSet<String>,
}

impl WordLists {
    /// The lists shipped in `src/understand/words.toml`, parsed once.
    pub(super) fn builtin() -> &'static WordLists {
        static BUILTIN: OnceLock<WordLists> = OnceLock::new();
        BUILTIN.get_or_init(|| {
            WordLists::parse(WORDS)
                .expect("the shipped words.toml is valid (a unit test parses it)")
        })
    }

    /// Reads word lists of the shape of `src/understand/words.toml`.
    ///
    /// # Errors
    /// [`WordsError`]: not TOML of that shape, or an entry that is not one
    /// lower-case word.
    pub(super) fn parse(toml_text: &str) -> Result<Self, WordsError> {
        let file: File = toml::from_str(toml_text)?;
        Ok(WordLists {
            stop: set("stop", file.stop)?,
            filler: set("filler", file.filler)?,
            language_cues: set("language_cues", file.language_cues)?,
            language_carriers: set("language_carriers", file.language_carriers)?,
            articles: set("articles", file.articles)?,
            joiners: set("joiners", file.joiners)?,
            not_fuzzy: set("not_fuzzy", file.not_fuzzy)?,
        })
    }

    /// Whether `w` is a stop word.
    pub(super) fn is_stop(&self, w: &str) -> bool {
        self.stop.contains(w)
    }

    /// Whether `w` is left out of the text: a stop word or filler.
    pub(super) fn is_dropped(&self, w: &str) -> bool {
        self.stop.contains(w) || self.filler.contains(w)
    }
}

/// The entries of one list as a set, each checked to be one word.
fn set(list: &'static str, entries: Vec<String>) -> Result<HashSet<String>, WordsError> {
    entries
        .into_iter()
        .map(|word| {
            if words(&word) == [word.as_str()] && word == word.to_lowercase() {
                Ok(word)
            } else {
                Err(WordsError::NotOneWord { list, word })
            }
        })
        .collect()
}

/// The words of `s`: maximal runs of letters and digits.
pub(super) fn words(s: &str) -> Vec<&str> {
    s.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect()
}

/// Characters of scripts written without spaces between words (Han,
/// kana, Hangul, Thai): phrases in them match anywhere.
pub(super) fn unspaced_script(c: char) -> bool {
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
mod tests {
    use super::*;

    #[test]
    fn the_shipped_word_lists_parse() {
        let lists = WordLists::parse(WORDS).unwrap();
        assert!(lists.is_stop("the"));
        assert!(lists.is_dropped("please"));
        assert!(lists.not_fuzzy.contains("germany"));
    }

    #[test]
    fn bad_word_lists_are_refused_with_what_is_wrong() {
        let missing = WORDS.replace("joiners = [\"and\", \"or\"]", "");
        let e = WordLists::parse(&missing).unwrap_err().to_string();
        assert!(e.contains("joiners"), "{e}");
        let unknown = format!("{WORDS}\nverbs = []\n");
        let e = WordLists::parse(&unknown).unwrap_err().to_string();
        assert!(e.contains("verbs"), "{e}");
        for bad in ["\"the end\"", "\"The\"", "\"\"", "\"tl;dr\""] {
            let text = WORDS.replace("not_fuzzy = [\"germany\"]", &format!("not_fuzzy = [{bad}]"));
            let e = WordLists::parse(&text).unwrap_err();
            assert!(
                matches!(
                    e,
                    WordsError::NotOneWord {
                        list: "not_fuzzy",
                        ..
                    }
                ),
                "{bad}: {e}"
            );
        }
    }
}
