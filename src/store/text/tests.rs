//! Tests of the text analysis, the writer's commit cadence, and the
//! operations read from a document.

use std::time::{Duration, Instant};

use super::analysis::{analyse, analyzer, MAX_TOKEN_BYTES};
use super::query::MAX_QUERY_TERMS;
use super::writer::{operations, Cadence, BULK_COMMIT_OPS, COMMIT_EVERY, COMMIT_EVERY_BULK};

fn texts(s: &str) -> Vec<String> {
    let mut a = analyzer();
    analyse(&mut a, s, 100)
}

#[test]
fn commits_wait_longer_while_a_bulk_of_changes_keeps_coming() {
    let t0 = Instant::now();
    let mut c = Cadence::new(t0);
    assert_eq!(c.every, COMMIT_EVERY);
    // A few changes: the short wait stays.
    c.committed(BULK_COMMIT_OPS - 1, t0);
    assert_eq!(c.every, COMMIT_EVERY);
    // A bulk: the next changes, coming at once, wait the long time.
    c.committed(BULK_COMMIT_OPS, t0);
    c.first_change(t0 + Duration::from_millis(1));
    assert_eq!(c.every, COMMIT_EVERY_BULK);
    // A change after a quiet spell does not wait for the bulk's time.
    c.first_change(t0 + COMMIT_EVERY_BULK);
    assert_eq!(c.every, COMMIT_EVERY);
    // A bulk ends with a small commit: short again.
    c.committed(BULK_COMMIT_OPS, t0);
    c.committed(1, t0 + COMMIT_EVERY_BULK);
    assert_eq!(c.every, COMMIT_EVERY);
}

#[test]
fn words_split_on_punctuation_and_underscores_and_are_stemmed() {
    assert_eq!(
        texts("Speech_to_text: Transcribing meetings"),
        ["speech", "text", "transcrib", "meet"]
    );
}

#[test]
fn cjk_text_becomes_bigrams_beside_latin_words() {
    assert_eq!(
        texts("法律文件 summary"),
        ["法律", "律文", "文件", "summari"]
    );
    assert_eq!(texts("翻"), ["翻"]);
    // Kana and Hangul too.
    assert_eq!(texts("ほんやく"), ["ほん", "んや", "やく"]);
    assert_eq!(texts("번역기"), ["번역", "역기"]);
}

#[test]
fn query_terms_are_bounded() {
    let long: String = (0..100).map(|i| format!("w{i} ")).collect();
    let mut a = analyzer();
    assert_eq!(
        analyse(&mut a, &long, MAX_QUERY_TERMS).len(),
        MAX_QUERY_TERMS
    );
    assert!(texts("   !!! ,,, ").is_empty());
    // Over-long tokens are dropped, not truncated.
    assert!(texts(&"x".repeat(MAX_TOKEN_BYTES + 1)).is_empty());
}

#[test]
fn operations_come_from_aidip_operations_and_a2a_skills() {
    let doc = r#"{"operations":[{"name":"summarize","description":"Short notes"}],
                  "skills":[{"id":"tr","name":"Translate"}]}"#;
    assert_eq!(
        operations(doc),
        ["summarize", "Short notes", "Translate", "tr"]
    );
    assert!(operations("not json").is_empty());
    assert!(operations(r#"{"operations":"x"}"#).is_empty());
}
