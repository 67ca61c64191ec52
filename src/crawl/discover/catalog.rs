//! A domain's ARD entries, resolved the way ARD v0.91 §5.1 says: the
//! manifest at `/.well-known/ard.json`; the manifests its `robots.txt`
//! names on `Agentmap:` lines and its home page names with `rel="ard"`
//! (an HTML `<link>` or an HTTP `Link` header); the entries its home page
//! embeds as JSON-LD; and, only when the domain publishes none of these,
//! the predecessor's `/.well-known/ai-catalog.json`.
//!
//! Every fetch is the crawler's: https only, the address policy (a source
//! on another host is resolved and checked like any), the allowed ports,
//! per-host politeness, bounded bodies. At most
//! [`sources::MAX_SOURCES`] named manifests are followed per domain, so a
//! publisher cannot aim this node at more. Every entry must name the
//! domain (or a subdomain) as its publisher, wherever it was found, so a
//! manifest hosted elsewhere adds nothing for another domain. An
//! identifier found twice is kept from the first source.
//!
//! An entry's trust manifest is reported (its claims), and its signature
//! checked with the key the publisher serves ([`ard::trust::key_source`]):
//! a signature that does not verify refuses the entry; one that cannot be
//! checked is reported and the entry kept. Neither raises the level.

use std::collections::{BTreeMap, HashSet};

use serde_json::Value;
use url::Url;

use super::{found, json, ms, not_modified, OtherFormats};
use crate::crawl::error::CrawlError;
use crate::crawl::fetch::{DocumentKind, Fetched, AI_CATALOG, HOME_PAGE, JWKS, ROBOTS_TXT};
use crate::crawl::report::{CrawlOutcome, Run, StepName};
use crate::descriptor::DocumentFormat;
use crate::formats::ard::{self, sources, trust};
use crate::formats::FormatError;
use crate::trust::Reason;

/// A `did:web` DID document (a trust manifest's key).
const DID_DOCUMENT: DocumentKind = DocumentKind {
    what: "DID document",
    accept: "application/did+json, application/did+ld+json, application/json",
    media_types: &[
        "application/did+json",
        "application/did+ld+json",
        "application/json",
    ],
    max_bytes: 64 * 1024,
    max_values: 5_000,
    json: true,
    headers: &[],
};

/// Most distinct key documents fetched for the signatures of one
/// domain's entries.
const MAX_KEY_FETCHES: usize = 4;

/// A manifest (or a page's entries) read.
struct Read {
    /// The JSON read (`entries` holds the raw entries).
    doc: Value,
    /// Its entries, parsed.
    catalog: ard::Catalog,
    /// How long fetching and reading took, ms.
    took: f64,
    /// Entries embedded in a page, rather than a manifest.
    inline: bool,
}

/// Where entries came from: a manifest URL, or the page's JSON-LD.
struct Source {
    /// The URL fetched (the page's, for inline entries).
    url: Url,
    /// What was read there.
    read: Result<(Value, ard::Catalog), CrawlError>,
    /// How long fetching and reading took, ms.
    took: f64,
    /// Entries embedded in a page, rather than a manifest.
    inline: bool,
}

impl OtherFormats<'_> {
    /// The domain's ARD entries: one outcome per entry, or one for a
    /// source that is not a manifest.
    pub(super) async fn catalog(&self, domain: &str) -> Vec<CrawlOutcome> {
        let started = std::time::Instant::now();
        let ips = match self.https_addresses(domain).await {
            None => return Vec::new(),
            Some(Ok(ips)) => ips,
            Some(Err(e)) => {
                let where_ = format!("{domain}{}", ard::ARD_JSON_PATH);
                let mut run = Run::new(domain, where_, DocumentFormat::Ard);
                run.fail(StepName::DnsAddress, ms(started), e);
                return vec![run.unverified()];
            }
        };
        let (manifest, robots, home) = tokio::join!(
            self.get_published(domain, &ips, ard::ARD_JSON_PATH, AI_CATALOG),
            self.get_published(domain, &ips, "/robots.txt", ROBOTS_TXT),
            self.get_published(domain, &ips, "/", HOME_PAGE),
        );
        let mut found_sources = Vec::new();
        if let Some(fetched) = manifest {
            found_sources.push(self.read_manifest(domain, fetched, started));
        }
        let (named, inline) = named_sources(robots, home);
        let mut seen: HashSet<Url> = found_sources.iter().map(|s| s.url.clone()).collect();
        for url in named {
            if seen.len() > sources::MAX_SOURCES || !seen.insert(url.clone()) {
                continue;
            }
            let started = std::time::Instant::now();
            let fetched = self.fetch_source(domain, &ips, &url).await;
            let mut source = self.read_manifest(domain, fetched, started);
            source.url = url;
            found_sources.push(source);
        }
        if let Some((page, entries)) = inline {
            let catalog = ard::Catalog {
                host: None,
                entries: ard::parse_entries(&entries, "/jsonld", domain),
            };
            found_sources.push(Source {
                url: page,
                read: Ok((serde_json::json!({ "entries": entries }), catalog)),
                took: 0.0,
                inline: true,
            });
        }
        if found_sources.is_empty() {
            let started = std::time::Instant::now();
            match self
                .get_published(domain, &ips, ard::WELL_KNOWN_PATH, AI_CATALOG)
                .await
            {
                Some(fetched) => found_sources.push(self.read_manifest(domain, fetched, started)),
                None => return Vec::new(),
            }
        }
        let mut outcomes = Vec::new();
        let mut identifiers = HashSet::new();
        let mut keys = KeyCache::default();
        for source in found_sources {
            let where_ = format!(
                "{}{}{}",
                source.url.host_str().unwrap_or_default(),
                source.url.path(),
                if source.inline { "#jsonld" } else { "" }
            );
            let entries = match source.read {
                Ok((doc, catalog)) => {
                    let read = Read {
                        doc,
                        catalog,
                        took: source.took,
                        inline: source.inline,
                    };
                    self.source_entries(domain, &where_, read, &mut identifiers, &mut keys)
                        .await
                }
                Err(e) => {
                    let mut run = Run::new(domain, where_, DocumentFormat::Ard);
                    let step = match e {
                        CrawlError::Document(_) => StepName::Catalog,
                        _ => StepName::Fetch,
                    };
                    run.fail(step, source.took, e);
                    vec![run.unverified()]
                }
            };
            outcomes.extend(entries);
        }
        outcomes
    }

    /// One outcome per entry of a manifest read at `where_` (a host and
    /// path) for `domain`, its trust manifests checked: for a manifest
    /// found some other way (a DNS-AID index).
    pub(super) async fn manifest_entries(
        &self,
        domain: &str,
        where_: &str,
        doc: Value,
        catalog: ard::Catalog,
        took: f64,
    ) -> Vec<CrawlOutcome> {
        let read = Read {
            doc,
            catalog,
            took,
            inline: false,
        };
        self.source_entries(
            domain,
            where_,
            read,
            &mut HashSet::new(),
            &mut KeyCache::default(),
        )
        .await
    }

    /// Reads a fetched manifest (or why there is none).
    fn read_manifest(
        &self,
        domain: &str,
        fetched: Result<Fetched, CrawlError>,
        started: std::time::Instant,
    ) -> Source {
        let url = match &fetched {
            Ok(f) => f.url.clone(),
            Err(_) => Url::parse(&format!("https://{domain}{}", ard::ARD_JSON_PATH))
                .expect("a checked domain makes a URL"),
        };
        let read = fetched.and_then(|f| {
            json(&f.text)
                .and_then(|doc| ard::parse_catalog(&doc, domain).map(|c| (doc, c)))
                .map_err(CrawlError::from)
        });
        Source {
            url,
            read,
            took: ms(started),
            inline: false,
        }
    }

    /// Fetches a manifest a domain named: its host resolved and checked under the address policy unless it is
    /// the domain's own.
    async fn fetch_source(
        &self,
        domain: &str,
        domain_ips: &[std::net::IpAddr],
        url: &Url,
    ) -> Result<Fetched, CrawlError> {
        let host = url.host_str().unwrap_or_default().to_ascii_lowercase();
        let ips = if host.eq_ignore_ascii_case(domain) {
            domain_ips.to_vec()
        } else {
            self.allowed_addresses(&host).await?
        };
        // No conditional request is made, so there is always a body.
        self.fetcher
            .fetch_kind(url, &ips, None, AI_CATALOG)
            .await?
            .ok_or_else(|| not_modified(url))
    }

    /// One outcome per entry of `read`, found at `where_`; identifiers
    /// already in `identifiers` are skipped.
    async fn source_entries(
        &self,
        domain: &str,
        where_: &str,
        read: Read,
        identifiers: &mut HashSet<String>,
        keys: &mut KeyCache,
    ) -> Vec<CrawlOutcome> {
        let Read {
            doc,
            catalog,
            took,
            inline,
        } = read;
        let raw = doc.get("entries").and_then(Value::as_array);
        let mut out = Vec::new();
        for (i, entry) in catalog.entries.into_iter().enumerate() {
            let raw_entry = raw.and_then(|r| r.get(i));
            let id = raw_entry
                .and_then(|e| e.get("identifier"))
                .and_then(Value::as_str)
                .map_or_else(|| format!("{where_}#/entries/{i}"), str::to_owned);
            if !identifiers.insert(id.clone()) {
                continue;
            }
            let mut run = Run::new(domain, id, DocumentFormat::Ard);
            let what = if inline { "JSON-LD entry" } else { "entry" };
            run.pass(StepName::Catalog, took, format!("{what} {i} of {where_}"));
            let entry = match entry {
                Ok(entry) => entry,
                Err(e) => {
                    run.fail(StepName::Entry, 0.0, e.into());
                    out.push(run.unverified());
                    continue;
                }
            };
            if let (Some(manifest), Some(raw_manifest)) =
                (&entry.trust, raw_entry.and_then(|e| e.get("trustManifest")))
            {
                let started = std::time::Instant::now();
                let checked = self
                    .check_manifest(&entry.publisher(), manifest, raw_manifest, keys)
                    .await;
                match checked {
                    Ok(detail) => run.pass(StepName::TrustManifest, ms(started), detail),
                    Err(e) => {
                        let forged = e.reason == Reason::TrustManifestSignatureBad;
                        run.fail(StepName::TrustManifest, ms(started), e.into());
                        if forged {
                            out.push(run.unverified());
                            continue;
                        }
                    }
                }
            }
            let text = raw_entry.map(Value::to_string).unwrap_or_default();
            out.push(found(run, entry.to_descriptor(), text));
        }
        out
    }

    /// Reports a trust manifest's claims, its signature checked when it
    /// has one.
    async fn check_manifest(
        &self,
        publisher: &str,
        manifest: &trust::TrustManifest,
        raw: &Value,
        keys: &mut KeyCache,
    ) -> Result<String, FormatError> {
        let unchecked =
            |why: String| FormatError::new(Reason::TrustManifestSignatureUnchecked, why);
        let claims = manifest.summary();
        let Some(jws) = &manifest.signature else {
            return Ok(format!("{claims}; not signed"));
        };
        let source = trust::key_source(manifest, publisher)
            .map_err(|why| unchecked(format!("{claims}; {why}")))?;
        let (url, did) = match &source {
            trust::KeySource::Jwks(url) => (url.clone(), false),
            trust::KeySource::DidWeb(url) => (url.clone(), true),
        };
        let jwks = keys
            .get(self, &url, did)
            .await
            .map_err(|why| unchecked(format!("{claims}; {why}")))?;
        trust::verify(raw, jws, &jwks)
            .map(|()| {
                format!(
                    "{claims}; {} signature by key {} from {url} verifies; the key is served by the publisher, not anchored in DNS, so the entry's level is not raised",
                    jws.header.alg, jws.header.kid
                )
            })
            .map_err(|e| match e {
                crate::formats::a2a::SignatureError::Bad => FormatError::new(
                    Reason::TrustManifestSignatureBad,
                    format!(
                        "{claims}; the signature does not verify with key {} from {url}",
                        jws.header.kid
                    ),
                ),
                other => unchecked(format!("{claims}; {other}")),
            })
    }
}

/// The manifests a domain names (robots.txt's `Agentmap:` lines, then the
/// home page's `rel="ard"` links and `Link` header), as https URLs, and
/// the home page's inline entries with the page's URL.
fn named_sources(
    robots: Option<Result<Fetched, CrawlError>>,
    home: Option<Result<Fetched, CrawlError>>,
) -> (Vec<Url>, Option<(Url, Vec<Value>)>) {
    let mut named = Vec::new();
    let mut resolve = |base: &Url, href: &str| {
        if let Ok(url) = base.join(href) {
            if url.scheme() == "https" && !named.contains(&url) {
                named.push(url);
            }
        }
    };
    if let Some(Ok(robots)) = robots {
        for href in sources::agentmaps(&robots.text) {
            resolve(&robots.url, &href);
        }
    }
    let mut inline = None;
    if let Some(Ok(home)) = home {
        let page = sources::page(&home.text);
        let header = home
            .link
            .as_deref()
            .map(sources::link_header)
            .unwrap_or_default();
        for href in header.iter().chain(&page.links) {
            resolve(&home.url, href);
        }
        if !page.entries.is_empty() {
            inline = Some((home.url.clone(), page.entries));
        }
    }
    named.truncate(sources::MAX_SOURCES);
    (named, inline)
}

/// The key sets fetched for one domain's signatures, by URL (a failure is
/// remembered too), at most [`MAX_KEY_FETCHES`].
#[derive(Default)]
struct KeyCache {
    fetched: BTreeMap<Url, Result<Value, String>>,
}

impl KeyCache {
    /// The JWKS at `url` (a DID document's keys when `did`).
    async fn get(
        &mut self,
        formats: &OtherFormats<'_>,
        url: &Url,
        did: bool,
    ) -> Result<Value, String> {
        if let Some(held) = self.fetched.get(url) {
            return held.clone();
        }
        if self.fetched.len() >= MAX_KEY_FETCHES {
            return Err(format!(
                "more than {MAX_KEY_FETCHES} key documents named by one domain's entries; {url} was not fetched"
            ));
        }
        let result = fetch_keys(formats, url, did).await;
        self.fetched.insert(url.clone(), result.clone());
        result
    }
}

async fn fetch_keys(formats: &OtherFormats<'_>, url: &Url, did: bool) -> Result<Value, String> {
    let host = url.host_str().unwrap_or_default().to_ascii_lowercase();
    let ips = formats
        .allowed_addresses(&host)
        .await
        .map_err(|e| format!("{url}: {e}"))?;
    let kind = if did { DID_DOCUMENT } else { JWKS };
    let fetched = match formats.fetcher.fetch_kind(url, &ips, None, kind).await {
        Ok(Some(f)) => f,
        Ok(None) => return Err(format!("{url} answered nothing")),
        Err(e) => return Err(format!("{url}: {e}")),
    };
    let doc: Value =
        serde_json::from_str(&fetched.text).map_err(|e| format!("{url} is not JSON: {e}"))?;
    Ok(if did {
        trust::did_document_keys(&doc)
    } else {
        doc
    })
}
