//! `agentmesh search`: a running node's `POST /agents/search` from the
//! command line. The flags become the request body (query, filters, top,
//! scope); the results are a table that fits the terminal (id, name,
//! trust level, score, source; long values end in `…`), or with `--json`
//! the node's JSON array as it answered.

use std::process::ExitCode;

use clap::builder::TypedValueParser as _;
use clap::Args;
use serde_json::{json, Map, Value};

use super::http::{terminal_width, ApiArgs, NodeApi};
use crate::trust::TrustLevel;

/// Where a search looks (`--scope`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ScopeArg {
    /// This node's records only.
    Local,
    /// Peers are asked too (the node's default).
    Mesh,
}

/// Flags of `search`.
#[derive(Debug, Clone, Args)]
pub struct SearchArgs {
    /// Free text, ranked by the node's index (omit to list by filters).
    pub query: Option<String>,
    /// A capability id the agents must have (repeatable: all of them).
    #[arg(long = "capability", value_name = "ID")]
    pub capabilities: Vec<String>,
    /// A language the agents must support, BCP 47 (repeatable: all).
    #[arg(long = "language", value_name = "TAG")]
    pub languages: Vec<String>,
    /// A tag the agents must have (repeatable: all of them).
    #[arg(long = "tag", value_name = "TAG")]
    pub tags: Vec<String>,
    /// Only agents at this trust level or above.
    #[arg(long, value_name = "LEVEL", value_parser = trust_level())]
    pub min_trust: Option<TrustLevel>,
    /// `local` (this node only) or `mesh` (peers asked too); the node's
    /// default (mesh) when omitted.
    #[arg(long, value_enum)]
    pub scope: Option<ScopeArg>,
    /// Most results (the node caps it at its `api.max_limit`).
    #[arg(long, default_value_t = 10, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub top: u32,
    /// Print the node's JSON array instead of the table.
    #[arg(long)]
    pub json: bool,
    /// The node, and how long to wait for it.
    #[command(flatten)]
    pub api: ApiArgs,
}

/// `--min-trust`'s parser: the levels' wire names, listed in `--help`
/// and offered by the shell completions.
fn trust_level() -> impl clap::builder::TypedValueParser<Value = TrustLevel> {
    clap::builder::PossibleValuesParser::new(TrustLevel::ALL.map(TrustLevel::as_str)).map(|s| {
        s.parse::<TrustLevel>()
            .expect("the possible values are the levels' names")
    })
}

/// The request body the flags make.
fn body(args: &SearchArgs) -> Value {
    let mut filters = Map::new();
    for (name, values) in [
        ("capabilities", &args.capabilities),
        ("supported_languages", &args.languages),
        ("tags", &args.tags),
    ] {
        if !values.is_empty() {
            filters.insert(name.into(), json!(values));
        }
    }
    if let Some(level) = args.min_trust {
        filters.insert("min_trust".into(), json!(level.as_str()));
    }
    let mut body = Map::new();
    if let Some(q) = &args.query {
        body.insert("query".into(), json!(q));
    }
    if !filters.is_empty() {
        body.insert("filters".into(), Value::Object(filters));
    }
    body.insert("top".into(), json!(args.top));
    if let Some(scope) = args.scope {
        let scope = match scope {
            ScopeArg::Local => "local",
            ScopeArg::Mesh => "mesh",
        };
        body.insert("scope".into(), json!(scope));
    }
    Value::Object(body)
}

/// Runs `search`: exit 0 when the node answered (with or without
/// results), 1 when it refused the search (its problems are printed), 2
/// when it could not be reached in time.
///
/// # Errors
/// When the HTTP client cannot be built.
pub(super) async fn run(args: SearchArgs) -> anyhow::Result<ExitCode> {
    let api = NodeApi::new(&args.api)?;
    let answer = match api.post("/agents/search", &body(&args)).await {
        Ok(a) => a,
        Err(f) => return Ok(f.report()),
    };
    let results = answer.json();
    let Some(rows) = results.as_array() else {
        eprintln!(
            "error: {}/agents/search did not answer a JSON array: is it an agentmesh node?",
            api.base()
        );
        return Ok(ExitCode::from(super::http::EXIT_REFUSED));
    };
    if args.json {
        // The node's bytes as they came (it answers one compact line).
        println!("{}", answer.text.trim_end());
        return Ok(ExitCode::SUCCESS);
    }
    if rows.is_empty() {
        println!("no agents found");
    } else {
        print!("{}", table(rows, terminal_width()));
    }
    if let Some(line) = mesh_line(&answer.headers) {
        println!("{line}");
    }
    Ok(ExitCode::SUCCESS)
}

/// `mesh: 3 peers asked, 2 answered, 5 records received, 41 ms
/// (partial)`, from the `x-agentmesh-*` headers of a mesh search.
fn mesh_line(headers: &reqwest::header::HeaderMap) -> Option<String> {
    let h = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let asked = h("x-agentmesh-peers-asked").filter(|&n| n != "0")?;
    let mut line = format!(
        "mesh: {asked} peers asked, {} answered, {} records received, {} ms",
        h("x-agentmesh-peers-answered").unwrap_or("?"),
        h("x-agentmesh-records-received").unwrap_or("?"),
        h("x-agentmesh-elapsed-ms").unwrap_or("?"),
    );
    if h("x-agentmesh-partial") == Some("true") {
        line.push_str(" (partial)");
    }
    Some(line)
}

/// The result table in `width` columns: trust, score and source keep
/// their width; id and name share the rest, and a value too long for its
/// column is cut with `…`.
fn table(rows: &[Value], width: usize) -> String {
    const TRUST: usize = 13; // peer-verified
    const SCORE: usize = 5;
    const SOURCE: usize = 6;
    const GAPS: usize = 4 * 2;
    let cells: Vec<[String; 5]> = rows
        .iter()
        .map(|r| {
            [
                r["id"].as_str().unwrap_or_default().to_owned(),
                r["name"].as_str().unwrap_or_default().to_owned(),
                r["trust"]["level"].as_str().unwrap_or("?").to_owned(),
                r["score"]
                    .as_f64()
                    .map_or("-".into(), |s| format!("{s:.2}")),
                r["source"].as_str().unwrap_or("?").to_owned(),
            ]
        })
        .collect();
    let measure = |i: usize, header: &str| {
        cells
            .iter()
            .map(|c| console::measure_text_width(&c[i]))
            .chain([header.len()])
            .max()
            .unwrap_or(0)
    };
    let room = width.saturating_sub(TRUST + SCORE + SOURCE + GAPS).max(20);
    let (id_want, name_want) = (measure(0, "ID"), measure(1, "NAME"));
    // Ids are what a user copies: they keep at least 60 % of the room
    // when both are too long, and whatever the names leave.
    let id_w = id_want.min(room.saturating_sub(name_want).max(room * 3 / 5));
    let name_w = name_want.min(room - id_w);
    let fit = |s: &str, w: usize| {
        let cut = console::truncate_str(s, w, "…");
        let pad = w.saturating_sub(console::measure_text_width(&cut));
        format!("{cut}{}", " ".repeat(pad))
    };
    let line = |c: [&str; 5]| {
        format!(
            "{}  {}  {:<TRUST$}  {:>SCORE$}  {}",
            fit(c[0], id_w),
            fit(c[1], name_w),
            c[2],
            c[3],
            c[4]
        )
        .trim_end()
        .to_owned()
            + "\n"
    };
    let mut out = line(["ID", "NAME", "TRUST", "SCORE", "SOURCE"]);
    for c in &cells {
        out.push_str(&line([&c[0], &c[1], &c[2], &c[3], &c[4]]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser as _;

    fn parse(args: &[&str]) -> SearchArgs {
        match crate::cli::Cli::try_parse_from(["agentmesh", "search"].iter().chain(args)) {
            Ok(crate::cli::Cli {
                command: crate::cli::Command::Search(a),
                ..
            }) => a,
            other => panic!("{args:?}: {other:?}"),
        }
    }

    #[test]
    fn the_flags_make_the_search_body() {
        let a = parse(&[
            "summarise contracts",
            "--capability",
            "summarization",
            "--capability",
            "legal",
            "--language",
            "de",
            "--min-trust",
            "key-verified",
            "--scope",
            "local",
            "--top",
            "3",
        ]);
        assert_eq!(
            body(&a),
            json!({
                "query": "summarise contracts",
                "filters": {"capabilities": ["summarization", "legal"], "supported_languages": ["de"], "min_trust": "key-verified"},
                "top": 3,
                "scope": "local",
            })
        );
        assert_eq!(body(&parse(&[])), json!({"top": 10}));
    }

    #[test]
    fn a_bad_trust_level_scope_or_top_is_a_usage_error() {
        for args in [
            &["--min-trust", "trusted"][..],
            &["--scope", "world"],
            &["--top", "0"],
        ] {
            let e = crate::cli::Cli::try_parse_from(["agentmesh", "search"].iter().chain(args))
                .expect_err("refused");
            assert_eq!(e.exit_code(), 2, "{args:?}");
        }
    }

    #[test]
    fn a_mesh_search_says_whom_it_asked_and_a_local_one_says_nothing() {
        let mut h = reqwest::header::HeaderMap::new();
        assert_eq!(mesh_line(&h), None);
        for (name, value) in [
            ("x-agentmesh-peers-asked", "3"),
            ("x-agentmesh-peers-answered", "2"),
            ("x-agentmesh-records-received", "5"),
            ("x-agentmesh-elapsed-ms", "41"),
            ("x-agentmesh-partial", "true"),
        ] {
            h.insert(name, value.parse().unwrap());
        }
        assert_eq!(
            mesh_line(&h).as_deref(),
            Some("mesh: 3 peers asked, 2 answered, 5 records received, 41 ms (partial)")
        );
        h.insert("x-agentmesh-peers-asked", "0".parse().unwrap());
        assert_eq!(mesh_line(&h), None, "nobody asked: nothing to say");
    }

    fn row(id: &str, name: &str, level: &str, score: Option<f64>, source: &str) -> Value {
        json!({"id": id, "name": name, "trust": {"level": level}, "score": score, "source": source})
    }

    #[test]
    fn the_table_fits_the_width_and_cuts_long_names() {
        let rows = [
            row(
                "agent:a.example",
                "Short",
                "key-verified",
                Some(0.8765),
                "crawl",
            ),
            row(
                "b",
                &"A very long agent name that goes on and on ".repeat(4),
                "unverified",
                None,
                "local",
            ),
        ];
        let out = table(&rows, 80);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 3, "{out}");
        for l in &lines {
            assert!(
                console::measure_text_width(l) <= 80,
                "{l:?} is wider than 80"
            );
        }
        assert!(lines[0].starts_with("ID "), "{out}");
        assert!(lines[1].starts_with("agent:a.example  Short "), "{out}");
        assert!(lines[1].contains("key-verified    0.88  crawl"), "{out}");
        assert!(lines[2].contains('…'), "the long name is cut: {out}");
        assert!(lines[2].contains("unverified"), "{out}");
        assert!(lines[2].ends_with("-  local"), "{out}");
    }
}
