//! The index's schema: its fields ([`Fields`]), where it lives, its
//! version, and how a trust level and an id's tie order are indexed.

use tantivy::schema::{
    Field, IndexRecordOption, NumericOptions, Schema, TextFieldIndexing, TextOptions, FAST,
    INDEXED, STORED, STRING,
};

use crate::store::error::StoreError;
use crate::trust::TrustLevel;

/// The index's directory, inside the store's.
pub(super) const INDEX_DIR: &str = "text-index";
/// The version of the schema and analysis; an index of another version is
/// rebuilt at open.
pub(super) const TEXT_VERSION: u32 = 3;
pub(super) const VERSION_FILE: &str = "agentmesh-text-version";
pub(super) const TOKENIZER: &str = "agentmesh";

/// The fields of an indexed agent.
#[derive(Clone, Copy)]
pub(super) struct Fields {
    pub(super) id: Field,
    pub(super) expires: Field,
    /// Every ranked text of the agent, in one field; what weighs more
    /// is written more than once (see `document`, `store/text/writer.rs`).
    pub(super) all: Field,
    /// The tags again, ranked beside `all`: a subject tag ("legal")
    /// weighs more than the same word in a description.
    pub(super) tags: Field,
    pub(super) cap: Field,
    pub(super) tag: Field,
    pub(super) lang: Field,
    pub(super) trust: Field,
    /// Where the agent stands among hits of equal score: a hash of its
    /// id, the same in every index and segment layout.
    pub(super) order: Field,
}

/// The index's schema and its fields.
pub(super) fn schema() -> (Schema, Fields) {
    let mut b = Schema::builder();
    let text = TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer(TOKENIZER)
            .set_index_option(IndexRecordOption::WithFreqs),
    );
    let fields = Fields {
        id: b.add_text_field("id", STRING | STORED),
        expires: b.add_u64_field("expires", NumericOptions::default() | INDEXED | FAST),
        all: b.add_text_field("all", text.clone()),
        tags: b.add_text_field("tags", text),
        cap: b.add_text_field("cap", STRING),
        tag: b.add_text_field("tag", STRING),
        lang: b.add_text_field("lang", STRING),
        trust: b.add_u64_field("trust", NumericOptions::default() | INDEXED | FAST),
        order: b.add_u64_field("order", NumericOptions::default() | FAST),
    };
    (b.build(), fields)
}

/// An agent's place among hits of equal score: the first 8 bytes of the
/// SHA-256 of its id.
pub(in crate::store) fn tie_order(id: &str) -> u64 {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(id.as_bytes());
    u64::from_be_bytes(digest[..8].try_into().expect("a SHA-256 is 32 bytes"))
}

/// A trust level as indexed: its rank, lowest 0.
pub(super) fn trust_rank(level: TrustLevel) -> u64 {
    match level {
        TrustLevel::Unverified => 0,
        TrustLevel::DnsVerified => 1,
        TrustLevel::KeyVerified => 2,
        TrustLevel::PeerVerified => 3,
    }
}

/// A tantivy (or writer thread) failure as a store error.
pub(super) fn text_err(e: impl std::fmt::Display) -> StoreError {
    StoreError::Text {
        reason: e.to_string(),
    }
}
