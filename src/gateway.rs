//! The invocation gateway (docs/protocol.md#gateway): a client calls an
//! agent this node knows through `POST /agents/{id}/invoke` or
//! `POST /agents/{id}/operations/{op}`, and the node does what the AIDIP
//! draft's invocation section asks of a gateway. In order:
//! - the agent is one the client may see, not suspended here, an AIDIP
//!   agent with an endpoint (or an MCP server, an A2A agent, an ADP agent:
//!   [`mcp`], [`a2a`], [`adp`]);
//! - the operation is named (or the only one), and the input checked
//!   against its JSON Schema before anything is sent
//!   ([`operation`]);
//! - the node's concurrency limits hold (in all, and per agent);
//! - the endpoint passes the crawler's rules and the call is sent there,
//!   with the client's credentials for the agent or the node's own
//!   ([`forward`]);
//! - the answer is mapped: 2xx with JSON is the result (checked against
//!   the output schema, which only warns), 4xx the agent's refusal passed
//!   on, 429 and 503 "busy, retry after", any other failure a 502 or 504
//!   ([`GatewayError`]). A failed task is never answered 2xx.
//!
//! Named operations are sub-resources of the agent's endpoint
//! (`{endpoint}/{operation}`, the draft's second option); an agent's one
//! implied operation is its endpoint itself.

pub mod a2a;
pub mod adp;
pub mod credentials;
pub mod error;
pub mod forward;
pub mod idempotency;
pub mod mcp;
pub mod operation;
mod rpc;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::Value;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

pub use adp::NodeSigner;
pub use error::{GatewayError, Violation};
pub use forward::{Answer, BodyStream, Opened, Upstream, PASSED_THROUGH};
pub use idempotency::{Claim, Kept, Keys};
pub use operation::Operation;

use crate::config::Config;
use crate::crawl::dns::{self, Dns};
use crate::crawl::CrawlerOptions;
use crate::descriptor::DocumentFormat;
use crate::record::RecordBody;
use crate::registry::Registry;
use crate::store::Viewer;
use credentials::NodeCredentials;

/// Longest message of an agent's refusal passed on, characters.
const MAX_REFUSAL_CHARS: usize = 2000;

/// An AIDIP call ready to send ([`Gateway::aim`]).
struct Aimed {
    operation: Operation,
    url: url::Url,
    ips: Vec<std::net::IpAddr>,
    /// The call's slots, in all and for its agent, held until it ends.
    permits: (OwnedSemaphorePermit, OwnedSemaphorePermit),
}

/// How an agent is called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Protocol {
    /// AIDIP: a JSON `POST` to the operation.
    Aidip,
    /// MCP over streamable HTTP: a session and `tools/call`.
    Mcp,
    /// A2A over JSON-RPC: `message/send` (0.x) or `SendMessage` (1.x).
    A2a,
    /// ADP: a `message` frame on its chat WebSocket.
    Adp,
}

/// What the node holds for the agent a call is for.
struct HeldAgent {
    /// How it is called.
    protocol: Protocol,
    /// Where: the descriptor's endpoint, an ADP agent's `endpoints.chat`.
    endpoint: String,
    /// Its document.
    doc: Value,
    /// The document's digest.
    doc_sha256: Vec<u8>,
    /// The DNS fingerprint matched its key, by this node or a trusted
    /// peer (counted, not claimed).
    anchored: bool,
}

/// A call a client makes through the gateway.
#[derive(Debug, Clone)]
pub struct Call {
    /// The agent's id.
    pub agent: String,
    /// The operation named, if any.
    pub operation: Option<String>,
    /// The input, as the operation's schema describes it.
    pub input: Value,
    /// The client's request headers (its credentials for the agent
    /// among them: [`PASSED_THROUGH`]).
    pub headers: HeaderMap,
    /// The request's id, passed on.
    pub request_id: Option<String>,
    /// Who calls, for the agent's visibility.
    pub viewer: Viewer,
}

/// An agent's answer to a call that worked.
#[derive(Debug, Clone)]
pub struct Invoked {
    /// The operation called (`None`: the agent's one implied operation).
    pub operation: Option<String>,
    /// The agent's status (a 2xx).
    pub status: u16,
    /// The agent's JSON answer.
    pub output: Value,
    /// Where the answer does not fit the operation's output schema (the
    /// answer is still given, with a warning).
    pub output_problems: Vec<Violation>,
    /// The call's time, the node's checks included.
    pub elapsed: Duration,
}

/// The gateway's limits (`[gateway]`).
#[derive(Debug, Clone)]
pub struct GatewayOptions {
    /// How it connects.
    pub upstream: Upstream,
    /// Calls in flight at once, all agents together.
    pub max_concurrent: usize,
    /// Calls in flight at once to one agent.
    pub max_concurrent_per_agent: usize,
    /// The node's own credentials for agents (`[[gateway.credentials]]`):
    /// the header it sends, the client certificate it presents.
    pub credentials: NodeCredentials,
    /// How long an `Idempotency-Key` is remembered.
    pub idempotency_window: Duration,
    /// The node's id and key, which sign its frames to ADP agents
    /// (`None`: ADP agents are not called).
    pub signer: Option<NodeSigner>,
}

/// Why the gateway could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// The crawler's resolver or TLS roots.
    #[error(transparent)]
    Crawl(#[from] crate::crawl::CrawlError),
    /// The resolver.
    #[error(transparent)]
    Dns(#[from] dns::DnsError),
    /// A `[[gateway.credentials]]` entry.
    #[error("gateway.credentials for {agent}: {message}")]
    Credential {
        /// The entry's agent.
        agent: String,
        /// What is wrong.
        message: String,
    },
}

impl GatewayOptions {
    /// The options `[gateway]` and `[crawl]` set: the crawler's resolver,
    /// TLS roots, address policy and ports.
    ///
    /// # Errors
    /// [`SetupError`]: the resolver, a CA file, a credential file.
    pub fn from_config(config: &Config) -> Result<Self, SetupError> {
        let crawl = CrawlerOptions::from_config(&config.crawl);
        let anchors = dns::trust_anchors(&crawl.trust_anchors)?;
        let dns = Dns::with_anchors(
            &crawl.resolvers,
            crawl.dns_timeout,
            anchors,
            crawl.dns_cache_size,
        )?;
        let g = &config.gateway;
        let credentials = NodeCredentials::read(&g.credentials, &crawl)?;
        Ok(Self {
            upstream: Upstream {
                dns,
                tls: crawl.tls_config()?,
                policy: crawl.policy,
                ports: crawl.allowed_ports.clone(),
                connect_timeout: g.connect_timeout,
                timeout: g.timeout,
                max_response_bytes: g.max_response_bytes,
                user_agent: format!("agentmesh-gateway/{}", env!("CARGO_PKG_VERSION")),
                clients: forward::Clients::default(),
                presenting: None,
            },
            max_concurrent: g.max_concurrent.max(1),
            max_concurrent_per_agent: g.max_concurrent_per_agent.max(1),
            credentials,
            idempotency_window: g.idempotency_window,
            signer: None,
        })
    }
}

/// The gateway. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Gateway {
    registry: Registry,
    options: Arc<GatewayOptions>,
    all: Arc<Semaphore>,
    /// One semaphore per agent with calls in flight; dropped when idle.
    per_agent: Arc<Mutex<HashMap<String, Arc<Semaphore>>>>,
    /// The `Idempotency-Key`s of recent calls.
    keys: Arc<Keys>,
    /// The operations' schemas, compiled.
    compiled: operation::Compiled,
}

impl Gateway {
    /// A gateway calling the agents `registry` holds.
    pub fn new(registry: Registry, options: GatewayOptions) -> Self {
        Self {
            registry,
            keys: Arc::new(Keys::new(options.idempotency_window)),
            compiled: operation::Compiled::default(),
            all: Arc::new(Semaphore::new(options.max_concurrent)),
            options: Arc::new(options),
            per_agent: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// Calls an agent (see the module documentation).
    ///
    /// # Errors
    /// [`GatewayError`], each with its status.
    pub async fn invoke(&self, call: Call) -> Result<Invoked, GatewayError> {
        let started = Instant::now();
        let held = self.held(&call).await?;
        let (endpoint, doc) = (&held.endpoint, &held.doc);
        match held.protocol {
            Protocol::Mcp => return self.invoke_mcp(call, endpoint, started).await,
            Protocol::A2a => return self.invoke_a2a(call, doc, started).await,
            Protocol::Adp => return self.invoke_adp(call, &held, started).await,
            Protocol::Aidip => {}
        }
        let Aimed {
            operation,
            url,
            ips,
            permits: _permits,
        } = self.aim(&call, endpoint, doc).await?;
        let upstream = &*self.upstream(&call.agent);
        let headers = self.outgoing(&call);
        let body = Bytes::from(serde_json::to_vec(&call.input).expect("a Value serialises"));
        let answer = upstream.post(&url, &ips, headers, body).await?;
        let status = answer.status;
        let output = outcome(answer)?;
        let output_problems = match operation.output.clone() {
            Some(schema) => checked(&self.compiled, schema, output.clone())
                .await
                .unwrap_or_default(),
            None => Vec::new(),
        };
        Ok(Invoked {
            operation: operation.name,
            status,
            output,
            output_problems,
            elapsed: started.elapsed(),
        })
    }

    /// An AIDIP call made ready to send: the operation chosen, the input
    /// checked against its schema, the slots taken, the target checked.
    async fn aim(&self, call: &Call, endpoint: &str, doc: &Value) -> Result<Aimed, GatewayError> {
        let operation = operation::choose(doc, call.operation.as_deref())?;
        if let Some(schema) = operation.input.clone() {
            let found = checked(&self.compiled, schema, call.input.clone())
                .await
                .map_err(GatewayError::BadSchema)?;
            if !found.is_empty() {
                return Err(GatewayError::InvalidInput(found));
            }
        }
        let permits = self.permits(&call.agent)?;
        let (url, ips) = self
            .options
            .upstream
            .target(&operation_url(endpoint, operation.name.as_deref())?)
            .await?;
        Ok(Aimed {
            operation,
            url,
            ips,
            permits,
        })
    }

    /// The `Idempotency-Key`s of recent calls.
    pub fn keys(&self) -> &Keys {
        &self.keys
    }

    /// Calls an AIDIP agent asking for a streamed answer
    /// (`Accept: text/event-stream`): its 2xx answer's body is passed on as
    /// it arrives (its content type kept), within the size limit and the
    /// deadline; every other answer is mapped as [`Gateway::invoke`] maps
    /// it. The operation called, the status, the content type, the body.
    ///
    /// # Errors
    /// As [`Gateway::invoke`]; [`GatewayError::NotInvocable`] for an MCP
    /// server (its tools answer whole).
    pub async fn invoke_stream(
        &self,
        call: Call,
    ) -> Result<(Option<String>, u16, String, BodyStream), GatewayError> {
        let held = self.held(&call).await?;
        if held.protocol != Protocol::Aidip {
            return Err(GatewayError::NotInvocable(
                "a streamed answer is for AIDIP agents; MCP tools, A2A and ADP agents answer \
                 whole"
                    .into(),
            ));
        }
        let (endpoint, doc) = (&held.endpoint, &held.doc);
        let Aimed {
            operation,
            url,
            ips,
            permits,
        } = self.aim(&call, endpoint, doc).await?;
        let upstream = &*self.upstream(&call.agent);
        let mut headers = self.outgoing(&call);
        headers.insert(
            reqwest::header::ACCEPT,
            HeaderValue::from_static("text/event-stream, application/json"),
        );
        let body = Bytes::from(serde_json::to_vec(&call.input).expect("a Value serialises"));
        match upstream.open(&url, &ips, headers, body).await? {
            Opened::Whole(answer) => {
                // Not a 2xx: the failure it maps to (a 2xx is streamed).
                outcome(answer)?;
                Err(GatewayError::AgentFailed(
                    "the agent's answer could not be streamed".into(),
                ))
            }
            Opened::Streaming {
                status,
                content_type,
                body,
            } => {
                use futures_util::StreamExt as _;
                // The slots are held until the stream ends.
                let body: BodyStream = Box::pin(body.map(move |chunk| {
                    let _held = &permits;
                    chunk
                }));
                Ok((operation.name, status, content_type, body))
            }
        }
    }

    /// An MCP server's tool ([`mcp`]), the whole session within
    /// `gateway.timeout`.
    async fn invoke_mcp(
        &self,
        call: Call,
        endpoint: &str,
        started: Instant,
    ) -> Result<Invoked, GatewayError> {
        let _permits = self.permits(&call.agent)?;
        let upstream = &*self.upstream(&call.agent);
        let deadline = started + upstream.timeout;
        let (url, ips) = upstream.target(endpoint).await?;
        let headers = self.outgoing(&call);
        let answer = mcp::call(
            upstream,
            &url,
            &ips,
            headers,
            call.operation.as_deref(),
            &call.input,
            deadline,
        )
        .await?;
        Ok(Invoked {
            operation: Some(answer.tool),
            status: 200,
            output: answer.output,
            output_problems: answer.output_problems,
            elapsed: started.elapsed(),
        })
    }

    /// An A2A agent ([`a2a`]): `message/send` (0.x) or `SendMessage`
    /// (1.x) to its card's JSON-RPC interface, within `gateway.timeout`.
    async fn invoke_a2a(
        &self,
        call: Call,
        card: &Value,
        started: Instant,
    ) -> Result<Invoked, GatewayError> {
        let card = crate::formats::a2a::parse_card(card).map_err(|e| {
            GatewayError::NotInvocable(format!("the agent's card does not read: {e}"))
        })?;
        let skill = a2a::skill(&card, call.operation.as_deref())?;
        let endpoint = a2a::endpoint(&card)?;
        let _permits = self.permits(&call.agent)?;
        let upstream = &*self.upstream(&call.agent);
        let deadline = started + upstream.timeout;
        let (url, ips) = upstream.target(&endpoint.url).await?;
        let headers = self.outgoing(&call);
        let sent = a2a::call(
            upstream,
            (&endpoint, &url, &ips),
            headers,
            &skill,
            &call.input,
        );
        let (status, output) = tokio::time::timeout_at(deadline, sent)
            .await
            .map_err(|_| GatewayError::Timeout(upstream.timeout))??;
        Ok(Invoked {
            operation: Some(skill),
            status,
            output,
            output_problems: Vec::new(),
            elapsed: started.elapsed(),
        })
    }

    /// How to reach `agent`: with the client certificate the operator
    /// gave the node for it, if any.
    fn upstream(&self, agent: &str) -> std::borrow::Cow<'_, Upstream> {
        let upstream = &self.options.upstream;
        match self.options.credentials.certificates.get(agent) {
            Some(tls) => std::borrow::Cow::Owned(upstream.presenting(agent, tls.clone())),
            None => std::borrow::Cow::Borrowed(upstream),
        }
    }

    /// An ADP agent ([`adp`]): a capability offered over `chat`, called
    /// with a signed `message` frame on its chat WebSocket after the
    /// handshake, within `gateway.timeout`. Only under a key this node
    /// counts as anchored in DNS.
    async fn invoke_adp(
        &self,
        call: Call,
        held: &HeldAgent,
        started: Instant,
    ) -> Result<Invoked, GatewayError> {
        let id = &call.agent;
        let signer = self.options.signer.as_ref().ok_or_else(|| {
            GatewayError::NotInvocable("this gateway has no node key to sign ADP frames".into())
        })?;
        if !held.anchored {
            return Err(GatewayError::NotInvocable(format!(
                "agent {id}'s key is not one this node counts as anchored in DNS (verified \
                 by this node or a trusted peer): the gateway calls an ADP agent only under \
                 such a key"
            )));
        }
        let document: crate::adp::AgentDocument = serde_json::from_value(held.doc.clone())
            .map_err(|e| {
                GatewayError::NotInvocable(format!("the agent's document does not read: {e}"))
            })?;
        let capability = adp::capability(&document, call.operation.as_deref())?;
        let _permits = self.permits(id)?;
        let upstream = &*self.upstream(id);
        let deadline = started + upstream.timeout;
        let (url, ips) = upstream.chat_target(&held.endpoint).await?;
        let target = adp::Held {
            agent: id,
            document: &document,
            doc_sha256: &held.doc_sha256,
        };
        let sent = adp::call(
            upstream,
            signer,
            &url,
            &ips,
            &target,
            &capability,
            &call.input,
        );
        let output = tokio::time::timeout_at(deadline, sent)
            .await
            .map_err(|_| GatewayError::Timeout(upstream.timeout))??;
        Ok(Invoked {
            operation: Some(capability),
            status: 200,
            output,
            output_problems: Vec::new(),
            elapsed: started.elapsed(),
        })
    }

    /// The headers to send the agent of `call`.
    fn outgoing(&self, call: &Call) -> HeaderMap {
        forward::outgoing(
            &call.headers,
            self.options
                .credentials
                .headers
                .get(&call.agent)
                .map(|(n, v)| (n, v)),
            call.request_id.as_deref(),
        )
    }

    /// What the node holds for the agent of `call` (its protocol,
    /// endpoint and document), for a caller who may see it, when it is not
    /// suspended here.
    async fn held(&self, call: &Call) -> Result<HeldAgent, GatewayError> {
        let id = &call.agent;
        let not_found = || GatewayError::NotFound { id: id.clone() };
        self.registry
            .visible_to(id, &call.viewer)
            .map_err(|_| not_found())?;
        if self.registry.store().suspension(id).is_some() {
            return Err(GatewayError::Suspended { id: id.clone() });
        }
        let held = self
            .registry
            .store()
            .get(id)
            .await
            .map_err(|e| GatewayError::Unreachable(format!("the store failed: {e}")))?
            .ok_or_else(not_found)?;
        let anchored = held.counted_evidence().fingerprint;
        let RecordBody::Descriptor(d) = held.body else {
            return Err(not_found());
        };
        let doc: Value = serde_json::from_str(&d.document).unwrap_or(Value::Null);
        let protocol = match d.descriptor.format {
            DocumentFormat::Aidip => Protocol::Aidip,
            // An MCP server reached over streamable HTTP (its first
            // remote, the descriptor's endpoint).
            DocumentFormat::McpRegistry
                if doc.pointer("/remotes/0/type").and_then(Value::as_str)
                    == Some("streamable-http") =>
            {
                Protocol::Mcp
            }
            DocumentFormat::A2a => Protocol::A2a,
            DocumentFormat::Adp => Protocol::Adp,
            other => {
                return Err(GatewayError::NotInvocable(format!(
                    "agent {id} is published as {}: the gateway calls AIDIP agents, MCP \
                     servers over streamable HTTP, A2A agents and ADP agents",
                    other.as_str()
                )))
            }
        };
        let endpoint = if protocol == Protocol::Adp {
            doc.pointer("/endpoints/chat")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| {
                    GatewayError::NotInvocable(format!("agent {id} has no endpoints.chat"))
                })?
        } else {
            d.descriptor
                .endpoint
                .clone()
                .ok_or_else(|| GatewayError::NotInvocable(format!("agent {id} has no endpoint")))?
        };
        Ok(HeldAgent {
            protocol,
            endpoint,
            doc,
            doc_sha256: d.doc_sha256,
            anchored,
        })
    }

    /// A slot among all calls and among this agent's, or `Busy`.
    fn permits(
        &self,
        agent: &str,
    ) -> Result<(OwnedSemaphorePermit, OwnedSemaphorePermit), GatewayError> {
        let all = self
            .all
            .clone()
            .try_acquire_owned()
            .map_err(|_| GatewayError::Busy("this node runs gateway.max_concurrent calls"))?;
        let one = {
            let mut map = self
                .per_agent
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            // Idle agents' semaphores (every permit back) are dropped.
            if map.len() > 1024 {
                let max = self.options.max_concurrent_per_agent;
                map.retain(|_, s| s.available_permits() < max);
            }
            map.entry(agent.to_owned())
                .or_insert_with(|| Arc::new(Semaphore::new(self.options.max_concurrent_per_agent)))
                .clone()
        };
        let one = one.try_acquire_owned().map_err(|_| {
            GatewayError::Busy(
                "this node runs gateway.max_concurrent_per_agent calls to this agent",
            )
        })?;
        Ok((all, one))
    }
}

/// `schema` checked against `value` on a blocking thread (a publisher's
/// schema may be large), compiled once for every call that uses it.
async fn checked(
    compiled: &operation::Compiled,
    schema: Value,
    value: Value,
) -> Result<Vec<Violation>, String> {
    let compiled = compiled.clone();
    tokio::task::spawn_blocking(move || compiled.check(&schema, &value))
        .await
        .map_err(|e| e.to_string())?
}

/// Where an operation is called: a named one at `{endpoint}/{name}`, the
/// implied one at the endpoint itself.
///
/// # Errors
/// [`GatewayError::EndpointRefused`] for an endpoint that is not a URL.
pub fn operation_url(endpoint: &str, name: Option<&str>) -> Result<String, GatewayError> {
    let Some(name) = name else {
        return Ok(endpoint.to_owned());
    };
    let mut url = url::Url::parse(endpoint)
        .map_err(|e| GatewayError::EndpointRefused(format!("{endpoint:?} is not a URL: {e}")))?;
    url.path_segments_mut()
        .map_err(|()| GatewayError::EndpointRefused(format!("{endpoint:?} cannot have a path")))?
        .pop_if_empty()
        .push(name);
    Ok(url.to_string())
}

/// The agent's answer as the call's outcome.
///
/// # Errors
/// [`GatewayError::AgentRefused`] (4xx), [`GatewayError::AgentBusy`]
/// (429, 503), [`GatewayError::AgentFailed`] (anything else that is not
/// a 2xx with JSON).
pub fn outcome(answer: Answer) -> Result<Value, GatewayError> {
    match answer.status {
        200..=299 => serde_json::from_slice(&answer.body)
            .map_err(|e| GatewayError::AgentFailed(format!("the agent's answer is not JSON: {e}"))),
        429 | 503 => Err(GatewayError::AgentBusy {
            retry_after: answer.retry_after.unwrap_or(Duration::from_secs(1)),
        }),
        status @ 400..=499 => Err(GatewayError::AgentRefused {
            status,
            body: refusal_body(&answer.body),
        }),
        status @ 300..=399 => Err(GatewayError::AgentFailed(format!(
            "the agent answered a redirect ({status}), which the gateway does not follow"
        ))),
        status => Err(GatewayError::AgentFailed(format!(
            "the agent answered {status}: {}",
            String::from_utf8_lossy(&answer.body[..answer.body.len().min(300)])
        ))),
    }
}

/// An agent's 4xx body, as passed on: its JSON when it is JSON, else its
/// text, bounded.
fn refusal_body(body: &[u8]) -> Value {
    match serde_json::from_slice::<Value>(body) {
        Ok(v) if v.to_string().chars().count() <= MAX_REFUSAL_CHARS => v,
        _ => Value::String(
            String::from_utf8_lossy(body)
                .chars()
                .take(MAX_REFUSAL_CHARS)
                .collect(),
        ),
    }
}

#[cfg(test)]
mod tests;
