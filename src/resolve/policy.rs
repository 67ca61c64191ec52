//! Policy terms checked against one agent: what its record proves (trust,
//! evidence) and what its document declares (protocols, interfaces,
//! jurisdiction, price, latency, status). Pure: the resolver hands in a
//! record and the parsed document, and gets back the reasons it passed
//! or the first term it failed.
//!
//! Where each declaration comes from (AIDIP leaves pricing and the like
//! open; ADP has `interfaces`, `policies`, per-capability `pricing`):
//!
//! | term | AIDIP document | ADP `agent.json` |
//! | --- | --- | --- |
//! | protocols | `aidip`, the endpoint's URL scheme, a `protocols` member (string or array, e.g. `["a2a","mcp"]`) | `adp`, the URL schemes of `endpoints` and `interfaces`, a `protocols` member |
//! | interfaces | an `interfaces` member (array, or object keyed by type); `api` when absent (AIDIP invocation is a REST API) | the keys of `interfaces` and every capability's `interfaces` |
//! | jurisdiction | a `jurisdiction` member (string or array of codes) | a top-level `jurisdiction`, else `policies.jurisdiction` |
//! | max_price | a `pricing` member | the `pricing` of the capabilities the intent names (all of them when it names none) |
//! | max_latency_ms | a `latency_ms` member (number) | `latency_ms`, else `availability.latency_ms` |
//! | status | `status` | `availability.status` (`online`, `offline`, `maintenance`) |
//! | alive_within | not declared: this node's liveness probe (`crawl::probe`), or a trusted peer's signed one, found it `alive` that recently | the same |
//!
//! A pricing object is `{"model": "free"}`, or has an `amount` (or
//! `price`) and a `currency`, at its top or under `details` (the ADP
//! testbed's `{"model": "per_call", "details": {"amount", "currency"}}`);
//! a bare number is an amount without currency. A free agent passes every
//! `max_price`; an agent with no price, or only a subscription, fails
//! one. A `max_price` with a currency passes only prices in that currency
//! (nothing is converted); one without compares amounts alone. An agent
//! that declares no jurisdiction, latency or status fails a policy asking
//! for one; every jurisdiction it declares must be allowed.

use std::collections::BTreeSet;

use serde::Serialize;
use serde_json::Value;

use super::request::{MaxPrice, Policy};
use crate::descriptor::{self, Descriptor, DocumentFormat};
use crate::store::Liveness;
use crate::trust::Evidence;
use crate::understand::language_matches;

/// Why a candidate is answered: each policy term it passed, each
/// capability and preferred language of the request it matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ReasonCode {
    /// The intent's words ranked it (the detail gives the score).
    IntentMatched,
    /// It offers a capability the intent names.
    CapabilityMatched,
    /// It supports a language the intent or context prefers.
    LanguageSupported,
    /// Its trust level is at least `policy.min_trust`.
    PolicyMinTrust,
    /// Its DNS record validated under DNSSEC (the `dnssec` flag).
    PolicyDnssec,
    /// It supports a language `policy.languages` requires.
    PolicyLanguage,
    /// It offers one of `policy.protocols`.
    PolicyProtocol,
    /// It offers one of `policy.interfaces`.
    PolicyInterface,
    /// Every jurisdiction it declares is allowed.
    PolicyJurisdiction,
    /// Its price is within `policy.max_price`.
    PolicyMaxPrice,
    /// Its declared latency is within `policy.max_latency_ms`.
    PolicyMaxLatency,
    /// Its status is one `policy.status` allows.
    PolicyStatus,
    /// It is not in `policy.exclude`.
    PolicyExclude,
    /// This node's liveness probe (or a trusted peer's signed result)
    /// found it `alive` within `policy.alive_within` seconds.
    PolicyAlive,
}

impl ReasonCode {
    /// The stable code.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::IntentMatched => "intent_matched",
            Self::CapabilityMatched => "capability_matched",
            Self::LanguageSupported => "language_supported",
            Self::PolicyMinTrust => "policy_min_trust",
            Self::PolicyDnssec => "policy_dnssec",
            Self::PolicyLanguage => "policy_language",
            Self::PolicyProtocol => "policy_protocol",
            Self::PolicyInterface => "policy_interface",
            Self::PolicyJurisdiction => "policy_jurisdiction",
            Self::PolicyMaxPrice => "policy_max_price",
            Self::PolicyMaxLatency => "policy_max_latency",
            Self::PolicyStatus => "policy_status",
            Self::PolicyExclude => "policy_exclude",
            Self::PolicyAlive => "policy_alive",
        }
    }
}

/// One reason: a code and what exactly matched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[schema(as = PolicyReason)]
pub struct Reason {
    /// Machine-readable.
    pub code: ReasonCode,
    /// For people: "key-verified ≥ dns-verified".
    pub detail: String,
}

impl Reason {
    pub(super) fn new(code: ReasonCode, detail: impl Into<String>) -> Self {
        Self {
            code,
            detail: detail.into(),
        }
    }
}

/// The agent as the checks see it.
pub(super) struct Agent<'a> {
    pub(super) descriptor: &'a Descriptor,
    pub(super) evidence: &'a Evidence,
    /// The parsed document (`Value::Null` when it is not JSON).
    pub(super) document: &'a Value,
    /// The capability ids the intent names (for ADP per-capability prices).
    pub(super) intent_capabilities: &'a [String],
    /// The liveness that counts: the newest `alive` result of this node's
    /// probe or a trusted peer's, else this node's last result.
    pub(super) liveness: Option<&'a Liveness>,
    /// Now, Unix seconds.
    pub(super) now: u64,
}

/// Checks every policy term, cheapest first. `Ok` holds one reason per
/// term passed; `Err` the first term failed.
pub(super) fn check(policy: &Policy, a: &Agent<'_>) -> Result<Vec<Reason>, ReasonCode> {
    let mut out = Vec::new();
    check_proven(policy, a, &mut out)?;
    check_offered(policy, a, &mut out)?;
    check_terms(policy, a, &mut out)?;
    check_observed(policy, a, &mut out)?;
    Ok(out)
}

/// The terms the record proves: not excluded, trust, DNSSEC.
fn check_proven(policy: &Policy, a: &Agent<'_>, out: &mut Vec<Reason>) -> Result<(), ReasonCode> {
    if !policy.exclude.is_empty() {
        if policy.exclude.contains(&a.descriptor.id) {
            return Err(ReasonCode::PolicyExclude);
        }
        out.push(Reason::new(
            ReasonCode::PolicyExclude,
            format!("not among the {} excluded ids", policy.exclude.len()),
        ));
    }
    let level = a.evidence.level();
    if let Some(min) = policy.min_trust {
        if level < min {
            return Err(ReasonCode::PolicyMinTrust);
        }
        out.push(Reason::new(
            ReasonCode::PolicyMinTrust,
            format!("trust {level} ≥ {min}"),
        ));
    }
    if policy.dnssec_required {
        if !a.evidence.dnssec {
            return Err(ReasonCode::PolicyDnssec);
        }
        out.push(Reason::new(
            ReasonCode::PolicyDnssec,
            "the agent's DNS record validated under DNSSEC",
        ));
    }
    Ok(())
}

/// The terms the document declares about what it offers: languages,
/// status, protocols, interfaces.
fn check_offered(policy: &Policy, a: &Agent<'_>, out: &mut Vec<Reason>) -> Result<(), ReasonCode> {
    for lang in &policy.languages {
        match a
            .descriptor
            .languages
            .iter()
            .find(|t| language_matches(lang, t))
        {
            Some(tag) => out.push(Reason::new(
                ReasonCode::PolicyLanguage,
                format!("language {lang} supported ({tag})"),
            )),
            None => return Err(ReasonCode::PolicyLanguage),
        }
    }
    if !policy.status.is_empty() {
        match a
            .descriptor
            .status
            .as_deref()
            .filter(|s| policy.status.iter().any(|p| p == s))
        {
            Some(s) => out.push(Reason::new(ReasonCode::PolicyStatus, format!("status {s}"))),
            None => return Err(ReasonCode::PolicyStatus),
        }
    }
    if !policy.protocols.is_empty() {
        let offered = protocols(a.descriptor, a.document);
        match policy.protocols.iter().find(|p| offered.contains(*p)) {
            Some(p) => out.push(Reason::new(
                ReasonCode::PolicyProtocol,
                format!("offers {p}"),
            )),
            None => return Err(ReasonCode::PolicyProtocol),
        }
    }
    if !policy.interfaces.is_empty() {
        let offered = interfaces(a.descriptor, a.document);
        match policy.interfaces.iter().find(|i| offered.contains(*i)) {
            Some(i) => out.push(Reason::new(
                ReasonCode::PolicyInterface,
                format!("offers the {i} interface"),
            )),
            None => return Err(ReasonCode::PolicyInterface),
        }
    }
    Ok(())
}

/// The terms of use the document declares: jurisdiction and price.
fn check_terms(policy: &Policy, a: &Agent<'_>, out: &mut Vec<Reason>) -> Result<(), ReasonCode> {
    if !policy.jurisdiction.is_empty() {
        let declared = jurisdictions(a.descriptor, a.document);
        if declared.is_empty() || !declared.iter().all(|j| policy.jurisdiction.contains(j)) {
            return Err(ReasonCode::PolicyJurisdiction);
        }
        out.push(Reason::new(
            ReasonCode::PolicyJurisdiction,
            format!(
                "declares {}, within {}",
                declared.join(", "),
                policy.jurisdiction.join(", ")
            ),
        ));
    }
    if let Some(max) = &policy.max_price {
        let prices = prices(a.descriptor, a.document, a.intent_capabilities);
        if prices.is_empty() {
            return Err(ReasonCode::PolicyMaxPrice);
        }
        let mut details = Vec::new();
        for price in &prices {
            details.push(price.within(max).ok_or(ReasonCode::PolicyMaxPrice)?);
        }
        details.dedup();
        out.push(Reason::new(ReasonCode::PolicyMaxPrice, details.join("; ")));
    }
    Ok(())
}

/// The terms about the service as it runs: found alive recently, and the
/// latency it declares.
fn check_observed(policy: &Policy, a: &Agent<'_>, out: &mut Vec<Reason>) -> Result<(), ReasonCode> {
    if let Some(within) = policy.alive_within {
        match a
            .liveness
            .filter(|l| l.alive_since(a.now.saturating_sub(within)))
        {
            Some(l) => out.push(Reason::new(
                ReasonCode::PolicyAlive,
                format!(
                    "found alive over {} {} s ago ({} ms), within {within} s",
                    l.protocol.as_str(),
                    a.now.saturating_sub(l.checked_at),
                    l.rtt_ms
                ),
            )),
            None => return Err(ReasonCode::PolicyAlive),
        }
    }
    if let Some(max) = policy.max_latency_ms {
        match latency_ms(a.descriptor, a.document).filter(|ms| *ms <= max as f64) {
            Some(ms) => out.push(Reason::new(
                ReasonCode::PolicyMaxLatency,
                format!("declares {ms} ms ≤ {max} ms"),
            )),
            None => return Err(ReasonCode::PolicyMaxLatency),
        }
    }
    Ok(())
}

/// Strings of a member that may be one string or an array of them.
fn string_or_strings(v: Option<&Value>) -> Vec<String> {
    match v {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    }
}

/// The scheme of an absolute URL, lower-case.
fn scheme(url: &str) -> Option<String> {
    let (scheme, _) = url.split_once("://")?;
    (!scheme.is_empty()
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c)))
    .then(|| scheme.to_ascii_lowercase())
}

/// The protocols an agent offers (see the module table).
pub(super) fn protocols(d: &Descriptor, doc: &Value) -> BTreeSet<String> {
    let mut out: BTreeSet<String> = string_or_strings(doc.get("protocols"))
        .into_iter()
        .map(|p| p.trim().to_lowercase())
        .collect();
    match d.format {
        DocumentFormat::Aidip => {
            out.insert("aidip".into());
            out.extend(d.endpoint.as_deref().and_then(scheme));
        }
        DocumentFormat::Adp => {
            out.insert("adp".into());
            for block in ["endpoints", "interfaces"] {
                if let Some(Value::Object(m)) = doc.get(block) {
                    out.extend(m.values().filter_map(Value::as_str).filter_map(scheme));
                }
            }
        }
        other => {
            out.insert(match other {
                DocumentFormat::McpRegistry => "mcp".into(),
                f => f.as_str().into(),
            });
            out.extend(d.endpoint.as_deref().and_then(scheme));
        }
    }
    out
}

/// The interfaces an agent offers (see the module table).
pub(super) fn interfaces(d: &Descriptor, doc: &Value) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    match doc.get("interfaces") {
        Some(Value::Object(m)) => out.extend(m.keys().cloned()),
        other => out.extend(string_or_strings(other)),
    }
    if d.format == DocumentFormat::Adp {
        for cap in doc
            .get("capabilities")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            out.extend(string_or_strings(cap.get("interfaces")));
        }
    } else if out.is_empty() {
        out.insert("api".into());
    }
    out.into_iter().map(|i| i.trim().to_lowercase()).collect()
}

/// The jurisdictions an agent declares, upper-case, sorted.
pub(super) fn jurisdictions(d: &Descriptor, doc: &Value) -> Vec<String> {
    let mut raw = string_or_strings(doc.get("jurisdiction"));
    if raw.is_empty() && d.format == DocumentFormat::Adp {
        raw = string_or_strings(doc.get("policies").and_then(|p| p.get("jurisdiction")));
    }
    let set: BTreeSet<String> = raw
        .iter()
        .map(|j| j.trim().to_ascii_uppercase())
        .filter(|j| !j.is_empty())
        .collect();
    set.into_iter().collect()
}

/// The declared latency, in milliseconds.
pub(super) fn latency_ms(d: &Descriptor, doc: &Value) -> Option<f64> {
    let direct = doc.get("latency_ms").and_then(Value::as_f64);
    let adp = || {
        (d.format == DocumentFormat::Adp)
            .then(|| doc.get("availability")?.get("latency_ms")?.as_f64())
            .flatten()
    };
    direct
        .or_else(adp)
        .filter(|ms| ms.is_finite() && *ms >= 0.0)
}

/// A declared price.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Price {
    /// Free of charge.
    Free,
    /// An amount per call, in a currency when one is given.
    PerCall {
        amount: f64,
        currency: Option<String>,
    },
    /// A pricing the checks cannot compare (a subscription, no amount).
    Unknown,
}

impl Price {
    /// Reads one pricing value (see the module documentation).
    pub(super) fn of(v: &Value) -> Self {
        if let Some(amount) = v.as_f64() {
            return Self::per_call(amount, None);
        }
        let model = v
            .get("model")
            .and_then(Value::as_str)
            .map(str::to_lowercase);
        if model.as_deref() == Some("free") {
            return Self::Free;
        }
        let details = v.get("details");
        let pick = |name: &str| {
            v.get(name)
                .or_else(|| details.and_then(|d| d.get(name)))
                .cloned()
        };
        let amount = pick("amount")
            .or_else(|| pick("price"))
            .and_then(|a| a.as_f64());
        let currency = pick("currency")
            .as_ref()
            .and_then(Value::as_str)
            .map(|c| c.trim().to_ascii_uppercase());
        match (model.as_deref(), amount) {
            (None | Some("per_call" | "per_request" | "usage"), Some(a)) => {
                Self::per_call(a, currency)
            }
            _ => Self::Unknown,
        }
    }

    fn per_call(amount: f64, currency: Option<String>) -> Self {
        if !amount.is_finite() || amount < 0.0 {
            Self::Unknown
        } else if amount == 0.0 {
            Self::Free
        } else {
            Self::PerCall { amount, currency }
        }
    }

    /// What to say when this price is within `max`; `None` when it is not.
    fn within(&self, max: &MaxPrice) -> Option<String> {
        let bound = match &max.currency {
            Some(c) => format!("{} {c}", max.amount),
            None => max.amount.to_string(),
        };
        match self {
            Self::Free => Some(format!("free ≤ {bound}")),
            Self::Unknown => None,
            Self::PerCall { amount, currency } => {
                if let Some(wanted) = &max.currency {
                    if currency.as_ref() != Some(wanted) {
                        return None;
                    }
                }
                (*amount <= max.amount).then(|| match currency {
                    Some(c) => format!("{amount} {c} per call ≤ {bound}"),
                    None => format!("{amount} per call ≤ {bound}"),
                })
            }
        }
    }
}

/// The prices that must be within `max_price` (see the module table).
pub(super) fn prices(d: &Descriptor, doc: &Value, intent_capabilities: &[String]) -> Vec<Price> {
    match d.format {
        DocumentFormat::Aidip => doc.get("pricing").map(Price::of).into_iter().collect(),
        DocumentFormat::A2a
        | DocumentFormat::Ard
        | DocumentFormat::DnsAid
        | DocumentFormat::Aid
        | DocumentFormat::McpRegistry => Vec::new(),
        DocumentFormat::Adp => {
            let caps: Vec<&Value> = doc
                .get("capabilities")
                .and_then(Value::as_array)
                .map(|c| c.iter().collect())
                .unwrap_or_default();
            let named: Vec<&Value> = caps
                .iter()
                .copied()
                .filter(|c| {
                    c.get("id")
                        .and_then(Value::as_str)
                        .and_then(descriptor::normalise_term)
                        .is_some_and(|id| intent_capabilities.contains(&id))
                })
                .collect();
            let relevant = if named.is_empty() { caps } else { named };
            relevant
                .iter()
                .map(|c| c.get("pricing").map_or(Price::Unknown, Price::of))
                .collect()
        }
    }
}
