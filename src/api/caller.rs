//! Who is asking. Two request extensions carry it to the layers and
//! handlers that need it (the rate limits, the audit log, the
//! entitlement checks):
//! - [`ClientAddr`]: the client's address, set by the server for each
//!   connection (the peer of the TCP connection, or behind a configured
//!   proxy the address the proxy reports);
//! - [`Caller`]: that address and the identity the request's
//!   credentials prove ([`Principal`]), set by the authentication layer
//!   before any handler runs.
//!
//! A request built without a server (a test's `oneshot`) has no
//! [`ClientAddr`]; its [`Caller`] then has no address.

use std::fmt;
use std::net::IpAddr;

/// The client's address, as the server determined it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientAddr(pub IpAddr);

/// Who a request's credentials prove it comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    /// No credentials (or none that the node checks).
    Anonymous,
    /// The node's admin token (`api.admin_token`).
    AdminToken,
    /// An API key, by its id (never its secret).
    ApiKey {
        /// The key's id.
        id: String,
    },
    /// A bearer JWT, by its issuer's subject.
    Jwt {
        /// The token's `sub` claim.
        subject: String,
    },
    /// A TLS client certificate, by the `[[api.tls.clients]]` entry it
    /// matched.
    Certificate {
        /// The entry's name.
        name: String,
    },
}

impl fmt::Display for Principal {
    /// How the audit log and the rate limits name it: `anonymous`,
    /// `admin-token`, `key:<id>`, `jwt:<subject>`, `cert:<name>`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Anonymous => f.write_str("anonymous"),
            Self::AdminToken => f.write_str("admin-token"),
            Self::ApiKey { id } => write!(f, "key:{id}"),
            Self::Jwt { subject } => write!(f, "jwt:{subject}"),
            Self::Certificate { name } => write!(f, "cert:{name}"),
        }
    }
}

/// A request's caller: who, and from where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// Who its credentials prove.
    pub principal: Principal,
    /// Its address, when a server received it.
    pub addr: Option<IpAddr>,
}

impl Caller {
    /// The caller of a request, from its extensions: anonymous when the
    /// authentication layer did not run (a router without it).
    pub fn of(extensions: &axum::http::Extensions) -> Caller {
        extensions
            .get::<Caller>()
            .cloned()
            .unwrap_or_else(|| Caller {
                principal: Principal::Anonymous,
                addr: extensions.get::<ClientAddr>().map(|a| a.0),
            })
    }
}
