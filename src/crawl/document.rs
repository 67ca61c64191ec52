//! The document phases of an ADP crawl: `agent.json` fetched from the
//! address checked, conditionally when a document is [`Held`] from an
//! earlier visit (a 304 means the held text stands, checked against DNS
//! again); then read as an ADP document (JSON, protocol, schema, identity)
//! and its key chained to the fingerprint DNS published.

use std::net::IpAddr;
use std::time::Instant;

use ed25519_dalek::VerifyingKey;
use sha2::{Digest, Sha256};
use url::Url;

use super::error::CrawlError;
use super::fetch::{Fetched, Fetcher};
use super::report::{Run, StepName};
use crate::adp::check::{self, DocumentChecker};
use crate::adp::AgentDocument;
use crate::trust::ChallengeProof;

/// What this node holds of an agent's document from an earlier visit:
/// what a recrawl asks with (`If-None-Match`) and what a 304 stands for.
#[derive(Debug, Clone)]
pub(crate) struct Held {
    /// The document text held (what the stored record carries).
    pub(crate) text: String,
    /// Its ETag, when the publisher sent one.
    pub(crate) etag: Option<String>,
    /// Its `max-age`, seconds, when the publisher sent one.
    pub(crate) max_age_secs: Option<u64>,
    /// The held record's challenge proof, if it has one.
    pub(crate) challenge: Option<ChallengeProof>,
    /// The challenge is due again (`crawl.challenge_interval` ran out):
    /// a 304 does not spare it.
    pub(crate) challenge_due: bool,
}

/// A document consistent with DNS: read, checked, its key chained.
pub(super) struct Checked {
    /// The document read.
    pub(super) document: AgentDocument,
    /// Its text, as fetched (or held).
    pub(super) text: String,
    /// SHA-256 of the text, which the challenge's nonce binds.
    pub(super) digest: [u8; 32],
    /// The key of `publicKey.full`, when the document gives it.
    pub(super) key: Option<VerifyingKey>,
    /// The document's `max-age`, seconds, when the publisher sent one.
    pub(super) max_age: Option<u64>,
}

/// Fetches `url` from `ips`, with the held ETag when there is one,
/// recording the `fetch` step and what the visit learnt (`ETag`,
/// `max-age`, a 304, an unchanged text) in the report's visit.
pub(super) async fn fetch(
    fetcher: &Fetcher,
    url: &Url,
    ips: &[IpAddr],
    held: Option<&Held>,
    run: &mut Run,
) -> Result<Fetched, ()> {
    let started = Instant::now();
    let etag = held.and_then(|h| h.etag.as_deref());
    let fetched = match fetcher.fetch(url, ips, etag).await {
        Ok(Some(f)) => Ok(f),
        Ok(None) => {
            let h = held.expect("a conditional request is only made with a held document");
            run.report.visit.not_modified = true;
            Ok(Fetched {
                text: h.text.clone(),
                url: url.clone(),
                etag: h.etag.clone(),
                max_age: h.max_age_secs,
                link: None,
            })
        }
        Err(e) => Err(e),
    };
    let not_modified = run.report.visit.not_modified;
    let fetched = run.step(StepName::Fetch, started, fetched, |f| {
        if not_modified {
            format!(
                "304 Not Modified from {}: the held document ({} bytes) stands",
                f.url,
                f.text.len()
            )
        } else {
            format!("{} bytes from {}", f.text.len(), f.url)
        }
    })?;
    run.report.visit.etag = fetched.etag.clone();
    run.report.visit.max_age_secs = fetched.max_age;
    run.report.visit.unchanged = held.is_some_and(|h| h.text == fetched.text);
    Ok(fetched)
}

/// Reads the fetched text as `domain`'s ADP document and chains its key
/// to `fingerprint`, the one DNS published, recording the `document` and
/// `fingerprint` steps.
pub(super) fn check(
    documents: &DocumentChecker,
    domain: &str,
    fingerprint: &str,
    fetched: Fetched,
    run: &mut Run,
) -> Result<Checked, ()> {
    let started = Instant::now();
    let document = documents
        .check(domain, &fetched.text)
        .map_err(CrawlError::from);
    let document = run.step(StepName::Document, started, document, |d| {
        format!(
            "ADP document for {} ({} capabilities)",
            d.identity.id,
            d.capabilities.len()
        )
    })?;

    let started = Instant::now();
    let key = check::fingerprint_chain(fingerprint, &document).map_err(CrawlError::from);
    let key = run.step(StepName::Fingerprint, started, key, |k| match k {
        Some(_) => format!("{fingerprint} matches the DNS pk and publicKey.full"),
        None => format!("{fingerprint} matches the DNS pk (no publicKey.full)"),
    })?;
    Ok(Checked {
        digest: Sha256::digest(fetched.text.as_bytes()).into(),
        text: fetched.text,
        document,
        key,
        max_age: fetched.max_age,
    })
}
