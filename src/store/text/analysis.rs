//! How text is analysed, for the index and for queries alike: words
//! split on anything not alphanumeric, CJK text as overlapping bigrams,
//! lower-cased, folded to ASCII, English stop words dropped, English
//! stemming.

use std::collections::HashSet;

use tantivy::tokenizer::{
    AsciiFoldingFilter, Language, LowerCaser, RemoveLongFilter, Stemmer, StopWordFilter,
    TextAnalyzer, Token, TokenStream, Tokenizer,
};

/// Longest token indexed, in bytes.
pub(super) const MAX_TOKEN_BYTES: usize = 40;

/// The analysis of every ranked field and of queries: words split on
/// anything not alphanumeric (so `speech_to_text` is three words), CJK
/// text as overlapping bigrams, lower-cased, folded to ASCII, English stop
/// words dropped, English stemming.
pub(super) fn analyzer() -> TextAnalyzer {
    let stop = StopWordFilter::new(Language::English)
        .expect("tantivy ships English stop words (feature `stopwords`)");
    TextAnalyzer::builder(MeshTokenizer)
        .filter(RemoveLongFilter::limit(MAX_TOKEN_BYTES))
        .filter(LowerCaser)
        .filter(AsciiFoldingFilter)
        .filter(stop)
        .filter(Stemmer::new(Language::English))
        .build()
}

/// Splits text into words and CJK bigrams.
#[derive(Clone, Default)]
struct MeshTokenizer;

/// The tokens of one text, split up front.
struct SplitTokens {
    tokens: Vec<Token>,
    at: usize,
}

impl Tokenizer for MeshTokenizer {
    type TokenStream<'a> = SplitTokens;
    fn token_stream<'a>(&'a mut self, text: &'a str) -> SplitTokens {
        SplitTokens {
            tokens: split(text),
            at: 0,
        }
    }
}

impl TokenStream for SplitTokens {
    fn advance(&mut self) -> bool {
        if self.at < self.tokens.len() {
            self.at += 1;
            true
        } else {
            false
        }
    }
    fn token(&self) -> &Token {
        &self.tokens[self.at.saturating_sub(1).min(self.tokens.len() - 1)]
    }
    fn token_mut(&mut self) -> &mut Token {
        let i = self.at.saturating_sub(1).min(self.tokens.len() - 1);
        &mut self.tokens[i]
    }
}

/// Han, kana and Hangul: scripts written without spaces between words,
/// indexed as character bigrams.
fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF   // Hiragana, Katakana
        | 0x31F0..=0x31FF // Katakana extensions
        | 0x3400..=0x4DBF // CJK extension A
        | 0x4E00..=0x9FFF // CJK unified ideographs
        | 0xF900..=0xFAFF // CJK compatibility ideographs
        | 0x1100..=0x11FF // Hangul Jamo
        | 0x3130..=0x318F // Hangul compatibility Jamo
        | 0xAC00..=0xD7AF // Hangul syllables
        | 0x20000..=0x2FFFF)
}

/// The words and CJK bigrams of `text`, in order.
fn split(text: &str) -> Vec<Token> {
    let mut out = Vec::new();
    let push = |from: usize, to: usize, out: &mut Vec<Token>| {
        out.push(Token {
            offset_from: from,
            offset_to: to,
            position: out.len(),
            text: text[from..to].to_owned(),
            position_length: 1,
        });
    };
    let mut chars = text.char_indices().peekable();
    while let Some((start, c)) = chars.next() {
        if is_cjk(c) {
            // A run of CJK characters: its bigrams (a lone one as itself).
            let mut run = vec![(start, c)];
            while let Some(&(i, d)) = chars.peek() {
                if !is_cjk(d) {
                    break;
                }
                run.push((i, d));
                chars.next();
            }
            if run.len() == 1 {
                push(start, start + c.len_utf8(), &mut out);
            }
            for w in run.windows(2) {
                let (from, _) = w[0];
                let (i, d) = w[1];
                push(from, i + d.len_utf8(), &mut out);
            }
        } else if c.is_alphanumeric() {
            let mut end = start + c.len_utf8();
            while let Some(&(i, d)) = chars.peek() {
                if !d.is_alphanumeric() || is_cjk(d) {
                    break;
                }
                end = i + d.len_utf8();
                chars.next();
            }
            push(start, end, &mut out);
        }
    }
    out
}

/// The analysed terms of `text`, distinct, in order of appearance, at most
/// `limit`.
pub(super) fn analyse(analyzer: &mut TextAnalyzer, text: &str, limit: usize) -> Vec<String> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    let mut stream = analyzer.token_stream(text);
    while out.len() < limit && stream.advance() {
        let t = &stream.token().text;
        if seen.insert(t.clone()) {
            out.push(t.clone());
        }
    }
    out
}
