//! The A2A Agent Card (A2A 1.0.1 `AgentCard`, and the 0.2.x / 0.3 shape
//! before it) read into an [`AgentCard`] and mapped into a [`Descriptor`].
//! The card's JWS signatures live in [`signing`] (re-exported here).
//!
//! The crawler fetches `/.well-known/agent-card.json` ([`WELL_KNOWN_PATH`])
//! or the 0.2.x `/.well-known/agent.json` ([`LEGACY_WELL_KNOWN_PATH`],
//! which is also ADP's path: [`classify`] tells the two apart by content)
//! and hands the parsed JSON to [`parse_card`]. Both card shapes are read:
//! a card with `supportedInterfaces` is a 1.0 card ([`SpecVersion::V1`]),
//! even when it also carries the 0.3 members (the hybrid a2a-python
//! serves); one with a top-level `url` instead is a 0.x card
//! ([`SpecVersion::V0`]), whose `url` / `preferredTransport` /
//! `additionalInterfaces` become the same [`Interface`] list.
//!
//! Unknown members are ignored (A2A §5.7). Members this module reads must
//! have their type; counts are bounded (over a bound: refused); text for
//! people (names, descriptions, examples) is cut to the formats' bounds,
//! while identifiers and URLs longer than [`MAX_VALUE_CHARS`] are refused,
//! since a cut one would name something else.

pub mod binding;
pub mod signing;

use serde_json::{Map, Value};

use crate::descriptor::{Descriptor, DocumentFormat};
use crate::formats::{bounded, terms, FormatError, MAX_DESCRIPTION_CHARS, MAX_NAME_CHARS};
use crate::trust::Reason;

pub use binding::{RpcInterface, RpcVersion};
pub use signing::{
    jwks_of, parse_protected, sign_card, sign_detached, signing_key, signing_payload,
    signing_payload_literal, signing_payload_v1, verify_jws, verify_signature, CardSignature,
    ProtectedHeader, SignatureError, SignerKey,
};

/// Where a domain publishes its Agent Card (A2A 1.0 §8.2, 0.3 and later).
pub const WELL_KNOWN_PATH: &str = "/.well-known/agent-card.json";
/// Where A2A 0.2.x put the card: the same path as ADP's `agent.json`.
pub const LEGACY_WELL_KNOWN_PATH: &str = "/.well-known/agent.json";

/// Most skills read from one card.
pub const MAX_SKILLS: usize = 256;
/// Most interfaces of one card (after the 0.x members are mapped).
pub const MAX_INTERFACES: usize = 32;
/// Most signatures on one card.
pub const MAX_SIGNATURES: usize = 8;
/// Most tags of one skill.
pub const MAX_TAGS_PER_SKILL: usize = 64;
/// Most examples of one skill.
pub const MAX_EXAMPLES_PER_SKILL: usize = 32;
/// Most media types in one list of input or output modes.
pub const MAX_MODES: usize = 32;
/// Most entries of `securitySchemes`.
pub const MAX_SECURITY_SCHEMES: usize = 32;
/// Longest identifier, URL, version or tag read, in characters.
pub const MAX_VALUE_CHARS: usize = 2048;

/// What a JSON document served at an `agent.json` path is, by content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// An ADP `agent.json` (`protocol` starts with `ADP/`).
    Adp,
    /// An A2A Agent Card (`skills` array, `capabilities` object, and
    /// `supportedInterfaces` array or `url` string).
    A2a,
    /// Neither.
    Unknown,
}

/// Tells an ADP document from an A2A card by content (both may be served
/// at `/.well-known/agent.json`).
pub fn classify(doc: &Value) -> Shape {
    let Some(obj) = doc.as_object() else {
        return Shape::Unknown;
    };
    let protocol = obj.get("protocol").and_then(Value::as_str);
    if protocol.is_some_and(|p| p.starts_with("ADP/")) {
        return Shape::Adp;
    }
    let skills = obj.get("skills").is_some_and(Value::is_array);
    let capabilities = obj.get("capabilities").is_some_and(Value::is_object);
    let reachable = obj.get("supportedInterfaces").is_some_and(Value::is_array)
        || obj.get("url").is_some_and(Value::is_string);
    if skills && capabilities && reachable {
        Shape::A2a
    } else {
        Shape::Unknown
    }
}

/// Which family of the A2A specification a card follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpecVersion {
    /// 1.0: `supportedInterfaces`.
    V1,
    /// 0.2.x / 0.3: a top-level `url` (with `protocolVersion`,
    /// `preferredTransport`, `additionalInterfaces`).
    V0,
}

/// The parts of an Agent Card agentmesh uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentCard {
    /// The specification family.
    pub spec: SpecVersion,
    /// Display name (cut to [`MAX_NAME_CHARS`]).
    pub name: String,
    /// Description (cut to [`MAX_DESCRIPTION_CHARS`]).
    pub description: String,
    /// The agent's own version.
    pub version: String,
    /// Who runs the agent.
    pub provider: Option<Provider>,
    /// `documentationUrl`.
    pub documentation_url: Option<String>,
    /// Where to reach the agent, the preferred interface first.
    pub interfaces: Vec<Interface>,
    /// What it offers.
    pub skills: Vec<Skill>,
    /// `defaultInputModes` (media types).
    pub default_input_modes: Vec<String>,
    /// `defaultOutputModes` (media types).
    pub default_output_modes: Vec<String>,
    /// `securitySchemes`, in document order.
    pub security_schemes: Vec<SecurityScheme>,
    /// The card's signatures (checked by [`verify_signature`]).
    pub signatures: Vec<CardSignature>,
}

/// `provider`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Provider {
    /// `organization`.
    pub organization: String,
    /// `url`.
    pub url: String,
}

/// One way to reach the agent (`AgentInterface`, or a 0.x `url` with its
/// transport).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interface {
    /// The endpoint (an URL; `host:port` for gRPC).
    pub url: String,
    /// `JSONRPC`, `GRPC`, `HTTP+JSON` or a custom binding (0.x:
    /// `preferredTransport` / `transport`, `JSONRPC` when absent).
    pub protocol_binding: String,
    /// The A2A version spoken there; for a 0.x card the card's
    /// `protocolVersion`, absent before 0.2.5.
    pub protocol_version: Option<String>,
    /// A 1.0 interface's `tenant`, which requests to it must carry
    /// (0.x: none).
    pub tenant: Option<String>,
}

/// `AgentSkill`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    /// `id`.
    pub id: String,
    /// `name` (cut to [`MAX_NAME_CHARS`]).
    pub name: String,
    /// `description` (cut to [`MAX_DESCRIPTION_CHARS`]).
    pub description: String,
    /// `tags`.
    pub tags: Vec<String>,
    /// `examples` (each cut to [`MAX_DESCRIPTION_CHARS`]).
    pub examples: Vec<String>,
}

/// One entry of `securitySchemes`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecurityScheme {
    /// The scheme's name (the map key, which security requirements name).
    pub name: String,
    /// What kind of scheme it is.
    pub kind: SchemeKind,
}

/// The kind of a security scheme: the 1.0 oneof wrapper
/// (`apiKeySecurityScheme`, ...) or the 0.x `type` (`apiKey`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemeKind {
    /// An API key.
    ApiKey,
    /// HTTP authentication (`bearer`, `basic`, ...).
    Http,
    /// OAuth 2.0.
    OAuth2,
    /// OpenID Connect.
    OpenIdConnect,
    /// Mutual TLS.
    MutualTls,
    /// Neither form names a kind this code knows.
    Other,
}

impl SchemeKind {
    /// The descriptor's `auth` name (`apikey`, `http`, `oauth2`,
    /// `openidconnect`, `mtls`); `None` for [`SchemeKind::Other`].
    pub fn auth_name(self) -> Option<&'static str> {
        match self {
            Self::ApiKey => Some("apikey"),
            Self::Http => Some("http"),
            Self::OAuth2 => Some("oauth2"),
            Self::OpenIdConnect => Some("openidconnect"),
            Self::MutualTls => Some("mtls"),
            Self::Other => None,
        }
    }

    /// The kind a scheme object declares: a 1.0 wrapper member first (a
    /// hybrid card carries both forms), then the 0.x `type`.
    fn of(scheme: &Map<String, Value>) -> Self {
        const WRAPPERS: [(&str, SchemeKind); 5] = [
            ("apiKeySecurityScheme", SchemeKind::ApiKey),
            ("httpAuthSecurityScheme", SchemeKind::Http),
            ("oauth2SecurityScheme", SchemeKind::OAuth2),
            ("openIdConnectSecurityScheme", SchemeKind::OpenIdConnect),
            ("mtlsSecurityScheme", SchemeKind::MutualTls),
        ];
        if let Some((_, kind)) = WRAPPERS
            .iter()
            .find(|(key, _)| scheme.get(*key).is_some_and(|v| !v.is_null()))
        {
            return *kind;
        }
        match scheme.get("type").and_then(Value::as_str) {
            Some(t) if t.eq_ignore_ascii_case("apiKey") => Self::ApiKey,
            Some(t) if t.eq_ignore_ascii_case("http") => Self::Http,
            Some(t) if t.eq_ignore_ascii_case("oauth2") => Self::OAuth2,
            Some(t) if t.eq_ignore_ascii_case("openIdConnect") => Self::OpenIdConnect,
            Some(t) if t.eq_ignore_ascii_case("mutualTLS") => Self::MutualTls,
            _ => Self::Other,
        }
    }
}

/// Reads an Agent Card: the required members of A2A 1.0 (`name`,
/// `description`, `version`, `supportedInterfaces`, `capabilities`,
/// `defaultInputModes`, `defaultOutputModes`, `skills`) or, for a card
/// without `supportedInterfaces`, of 0.2.x (the same with `url` in place of
/// `supportedInterfaces`; `protocolVersion` is not required, 0.2.0 to 0.2.4
/// had none).
///
/// Required arrays may be empty (the spec's own examples and the SDKs'
/// output have `"skills": []`), except the interfaces: a card with no way
/// to reach the agent is refused.
///
/// # Errors
/// [`Reason::CardInvalid`], the message naming the member by JSON pointer
/// (`/skills/0/id`): a required member missing, a member of the wrong
/// type, a count over its bound, an identifier over [`MAX_VALUE_CHARS`],
/// a signature whose `protected` header does not decode.
pub fn parse_card(doc: &Value) -> Result<AgentCard, FormatError> {
    if classify(doc) == Shape::Adp {
        return Err(invalid(
            "an ADP document (`protocol` ADP/...), not an A2A Agent Card",
        ));
    }
    let card = Obj::root(doc)?;
    let spec = if card.has("supportedInterfaces") {
        SpecVersion::V1
    } else {
        SpecVersion::V0
    };
    let name = card.string("name", Long::Cut(MAX_NAME_CHARS))?;
    let description = card.string("description", Long::Cut(MAX_DESCRIPTION_CHARS))?;
    let version = card.string("version", Long::Refuse)?;
    card.object("capabilities")?;
    let default_input_modes = card.strings("defaultInputModes", MAX_MODES, Long::Refuse)?;
    let default_output_modes = card.strings("defaultOutputModes", MAX_MODES, Long::Refuse)?;
    let interfaces = match spec {
        SpecVersion::V1 => interfaces_v1(&card)?,
        SpecVersion::V0 => interfaces_v0(&card)?,
    };
    let provider = match card.opt_object("provider")? {
        Some(p) => Some(Provider {
            organization: p.string("organization", Long::Cut(MAX_NAME_CHARS))?,
            url: p.string("url", Long::Refuse)?,
        }),
        None => None,
    };
    let documentation_url = card.opt_string("documentationUrl", Long::Refuse)?;
    let skills = card
        .items("skills", MAX_SKILLS)?
        .iter()
        .map(skill)
        .collect::<Result<_, _>>()?;
    let security_schemes = security_schemes(&card)?;
    let signatures = match card.opt_items("signatures", MAX_SIGNATURES)? {
        Some(items) => items
            .iter()
            .map(signing::parse_signature)
            .collect::<Result<_, _>>()?,
        None => Vec::new(),
    };
    Ok(AgentCard {
        spec,
        name,
        description,
        version,
        provider,
        documentation_url,
        interfaces,
        skills,
        default_input_modes,
        default_output_modes,
        security_schemes,
        signatures,
    })
}

impl AgentCard {
    /// The normalised descriptor under `id`: the skills' ids as
    /// capabilities and their tags as tags, the first interface's URL as
    /// endpoint, the provider's organization as publisher, the first
    /// security scheme of a known kind as `auth`. Cards declare no natural
    /// languages, so `languages` is empty.
    pub fn to_descriptor(&self, id: &str) -> Descriptor {
        let name = bounded(self.name.trim(), MAX_NAME_CHARS);
        Descriptor {
            id: id.to_owned(),
            name: if name.is_empty() { id.to_owned() } else { name },
            description: bounded(self.description.trim(), MAX_DESCRIPTION_CHARS),
            version: non_empty(&self.version),
            publisher: self
                .provider
                .as_ref()
                .and_then(|p| non_empty(&p.organization)),
            endpoint: self.interfaces.first().map(|i| i.url.clone()),
            capabilities: terms(self.skills.iter().map(|s| s.id.as_str())),
            tags: terms(
                self.skills
                    .iter()
                    .flat_map(|s| s.tags.iter().map(String::as_str)),
            ),
            languages: Vec::new(),
            status: None,
            auth: self
                .security_schemes
                .iter()
                .find_map(|s| s.kind.auth_name())
                .map(str::to_owned),
            format: DocumentFormat::A2a,
        }
    }
}

fn non_empty(text: &str) -> Option<String> {
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

/// `supportedInterfaces`: at least one, each with `url`, `protocolBinding`
/// and `protocolVersion`.
fn interfaces_v1(card: &Obj<'_>) -> Result<Vec<Interface>, FormatError> {
    let items = card.items("supportedInterfaces", MAX_INTERFACES)?;
    if items.is_empty() {
        return Err(invalid("/supportedInterfaces: no interface"));
    }
    items
        .iter()
        .map(|item| {
            Ok(Interface {
                url: item.url("url")?,
                protocol_binding: item.string("protocolBinding", Long::Refuse)?,
                protocol_version: Some(item.string("protocolVersion", Long::Refuse)?),
                tenant: item.opt_string("tenant", Long::Refuse)?,
            })
        })
        .collect()
}

/// The 0.x `url` (with `preferredTransport`, `JSONRPC` when absent) first,
/// then `additionalInterfaces` (`url` + `transport`), without repeats; all
/// at the card's `protocolVersion`.
fn interfaces_v0(card: &Obj<'_>) -> Result<Vec<Interface>, FormatError> {
    let protocol_version = card.opt_string("protocolVersion", Long::Refuse)?;
    let first = Interface {
        url: card.url("url")?,
        protocol_binding: card
            .opt_string("preferredTransport", Long::Refuse)?
            .unwrap_or_else(|| "JSONRPC".to_owned()),
        protocol_version: protocol_version.clone(),
        tenant: None,
    };
    let mut out = vec![first];
    for item in card
        .opt_items("additionalInterfaces", MAX_INTERFACES)?
        .unwrap_or_default()
    {
        let next = Interface {
            url: item.url("url")?,
            protocol_binding: item.string("transport", Long::Refuse)?,
            protocol_version: protocol_version.clone(),
            tenant: None,
        };
        if !out.contains(&next) {
            out.push(next);
        }
    }
    if out.len() > MAX_INTERFACES {
        return Err(invalid(format!(
            "/additionalInterfaces: more than {MAX_INTERFACES} interfaces"
        )));
    }
    Ok(out)
}

fn skill(item: &Obj<'_>) -> Result<Skill, FormatError> {
    Ok(Skill {
        id: item.string("id", Long::Refuse)?,
        name: item.string("name", Long::Cut(MAX_NAME_CHARS))?,
        description: item.string("description", Long::Cut(MAX_DESCRIPTION_CHARS))?,
        tags: item.strings("tags", MAX_TAGS_PER_SKILL, Long::Refuse)?,
        examples: item.opt_strings(
            "examples",
            MAX_EXAMPLES_PER_SKILL,
            Long::Cut(MAX_DESCRIPTION_CHARS),
        )?,
    })
}

fn security_schemes(card: &Obj<'_>) -> Result<Vec<SecurityScheme>, FormatError> {
    let Some(schemes) = card.opt_object("securitySchemes")? else {
        return Ok(Vec::new());
    };
    if schemes.map.len() > MAX_SECURITY_SCHEMES {
        return Err(invalid(format!(
            "{}: more than {MAX_SECURITY_SCHEMES} schemes",
            schemes.at
        )));
    }
    schemes
        .map
        .keys()
        .map(|name| {
            let scheme = schemes.object(name)?;
            if name.chars().count() > MAX_VALUE_CHARS {
                return Err(invalid(format!(
                    "{}: name longer than {MAX_VALUE_CHARS} characters",
                    scheme.at
                )));
            }
            Ok(SecurityScheme {
                name: name.clone(),
                kind: SchemeKind::of(scheme.map),
            })
        })
        .collect()
}

fn invalid(message: impl Into<String>) -> FormatError {
    FormatError::new(Reason::CardInvalid, message)
}

/// What to do with a string longer than its bound.
#[derive(Clone, Copy)]
enum Long {
    /// Keep its first characters (text for people).
    Cut(usize),
    /// Refuse it when over [`MAX_VALUE_CHARS`] (identifiers, URLs).
    Refuse,
}

impl Long {
    fn apply(self, text: &str, at: &str) -> Result<String, FormatError> {
        match self {
            Self::Cut(max) => Ok(bounded(text, max)),
            Self::Refuse if text.chars().count() > MAX_VALUE_CHARS => Err(invalid(format!(
                "{at}: longer than {MAX_VALUE_CHARS} characters"
            ))),
            Self::Refuse => Ok(text.to_owned()),
        }
    }
}

/// A JSON object being read, with its JSON pointer for messages. A member
/// that is `null` counts as absent.
struct Obj<'a> {
    map: &'a Map<String, Value>,
    at: String,
}

impl<'a> Obj<'a> {
    fn root(doc: &'a Value) -> Result<Self, FormatError> {
        Self::new(doc, String::new(), "the card")
    }

    fn new(value: &'a Value, at: String, what: &str) -> Result<Self, FormatError> {
        match value.as_object() {
            Some(map) => Ok(Self { map, at }),
            None => Err(invalid(format!("{}: {what} is not an object", shown(&at)))),
        }
    }

    /// The pointer of member `key` (RFC 6901 escapes).
    fn pointer(&self, key: &str) -> String {
        format!("{}/{}", self.at, key.replace('~', "~0").replace('/', "~1"))
    }

    fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    fn has(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    fn required(&self, key: &str) -> Result<&'a Value, FormatError> {
        self.get(key)
            .ok_or_else(|| invalid(format!("{}: required member missing", self.pointer(key))))
    }

    fn string(&self, key: &str, long: Long) -> Result<String, FormatError> {
        let at = self.pointer(key);
        match self.required(key)?.as_str() {
            Some(text) => long.apply(text, &at),
            None => Err(invalid(format!("{at}: not a string"))),
        }
    }

    fn opt_string(&self, key: &str, long: Long) -> Result<Option<String>, FormatError> {
        if self.has(key) {
            self.string(key, long).map(Some)
        } else {
            Ok(None)
        }
    }

    /// A required, non-empty URL-like string.
    fn url(&self, key: &str) -> Result<String, FormatError> {
        let url = self.string(key, Long::Refuse)?;
        if url.trim().is_empty() {
            return Err(invalid(format!("{}: empty", self.pointer(key))));
        }
        Ok(url)
    }

    fn object(&self, key: &str) -> Result<Obj<'a>, FormatError> {
        Self::new(self.required(key)?, self.pointer(key), "the member")
    }

    fn opt_object(&self, key: &str) -> Result<Option<Obj<'a>>, FormatError> {
        self.has(key).then(|| self.object(key)).transpose()
    }

    fn array(&self, key: &str, max: usize) -> Result<&'a Vec<Value>, FormatError> {
        let at = self.pointer(key);
        let Some(items) = self.required(key)?.as_array() else {
            return Err(invalid(format!("{at}: not an array")));
        };
        if items.len() > max {
            return Err(invalid(format!("{at}: more than {max} entries")));
        }
        Ok(items)
    }

    /// A required array of objects.
    fn items(&self, key: &str, max: usize) -> Result<Vec<Obj<'a>>, FormatError> {
        let at = self.pointer(key);
        self.array(key, max)?
            .iter()
            .enumerate()
            .map(|(i, v)| Self::new(v, format!("{at}/{i}"), "the entry"))
            .collect()
    }

    fn opt_items(&self, key: &str, max: usize) -> Result<Option<Vec<Obj<'a>>>, FormatError> {
        self.has(key).then(|| self.items(key, max)).transpose()
    }

    /// A required array of strings.
    fn strings(&self, key: &str, max: usize, long: Long) -> Result<Vec<String>, FormatError> {
        let at = self.pointer(key);
        self.array(key, max)?
            .iter()
            .enumerate()
            .map(|(i, v)| match v.as_str() {
                Some(text) => long.apply(text, &format!("{at}/{i}")),
                None => Err(invalid(format!("{at}/{i}: not a string"))),
            })
            .collect()
    }

    fn opt_strings(&self, key: &str, max: usize, long: Long) -> Result<Vec<String>, FormatError> {
        if self.has(key) {
            self.strings(key, max, long)
        } else {
            Ok(Vec::new())
        }
    }
}

/// A pointer for a message: the root pointer `""` shown as `/`.
fn shown(at: &str) -> &str {
    if at.is_empty() {
        "/"
    } else {
        at
    }
}

#[cfg(test)]
mod tests;
