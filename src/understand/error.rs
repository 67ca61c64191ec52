//! Why a lexicon table was refused: [`LexiconError`], shared by the
//! table's reader and the phrase lists it fills.

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
