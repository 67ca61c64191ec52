//! Step 1b: who may use the API (docs/protocol.md#api-access). A node
//! whose API listens beyond loopback never runs open: without any
//! credential configured (a client certificate entry counts) it refuses
//! to start, and says what to set. Loose permissions on the node key,
//! the admin token file and the TLS key are warned about. Step 0,
//! before the store opens: the TLS files of `[api.tls]`, read and
//! checked ([`build_tls`]).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;

use super::NodeError;
use crate::access::certs::ClientCertificates;
use crate::access::jwt::JwtVerifier;
use crate::access::keys::KeyRing;
use crate::api::Access;
use crate::config::Config;

/// The API's access: the configured credentials.
///
/// # Errors
/// [`NodeError::Access`] when the API listens beyond loopback with no
/// credential configured, or the JWT settings, the key file or an
/// `[[api.tls.clients]]` entry cannot be used.
pub(super) fn build_access(config: &Config) -> Result<Access, NodeError> {
    warn_if_loose(&config.node_key_path());
    if let Some(path) = &config.api.admin_token_file {
        warn_if_loose(path);
    }
    let keys = KeyRing::in_dir(&config.data_dir);
    let jwt = config
        .api
        .jwt
        .clone()
        .map(JwtVerifier::new)
        .transpose()
        .map_err(|e| NodeError::Access(e.to_string()))?;
    let clients = config.api.tls.as_ref().map_or(&[][..], |t| &t.clients[..]);
    let certificates =
        ClientCertificates::from_config(clients).map_err(|e| NodeError::Access(e.to_string()))?;
    let configured =
        config.api.admin_token.is_some() || jwt.is_some() || keys.any() || !certificates.is_empty();
    if let Some(e) = keys.last_error() {
        return Err(NodeError::Access(e));
    }
    if !configured {
        if !config.api.listen.ip().is_loopback() {
            return Err(NodeError::Access(format!(
                "the API listens on {}, beyond loopback, and no credential is configured, \
                 so anyone could write to this node. Set one of: api.admin_token_file \
                 (or AGENTMESH_API__ADMIN_TOKEN), an API key (`agentmesh keys create \
                 --data-dir {} --name operator --scope admin` prints one), [api.jwt], \
                 or [[api.tls.clients]] client certificates; or listen on 127.0.0.1",
                config.api.listen,
                config.data_dir.display()
            )));
        }
        tracing::info!("no API credentials are configured: on loopback, every caller may write");
    }
    Ok(Access::new(
        config.api.admin_token.clone(),
        keys,
        jwt,
        config.api.public_reads,
    )
    .with_certificates(certificates))
}

/// The API's TLS server configuration, when `[api.tls]` is set: its
/// files read and checked now, so that a missing or broken one stops
/// the start with its name.
///
/// # Errors
/// [`NodeError::Tls`] naming the file or the pair rustls refuses.
pub(super) fn build_tls(config: &Config) -> Result<Option<Arc<rustls::ServerConfig>>, NodeError> {
    let Some(tls) = &config.api.tls else {
        return Ok(None);
    };
    warn_if_loose(&tls.key_file);
    Ok(Some(crate::api::tls_server_config(tls)?))
}

/// Warns when a secret file can be read or written by others than its
/// owner.
fn warn_if_loose(path: &Path) {
    if let Ok(meta) = std::fs::metadata(path) {
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            tracing::warn!(
                file = %path.display(),
                mode = format!("{mode:o}"),
                "a secret file is open to other users: chmod 600 it"
            );
        }
    }
}
