//! The agents the relevance set is judged over: a seeded, deterministic
//! population of AIDIP documents, each with the ground truth it was made
//! from (capabilities, subject domain, languages, trust level).
//!
//! Agent `i` depends only on `i`, so the first 1,000 agents of a 100k
//! population are the 1,000 of the small test, and the queries (anchored
//! on those) have relevant agents at every size. Names and descriptions
//! are written from several wordings per capability, not only the
//! capability id, so a ranker has to understand words, not match ids.

use agentmesh::trust::TrustLevel;
use serde_json::{json, Value};

/// Every agent the queries are anchored on is below this index.
pub(crate) const ANCHORS: usize = 1_000;

/// One capability the generator gives agents: its id, what an agent
/// with it is called, and sentences describing it (`{d}` is replaced by
/// the domain's objects, e.g. "contracts and court filings").
pub(crate) struct Kind {
    pub(crate) id: &'static str,
    pub(crate) nouns: &'static [&'static str],
    pub(crate) sentences: &'static [&'static str],
}

const fn kind(
    id: &'static str,
    nouns: &'static [&'static str],
    sentences: &'static [&'static str],
) -> Kind {
    Kind {
        id,
        nouns,
        sentences,
    }
}

/// The capability vocabulary: the testbed's 30 (`src/testbed/vocab.rs`)
/// and the four more of the synthetic registrations.
pub(crate) const KINDS: &[Kind] = &[
    kind(
        "translation",
        &["Translator", "Localizer"],
        &[
            "Translates {d} between languages, keeping formatting.",
            "Professional-grade machine translation for {d}.",
            "Localizes {d} for new markets.",
        ],
    ),
    kind(
        "summarization",
        &["Summarizer", "Digest", "Condenser"],
        &[
            "Condenses long {d} into short abstracts.",
            "Summarizes {d} into a few key points.",
            "Produces concise summaries of lengthy {d}.",
        ],
    ),
    kind(
        "code_review",
        &["Code Reviewer", "Patch Checker"],
        &[
            "Reviews patches for bugs, style and security issues.",
            "Automated code review for pull requests.",
            "Reads diffs and comments on likely defects.",
        ],
    ),
    kind(
        "code_generation",
        &["Coder", "Code Writer"],
        &[
            "Writes code from a natural-language specification.",
            "Generates functions and tests from plain-English requirements.",
            "A programming assistant that implements features end to end.",
        ],
    ),
    kind(
        "sentiment_analysis",
        &["Sentiment Scorer", "Mood Meter"],
        &[
            "Scores the sentiment and emotion of short texts.",
            "Detects whether {d} feedback is positive, negative or neutral.",
            "Opinion mining over reviews and social posts.",
        ],
    ),
    kind(
        "entity_extraction",
        &["Entity Extractor", "NER"],
        &[
            "Finds people, organisations, places and dates in {d}.",
            "Named-entity recognition for {d}.",
            "Pulls names, companies and locations out of free text.",
        ],
    ),
    kind(
        "question_answering",
        &["Answer Engine", "QA"],
        &[
            "Answers questions grounded in supplied {d}.",
            "Ask questions about your {d} and get cited answers.",
            "Retrieval-augmented question answering over {d}.",
        ],
    ),
    kind(
        "speech_to_text",
        &["Transcriber", "Scribe"],
        &[
            "Transcribes speech with timestamps and speaker labels.",
            "Turns recorded calls and meetings into accurate transcripts.",
            "Speech recognition for dictation and interviews.",
        ],
    ),
    kind(
        "text_to_speech",
        &["Voice", "Narrator"],
        &[
            "Reads text aloud in natural-sounding voices.",
            "Speech synthesis for {d}, with many voices.",
            "Turns articles into spoken audio.",
        ],
    ),
    kind(
        "image_captioning",
        &["Captioner", "Alt Text"],
        &[
            "Describes the content of photographs and diagrams.",
            "Writes alt text and captions for images.",
            "Generates short descriptions of pictures.",
        ],
    ),
    kind(
        "image_generation",
        &["Painter", "Image Studio"],
        &[
            "Creates images from text prompts.",
            "Generates illustrations and artwork from descriptions.",
            "Text-to-image generation for marketing visuals.",
        ],
    ),
    kind(
        "ocr",
        &["OCR", "Page Reader"],
        &[
            "Extracts text from scanned pages and photos.",
            "Optical character recognition for scanned {d}.",
            "Reads printed and handwritten text from images.",
        ],
    ),
    kind(
        "document_parsing",
        &["Parser", "Form Reader"],
        &[
            "Turns invoices, forms and receipts into structured data.",
            "Parses PDF {d} into JSON fields.",
            "Extracts line items and totals from business documents.",
        ],
    ),
    kind(
        "legal_review",
        &["Contract Reviewer", "Clause Checker"],
        &[
            "Flags risky clauses in contracts and terms.",
            "Reviews agreements and NDAs for unusual obligations.",
            "Contract analysis that highlights liabilities.",
        ],
    ),
    kind(
        "medical_coding",
        &["Medical Coder", "ICD Assistant"],
        &[
            "Assigns ICD-10 codes to clinical notes.",
            "Clinical coding of discharge summaries.",
            "Suggests diagnosis and procedure codes from patient records.",
        ],
    ),
    kind(
        "financial_analysis",
        &["Analyst", "Ratio Desk"],
        &[
            "Analyses statements and computes key ratios.",
            "Reads balance sheets and income statements and explains trends.",
            "Financial analysis of quarterly reports.",
        ],
    ),
    kind(
        "data_visualization",
        &["Charts", "Plotter"],
        &[
            "Draws charts from tabular data.",
            "Turns spreadsheets into dashboards and graphs.",
            "Data visualisation from CSV files.",
        ],
    ),
    kind(
        "sql_generation",
        &["SQL Writer", "Query Builder"],
        &[
            "Writes SQL queries from questions about a schema.",
            "Text-to-SQL for analysts.",
            "Turns plain questions into database queries.",
        ],
    ),
    kind(
        "web_search",
        &["Web Searcher", "Browser"],
        &[
            "Searches the web and returns ranked, cited results.",
            "Live internet search with sources.",
            "Browses the web to answer current-events questions.",
        ],
    ),
    kind(
        "scheduling",
        &["Scheduler", "Calendar"],
        &[
            "Finds meeting slots across calendars.",
            "Books appointments and reschedules meetings.",
            "Coordinates calendars for busy teams.",
        ],
    ),
    kind(
        "email_drafting",
        &["Mail Writer", "Inbox Helper"],
        &[
            "Drafts and replies to emails in a given tone.",
            "Writes polite email replies for {d} teams.",
            "Composes outreach and follow-up emails.",
        ],
    ),
    kind(
        "customer_support",
        &["Support Desk", "Helpdesk"],
        &[
            "Answers customer questions from a knowledge base.",
            "Customer service for {d}, around the clock.",
            "Resolves support tickets and escalates hard cases.",
        ],
    ),
    kind(
        "tutoring",
        &["Tutor", "Teacher"],
        &[
            "Explains concepts step by step and checks answers.",
            "Homework help and practice exercises.",
            "A patient tutor for students.",
        ],
    ),
    kind(
        "travel_planning",
        &["Trip Planner", "Itinerary"],
        &[
            "Plans itineraries within a budget.",
            "Builds day-by-day travel plans with flights and hotels.",
            "Plans trips and suggests what to see.",
        ],
    ),
    kind(
        "fraud_detection",
        &["Fraud Guard", "Risk Scorer"],
        &[
            "Scores transactions for fraud risk.",
            "Flags suspicious payments in real time.",
            "Detects fraudulent accounts and chargebacks.",
        ],
    ),
    kind(
        "log_analysis",
        &["Log Reader", "Log Insight"],
        &[
            "Clusters log lines and explains anomalies.",
            "Finds the root cause in application logs.",
            "Summarises error spikes in server logs.",
        ],
    ),
    kind(
        "security_audit",
        &["Auditor", "Hardening Check"],
        &[
            "Audits configurations against security baselines.",
            "Finds misconfigurations and vulnerabilities in cloud setups.",
            "Security review of infrastructure-as-code.",
        ],
    ),
    kind(
        "research_assistant",
        &["Researcher", "Scholar"],
        &[
            "Finds and ranks papers for a research question.",
            "Literature review assistant for {d}.",
            "Searches academic papers and summarises findings.",
        ],
    ),
    kind(
        "recipe_planning",
        &["Chef", "Meal Planner"],
        &[
            "Plans meals around diets and what is in the fridge.",
            "Suggests recipes and weekly meal plans.",
            "Builds shopping lists from a menu.",
        ],
    ),
    kind(
        "chat",
        &["Chat", "Companion"],
        &[
            "General-purpose conversational assistant.",
            "A friendly chatbot for everyday questions.",
            "Open-ended conversation and brainstorming.",
        ],
    ),
    kind(
        "text_generation",
        &["Writer", "Copywriter"],
        &[
            "Writes articles, blog posts and marketing copy.",
            "Generates long-form text from an outline.",
            "Creative writing and copywriting for {d}.",
        ],
    ),
    kind(
        "search",
        &["Finder", "Retriever"],
        &[
            "Semantic search over your {d}.",
            "Retrieves the most relevant passages from large collections.",
            "Enterprise search across internal {d}.",
        ],
    ),
    kind(
        "data_extraction",
        &["Extractor", "Scraper"],
        &[
            "Extracts structured data from web pages.",
            "Pulls tables and fields out of {d}.",
            "Scrapes product data into spreadsheets.",
        ],
    ),
    kind(
        "classification",
        &["Classifier", "Sorter"],
        &[
            "Classifies {d} into categories.",
            "Routes and labels incoming messages.",
            "Topic and spam classification for text.",
        ],
    ),
];

/// A subject domain: its id (a tag), adjectives, and the objects it
/// works on (for `{d}`).
pub(crate) struct Domain {
    pub(crate) id: &'static str,
    pub(crate) adjective: &'static str,
    pub(crate) objects: &'static str,
}

/// The subject domains agents are specialised in.
pub(crate) const DOMAINS: &[Domain] = &[
    Domain {
        id: "legal",
        adjective: "Legal",
        objects: "contracts, court filings and legal documents",
    },
    Domain {
        id: "medical",
        adjective: "Medical",
        objects: "clinical notes and medical records",
    },
    Domain {
        id: "finance",
        adjective: "Financial",
        objects: "financial reports and banking documents",
    },
    Domain {
        id: "retail",
        adjective: "Retail",
        objects: "product listings and shop reviews",
    },
    Domain {
        id: "education",
        adjective: "Education",
        objects: "course material and lecture notes",
    },
    Domain {
        id: "travel",
        adjective: "Travel",
        objects: "travel guides and booking emails",
    },
];

/// Objects for agents without a domain.
const GENERIC_OBJECTS: &str = "documents and text";

/// Language tags agents declare, with their English names.
pub(crate) const LANGUAGES: &[(&str, &str)] = &[
    ("en", "English"),
    ("zh-Hans", "Simplified Chinese"),
    ("zh-Hant", "Traditional Chinese"),
    ("ja", "Japanese"),
    ("ko", "Korean"),
    ("es", "Spanish"),
    ("fr", "French"),
    ("de", "German"),
    ("pt-BR", "Brazilian Portuguese"),
    ("it", "Italian"),
    ("ru", "Russian"),
    ("ar", "Arabic"),
    ("hi", "Hindi"),
    ("nl", "Dutch"),
];

const ADJECTIVES: &[&str] = &[
    "Amber", "Brisk", "Cobalt", "Deft", "Eager", "Fable", "Gentle", "Hazel", "Ivory", "Jade",
    "Keen", "Lucid", "Mellow", "Nimble", "Onyx", "Polar", "Quiet", "Rapid", "Sage", "Tidal",
];
const NOUNS: &[&str] = &[
    "Falcon", "Otter", "Maple", "Comet", "Harbor", "Lynx", "Quill", "Raven", "Willow", "Badger",
    "Cedar", "Delta", "Ember", "Fjord", "Heron", "Iris", "Lotus", "Meadow", "Pebble", "Wren",
];
const PUBLISHERS: &[&str] = &[
    "Acme Labs",
    "Globex",
    "Initech",
    "Hooli",
    "Stark Analytics",
    "Wayne Systems",
    "Aperture",
];

/// What an agent was generated as: what a judgement is derived from.
#[derive(Debug, Clone)]
pub(crate) struct Truth {
    /// Capability ids (one or two).
    pub(crate) capabilities: Vec<&'static str>,
    /// The subject domain's id, when the agent is specialised.
    pub(crate) domain: Option<&'static str>,
    /// Declared language tags (may be empty).
    pub(crate) languages: Vec<&'static str>,
    /// The trust level its evidence proves.
    pub(crate) trust: TrustLevel,
}

/// One generated agent.
#[derive(Debug, Clone)]
pub(crate) struct Agent {
    pub(crate) id: String,
    pub(crate) doc: Value,
    pub(crate) truth: Truth,
}

/// splitmix64: a small, stable generator (the population must not change
/// when a dependency's generator does).
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Self(seed)
    }
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    pub(crate) fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
    pub(crate) fn pick<'a, T>(&mut self, from: &'a [T]) -> &'a T {
        &from[self.below(from.len())]
    }
}

/// Agents whose capabilities, domain and languages are set by hand (the
/// rest of them is generated): what the written-out queries ask for,
/// and the draft's comparison (a Chinese legal summariser, an English
/// one, a Chinese legal translator, a generic summariser).
type Planted = (
    usize,
    &'static [&'static str],
    Option<&'static str>,
    &'static [&'static str],
);
const PLANTED: &[Planted] = &[
    (7, &["summarization"], Some("legal"), &["zh-Hans"]),
    (8, &["summarization"], Some("legal"), &["en"]),
    (9, &["translation"], Some("legal"), &["zh-Hans", "en"]),
    (10, &["summarization"], None, &["en", "zh-Hant"]),
    (11, &["speech_to_text", "translation"], None, &["en", "es"]),
    (
        12,
        &["summarization", "translation"],
        Some("legal"),
        &["en", "de"],
    ),
    (13, &["classification", "entity_extraction"], None, &["en"]),
    (14, &["question_answering"], Some("medical"), &["ar", "en"]),
];

/// The id of agent `i`.
pub(crate) fn agent_id(i: usize) -> String {
    format!("rel-{i:06}")
}

/// Agent `i` of the population.
pub(crate) fn agent(i: usize) -> Agent {
    let mut rng = Rng::new(0x5eed_0000_0000 ^ i as u64);
    let mut first = rng.below(KINDS.len());
    let mut capabilities = vec![KINDS[first].id];
    if rng.chance(25) {
        let second = KINDS[rng.below(KINDS.len())].id;
        if second != capabilities[0] {
            capabilities.push(second);
        }
    }
    let mut domain = rng.chance(60).then(|| rng.pick(DOMAINS));
    let mut languages: Vec<&'static str> = Vec::new();
    if !rng.chance(5) {
        if rng.chance(55) {
            languages.push("en");
        }
        let more = 1 + rng.below(2);
        for _ in 0..more {
            let (tag, _) = *rng.pick(&LANGUAGES[1..]);
            if !languages.contains(&tag) {
                languages.push(tag);
            }
        }
    }
    if let Some(&(_, caps, d, langs)) = PLANTED.iter().find(|p| p.0 == i) {
        capabilities = caps.to_vec();
        domain = d.map(|d| DOMAINS.iter().find(|x| x.id == d).expect("a known domain"));
        languages = langs.to_vec();
        first = KINDS
            .iter()
            .position(|k| k.id == capabilities[0])
            .expect("a known capability");
    }
    let trust = match rng.below(100) {
        0..=64 => TrustLevel::Unverified,
        65..=74 => TrustLevel::DnsVerified,
        75..=92 => TrustLevel::KeyVerified,
        _ => TrustLevel::PeerVerified,
    };

    let main = &KINDS[first];
    let noun = rng.pick(main.nouns);
    let mut name = format!("{} {}", rng.pick(ADJECTIVES), rng.pick(NOUNS));
    if let Some(d) = domain {
        if rng.chance(50) {
            name = format!("{name} {}", d.adjective);
        }
    }
    name = format!("{name} {noun}");
    let objects = domain.map_or(GENERIC_OBJECTS, |d| d.objects);
    let mut description = rng.pick(main.sentences).replace("{d}", objects);
    if let Some(d) = domain {
        if !description.contains(d.objects) {
            description.push_str(&format!(" Built for {} teams.", d.id));
        }
    }
    if capabilities.len() > 1 {
        let other = KINDS
            .iter()
            .find(|k| k.id == capabilities[1])
            .expect("capabilities come from KINDS");
        description.push(' ');
        description.push_str(&rng.pick(other.sentences).replace("{d}", objects));
    }
    // Most agents name their languages in prose too; some only declare them.
    if !languages.is_empty() && rng.chance(60) {
        let names: Vec<&str> = languages
            .iter()
            .map(|t| LANGUAGES.iter().find(|(l, _)| l == t).expect("known tag").1)
            .collect();
        description.push_str(&format!(" Works in {}.", names.join(", ")));
    }
    let mut tags: Vec<&str> = Vec::new();
    if let Some(d) = domain {
        tags.push(d.id);
    }
    tags.push(if rng.chance(50) {
        "cloud"
    } else {
        "on_premises"
    });
    let id = agent_id(i);
    let mut doc = json!({
        "id": id,
        "name": name,
        "description": description,
        "version": "1.0.0",
        "publisher": rng.pick(PUBLISHERS),
        "capabilities": capabilities,
        "tags": tags,
        "endpoint": format!("https://agents{}.example.net/{i}", i % 10),
        "authentication": {"type": "api_key"},
        "status": "active",
        "inputs": {"type": "object", "properties": {"text": {"type": "string"}}},
        "outputs": {"type": "object"},
    });
    if !languages.is_empty() {
        doc["supported_languages"] = json!(languages);
    }
    Agent {
        id,
        doc,
        truth: Truth {
            capabilities,
            domain: domain.map(|d| d.id),
            languages,
            trust,
        },
    }
}

/// Agents `0..n`.
pub(crate) fn population(n: usize) -> Vec<Agent> {
    (0..n).map(agent).collect()
}
