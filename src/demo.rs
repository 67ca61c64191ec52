//! `agentmesh demo`: the README's one-command tour. It starts a node on a
//! temporary data directory, registers the drafts' example agents and a
//! generated population, shows a few searches, then serves the API until
//! Ctrl-C with curl examples to try.

use std::path::PathBuf;

use anyhow::Context as _;
use serde_json::{json, Value};

use crate::cli::DemoArgs;
use crate::config::Config;
use crate::node::Node;
use crate::registry::{Registry, SearchQuery, Summary};
use crate::store::Filter;

const EXAMPLES: [&str; 4] = [
    include_str!("../proto/examples/aidip/valid/translator-draft-example.json"),
    include_str!("../proto/examples/aidip/valid/legal-summarizer-zh-en.json"),
    include_str!("../proto/examples/aidip/valid/extra-fields-oauth2-scopes.json"),
    include_str!("../proto/examples/aidip/valid/minimal-top-level-inputs-outputs.json"),
];

const CAPABILITIES: [&str; 12] = [
    "translation",
    "summarization",
    "text_generation",
    "code_review",
    "image_captioning",
    "speech_to_text",
    "sentiment_analysis",
    "search",
    "scheduling",
    "data_extraction",
    "question_answering",
    "classification",
];
const LANGUAGES: [&str; 8] = ["en", "zh", "fr", "de", "es", "ja", "pt-BR", "ar"];
const PUBLISHERS: [&str; 5] = [
    "Acme AI",
    "Northwind Labs",
    "Example Org",
    "Globex",
    "Initech",
];
const DOMAINS: [&str; 6] = [
    "legal",
    "medical",
    "finance",
    "retail",
    "education",
    "travel",
];

/// A deterministic synthetic AIDIP document, number `i` of a population.
pub fn synthetic_agent(i: usize) -> Value {
    let cap = |k: usize| CAPABILITIES[(i * 7 + k * 5) % CAPABILITIES.len()];
    let (c1, c2) = (cap(0), cap(1));
    let capabilities: Vec<&str> = if c1 == c2 { vec![c1] } else { vec![c1, c2] };
    let domain = DOMAINS[i % DOMAINS.len()];
    let languages = vec![
        LANGUAGES[i % LANGUAGES.len()],
        LANGUAGES[(i / 3 + 1) % LANGUAGES.len()],
    ];
    json!({
        "id": format!("demo-{i:05}"),
        "name": format!("{} {} agent #{i}", domain, c1.replace('_', " ")),
        "description": format!("A {domain} agent offering {}.", capabilities.join(" and ").replace('_', " ")),
        "version": "1.0.0",
        "publisher": PUBLISHERS[i % PUBLISHERS.len()],
        "capabilities": capabilities,
        "tags": [domain, if i.is_multiple_of(2) { "cloud" } else { "on_premises" }],
        "endpoint": format!("https://agents{}.example.net/{i}", i % 10),
        "supported_languages": languages,
        "authentication": {"type": "api_key"},
        "status": "active",
        "inputs": {"type": "object", "properties": {"text": {"type": "string"}}},
        "outputs": {"type": "object"}
    })
}

fn print_results(title: &str, items: &[Summary]) {
    println!("\n{title}: {} result(s)", items.len());
    for s in items {
        let score = s
            .score
            .map(|v| format!(" score {v:.2}"))
            .unwrap_or_default();
        println!(
            "  {:<14} {:<40} [{}] trust {}{score}",
            s.id,
            s.name.chars().take(40).collect::<String>(),
            s.capabilities.join(", "),
            s.trust.level
        );
    }
}

fn filter(caps: &[&str], tags: &[&str], langs: &[&str]) -> anyhow::Result<Filter> {
    Filter::new(
        caps.iter().copied(),
        tags.iter().copied(),
        langs.iter().copied(),
    )
    .map_err(|bad| anyhow::anyhow!("bad language {bad}"))
}

async fn tour(registry: &Registry) -> anyhow::Result<()> {
    for text in EXAMPLES {
        let doc: Value = serde_json::from_str(text).context("built-in example")?;
        registry.register(doc).await?;
    }
    for i in 0..200 {
        registry.register(synthetic_agent(i)).await?;
    }
    println!(
        "registered {} agents (4 from the drafts' examples, 200 generated)",
        registry.store().len()
    );
    let q = |filter, query: Option<&str>, limit| SearchQuery {
        filter,
        query: query.map(str::to_owned),
        after: None,
        limit,
    };
    let r = registry.search(&q(filter(&["translation"], &["nlp"], &["zh"])?, None, 5))?;
    print_results(
        "filter: capability translation, tag nlp, language zh",
        &r.items,
    );
    let r = registry.search(&q(filter(&["summarization"], &["legal"], &[])?, None, 5))?;
    print_results("filter: capability summarization, tag legal", &r.items);
    let r = registry.search(&q(
        Filter::default(),
        Some("summarize long legal documents in Chinese"),
        5,
    ))?;
    print_results(
        "query: \"summarize long legal documents in Chinese\"",
        &r.items,
    );
    Ok(())
}

/// Runs the demo.
///
/// # Errors
/// When the node cannot start or a step fails.
pub async fn run(args: DemoArgs) -> anyhow::Result<()> {
    let (data_dir, temporary) = match &args.data_dir {
        Some(d) => (d.clone(), false),
        None => (
            std::env::temp_dir().join(format!(
                "agentmesh-demo-{}",
                hex::encode(rand::random::<[u8; 6]>())
            )),
            true,
        ),
    };
    let result = run_in(&args, data_dir.clone(), temporary).await;
    if temporary {
        let _ = std::fs::remove_dir_all(&data_dir);
    }
    result
}

async fn run_in(args: &DemoArgs, data_dir: PathBuf, temporary: bool) -> anyhow::Result<()> {
    let signal = crate::cli::shutdown_signal();
    let place = if temporary {
        "a temporary directory".to_owned()
    } else {
        data_dir.display().to_string()
    };
    let mut config = Config {
        data_dir,
        ..Config::default()
    };
    config.api.listen = args.listen;
    // The single-node tour keeps its p2p listener on loopback, on any port.
    config.p2p.listen = vec!["/ip4/127.0.0.1/tcp/0".into()];
    let node = Node::spawn(config)
        .await
        .context("starting the demo node")?;
    println!(
        "agentmesh demo: node {} with data in {place}",
        node.peer_id()
    );
    let outcome = tour(node.registry()).await;
    if outcome.is_ok() && !args.no_serve {
        let base = format!("http://{}", node.api_addr());
        println!("\nThe API is live at {base}. Try:");
        println!("  curl -s {base}/health");
        println!("  curl -s '{base}/agents?capabilities=translation&language=zh'");
        println!("  curl -s {base}/agents/agent-12345");
        println!("  curl -s -X POST {base}/agents/search -H 'content-type: application/json' \\");
        println!("       -d '{{\"filters\":{{\"capabilities\":[\"summarization\"],\"tags\":[\"legal\"]}},\"top\":3}}'");
        println!("Ctrl-C stops the demo and removes its data.");
        signal.await;
    }
    node.shutdown().await?;
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aidip::MetadataValidator;

    #[test]
    fn synthetic_agents_are_valid_registrations() {
        let v = MetadataValidator::new();
        for i in 0..50 {
            v.parse(&synthetic_agent(i))
                .unwrap_or_else(|p| panic!("agent {i}: {p:?}"));
        }
    }
}
