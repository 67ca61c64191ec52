//! Generated AIDIP registrations: a deterministic population of valid
//! documents for benchmarks and examples.

use serde_json::{json, Value};

/// The capability ids of the synthetic population.
pub const SYNTHETIC_CAPABILITIES: [&str; 12] = [
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
/// The languages of the synthetic population.
pub const SYNTHETIC_LANGUAGES: [&str; 8] = ["en", "zh", "fr", "de", "es", "ja", "pt-BR", "ar"];
const PUBLISHERS: [&str; 5] = [
    "Acme AI",
    "Northwind Labs",
    "Example Org",
    "Globex",
    "Initech",
];
/// The subject domains of the synthetic population (each agent's first
/// tag), for benchmarks that word queries about them.
pub const SYNTHETIC_DOMAINS: [&str; 6] = [
    "legal",
    "medical",
    "finance",
    "retail",
    "education",
    "travel",
];

/// A deterministic synthetic AIDIP document, number `i` of a population.
pub fn synthetic_agent(i: usize) -> Value {
    let cap = |k: usize| SYNTHETIC_CAPABILITIES[(i * 7 + k * 5) % SYNTHETIC_CAPABILITIES.len()];
    let (c1, c2) = (cap(0), cap(1));
    let capabilities: Vec<&str> = if c1 == c2 { vec![c1] } else { vec![c1, c2] };
    let domain = SYNTHETIC_DOMAINS[i % SYNTHETIC_DOMAINS.len()];
    let languages = vec![
        SYNTHETIC_LANGUAGES[i % SYNTHETIC_LANGUAGES.len()],
        SYNTHETIC_LANGUAGES[(i / 3 + 1) % SYNTHETIC_LANGUAGES.len()],
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
