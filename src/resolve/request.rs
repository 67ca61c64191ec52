//! The `POST /resolve` request: its members, their bounds, and a parse
//! that reports every problem at its JSON pointer. An unknown member of
//! the request or of `policy` is refused, so that a misspelt policy term
//! never silently lets everything through; unknown members of `context`
//! (hints, not constraints) are ignored and listed in the answer.

use serde_json::{Map, Value};

use crate::aidip::FieldProblem;
use crate::descriptor;
use crate::trust::TrustLevel;

/// Longest intent, in bytes.
pub const MAX_INTENT_BYTES: usize = 1024;
/// Most candidates one request may ask for.
pub const MAX_TOP: usize = 50;
/// Candidates answered when `top` is absent.
pub const DEFAULT_TOP: usize = 10;
/// Most values in one policy or context array.
pub const MAX_POLICY_TERMS: usize = 32;
/// Longest value in a policy array (and of `context.domain`), in bytes.
pub const MAX_TERM_BYTES: usize = 128;
/// Longest `policy.alive_within`, seconds (a year).
pub const MAX_ALIVE_WITHIN: u64 = 365 * 24 * 3600;

/// Where a resolution looks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Scope {
    /// Only what this node holds (the default for `/resolve`).
    #[default]
    Local,
    /// Ask peers first, then resolve over everything held.
    Mesh,
}

/// A parsed, bounded `/resolve` request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ResolveRequest {
    /// The task, in natural language (at most [`MAX_INTENT_BYTES`]).
    pub intent: String,
    /// Ranking hints.
    pub context: Context,
    /// Hard constraints.
    pub policy: Policy,
    /// Most candidates answered, 1..=[`MAX_TOP`].
    pub top: usize,
    /// Local or mesh.
    pub scope: Scope,
}

/// `context`: hints that order candidates, never exclude them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Context {
    /// Preferred languages (`context.language`, `context.languages`),
    /// canonical BCP 47: agents supporting them are answered first.
    pub languages: Vec<String>,
    /// A subject area (`context.domain`, e.g. "legal"): its words join
    /// the intent's in the ranking.
    pub domain: Option<String>,
    /// Members that were not understood, by name.
    pub ignored: Vec<String>,
}

/// A price bound: an amount, in one currency or (without one) compared
/// as a bare amount.
#[derive(Debug, Clone, PartialEq)]
pub struct MaxPrice {
    /// The highest acceptable price per call.
    pub amount: f64,
    /// ISO 4217 code, upper-case; `None` compares amounts only.
    pub currency: Option<String>,
}

/// `policy`: every term is a hard constraint; an agent failing one is
/// never a candidate.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Policy {
    /// The lowest trust level accepted.
    pub min_trust: Option<TrustLevel>,
    /// The agent's DNS record (the `_agent` TXT RRset, a DNS-AID SVCB
    /// RRset) must have validated under DNSSEC (the `dnssec` evidence
    /// flag).
    pub dnssec_required: bool,
    /// Languages the agent must all support (canonical BCP 47; `zh`
    /// accepts `zh-Hant`).
    pub languages: Vec<String>,
    /// The agent must offer one of these protocols (lower-case).
    pub protocols: Vec<String>,
    /// The agent must offer one of these interfaces (lower-case).
    pub interfaces: Vec<String>,
    /// Every jurisdiction the agent declares must be one of these
    /// (upper-case); an agent that declares none fails.
    pub jurisdiction: Vec<String>,
    /// The highest per-call price accepted.
    pub max_price: Option<MaxPrice>,
    /// The highest declared latency accepted, in milliseconds.
    pub max_latency_ms: Option<u64>,
    /// The agent's status must be one of these (lower-case).
    pub status: Vec<String>,
    /// Agent ids never answered.
    pub exclude: Vec<String>,
    /// The agent's last liveness probe here found it `alive` within this
    /// many seconds.
    pub alive_within: Option<u64>,
    /// Whether the intent's text may be sent to other nodes.
    pub share_intent: bool,
}

impl Policy {
    /// How many terms constrain candidates (`share_intent` aside).
    pub fn term_count(&self) -> usize {
        usize::from(self.min_trust.is_some())
            + usize::from(self.dnssec_required)
            + usize::from(!self.languages.is_empty())
            + usize::from(!self.protocols.is_empty())
            + usize::from(!self.interfaces.is_empty())
            + usize::from(!self.jurisdiction.is_empty())
            + usize::from(self.max_price.is_some())
            + usize::from(self.max_latency_ms.is_some())
            + usize::from(!self.status.is_empty())
            + usize::from(!self.exclude.is_empty())
            + usize::from(self.alive_within.is_some())
    }
}

const REQUEST_MEMBERS: &[&str] = &["intent", "context", "policy", "top", "scope"];
const POLICY_MEMBERS: &[&str] = &[
    "min_trust",
    "dnssec_required",
    "languages",
    "protocols",
    "interfaces",
    "jurisdiction",
    "max_price",
    "max_latency_ms",
    "status",
    "exclude",
    "alive_within",
    "share_intent",
];

/// Collects problems while a request is read.
#[derive(Default)]
struct Problems(Vec<FieldProblem>);

impl Problems {
    fn push(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.0.push(FieldProblem {
            field: field.into(),
            message: message.into(),
        });
    }

    /// `value` as an object, or a problem.
    fn object<'a>(&mut self, value: &'a Value, field: &str) -> Option<&'a Map<String, Value>> {
        let object = value.as_object();
        if object.is_none() {
            self.push(field, "must be a JSON object");
        }
        object
    }

    fn bool(&mut self, value: &Value, field: &str) -> bool {
        value.as_bool().unwrap_or_else(|| {
            self.push(field, "must be true or false");
            false
        })
    }

    /// An array of at most [`MAX_POLICY_TERMS`] non-empty strings of at
    /// most [`MAX_TERM_BYTES`] bytes; with `non_empty`, at least one.
    fn strings(&mut self, value: &Value, field: &str, non_empty: bool) -> Vec<String> {
        let Some(items) = value.as_array() else {
            self.push(field, "must be an array of strings");
            return Vec::new();
        };
        if items.len() > MAX_POLICY_TERMS {
            self.push(
                field,
                format!(
                    "has {} values; at most {MAX_POLICY_TERMS} are allowed",
                    items.len()
                ),
            );
            return Vec::new();
        }
        if non_empty && items.is_empty() {
            self.push(
                field,
                "must list at least one value (an empty list would accept no agent)",
            );
        }
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            match item.as_str().map(str::trim) {
                Some(s) if !s.is_empty() && s.len() <= MAX_TERM_BYTES => out.push(s.to_owned()),
                Some(_) => self.push(
                    format!("{field}/{i}"),
                    format!("must be a non-empty string of at most {MAX_TERM_BYTES} bytes"),
                ),
                None => self.push(format!("{field}/{i}"), "must be a string"),
            }
        }
        out
    }

    /// Language tags, canonical; each malformed one is a problem.
    fn languages(&mut self, raw: &[String], field: &str) -> Vec<String> {
        let mut ok = Vec::new();
        for (i, tag) in raw.iter().enumerate() {
            match descriptor::normalise_language(tag) {
                Some(_) => ok.push(tag.as_str()),
                None => self.push(
                    format!("{field}/{i}"),
                    format!("{tag:?} is not a well-formed BCP 47 language tag"),
                ),
            }
        }
        descriptor::normalise_languages(ok).unwrap_or_default()
    }
}

impl ResolveRequest {
    /// Reads a request body, reporting every problem found (each at its
    /// JSON pointer).
    ///
    /// # Errors
    /// The problems, when there is at least one.
    pub fn parse(body: &Value) -> Result<Self, Vec<FieldProblem>> {
        let mut p = Problems::default();
        let Some(members) = p.object(body, "") else {
            return Err(p.0);
        };
        let mut req = Self {
            top: DEFAULT_TOP,
            ..Self::default()
        };
        for name in members.keys() {
            if !REQUEST_MEMBERS.contains(&name.as_str()) {
                p.push(
                    format!("/{name}"),
                    format!(
                        "unknown member {name:?}; expected {}",
                        REQUEST_MEMBERS.join(", ")
                    ),
                );
            }
        }
        match members.get("intent") {
            None | Some(Value::Null) => p.push("/intent", "\"intent\" is a required property"),
            Some(Value::String(s)) if s.trim().is_empty() => {
                p.push("/intent", "must not be empty");
            }
            Some(Value::String(s)) if s.len() > MAX_INTENT_BYTES => p.push(
                "/intent",
                format!(
                    "is {} bytes long; at most {MAX_INTENT_BYTES} are allowed",
                    s.len()
                ),
            ),
            Some(Value::String(s)) => req.intent = s.trim().to_owned(),
            Some(_) => p.push("/intent", "must be a string"),
        }
        if let Some(top) = members.get("top") {
            match top.as_u64() {
                Some(n) if (1..=MAX_TOP as u64).contains(&n) => req.top = n as usize,
                _ => p.push(
                    "/top",
                    format!("must be a whole number between 1 and {MAX_TOP}"),
                ),
            }
        }
        match members.get("scope").map(|s| (s, s.as_str())) {
            None => {}
            Some((_, Some("local"))) => req.scope = Scope::Local,
            Some((_, Some("mesh"))) => req.scope = Scope::Mesh,
            Some((v, _)) => p.push("/scope", format!("must be \"local\" or \"mesh\", got {v}")),
        }
        if let Some(context) = members.get("context") {
            req.context = parse_context(&mut p, context);
        }
        if let Some(policy) = members.get("policy") {
            req.policy = parse_policy(&mut p, policy);
        }
        if p.0.is_empty() {
            Ok(req)
        } else {
            Err(p.0)
        }
    }
}

fn parse_context(p: &mut Problems, value: &Value) -> Context {
    let mut out = Context::default();
    let Some(members) = p.object(value, "/context") else {
        return out;
    };
    let mut raw_languages = Vec::new();
    for (name, v) in members {
        match name.as_str() {
            "language" => match v.as_str() {
                Some(tag) => {
                    if descriptor::normalise_language(tag).is_some() {
                        raw_languages.push(tag.to_owned());
                    } else {
                        p.push(
                            "/context/language",
                            format!("{tag:?} is not a well-formed BCP 47 language tag"),
                        );
                    }
                }
                None => p.push("/context/language", "must be a string"),
            },
            "languages" => {
                let tags = p.strings(v, "/context/languages", false);
                raw_languages.extend(p.languages(&tags, "/context/languages"));
            }
            "domain" => match v.as_str().map(str::trim) {
                Some(d) if d.len() <= MAX_TERM_BYTES => {
                    out.domain = Some(d.to_owned()).filter(|d| !d.is_empty());
                }
                _ => p.push(
                    "/context/domain",
                    format!("must be a string of at most {MAX_TERM_BYTES} bytes"),
                ),
            },
            other => out.ignored.push(other.to_owned()),
        }
    }
    out.languages = descriptor::normalise_languages(raw_languages.iter().map(String::as_str))
        .unwrap_or_default();
    out
}

fn parse_policy(p: &mut Problems, value: &Value) -> Policy {
    let mut out = Policy::default();
    let Some(members) = p.object(value, "/policy") else {
        return out;
    };
    for (name, v) in members {
        let field = format!("/policy/{name}");
        match name.as_str() {
            "min_trust" => match v.as_str().map(str::parse::<TrustLevel>) {
                Some(Ok(level)) => out.min_trust = Some(level),
                Some(Err(message)) => p.push(field, message),
                None => p.push(field, "must be a trust level string"),
            },
            "dnssec_required" => out.dnssec_required = p.bool(v, &field),
            "share_intent" => out.share_intent = p.bool(v, &field),
            "languages" => {
                let tags = p.strings(v, &field, false);
                out.languages = p.languages(&tags, &field);
            }
            "protocols" => out.protocols = lower(p.strings(v, &field, true)),
            "interfaces" => out.interfaces = lower(p.strings(v, &field, true)),
            "status" => out.status = lower(p.strings(v, &field, true)),
            "exclude" => out.exclude = p.strings(v, &field, false),
            "jurisdiction" => {
                let codes = p.strings(v, &field, true);
                for (i, code) in codes.iter().enumerate() {
                    if !is_jurisdiction_code(code) {
                        p.push(
                            format!("{field}/{i}"),
                            format!(
                                "{code:?} is not a jurisdiction code (ISO 3166 \
                                 \"DE\", \"US-CA\", or a region such as \"EU\")"
                            ),
                        );
                    }
                }
                out.jurisdiction = codes.iter().map(|c| c.to_ascii_uppercase()).collect();
            }
            "max_price" => out.max_price = parse_price(p, v, &field),
            "max_latency_ms" => match v.as_u64() {
                Some(ms) if ms > 0 => out.max_latency_ms = Some(ms),
                _ => p.push(field, "must be a positive whole number of milliseconds"),
            },
            "alive_within" => match v.as_u64() {
                Some(secs) if (1..=MAX_ALIVE_WITHIN).contains(&secs) => {
                    out.alive_within = Some(secs);
                }
                _ => p.push(
                    field,
                    format!("must be a whole number of seconds from 1 to {MAX_ALIVE_WITHIN}"),
                ),
            },
            other => p.push(
                field,
                format!(
                    "unknown policy member {other:?}; expected one of {}",
                    POLICY_MEMBERS.join(", ")
                ),
            ),
        }
    }
    out
}

fn lower(v: Vec<String>) -> Vec<String> {
    let mut v: Vec<String> = v.into_iter().map(|s| s.to_lowercase()).collect();
    v.sort();
    v.dedup();
    v
}

/// Two to sixteen ASCII letters, digits or `-`, starting with a letter.
fn is_jurisdiction_code(code: &str) -> bool {
    (2..=16).contains(&code.len())
        && code.starts_with(|c: char| c.is_ascii_alphabetic())
        && code.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
}

/// `max_price`: a number (amount only) or `{"amount": n, "currency": "USD"}`.
fn parse_price(p: &mut Problems, v: &Value, field: &str) -> Option<MaxPrice> {
    let amount_ok = |n: f64| n.is_finite() && n >= 0.0;
    match v {
        Value::Number(n) => match n.as_f64().filter(|n| amount_ok(*n)) {
            Some(amount) => Some(MaxPrice {
                amount,
                currency: None,
            }),
            None => {
                p.push(field, "must not be negative");
                None
            }
        },
        Value::Object(m) => {
            for name in m
                .keys()
                .filter(|k| !matches!(k.as_str(), "amount" | "currency"))
            {
                p.push(
                    format!("{field}/{name}"),
                    format!("unknown member {name:?}; expected amount, currency"),
                );
            }
            let amount = m
                .get("amount")
                .and_then(Value::as_f64)
                .filter(|n| amount_ok(*n));
            if amount.is_none() {
                p.push(format!("{field}/amount"), "must be a number, not negative");
            }
            let currency = match m.get("currency") {
                None => None,
                Some(Value::String(c))
                    if c.len() == 3 && c.chars().all(|c| c.is_ascii_alphabetic()) =>
                {
                    Some(c.to_ascii_uppercase())
                }
                Some(_) => {
                    p.push(
                        format!("{field}/currency"),
                        "must be an ISO 4217 code such as \"USD\"",
                    );
                    None
                }
            };
            amount.map(|amount| MaxPrice { amount, currency })
        }
        _ => {
            p.push(
                field,
                "must be a number or {\"amount\": number, \"currency\": \"USD\"}",
            );
            None
        }
    }
}
