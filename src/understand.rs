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
//! table of the same shape. The word lists the rules below name (stop
//! words, filler, the cues and carriers of a language name) are data too,
//! `src/understand/words.toml`, embedded and parsed once the same way.
//!
//! The parts: `understood` (what a query asks for), `lexicon` (the table
//! read into phrase lists), `phrases` (matching words against phrases,
//! exact or one edit away), `words` (the word lists, cutting a query into
//! words), `reading` (one query read in the order of the rules below).
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

use crate::descriptor;

mod error;
mod lexicon;
mod phrases;
mod reading;
mod understood;
mod words;

pub use error::LexiconError;
pub use lexicon::Lexicon;
pub use understood::{Understood, MAX_QUERY_BYTES, MAX_QUERY_WORDS};

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

#[cfg(test)]
mod tests;
