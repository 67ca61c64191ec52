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

pub mod signing;

use serde_json::{Map, Value};

use crate::descriptor::{Descriptor, DocumentFormat};
use crate::formats::{bounded, terms, FormatError, MAX_DESCRIPTION_CHARS, MAX_NAME_CHARS};
use crate::verify::Reason;

pub use signing::{
    jwks_of, sign_card, signing_payload, signing_payload_literal, signing_payload_v1,
    verify_signature, CardSignature, ProtectedHeader, SignatureError,
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
mod tests {
    use super::*;
    use serde_json::json;

    /// The notes' minimal 1.0 card: every required member, non-empty arrays.
    pub(super) fn minimal_v1() -> Value {
        json!({"name": "Echo Agent", "description": "Echoes text back.", "version": "1.0.0",
            "supportedInterfaces": [{"url": "https://echo.example.com/a2a",
                "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
            "capabilities": {}, "defaultInputModes": ["text/plain"],
            "defaultOutputModes": ["text/plain"],
            "skills": [{"id": "echo", "name": "Echo", "description": "Returns the input text.",
                "tags": ["echo"]}]})
    }

    /// A 0.2.5-shaped card: `url`, `protocolVersion`, `preferredTransport`,
    /// `additionalInterfaces` (repeating the main one), a `type` scheme.
    fn legacy_v0() -> Value {
        json!({"name": "Weather", "description": "Forecasts.", "version": "0.4.1",
            "url": "https://weather.example.com/a2a", "protocolVersion": "0.2.5",
            "preferredTransport": "JSONRPC",
            "additionalInterfaces": [
                {"url": "https://weather.example.com/a2a", "transport": "JSONRPC"},
                {"url": "https://weather.example.com/rest", "transport": "HTTP+JSON"}],
            "provider": {"organization": "Example Weather", "url": "https://example.com"},
            "capabilities": {"streaming": true, "stateTransitionHistory": false},
            "securitySchemes": {"key": {"type": "apiKey", "in": "header", "name": "X-Key"}},
            "security": [{"key": []}],
            "defaultInputModes": ["text/plain"], "defaultOutputModes": ["application/json"],
            "skills": [{"id": "Forecast", "name": "Forecast", "description": "Daily forecast.",
                "tags": ["Weather", "forecast"], "examples": ["Rain in Oslo tomorrow?"]}]})
    }

    /// What a2a-python serves: the 1.0 members merged with the 0.3 ones.
    pub(super) fn python_hybrid() -> Value {
        json!({"name": "Complex Agent", "description": "Agent with many interfaces",
            "version": "1.2.3",
            "supportedInterfaces": [
                {"url": "http://jsonrpc.v10.com", "protocolBinding": "JSONRPC",
                    "protocolVersion": "1.0"},
                {"url": "http://jsonrpc.v03.com", "protocolBinding": "JSONRPC",
                    "protocolVersion": "0.3.0"},
                {"url": "http://grpc.v03.com", "protocolBinding": "GRPC",
                    "protocolVersion": "0.3.0"}],
            "url": "http://jsonrpc.v03.com", "preferredTransport": "JSONRPC",
            "protocolVersion": "0.3.0",
            "additionalInterfaces": [{"url": "http://grpc.v03.com", "transport": "GRPC"}],
            "capabilities": {"extensions": [{"uri": "https://example.com/ext", "required": false}]},
            "securitySchemes": {"bearer": {
                "httpAuthSecurityScheme": {"scheme": "Bearer"}, "type": "http", "scheme": "Bearer"}},
            "securityRequirements": [{"schemes": {"bearer": {"list": []}}}],
            "security": [{"bearer": []}],
            "defaultInputModes": [], "defaultOutputModes": [], "skills": []})
    }

    fn refused(doc: &Value) -> String {
        let err = parse_card(doc).expect_err("the card must be refused");
        assert_eq!(err.reason, Reason::CardInvalid, "{}", err.message);
        err.message
    }

    #[test]
    fn classify_tells_adp_from_a2a_by_content() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/proto/examples/adp/valid");
        let mut seen = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let doc: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
            assert_eq!(classify(&doc), Shape::Adp, "{}", path.display());
            seen += 1;
        }
        assert!(seen >= 3, "the ADP examples are there");
        for card in [minimal_v1(), legacy_v0(), python_hybrid()] {
            assert_eq!(classify(&card), Shape::A2a);
        }
        let mut no_endpoint = minimal_v1();
        no_endpoint
            .as_object_mut()
            .unwrap()
            .remove("supportedInterfaces");
        let mut capability_list = minimal_v1();
        capability_list["capabilities"] = json!([{"id": "echo"}]);
        let others = [
            json!({"name": "x", "skills": []}),
            json!([minimal_v1()]),
            json!({"name": "io.example/weather", "version": "1.0.0",
                "remotes": [{"type": "streamable-http", "url": "https://x/mcp"}]}),
            json!({"skills": [], "capabilities": {}, "url": 7}),
            no_endpoint,
            capability_list,
        ];
        for other in &others {
            assert_eq!(classify(other), Shape::Unknown, "{other}");
        }
    }

    #[test]
    fn a_minimal_v1_card_is_read() {
        let card = parse_card(&minimal_v1()).unwrap();
        assert_eq!(card.spec, SpecVersion::V1);
        assert_eq!(card.name, "Echo Agent");
        assert_eq!(card.version, "1.0.0");
        assert_eq!(
            card.interfaces,
            [Interface {
                url: "https://echo.example.com/a2a".into(),
                protocol_binding: "JSONRPC".into(),
                protocol_version: Some("1.0".into()),
            }]
        );
        assert_eq!(card.skills.len(), 1);
        assert_eq!(card.skills[0].id, "echo");
        assert_eq!(card.skills[0].tags, ["echo"]);
        assert_eq!(card.default_input_modes, ["text/plain"]);
        assert!(card.provider.is_none() && card.signatures.is_empty());
    }

    #[test]
    fn a_legacy_card_maps_its_url_and_transports_into_interfaces() {
        let card = parse_card(&legacy_v0()).unwrap();
        assert_eq!(card.spec, SpecVersion::V0);
        let got: Vec<(&str, &str, Option<&str>)> = card
            .interfaces
            .iter()
            .map(|i| {
                let version = i.protocol_version.as_deref();
                (i.url.as_str(), i.protocol_binding.as_str(), version)
            })
            .collect();
        assert_eq!(
            got,
            [
                ("https://weather.example.com/a2a", "JSONRPC", Some("0.2.5")),
                (
                    "https://weather.example.com/rest",
                    "HTTP+JSON",
                    Some("0.2.5")
                ),
            ]
        );
        assert_eq!(
            card.security_schemes,
            [SecurityScheme {
                name: "key".into(),
                kind: SchemeKind::ApiKey
            }]
        );
        assert_eq!(card.skills[0].examples, ["Rain in Oslo tomorrow?"]);
        assert_eq!(card.provider.unwrap().organization, "Example Weather");

        // 0.2.0-0.2.3: no protocolVersion, no preferredTransport.
        let mut old = legacy_v0();
        let obj = old.as_object_mut().unwrap();
        for key in [
            "protocolVersion",
            "preferredTransport",
            "additionalInterfaces",
        ] {
            obj.remove(key);
        }
        let card = parse_card(&old).unwrap();
        assert_eq!(card.interfaces.len(), 1);
        assert_eq!(card.interfaces[0].protocol_binding, "JSONRPC");
        assert_eq!(card.interfaces[0].protocol_version, None);
    }

    #[test]
    fn a_python_hybrid_is_read_as_v1() {
        let card = parse_card(&python_hybrid()).unwrap();
        assert_eq!(card.spec, SpecVersion::V1);
        assert_eq!(card.interfaces.len(), 3);
        assert_eq!(card.interfaces[0].url, "http://jsonrpc.v10.com");
        assert_eq!(card.interfaces[0].protocol_version.as_deref(), Some("1.0"));
        assert_eq!(card.security_schemes[0].kind, SchemeKind::Http);
        assert!(card.skills.is_empty());
        assert_eq!(card.to_descriptor("a2a:x").auth.as_deref(), Some("http"));
    }

    #[test]
    fn scheme_kinds_are_read_from_both_forms() {
        let mut doc = minimal_v1();
        doc["securitySchemes"] = json!({
            "custom": {"type": "somethingNew"},
            "oidc": {"openIdConnectSecurityScheme": {"openIdConnectUrl": "https://x/.well-known"}},
            "tls": {"mtlsSecurityScheme": {}},
            "old-oauth": {"type": "oauth2", "flows": {}},
            "old-tls": {"type": "mutualTLS"},
            "key": {"apiKeySecurityScheme": {"location": "header", "name": "K"}}});
        let card = parse_card(&doc).unwrap();
        let kinds: Vec<SchemeKind> = card.security_schemes.iter().map(|s| s.kind).collect();
        use SchemeKind::*;
        assert_eq!(
            kinds,
            [Other, OpenIdConnect, MutualTls, OAuth2, MutualTls, ApiKey]
        );
        // The first scheme of a known kind gives `auth`.
        assert_eq!(
            card.to_descriptor("a2a:x").auth.as_deref(),
            Some("openidconnect")
        );
    }

    #[test]
    fn every_refusal_names_the_member() {
        let edit = |f: &dyn Fn(&mut Map<String, Value>)| {
            let mut doc = minimal_v1();
            f(doc.as_object_mut().unwrap());
            doc
        };
        let cases: Vec<(Value, &str)> = vec![
            (
                edit(&|c| drop(c.remove("name"))),
                "/name: required member missing",
            ),
            (
                edit(&|c| drop(c.insert("name".into(), Value::Null))),
                "/name: required",
            ),
            (
                edit(&|c| drop(c.insert("name".into(), json!(7)))),
                "/name: not a string",
            ),
            (edit(&|c| drop(c.remove("version"))), "/version: required"),
            (
                edit(&|c| drop(c.remove("description"))),
                "/description: required",
            ),
            (
                edit(&|c| drop(c.insert("skills".into(), json!({})))),
                "/skills: not an array",
            ),
            (
                edit(&|c| drop(c["skills"][0].as_object_mut().unwrap().remove("id"))),
                "/skills/0/id: required",
            ),
            (
                edit(&|c| drop(c["skills"][0].as_object_mut().unwrap().remove("tags"))),
                "/skills/0/tags: required",
            ),
            (
                edit(&|c| c["skills"][0]["tags"] = json!(["ok", 1])),
                "/skills/0/tags/1: not a string",
            ),
            (
                edit(&|c| c["skills"] = json!(["echo"])),
                "/skills/0: the entry is not an object",
            ),
            (
                edit(&|c| {
                    drop(
                        c["supportedInterfaces"][0]
                            .as_object_mut()
                            .unwrap()
                            .remove("url"),
                    )
                }),
                "/supportedInterfaces/0/url: required",
            ),
            (
                edit(&|c| c["supportedInterfaces"][0]["url"] = json!(" ")),
                "/supportedInterfaces/0/url: empty",
            ),
            (
                edit(&|c| {
                    drop(
                        c["supportedInterfaces"][0]
                            .as_object_mut()
                            .unwrap()
                            .remove("protocolVersion"),
                    )
                }),
                "/supportedInterfaces/0/protocolVersion: required",
            ),
            (
                edit(&|c| c["supportedInterfaces"] = json!([])),
                "/supportedInterfaces: no interface",
            ),
            (
                edit(&|c| c["supportedInterfaces"] = json!("https://x")),
                "/supportedInterfaces: not an array",
            ),
            (
                edit(&|c| drop(c.remove("supportedInterfaces"))),
                "/url: required",
            ),
            (
                edit(&|c| drop(c.remove("capabilities"))),
                "/capabilities: required",
            ),
            (
                edit(&|c| c["capabilities"] = json!([])),
                "/capabilities: the member is not an object",
            ),
            (
                edit(&|c| drop(c.remove("defaultOutputModes"))),
                "/defaultOutputModes: required",
            ),
            (
                edit(&|c| drop(c.insert("provider".into(), json!({"url": "https://x"})))),
                "/provider/organization: required",
            ),
            (
                edit(&|c| drop(c.insert("documentationUrl".into(), json!(["x"])))),
                "/documentationUrl: not a string",
            ),
            (
                edit(&|c| drop(c.insert("securitySchemes".into(), json!({"a/b": "bearer"})))),
                "/securitySchemes/a~1b: the member is not an object",
            ),
            (
                edit(&|c| c["skills"][0]["id"] = json!("x".repeat(MAX_VALUE_CHARS + 1))),
                "/skills/0/id: longer than",
            ),
            (
                edit(&|c| drop(c.insert("signatures".into(), json!({})))),
                "/signatures: not an array",
            ),
            (
                edit(&|c| drop(c.insert("signatures".into(), json!([{"signature": "AA"}])))),
                "/signatures/0/protected: required",
            ),
        ];
        for (doc, expected) in cases {
            let message = refused(&doc);
            assert!(
                message.starts_with(expected),
                "{message:?} for {expected:?}"
            );
        }
        assert!(refused(&json!("card")).contains("not an object"));
        let adp = include_str!("../../proto/examples/adp/valid/minimal-required-only.json");
        assert!(refused(&serde_json::from_str(adp).unwrap()).contains("ADP"));
        // A legacy card's extra interfaces need both members.
        let mut legacy = legacy_v0();
        legacy["additionalInterfaces"][1]
            .as_object_mut()
            .unwrap()
            .remove("transport");
        assert!(refused(&legacy).starts_with("/additionalInterfaces/1/transport: required"));
    }

    #[test]
    fn counts_over_their_bounds_are_refused() {
        let skill = json!({"id": "s", "name": "S", "description": "d", "tags": []});
        let mut doc = minimal_v1();
        doc["skills"] = Value::Array(vec![skill.clone(); MAX_SKILLS]);
        assert_eq!(parse_card(&doc).unwrap().skills.len(), MAX_SKILLS);
        doc["skills"] = Value::Array(vec![skill; MAX_SKILLS + 1]);
        assert!(refused(&doc).starts_with("/skills: more than 256 entries"));

        let mut doc = minimal_v1();
        doc["skills"][0]["tags"] = json!(vec!["t"; MAX_TAGS_PER_SKILL + 1]);
        assert!(refused(&doc).starts_with("/skills/0/tags: more than"));

        let mut doc = minimal_v1();
        let interface = doc["supportedInterfaces"][0].clone();
        doc["supportedInterfaces"] = Value::Array(vec![interface; MAX_INTERFACES + 1]);
        assert!(refused(&doc).starts_with("/supportedInterfaces: more than"));

        // A legacy card's `url` counts with its additional interfaces.
        let mut legacy = legacy_v0();
        let extra: Vec<Value> = (0..MAX_INTERFACES)
            .map(|i| json!({"url": format!("https://x/{i}"), "transport": "GRPC"}))
            .collect();
        legacy["additionalInterfaces"] = Value::Array(extra);
        assert!(refused(&legacy).starts_with("/additionalInterfaces: more than"));

        let mut doc = minimal_v1();
        doc["signatures"] = Value::Array(vec![json!({}); MAX_SIGNATURES + 1]);
        assert!(refused(&doc).starts_with("/signatures: more than"));

        let mut doc = minimal_v1();
        let schemes: Map<String, Value> = (0..=MAX_SECURITY_SCHEMES)
            .map(|i| (format!("s{i}"), json!({"type": "http"})))
            .collect();
        doc["securitySchemes"] = Value::Object(schemes);
        assert!(refused(&doc).starts_with("/securitySchemes: more than"));
    }

    #[test]
    fn text_for_people_is_cut_not_refused() {
        let mut doc = minimal_v1();
        doc["name"] = json!("n".repeat(MAX_NAME_CHARS + 10));
        doc["skills"][0]["description"] = json!("d".repeat(MAX_DESCRIPTION_CHARS + 10));
        doc["x-unknown"] = json!({"ignored": true});
        let card = parse_card(&doc).unwrap();
        assert_eq!(card.name.chars().count(), MAX_NAME_CHARS);
        assert_eq!(
            card.skills[0].description.chars().count(),
            MAX_DESCRIPTION_CHARS
        );
    }

    #[test]
    fn the_descriptor_takes_skills_provider_endpoint_and_auth() {
        let mut doc = legacy_v0();
        doc["skills"].as_array_mut().unwrap().push(
            json!({"id": "Air Quality", "name": "AQ", "description": "Air.",
                "tags": ["weather", "Air  Quality"]}),
        );
        let d = parse_card(&doc)
            .unwrap()
            .to_descriptor("a2a:weather.example.com");
        assert_eq!(d.id, "a2a:weather.example.com");
        assert_eq!(d.name, "Weather");
        assert_eq!(d.description, "Forecasts.");
        assert_eq!(d.version.as_deref(), Some("0.4.1"));
        assert_eq!(d.publisher.as_deref(), Some("Example Weather"));
        assert_eq!(
            d.endpoint.as_deref(),
            Some("https://weather.example.com/a2a")
        );
        assert_eq!(d.capabilities, ["air_quality", "forecast"]);
        assert_eq!(d.tags, ["air_quality", "forecast", "weather"]);
        assert!(d.languages.is_empty());
        assert_eq!(d.status, None);
        assert_eq!(d.auth.as_deref(), Some("apikey"));
        assert_eq!(d.format, DocumentFormat::A2a);

        // No name: the id stands in. No schemes: no auth.
        let mut doc = minimal_v1();
        doc["name"] = json!("  ");
        let d = parse_card(&doc)
            .unwrap()
            .to_descriptor("a2a:echo.example.com");
        assert_eq!(d.name, "a2a:echo.example.com");
        assert_eq!(d.auth, None);
        assert_eq!(d.publisher, None);
    }
}
