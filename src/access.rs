//! Who may do what through the API: the [`Scope`]s a credential grants,
//! the node's API keys ([`keys`]: kept hashed in a file of the data
//! directory, read again when it changes, so `agentmesh keys` works
//! while the node runs), bearer JWTs checked against a configured
//! JWKS ([`jwt`]), and client certificates from `[[api.tls.clients]]`
//! ([`certs`]). The API's authentication layer (`api/auth.rs`) asks
//! these which principal a request's credentials prove and what it may
//! do; which route needs which scope is the API's table.

pub mod certs;
pub mod jwt;
pub mod keys;
mod scope;

pub use scope::{Scope, ScopeError, Scopes};
