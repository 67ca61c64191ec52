//! `agentmesh keys`: the node's API keys, made, listed and revoked in
//! its data directory's key file. A running node reads the file again
//! within a second of a change (docs/protocol.md#api-access), so these
//! work while it runs.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};
use serde_json::json;

use crate::access::keys::{KeyRing, StoredKey};
use crate::access::{Scope, Scopes};
use crate::config::Config;

/// Flags of `keys`.
#[derive(Debug, Clone, Args)]
pub struct KeysArgs {
    /// TOML config file (for its data_dir).
    #[arg(long, env = "AGENTMESH_CONFIG", value_name = "FILE", global = true)]
    pub config: Option<PathBuf>,
    /// Data directory (where api-keys.json is).
    #[arg(long, env = "AGENTMESH_DATA_DIR", value_name = "DIR", global = true)]
    pub data_dir: Option<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long, global = true)]
    pub json: bool,
    /// What to do.
    #[command(subcommand)]
    pub action: KeysAction,
}

/// What `keys` does.
#[derive(Debug, Clone, Subcommand)]
pub enum KeysAction {
    /// Make a key and print its token once (the token alone on stdout,
    /// what it allows on stderr; with --json, all of it as JSON).
    Create {
        /// Who holds it (shown by `keys list` and in the audit log).
        #[arg(long)]
        name: String,
        /// What it allows (repeatable, or comma-separated): read,
        /// register, records, import, crawl, admin.
        #[arg(long = "scope", value_delimiter = ',', required = true)]
        scopes: Vec<Scope>,
        /// How long it works (`90d`, `12h`); forever when not given.
        #[arg(long, value_parser = humantime::parse_duration)]
        expires: Option<Duration>,
    },
    /// List every key: id, name, scopes, state (never a secret).
    List,
    /// Revoke a key by its id (it stays listed, marked revoked).
    Revoke {
        /// The key's id (16 hex digits, from `keys list`).
        id: String,
    },
}

/// Runs `keys`.
///
/// # Errors
/// The key file could not be read or written, or the config loaded.
pub(super) fn run(args: KeysArgs) -> anyhow::Result<ExitCode> {
    let mut config = Config::load(args.config.as_deref(), std::env::vars())?;
    if let Some(d) = &args.data_dir {
        config.data_dir = d.clone();
    }
    crate::node::create_data_dir(&config.data_dir)?;
    let ring = KeyRing::in_dir(&config.data_dir);
    match args.action {
        KeysAction::Create {
            name,
            scopes,
            expires,
        } => {
            let scopes: Scopes = scopes.into_iter().collect();
            let made = ring
                .create(&name, scopes, expires)
                .with_context(|| format!("making a key in {}", ring.path().display()))?;
            if args.json {
                let mut shown = described(&made.key);
                shown["token"] = json!(made.token);
                println!("{shown}");
            } else {
                eprintln!(
                    "key {} ({}) allows: {}; {}. The token below is shown once.",
                    made.key.id,
                    made.key.name,
                    made.key.scopes,
                    expiry(&made.key)
                );
                println!("{}", made.token);
            }
        }
        KeysAction::List => {
            let keys = ring
                .list()
                .with_context(|| format!("reading {}", ring.path().display()))?;
            if args.json {
                let all: Vec<_> = keys.iter().map(described).collect();
                println!("{}", serde_json::Value::Array(all));
            } else if keys.is_empty() {
                eprintln!("no API keys in {}", ring.path().display());
            } else {
                println!("{:<16}  {:<8}  {:<24}  SCOPES", "ID", "STATE", "NAME");
                for key in &keys {
                    println!(
                        "{:<16}  {:<8}  {:<24}  {}",
                        key.id,
                        state(key),
                        key.name,
                        key.scopes
                    );
                }
            }
        }
        KeysAction::Revoke { id } => {
            let changed = ring
                .revoke(&id)
                .with_context(|| format!("revoking in {}", ring.path().display()))?;
            if changed {
                eprintln!("key {id} revoked; a running node refuses it within a second");
            } else {
                eprintln!("key {id} was revoked already");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn state(key: &StoredKey) -> &'static str {
    if key.revoked.is_some() {
        "revoked"
    } else if key
        .expires
        .is_some_and(|at| at <= crate::record::unix_now())
    {
        "expired"
    } else {
        "active"
    }
}

fn expiry(key: &StoredKey) -> String {
    match key.expires {
        Some(at) => format!(
            "expires {}",
            httpdate::fmt_http_date(std::time::UNIX_EPOCH + Duration::from_secs(at))
        ),
        None => "does not expire".into(),
    }
}

/// A key as shown: everything but the secret's hash.
fn described(key: &StoredKey) -> serde_json::Value {
    json!({
        "id": key.id,
        "name": key.name,
        "scopes": key.scopes,
        "state": state(key),
        "created": key.created,
        "expires": key.expires,
        "revoked": key.revoked,
    })
}
