//! `agentmesh status`: what a running node says about itself, from its
//! API: `GET /health` (version, peer id, addresses, records by trust
//! level, the crawl queue and recrawl schedule) and `GET /peers` (the
//! connected peers, records from peers accepted and refused). Aligned
//! text for people, one JSON object with `--json`.

use std::process::ExitCode;

use clap::Args;
use serde_json::{json, Map, Value};

use super::http::{ApiArgs, Failure, NodeApi};
use crate::trust::TrustLevel;

/// Flags of `status`.
#[derive(Debug, Clone, Args)]
pub struct StatusArgs {
    /// The node, and how long to wait for it.
    #[command(flatten)]
    pub api: ApiArgs,
    /// Print one JSON object instead of the text.
    #[arg(long)]
    pub json: bool,
}

/// Runs `status`: exit 0 when the node answered, 1 when it answered with
/// an error, 2 when it could not be reached in time.
///
/// # Errors
/// When the HTTP client cannot be built.
pub(super) async fn run(args: StatusArgs) -> anyhow::Result<ExitCode> {
    let api = NodeApi::new(&args.api)?;
    let health = match api.get("/health").await {
        Ok(a) => a.json(),
        Err(f) => return Ok(f.report()),
    };
    if !health.is_object() {
        eprintln!(
            "error: {}/health did not answer a JSON object: is it an agentmesh node?",
            api.base()
        );
        return Ok(ExitCode::from(super::http::EXIT_REFUSED));
    }
    // A node without a mesh answers /peers 503: its peers are then none.
    let peers = match api.get("/peers").await {
        Ok(a) => Some(a.json()),
        Err(Failure::Refused { answer, .. })
            if answer.status == reqwest::StatusCode::SERVICE_UNAVAILABLE =>
        {
            None
        }
        Err(f) => return Ok(f.report()),
    };
    let status = combine(api.base(), health, peers);
    if args.json {
        println!("{status}");
    } else {
        print!("{}", text(&status, crate::record::unix_now()));
    }
    Ok(ExitCode::SUCCESS)
}

/// The one object `--json` prints: `/health`'s members, the CLI's
/// version and the URL asked, and from `/peers` the connected peers
/// (`connected`) and what the node made of records from peers
/// (`mesh_records`), both `null` for a node without a mesh.
fn combine(api: &str, health: Value, peers: Option<Value>) -> Value {
    let mut out = Map::new();
    out.insert("api".into(), json!(api));
    out.insert("cli_version".into(), json!(env!("CARGO_PKG_VERSION")));
    if let Value::Object(h) = health {
        out.extend(h);
    }
    let (connected, records) = match peers {
        Some(mut p) => (p["peers"].take(), p["records"].take()),
        None => (Value::Null, Value::Null),
    };
    out.insert("connected".into(), connected);
    out.insert("mesh_records".into(), records);
    Value::Object(out)
}

/// The longest label (`crawl queue`): every value starts after it.
const LABEL_WIDTH: usize = 11;

/// The text layout: one `label  value` line each, values aligned.
fn text(s: &Value, now: u64) -> String {
    let mut lines = Lines::default();
    node(&mut lines, s);
    records(&mut lines, s);
    peers(&mut lines, s);
    crawl(&mut lines, s, now);
    semantic(&mut lines, s);
    lines
        .0
        .iter()
        .map(|(label, value)| format!("{label:<LABEL_WIDTH$}  {value}\n"))
        .collect()
}

/// The report's lines so far, label and value; a label left empty
/// continues the line above.
#[derive(Default)]
struct Lines(Vec<(String, String)>);

impl Lines {
    fn line(&mut self, label: &str, value: String) {
        self.0.push((label.to_owned(), value));
    }
}

/// A JSON string as shown, `?` when it is missing.
fn str_of(v: &Value) -> String {
    v.as_str().unwrap_or("?").to_owned()
}

/// The node: its API, health, versions, peer id and addresses.
fn node(lines: &mut Lines, s: &Value) {
    lines.line("node", str_of(&s["api"]));
    lines.line("status", str_of(&s["status"]));
    lines.line(
        "version",
        format!(
            "{} (this CLI {})",
            str_of(&s["version"]),
            str_of(&s["cli_version"])
        ),
    );
    lines.line("peer id", str_of(&s["peer_id"]));
    for (label, key) in [
        ("listening", "listen_addrs"),
        ("external", "external_addrs"),
    ] {
        let addrs: Vec<String> = s[key]
            .as_array()
            .into_iter()
            .flatten()
            .map(str_of)
            .collect();
        if addrs.is_empty() {
            lines.line(label, "none".into());
        }
        for (i, a) in addrs.into_iter().enumerate() {
            lines.line(if i == 0 { label } else { "" }, a);
        }
    }
}

/// The records held, by trust level.
fn records(lines: &mut Lines, s: &Value) {
    let by_trust: Vec<String> = TrustLevel::ALL
        .iter()
        .filter_map(|l| {
            Some(format!(
                "{} {}",
                s["records_by_trust"][l.as_str()].as_u64()?,
                l
            ))
        })
        .collect();
    let records = s["records"].as_u64().map_or("?".into(), |n| n.to_string());
    lines.line(
        "records",
        if by_trust.is_empty() {
            records
        } else {
            format!("{records} ({})", by_trust.join(", "))
        },
    );
}

/// The mesh: connected peers, and what the node made of their records.
fn peers(lines: &mut Lines, s: &Value) {
    let count = s["peers"].as_u64().map_or("?".into(), |n| n.to_string());
    match s["connected"].as_array() {
        None => lines.line("peers", format!("{count} (this node runs no mesh)")),
        Some(peers) => {
            lines.line("peers", format!("{count} connected"));
            for p in peers {
                let addr = p["addrs"][0].as_str().unwrap_or_default();
                lines.line(
                    "",
                    format!("{} {addr}", str_of(&p["peer_id"]))
                        .trim_end()
                        .into(),
                );
            }
        }
    }
    if let Some(records) = s["mesh_records"].as_object() {
        let refused: u64 = records["refused"]
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(_, n)| n.as_u64())
            .sum();
        lines.line(
            "from peers",
            format!(
                "{} records accepted, {refused} refused",
                records["accepted"].as_u64().unwrap_or(0)
            ),
        );
    }
}

/// The crawler: its queue and its recrawl schedule, `now` in Unix
/// seconds.
fn crawl(lines: &mut Lines, s: &Value, now: u64) {
    let Some(c) = s["crawl"].as_object() else {
        lines.line("crawl", "this node does not crawl".into());
        return;
    };
    lines.line(
        "crawl queue",
        format!(
            "{} jobs waiting (room for {})",
            c["jobs_waiting"].as_u64().unwrap_or(0),
            c["capacity"].as_u64().unwrap_or(0)
        ),
    );
    let schedule = c["schedule"].as_object().map_or_else(
        || "off".to_owned(),
        |r| {
            let next = match r["next_at"].as_u64() {
                None => String::new(),
                Some(at) if at <= now => ", next now".into(),
                Some(at) => format!(", next in {}", span(at - now)),
            };
            format!(
                "{} domains, {} due{next}",
                r["domains"].as_u64().unwrap_or(0),
                r["due"].as_u64().unwrap_or(0)
            )
        },
    );
    lines.line("recrawl", schedule);
}

/// The vector index, which only a node with a semantic model has.
fn semantic(lines: &mut Lines, s: &Value) {
    let Some(v) = s["semantic"].as_object() else {
        return;
    };
    let agents = v["agents"].as_u64().unwrap_or(0);
    let state = if v["stopped"].as_bool() == Some(true) {
        format!(
            "STOPPED with {agents} agents: searches by meaning no longer follow the \
             store (see the node's log; a restart reads it again)"
        )
    } else if v["ready"].as_bool() == Some(true) {
        format!("{agents} agents")
    } else {
        format!("reading the store, {agents} agents so far")
    };
    lines.line("semantic", state);
}

/// `45s`, `12m`, `3h 5m`, `2d 4h`.
fn span(secs: u64) -> String {
    match secs {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m", s / 60),
        s if s < 86_400 => format!("{}h {}m", s / 3600, s % 3600 / 60),
        s => format!("{}d {}h", s / 86_400, s % 86_400 / 3600),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn health() -> Value {
        json!({
            "status": "ok", "version": "9.9.9", "peer_id": "12D3KooWX",
            "listen_addrs": ["/ip4/127.0.0.1/tcp/1/p2p/12D3KooWX", "/ip4/10.0.0.1/tcp/1/p2p/12D3KooWX"],
            "external_addrs": [], "records": 3,
            "records_by_trust": {"unverified": 1, "dns-verified": 0, "key-verified": 2, "peer-verified": 0},
            "peers": 1,
            "crawl": {"jobs_waiting": 0, "capacity": 64, "schedule": {"domains": 4, "due": 1, "next_at": 1000}},
        })
    }

    #[test]
    fn the_text_aligns_its_labels_and_shows_every_part() {
        let peers = json!({
            "peers": [{"peer_id": "12D3KooWP", "addrs": ["/ip4/127.0.0.1/tcp/2"]}],
            "records": {"accepted": 5, "refused": {"bad_signature": 1, "expired": 2}},
        });
        let out = text(&combine("http://n", health(), Some(peers)), 1000 - 125);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "node         http://n");
        assert!(
            lines.contains(
                &"version      9.9.9 (this CLI 0.1.0)"
                    .replace("0.1.0", env!("CARGO_PKG_VERSION"))
                    .as_str()
            ),
            "{out}"
        );
        assert!(
            lines.contains(&"listening    /ip4/127.0.0.1/tcp/1/p2p/12D3KooWX"),
            "{out}"
        );
        assert!(
            lines.contains(&"             /ip4/10.0.0.1/tcp/1/p2p/12D3KooWX"),
            "{out}"
        );
        assert!(lines.contains(&"external     none"), "{out}");
        assert!(
            lines.contains(
                &"records      3 (1 unverified, 0 dns-verified, 2 key-verified, 0 peer-verified)"
            ),
            "{out}"
        );
        assert!(lines.contains(&"peers        1 connected"), "{out}");
        assert!(
            lines.contains(&"             12D3KooWP /ip4/127.0.0.1/tcp/2"),
            "{out}"
        );
        assert!(
            lines.contains(&"from peers   5 records accepted, 3 refused"),
            "{out}"
        );
        assert!(
            lines.contains(&"crawl queue  0 jobs waiting (room for 64)"),
            "{out}"
        );
        assert!(
            lines.contains(&"recrawl      4 domains, 1 due, next in 2m"),
            "{out}"
        );
    }

    #[test]
    fn a_node_without_mesh_or_crawler_says_so() {
        let mut h = health();
        h["crawl"] = Value::Null;
        let out = text(&combine("http://n", h, None), 0);
        assert!(
            out.contains("peers        1 (this node runs no mesh)"),
            "{out}"
        );
        assert!(
            out.contains("crawl        this node does not crawl"),
            "{out}"
        );
        assert!(!out.contains("from peers"), "{out}");
    }

    #[test]
    fn the_vector_index_shows_when_there_is_one_and_says_when_it_stopped() {
        let semantic = |v: Value| {
            let mut h = health();
            h["semantic"] = v;
            text(&combine("http://n", h, None), 0)
        };
        assert!(!semantic(Value::Null).contains("semantic"));
        let out = semantic(json!({"ready": true, "agents": 12, "stopped": false}));
        assert!(out.contains("semantic     12 agents\n"), "{out}");
        let out = semantic(json!({"ready": false, "agents": 3, "stopped": false}));
        assert!(
            out.contains("semantic     reading the store, 3 agents so far"),
            "{out}"
        );
        let out = semantic(json!({"ready": true, "agents": 12, "stopped": true}));
        assert!(out.contains("semantic     STOPPED with 12 agents"), "{out}");
    }

    #[test]
    fn spans_read_at_a_glance() {
        assert_eq!(span(45), "45s");
        assert_eq!(span(125), "2m");
        assert_eq!(span(3 * 3600 + 300), "3h 5m");
        assert_eq!(span(2 * 86_400 + 4 * 3600), "2d 4h");
    }
}
