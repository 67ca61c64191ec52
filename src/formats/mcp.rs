//! The MCP Registry's `server.json` (schema 2025-12-11) and the shapes its
//! servers come in: the list API's response (`GET /v0.1/servers`), an
//! array of its `{server, _meta}` items, or an array of bare `server.json`
//! objects (the registry's seed file). Each server is read into an
//! [`McpServer`] and, unless the registry deleted it, into a
//! [`Descriptor`] under the id `mcp:{name}`. `agentmesh import --format
//! mcp-registry` feeds these from a file; nothing here touches the
//! network or the store.
//!
//! What is checked is what the schema requires and what a descriptor
//! needs: the `namespace/name` pattern and length, `description` (1 to
//! 100 characters), `version` (at most 255), remotes (`streamable-http`
//! or `sse`, with an https URL), and bounds on remotes, packages and list
//! items. Unknown members are ignored (the schema allows them). The
//! registry's status (`active`, `deprecated`, `deleted`) is not part of
//! `server.json`: it comes from the list item's
//! `_meta["io.modelcontextprotocol.registry/official"]`; a server without
//! it is active. Every refusal is [`Reason::McpServerInvalid`], its
//! message naming the member at its JSON pointer.

use serde_json::{Map, Value};

use crate::descriptor::{Descriptor, DocumentFormat};
use crate::formats::{bounded, terms, FormatError, MAX_DESCRIPTION_CHARS, MAX_NAME_CHARS};
use crate::trust::Reason;

/// Shortest server name, in characters.
pub const MIN_SERVER_NAME_CHARS: usize = 3;
/// Longest server name, in characters.
pub const MAX_SERVER_NAME_CHARS: usize = 200;
/// Longest `description`, in characters.
pub const MAX_SERVER_DESCRIPTION_CHARS: usize = 100;
/// Longest `version`, in characters.
pub const MAX_VERSION_CHARS: usize = 255;
/// Longest URL or package identifier accepted, in characters.
pub const MAX_URL_CHARS: usize = 2048;
/// Most characters kept of a `title`.
pub const MAX_TITLE_CHARS: usize = 100;
/// Most characters kept of a `statusMessage`.
pub const MAX_STATUS_MESSAGE_CHARS: usize = 500;
/// Most remotes of one server.
pub const MAX_REMOTES: usize = 32;
/// Most packages of one server.
pub const MAX_PACKAGES: usize = 32;
/// Most servers read from one list.
pub const MAX_LIST_ITEMS: usize = 100_000;
/// The `_meta` key of the registry's own metadata in list items.
pub const OFFICIAL_META: &str = "io.modelcontextprotocol.registry/official";
/// [`OFFICIAL_META`] as a JSON pointer token (`/` escaped).
const OFFICIAL_META_TOKEN: &str = "io.modelcontextprotocol.registry~1official";
/// The prefix of the ids of imported MCP servers.
pub const ID_PREFIX: &str = "mcp:";

/// A server as the registry lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct McpServer {
    /// `namespace/name` (reverse-DNS namespace).
    pub name: String,
    /// The display name, bounded to [`MAX_TITLE_CHARS`].
    pub title: Option<String>,
    /// What it does.
    pub description: String,
    /// The version of this `server.json`.
    pub version: String,
    /// `websiteUrl`.
    pub website_url: Option<String>,
    /// `repository.url`.
    pub repository_url: Option<String>,
    /// Where it is reachable, in order.
    pub remotes: Vec<Remote>,
    /// How it is installed locally, in order.
    pub packages: Vec<Package>,
    /// The registry's status of this version.
    pub status: Status,
    /// The registry's `statusMessage` (for a deprecation, what to use
    /// instead), bounded to [`MAX_STATUS_MESSAGE_CHARS`].
    pub status_message: Option<String>,
    /// The registry's `isLatest`: whether this is the newest version of
    /// the name; `None` when the list does not say.
    pub is_latest: Option<bool>,
}

/// A remote transport.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Remote {
    /// `type`.
    pub kind: RemoteKind,
    /// The https URL, as written (it may hold `{variable}`s).
    pub url: String,
}

/// The transports a remote may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RemoteKind {
    /// `streamable-http`.
    StreamableHttp,
    /// `sse`.
    Sse,
}

impl RemoteKind {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::StreamableHttp => "streamable-http",
            Self::Sse => "sse",
        }
    }
}

/// A package the server is distributed as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Package {
    /// `registryType` (`npm`, `pypi`, `oci`, `nuget`, `mcpb`, ...).
    pub registry_type: String,
    /// The package name, image reference or download URL.
    pub identifier: String,
    /// The package version, when given.
    pub version: Option<String>,
    /// The local transport's `type` (`stdio`, ...), when given.
    pub transport: Option<String>,
}

/// The registry's status of a server version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum Status {
    /// Listed normally (also: no status given).
    #[default]
    Active,
    /// Still listed, with a warning (`statusMessage`).
    Deprecated,
    /// Withdrawn by the registry (moderation): remove it.
    Deleted,
}

impl Status {
    /// The wire name (`active`, `deprecated`, `deleted`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Deprecated => "deprecated",
            Self::Deleted => "deleted",
        }
    }
}

impl McpServer {
    /// The agent id: `mcp:` and the server name.
    pub fn id(&self) -> String {
        format!("{ID_PREFIX}{}", self.name)
    }

    /// The namespace of the name (what precedes the `/`).
    pub fn namespace(&self) -> &str {
        self.name.split('/').next().unwrap_or_default()
    }

    /// The normalised descriptor of an active or deprecated server: title
    /// (or name) as name, the namespace as publisher, the first remote's
    /// URL as endpoint, tags `mcp`, the remotes' transports and the
    /// packages' registry types, the status. A deleted server is not
    /// meant to become a descriptor (remove what is held instead); given
    /// one, the descriptor says `deleted`.
    pub fn to_descriptor(&self) -> Descriptor {
        let name = self
            .title
            .as_deref()
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .unwrap_or(&self.name);
        let tags = ["mcp"]
            .into_iter()
            .chain(self.remotes.iter().map(|r| r.kind.as_str()))
            .chain(self.packages.iter().map(|p| p.registry_type.as_str()));
        Descriptor {
            id: self.id(),
            name: bounded(name, MAX_NAME_CHARS),
            description: bounded(&self.description, MAX_DESCRIPTION_CHARS),
            version: Some(self.version.clone()),
            publisher: Some(self.namespace().to_owned()),
            endpoint: self.remotes.first().map(|r| r.url.clone()),
            capabilities: Vec::new(),
            tags: terms(tags),
            languages: Vec::new(),
            status: Some(self.status.as_str().to_owned()),
            auth: None,
            format: DocumentFormat::McpRegistry,
        }
    }
}

/// Reads one `server.json`, with the `_meta` of the list item it came in
/// (for the registry's status), when there is one.
///
/// # Errors
/// [`Reason::McpServerInvalid`] when `server` is not an object, its
/// `name` does not match `namespace/name` or is not 3 to 200 characters,
/// `description` is missing, empty or over 100 characters, `version` is
/// missing or over 255 characters, a remote has no https URL or a type
/// other than `streamable-http` and `sse`, there are more than 32 remotes
/// or packages, a package has no `registryType` or `identifier`, a known
/// member has the wrong type, or the status is none of the three.
pub fn parse_server(server: &Value, meta: Option<&Value>) -> Result<McpServer, FormatError> {
    parse_at(server, meta, "", "/_meta")
}

/// Reads one list item: a `{server, _meta}` object as the list API
/// answers it, or a bare `server.json`. Messages name members relative
/// to the item.
///
/// # Errors
/// As [`parse_server`].
pub fn parse_item(item: &Value) -> Result<McpServer, FormatError> {
    if is_wrapper(item) {
        parse_at(&item["server"], item.get("_meta"), "/server", "/_meta")
    } else {
        parse_at(item, None, "", "/_meta")
    }
}

/// The `server.json` of a list item: its `server` member, or the item
/// itself when it is a bare `server.json`.
pub fn server_of(item: &Value) -> &Value {
    if is_wrapper(item) {
        &item["server"]
    } else {
        item
    }
}

/// The `_meta` of a list item (the registry's metadata), when it is a
/// `{server, _meta}` object that has one.
pub fn meta_of(item: &Value) -> Option<&Value> {
    if is_wrapper(item) {
        item.get("_meta")
    } else {
        None
    }
}

/// Whether `doc` is a list of servers in one of the shapes
/// [`parse_list`] reads (an array, or an object with `servers`), rather
/// than one item.
pub fn is_list(doc: &Value) -> bool {
    match doc {
        Value::Array(_) => true,
        Value::Object(map) => map.contains_key("servers"),
        _ => false,
    }
}

/// The items of a list, unread: the `servers` of a list API response,
/// or the elements of an array.
///
/// # Errors
/// [`Reason::McpServerInvalid`] when `doc` is neither shape, or has more
/// than [`MAX_LIST_ITEMS`] items.
pub fn list_items(doc: &Value) -> Result<&[Value], FormatError> {
    let invalid = |message: String| FormatError::new(Reason::McpServerInvalid, message);
    let items = match doc {
        Value::Array(items) => items,
        Value::Object(map) => match map.get("servers") {
            Some(Value::Array(items)) => items,
            Some(_) => return Err(invalid("/servers is not an array".into())),
            None => {
                return Err(invalid(
                    "not a server list: an object without servers".into(),
                ))
            }
        },
        _ => {
            return Err(invalid(
                "not a server list: neither an array nor an object with servers".into(),
            ))
        }
    };
    if items.len() > MAX_LIST_ITEMS {
        return Err(invalid(format!(
            "the list has {} servers; at most {MAX_LIST_ITEMS} are read",
            items.len()
        )));
    }
    Ok(items)
}

/// [`list_items`], taken out of the list (for a caller that keeps them).
///
/// # Errors
/// As [`list_items`].
pub fn into_list_items(doc: Value) -> Result<Vec<Value>, FormatError> {
    list_items(&doc)?;
    Ok(match doc {
        Value::Array(items) => items,
        Value::Object(mut map) => match map.remove("servers") {
            Some(Value::Array(items)) => items,
            _ => Vec::new(),
        },
        _ => Vec::new(),
    })
}

/// The `name` of a list item's server when it is a string, read without
/// checking the rest (to name an item that is refused).
pub fn item_name(item: &Value) -> Option<&str> {
    server_of(item).get("name").and_then(Value::as_str)
}

/// The `isLatest` the registry's metadata of a list item gives, read
/// without checking the rest.
pub fn item_is_latest(item: &Value) -> Option<bool> {
    if !is_wrapper(item) {
        return None;
    }
    item.get("_meta")?
        .get(OFFICIAL_META)?
        .get("isLatest")?
        .as_bool()
}

/// Reads a list of servers: the list API response `{"servers": [{server,
/// _meta}, ...], "metadata": {...}}`, an array of such items, or an array
/// of bare `server.json` objects. One bad server is an `Err` among the
/// others, its message naming the member from the list's root.
///
/// # Errors
/// As [`list_items`].
pub fn parse_list(doc: &Value) -> Result<Vec<Result<McpServer, FormatError>>, FormatError> {
    let items = list_items(doc)?;
    let base = if doc.is_array() { "" } else { "/servers" };
    Ok(items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            parse_item(item).map_err(|e| {
                // Messages about a member start with its pointer.
                let message = if e.message.starts_with('/') {
                    format!("{base}/{i}{}", e.message)
                } else {
                    pointed(&format!("{base}/{i}"), &e.message)
                };
                FormatError::new(e.reason, message)
            })
        })
        .collect())
}

/// Whether a list item is a `{server, _meta}` wrapper (an object
/// `server` member and no `name`) rather than a bare `server.json`.
fn is_wrapper(item: &Value) -> bool {
    item.get("server").is_some_and(Value::is_object) && item.get("name").is_none()
}

/// [`parse_server`] with the JSON pointers of `server` and `meta` to name
/// members by.
fn parse_at(
    server: &Value,
    meta: Option<&Value>,
    at: &str,
    meta_at: &str,
) -> Result<McpServer, FormatError> {
    let Some(obj) = server.as_object() else {
        return Err(invalid(at, "", "the server is not an object"));
    };
    let name = string(obj, "name", at)?.ok_or_else(|| invalid(at, "/name", "missing"))?;
    let chars = name.chars().count();
    if !(MIN_SERVER_NAME_CHARS..=MAX_SERVER_NAME_CHARS).contains(&chars) {
        return Err(invalid(
            at,
            "/name",
            &format!("{chars} characters; {MIN_SERVER_NAME_CHARS} to {MAX_SERVER_NAME_CHARS} are allowed"),
        ));
    }
    if !is_server_name(name) {
        return Err(invalid(
            at,
            "/name",
            "not namespace/name (a namespace of [A-Za-z0-9.-], a name of [A-Za-z0-9._-])",
        ));
    }
    let description = string(obj, "description", at)?
        .filter(|d| !d.trim().is_empty())
        .ok_or_else(|| invalid(at, "/description", "missing or empty"))?;
    if description.chars().count() > MAX_SERVER_DESCRIPTION_CHARS {
        return Err(invalid(
            at,
            "/description",
            &format!("longer than {MAX_SERVER_DESCRIPTION_CHARS} characters"),
        ));
    }
    let version = string(obj, "version", at)?.ok_or_else(|| invalid(at, "/version", "missing"))?;
    if version.chars().count() > MAX_VERSION_CHARS {
        return Err(invalid(
            at,
            "/version",
            &format!("longer than {MAX_VERSION_CHARS} characters"),
        ));
    }
    let url_member = |v: Option<&str>, member: &str| -> Result<Option<String>, FormatError> {
        match v {
            Some(u) if u.chars().count() > MAX_URL_CHARS => Err(invalid(
                at,
                member,
                &format!("longer than {MAX_URL_CHARS} characters"),
            )),
            v => Ok(v.map(str::to_owned)),
        }
    };
    let website_url = url_member(string(obj, "websiteUrl", at)?, "/websiteUrl")?;
    let repository_url = match obj.get("repository") {
        None | Some(Value::Null) => None,
        Some(Value::Object(repo)) => url_member(
            string(repo, "url", &format!("{at}/repository"))?,
            "/repository/url",
        )?,
        Some(_) => return Err(invalid(at, "/repository", "not an object")),
    };
    let remotes = array(obj, "remotes", at, MAX_REMOTES)?
        .iter()
        .enumerate()
        .map(|(i, r)| remote(r, &format!("{at}/remotes/{i}")))
        .collect::<Result<Vec<_>, _>>()?;
    let packages = array(obj, "packages", at, MAX_PACKAGES)?
        .iter()
        .enumerate()
        .map(|(i, p)| package(p, &format!("{at}/packages/{i}")))
        .collect::<Result<Vec<_>, _>>()?;
    let (status, status_message, is_latest) = official(meta, meta_at)?;
    Ok(McpServer {
        name: name.to_owned(),
        title: string(obj, "title", at)?
            .map(|t| bounded(t.trim(), MAX_TITLE_CHARS))
            .filter(|t| !t.is_empty()),
        description: description.trim().to_owned(),
        version: version.to_owned(),
        website_url,
        repository_url,
        remotes,
        packages,
        status,
        status_message,
        is_latest,
    })
}

/// The registry's status, status message and `isLatest` from an item's
/// `_meta` (at `at`).
fn official(
    meta: Option<&Value>,
    at: &str,
) -> Result<(Status, Option<String>, Option<bool>), FormatError> {
    let official = match meta.and_then(|m| m.get(OFFICIAL_META)) {
        None | Some(Value::Null) => return Ok((Status::Active, None, None)),
        Some(Value::Object(official)) => official,
        Some(_) => {
            return Err(invalid(
                at,
                &format!("/{OFFICIAL_META_TOKEN}"),
                "not an object",
            ))
        }
    };
    let at = format!("{at}/{OFFICIAL_META_TOKEN}");
    let status = match string(official, "status", &at)? {
        None | Some("active") => Status::Active,
        Some("deprecated") => Status::Deprecated,
        Some("deleted") => Status::Deleted,
        Some(other) => {
            return Err(invalid(
                &at,
                "/status",
                &format!(
                    "{:?} is none of active, deprecated, deleted",
                    bounded(other, 32)
                ),
            ))
        }
    };
    let message = string(official, "statusMessage", &at)?
        .map(|m| bounded(m.trim(), MAX_STATUS_MESSAGE_CHARS))
        .filter(|m| !m.is_empty());
    let is_latest = match official.get("isLatest") {
        None | Some(Value::Null) => None,
        Some(Value::Bool(b)) => Some(*b),
        Some(_) => return Err(invalid(&at, "/isLatest", "not a boolean")),
    };
    Ok((status, message, is_latest))
}

/// One remote (at `at`).
fn remote(raw: &Value, at: &str) -> Result<Remote, FormatError> {
    let Some(obj) = raw.as_object() else {
        return Err(invalid(at, "", "the remote is not an object"));
    };
    let kind = match string(obj, "type", at)? {
        Some("streamable-http") => RemoteKind::StreamableHttp,
        Some("sse") => RemoteKind::Sse,
        Some(other) => {
            return Err(invalid(
                at,
                "/type",
                &format!(
                    "{:?} is not a remote transport (streamable-http or sse)",
                    bounded(other, 32)
                ),
            ))
        }
        None => return Err(invalid(at, "/type", "missing")),
    };
    let url = string(obj, "url", at)?.ok_or_else(|| invalid(at, "/url", "missing"))?;
    if url.chars().count() > MAX_URL_CHARS {
        return Err(invalid(
            at,
            "/url",
            &format!("longer than {MAX_URL_CHARS} characters"),
        ));
    }
    if !is_https_template(url) {
        return Err(invalid(at, "/url", "not an https URL"));
    }
    Ok(Remote {
        kind,
        url: url.to_owned(),
    })
}

/// Whether `url` is `https://` and more, with no white space or control
/// characters (the schema's pattern, https only: the URL may hold
/// `{variable}`s, so it is not parsed).
fn is_https_template(url: &str) -> bool {
    let Some(rest) = url
        .get(..8)
        .filter(|scheme| scheme.eq_ignore_ascii_case("https://"))
        .map(|_| &url[8..])
    else {
        return false;
    };
    !rest.is_empty()
        && !rest.starts_with('/')
        && !rest.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// One package (at `at`).
fn package(raw: &Value, at: &str) -> Result<Package, FormatError> {
    let Some(obj) = raw.as_object() else {
        return Err(invalid(at, "", "the package is not an object"));
    };
    let required = |key: &str| -> Result<String, FormatError> {
        let v = string(obj, key, at)?
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| invalid(at, &format!("/{key}"), "missing or empty"))?;
        if v.chars().count() > MAX_URL_CHARS {
            return Err(invalid(
                at,
                &format!("/{key}"),
                &format!("longer than {MAX_URL_CHARS} characters"),
            ));
        }
        Ok(v.to_owned())
    };
    let transport = match obj.get("transport") {
        None | Some(Value::Null) => None,
        Some(Value::Object(t)) => {
            string(t, "type", &format!("{at}/transport"))?.map(|t| bounded(t, MAX_TITLE_CHARS))
        }
        Some(_) => return Err(invalid(at, "/transport", "not an object")),
    };
    Ok(Package {
        registry_type: bounded(&required("registryType")?, MAX_TITLE_CHARS),
        identifier: required("identifier")?,
        version: string(obj, "version", at)?.map(|v| bounded(v, MAX_VERSION_CHARS)),
        transport,
    })
}

/// Whether `name` matches `^[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+$`.
fn is_server_name(name: &str) -> bool {
    let Some((namespace, rest)) = name.split_once('/') else {
        return false;
    };
    !namespace.is_empty()
        && !rest.is_empty()
        && namespace
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-'))
        && rest
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// A refusal naming `member` of the object at `at`.
fn invalid(at: &str, member: &str, what: &str) -> FormatError {
    FormatError::new(
        Reason::McpServerInvalid,
        pointed(&format!("{at}{member}"), what),
    )
}

/// `what` after the JSON pointer it is about (none: the root).
fn pointed(pointer: &str, what: &str) -> String {
    if pointer.is_empty() {
        what.to_owned()
    } else {
        format!("{pointer}: {what}")
    }
}

/// The member `key` when it is a string; `None` when absent or null.
fn string<'a>(
    obj: &'a Map<String, Value>,
    key: &str,
    at: &str,
) -> Result<Option<&'a str>, FormatError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(invalid(at, &format!("/{key}"), "not a string")),
    }
}

/// The member `key` when it is an array of at most `max` items; empty
/// when absent or null.
fn array<'a>(
    obj: &'a Map<String, Value>,
    key: &str,
    at: &str,
    max: usize,
) -> Result<&'a [Value], FormatError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(&[]),
        Some(Value::Array(items)) if items.len() > max => Err(invalid(
            at,
            &format!("/{key}"),
            &format!("{} items; at most {max} are allowed", items.len()),
        )),
        Some(Value::Array(items)) => Ok(items),
        Some(_) => Err(invalid(at, &format!("/{key}"), "not an array")),
    }
}

mod served;
#[cfg(test)]
mod tests;

pub use served::{rfc3339, served_item, stored_document, Official};
