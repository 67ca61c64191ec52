//! The queries and their judgements.
//!
//! Each query is written for an anchor: an agent of the first
//! [`ANCHORS`] whose ground truth has what the query asks for, so a
//! relevant agent exists at every population size. The wording comes
//! from hand-written phrasings per capability (some use the synonym
//! table's words, some do not), with the language named in words (or in
//! its own script), a subject domain, a trust word, a misspelling or an
//! explicit filter, by shape. The grade of an agent is derived from its
//! ground truth by [`grade`], so every judgement can be checked:
//!
//! - an agent outside the query's explicit filter, or below the trust the
//!   query asks for, is 0;
//! - an agent with every capability asked for is 3, less one for a
//!   language asked for that it does not declare and one for a subject
//!   domain it is not specialised in (but at least 1);
//! - otherwise an agent with a related capability (or one of two asked
//!   for), and the language and domain asked for, is 1;
//! - anything else is 0.
//!
//! Languages match by subtag prefix: "Chinese" asks for `zh`, which
//! `zh-Hans` and `zh-Hant` satisfy.

use std::collections::BTreeSet;

use agentmesh::trust::TrustLevel;

use super::eval::{Asked, Judged};
use super::population::{agent, Agent, Rng, Truth, ANCHORS};

/// What a query asks for: the ground truth a judgement compares with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Intent {
    pub(crate) capabilities: Vec<&'static str>,
    /// Language constraints (BCP 47; a prefix matches longer tags).
    pub(crate) languages: Vec<String>,
    pub(crate) domain: Option<&'static str>,
    pub(crate) min_trust: Option<TrustLevel>,
}

/// An explicit filter sent with the text (the API's `filters`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FilterSpec {
    pub(crate) capabilities: Vec<&'static str>,
    pub(crate) languages: Vec<String>,
}

/// One query of the set.
#[derive(Debug, Clone)]
pub(crate) struct Query {
    /// Its number in the set.
    pub(crate) n: usize,
    /// The text a user types.
    pub(crate) text: String,
    /// The filter sent with it, if any.
    pub(crate) filter: Option<FilterSpec>,
    /// What it asks for.
    pub(crate) intent: Intent,
    /// How it is worded (for the per-shape breakdown).
    pub(crate) shape: &'static str,
}

impl Asked for Query {
    fn n(&self) -> usize {
        self.n
    }

    fn text(&self) -> &str {
        &self.text
    }

    fn shape(&self) -> &'static str {
        self.shape
    }
}

/// Judges every query over `agents` by [`grade`].
pub(crate) fn judge(agents: &[Agent], queries: Vec<Query>) -> Vec<Judged<Query>> {
    queries
        .into_iter()
        .map(|query| {
            let grades = agents
                .iter()
                .filter_map(|a| {
                    let g = grade(&query, &a.truth);
                    (g > 0).then(|| (a.id.clone(), g))
                })
                .collect();
            Judged::new(query, grades)
        })
        .collect()
}

/// How users ask for each capability: request phrasings (`{o}` is what
/// it works on) and what they call such an agent.
struct Ask {
    id: &'static str,
    asks: &'static [&'static str],
    who: &'static [&'static str],
    /// What it works on when no domain is asked for.
    object: &'static str,
}

const fn ask(
    id: &'static str,
    asks: &'static [&'static str],
    who: &'static [&'static str],
    object: &'static str,
) -> Ask {
    Ask {
        id,
        asks,
        who,
        object,
    }
}

const ASKS: &[Ask] = &[
    ask(
        "translation",
        &[
            "translate {o}",
            "an agent to translate my {o}",
            "localize {o} for a new market",
            "convert {o} into another language",
        ],
        &["translator", "translation service"],
        "documents",
    ),
    ask(
        "summarization",
        &[
            "summarize {o}",
            "I need short summaries of {o}",
            "tl;dr for long {o}",
            "condense {o} into key points",
        ],
        &["summarizer", "summary bot"],
        "reports",
    ),
    ask(
        "code_review",
        &[
            "review my pull requests",
            "check my code for bugs",
            "code review for patches",
            "someone to look over diffs before merging",
        ],
        &["code reviewer", "PR reviewer"],
        "code",
    ),
    ask(
        "code_generation",
        &[
            "write code from a spec",
            "generate Python functions from requirements",
            "an assistant that writes code for me",
            "implement features from plain English",
        ],
        &["coding assistant", "code generator"],
        "code",
    ),
    ask(
        "sentiment_analysis",
        &[
            "sentiment analysis of {o}",
            "tell me if {o} are positive or negative",
            "measure the mood of {o}",
            "emotion detection in {o}",
        ],
        &["sentiment analyzer", "sentiment scorer"],
        "reviews",
    ),
    ask(
        "entity_extraction",
        &[
            "extract names and places from {o}",
            "named entity recognition on {o}",
            "find people and organisations mentioned in {o}",
            "entity extraction for {o}",
        ],
        &["entity extractor", "NER tool"],
        "news articles",
    ),
    ask(
        "question_answering",
        &[
            "answer questions about {o}",
            "ask questions over my {o}",
            "question answering on {o}",
            "get cited answers from {o}",
        ],
        &["Q&A bot", "question answering agent"],
        "manuals",
    ),
    ask(
        "speech_to_text",
        &[
            "transcribe {o}",
            "turn {o} into text",
            "speech to text for {o}",
            "dictation and transcripts of {o}",
        ],
        &["transcriber", "transcription service"],
        "meeting recordings",
    ),
    ask(
        "text_to_speech",
        &[
            "read {o} aloud",
            "text to speech for {o}",
            "turn {o} into spoken audio",
            "natural voices narrating {o}",
        ],
        &["narrator", "TTS voice"],
        "articles",
    ),
    ask(
        "image_captioning",
        &[
            "caption my photos",
            "describe what is in a picture",
            "write alt text for images",
            "image captioning for a photo library",
        ],
        &["image captioner", "alt text generator"],
        "photos",
    ),
    ask(
        "image_generation",
        &[
            "generate images from a prompt",
            "create illustrations for a blog",
            "text to image",
            "draw artwork from a description",
        ],
        &["image generator", "AI art tool"],
        "images",
    ),
    ask(
        "ocr",
        &[
            "extract text from scanned {o}",
            "OCR for scanned {o}",
            "read handwriting in photos",
            "digitize paper {o}",
        ],
        &["OCR engine", "text recognition tool"],
        "pages",
    ),
    ask(
        "document_parsing",
        &[
            "parse invoices into JSON",
            "turn receipts and forms into structured data",
            "pull line items out of {o}",
            "document parsing for {o}",
        ],
        &["document parser", "invoice parser"],
        "PDF files",
    ),
    ask(
        "legal_review",
        &[
            "review contracts for risky clauses",
            "check an NDA before I sign it",
            "contract review",
            "flag liabilities in agreements",
        ],
        &["contract reviewer", "legal review agent"],
        "contracts",
    ),
    ask(
        "medical_coding",
        &[
            "assign ICD-10 codes to clinical notes",
            "medical coding for discharge summaries",
            "suggest diagnosis codes from patient records",
            "clinical coding help",
        ],
        &["medical coder", "ICD coding assistant"],
        "clinical notes",
    ),
    ask(
        "financial_analysis",
        &[
            "analyze {o} and compute ratios",
            "financial analysis of {o}",
            "explain trends in balance sheets",
            "read income statements for me",
        ],
        &["financial analyst", "finance analysis agent"],
        "quarterly reports",
    ),
    ask(
        "data_visualization",
        &[
            "make charts from a spreadsheet",
            "visualize data from CSV",
            "turn tables into dashboards",
            "plot graphs of my data",
        ],
        &["chart maker", "data visualization tool"],
        "data",
    ),
    ask(
        "sql_generation",
        &[
            "write SQL from a question",
            "turn plain questions into database queries",
            "text to SQL",
            "generate queries for my Postgres schema",
        ],
        &["SQL generator", "text-to-SQL agent"],
        "databases",
    ),
    ask(
        "web_search",
        &[
            "search the web for news",
            "look things up online with sources",
            "live internet search",
            "browse the web and cite results",
        ],
        &["web search agent", "search engine bot"],
        "the web",
    ),
    ask(
        "scheduling",
        &[
            "find a meeting slot for my team",
            "book appointments",
            "schedule meetings across calendars",
            "coordinate calendars",
        ],
        &["scheduler", "calendar assistant"],
        "meetings",
    ),
    ask(
        "email_drafting",
        &[
            "draft replies to emails",
            "write polite emails",
            "compose follow-up emails",
            "help me answer my inbox",
        ],
        &["email writer", "email assistant"],
        "emails",
    ),
    ask(
        "customer_support",
        &[
            "answer customer questions",
            "customer service for {o}",
            "handle support tickets",
            "a helpdesk bot",
        ],
        &["support agent", "helpdesk bot"],
        "an online shop",
    ),
    ask(
        "tutoring",
        &[
            "help my kid with homework",
            "explain concepts step by step",
            "a tutor for {o}",
            "teach me algebra",
        ],
        &["tutor", "teacher"],
        "students",
    ),
    ask(
        "travel_planning",
        &[
            "plan a trip to Japan",
            "build an itinerary within a budget",
            "plan my holiday with flights and hotels",
            "trip planner",
        ],
        &["trip planner", "travel agent"],
        "trips",
    ),
    ask(
        "fraud_detection",
        &[
            "detect fraud in transactions",
            "flag suspicious payments",
            "score payments for fraud risk",
            "catch fraudulent chargebacks",
        ],
        &["fraud detector", "fraud detection service"],
        "payments",
    ),
    ask(
        "log_analysis",
        &[
            "analyze server logs",
            "find the root cause in application logs",
            "cluster log lines and explain anomalies",
            "make sense of error logs",
        ],
        &["log analyzer", "log analysis tool"],
        "logs",
    ),
    ask(
        "security_audit",
        &[
            "audit my cloud config against security baselines",
            "security audit of infrastructure",
            "find misconfigurations and vulnerabilities",
            "pentest my setup",
        ],
        &["security auditor", "security audit agent"],
        "infrastructure",
    ),
    ask(
        "research_assistant",
        &[
            "find papers for my research question",
            "literature review on {o}",
            "rank academic papers",
            "help me research a topic",
        ],
        &["research assistant", "literature review agent"],
        "a topic",
    ),
    ask(
        "recipe_planning",
        &[
            "plan meals for the week",
            "suggest recipes from what is in my fridge",
            "a vegan meal plan",
            "what should I cook tonight",
        ],
        &["meal planner", "recipe planner"],
        "meals",
    ),
    ask(
        "chat",
        &[
            "a chatbot to talk to",
            "general conversation assistant",
            "someone to chat with",
            "a conversational companion",
        ],
        &["chatbot", "chat assistant"],
        "anything",
    ),
    ask(
        "text_generation",
        &[
            "write blog posts",
            "generate marketing copy",
            "creative writing from an outline",
            "long-form text generation",
        ],
        &["copywriter", "writing assistant"],
        "articles",
    ),
    ask(
        "search",
        &[
            "semantic search over {o}",
            "retrieve relevant passages from {o}",
            "enterprise search for {o}",
            "find the right document in {o}",
        ],
        &["search engine", "retrieval agent"],
        "internal documents",
    ),
    ask(
        "data_extraction",
        &[
            "extract structured data from web pages",
            "scrape product prices",
            "pull tables out of {o}",
            "data extraction from {o}",
        ],
        &["data extractor", "scraper"],
        "websites",
    ),
    ask(
        "classification",
        &[
            "classify {o} into categories",
            "label incoming messages",
            "spam classification",
            "categorize {o} by topic",
        ],
        &["classifier", "text classifier"],
        "support tickets",
    ),
];

/// What users call a domain's objects and its users, per domain id.
const DOMAIN_WORDS: &[(&str, &[&str], &str)] = &[
    (
        "legal",
        &["legal documents", "contracts", "court filings"],
        "legal",
    ),
    (
        "medical",
        &["medical records", "clinical notes", "patient files"],
        "medical",
    ),
    (
        "finance",
        &["financial reports", "bank statements", "finance documents"],
        "finance",
    ),
    (
        "retail",
        &["product reviews", "shop listings", "retail catalogues"],
        "retail",
    ),
    (
        "education",
        &["lecture notes", "course material", "education content"],
        "education",
    ),
    (
        "travel",
        &["travel guides", "booking emails", "travel documents"],
        "travel",
    ),
];

/// What users call a language, and the constraint it means.
fn language_words(tag: &str, rng: &mut Rng) -> (&'static str, &'static str) {
    match tag {
        "en" => ("English", "en"),
        "zh-Hans" => *rng.pick(&[
            ("Chinese", "zh"),
            ("Mandarin", "zh"),
            ("simplified Chinese", "zh-Hans"),
        ]),
        "zh-Hant" => *rng.pick(&[("Chinese", "zh"), ("traditional Chinese", "zh-Hant")]),
        "ja" => ("Japanese", "ja"),
        "ko" => ("Korean", "ko"),
        "es" => ("Spanish", "es"),
        "fr" => ("French", "fr"),
        "de" => ("German", "de"),
        "pt-BR" => *rng.pick(&[("Portuguese", "pt"), ("Brazilian Portuguese", "pt-BR")]),
        "it" => ("Italian", "it"),
        "ru" => ("Russian", "ru"),
        "ar" => ("Arabic", "ar"),
        "hi" => ("Hindi", "hi"),
        "nl" => ("Dutch", "nl"),
        other => panic!("no words for {other}"),
    }
}

/// Capabilities close enough to be worth a grade of 1.
const RELATED: &[(&str, &str)] = &[
    ("code_review", "code_generation"),
    ("code_review", "security_audit"),
    ("ocr", "document_parsing"),
    ("ocr", "image_captioning"),
    ("document_parsing", "data_extraction"),
    ("entity_extraction", "data_extraction"),
    ("sql_generation", "data_visualization"),
    ("financial_analysis", "data_visualization"),
    ("financial_analysis", "fraud_detection"),
    ("web_search", "search"),
    ("web_search", "research_assistant"),
    ("search", "question_answering"),
    ("research_assistant", "question_answering"),
    ("customer_support", "chat"),
    ("customer_support", "question_answering"),
    ("text_generation", "email_drafting"),
    ("sentiment_analysis", "classification"),
    ("log_analysis", "security_audit"),
    ("scheduling", "travel_planning"),
    ("tutoring", "question_answering"),
];

fn related(a: &str, b: &str) -> bool {
    RELATED
        .iter()
        .any(|&(x, y)| (x == a && y == b) || (x == b && y == a))
}

/// Whether a declared tag satisfies a constraint (subtag prefix).
pub(crate) fn language_ok(constraint: &str, tag: &str) -> bool {
    let (c, t) = (constraint.to_ascii_lowercase(), tag.to_ascii_lowercase());
    t == c || t.starts_with(&format!("{c}-"))
}

fn declares(t: &Truth, constraint: &str) -> bool {
    t.languages.iter().any(|tag| language_ok(constraint, tag))
}

/// The grade (0-3) of an agent with ground truth `t` for query `q`.
pub(crate) fn grade(q: &Query, t: &Truth) -> u8 {
    if let Some(f) = &q.filter {
        let caps = f.capabilities.iter().all(|c| t.capabilities.contains(c));
        let langs = f.languages.iter().all(|l| declares(t, l));
        if !(caps && langs) {
            return 0;
        }
    }
    let i = &q.intent;
    if i.min_trust.is_some_and(|min| t.trust < min) {
        return 0;
    }
    let lang_miss = !i.languages.iter().all(|l| declares(t, l));
    let domain_miss = i.domain.is_some() && t.domain != i.domain;
    let misses = u8::from(lang_miss) + u8::from(domain_miss);
    if i.capabilities.iter().all(|c| t.capabilities.contains(c)) {
        return 3u8.saturating_sub(misses).max(1);
    }
    let near = i.capabilities.iter().any(|c| {
        t.capabilities
            .iter()
            .any(|have| have == c || related(c, have))
    });
    u8::from(near && misses == 0)
}

/// A misspelling: two neighbouring letters swapped in the longest word
/// (of six letters or more) of `text`.
fn misspell(text: &str) -> String {
    let Some(word) = text
        .split(' ')
        .filter(|w| w.len() >= 6 && w.bytes().all(|b| b.is_ascii_alphabetic()))
        .max_by_key(|w| w.len())
    else {
        return text.to_owned();
    };
    let mut b = word.as_bytes().to_vec();
    let k = b.len() / 2;
    b.swap(k, k + 1);
    let typo = String::from_utf8(b).expect("ASCII stays ASCII");
    text.replacen(word, &typo, 1)
}

/// The first anchor (from `start`, wrapping) that satisfies `pick`.
fn anchor(start: usize, pick: impl Fn(&Truth) -> bool) -> Option<Truth> {
    (0..ANCHORS)
        .map(|k| agent((start + k) % ANCHORS).truth)
        .find(|t| pick(t))
}

fn other_language(t: &Truth) -> Option<&'static str> {
    t.languages.iter().copied().find(|l| *l != "en")
}

/// The query shapes, in the order they are generated per capability.
pub(crate) const SHAPES: &[&str] = &[
    "plain",
    "language",
    "domain",
    "domain+language",
    "misspelt+language",
    "filter",
    "trust",
];

/// The relevance set: seven shapes per capability, then hand-written
/// queries (the draft's example, other scripts, two capabilities).
pub(crate) fn queries() -> Vec<Query> {
    let mut out: Vec<Query> = Vec::new();
    let mut push =
        |text: String, filter: Option<FilterSpec>, intent: Intent, shape: &'static str| {
            let n = out.len();
            out.push(Query {
                n,
                text,
                filter,
                intent,
                shape,
            });
        };
    for (k, a) in ASKS.iter().enumerate() {
        let mut rng = Rng::new(0xa5c0_0000 ^ k as u64);
        let cap = a.id;
        let has = move |t: &Truth| t.capabilities.contains(&cap);
        let start = rng.below(ANCHORS);
        let words_for = |d: &str| {
            DOMAIN_WORDS
                .iter()
                .find(|w| w.0 == d)
                .expect("known domain")
        };
        let fill = |ask: &str, object: &str| ask.replace("{o}", object);
        let with_domain = |ask: &str, d: &str, rng: &mut Rng| {
            let (_, objects, adjective) = words_for(d);
            if ask.contains("{o}") {
                fill(ask, rng.pick::<&str>(objects))
            } else {
                format!("{ask} for {adjective} teams")
            }
        };

        // plain
        push(
            fill(a.asks[0], a.object),
            None,
            Intent {
                capabilities: vec![cap],
                ..Intent::default()
            },
            "plain",
        );

        // language
        let t = anchor(start, |t| has(t) && other_language(t).is_some())
            .expect("an anchor speaks a language");
        let (name, tag) = language_words(other_language(&t).unwrap(), &mut rng);
        let text = match rng.below(3) {
            0 => format!("{} in {name}", fill(a.asks[1], a.object)),
            1 => format!("{name} {}", rng.pick(a.who)),
            _ => format!("{} that speaks {name}", rng.pick(a.who)),
        };
        push(
            text,
            None,
            Intent {
                capabilities: vec![cap],
                languages: vec![tag.into()],
                ..Intent::default()
            },
            "language",
        );

        // domain
        let t =
            anchor(start + 1, |t| has(t) && t.domain.is_some()).expect("an anchor has a domain");
        let d = t.domain.unwrap();
        push(
            with_domain(a.asks[2], d, &mut rng),
            None,
            Intent {
                capabilities: vec![cap],
                domain: Some(d),
                ..Intent::default()
            },
            "domain",
        );

        // domain + language, the draft's shape
        let t = anchor(start + 2, |t| {
            has(t) && t.domain.is_some() && other_language(t).is_some()
        })
        .expect("an anchor has a domain and a language");
        let d = t.domain.unwrap();
        let (name, tag) = language_words(other_language(&t).unwrap(), &mut rng);
        let ask = with_domain(a.asks[3], d, &mut rng);
        let text = match rng.below(2) {
            0 => format!("{ask} in {name}, please."),
            _ => format!("I'm looking for this, in {name}: {ask}"),
        };
        push(
            text,
            None,
            Intent {
                capabilities: vec![cap],
                languages: vec![tag.into()],
                domain: Some(d),
                ..Intent::default()
            },
            "domain+language",
        );

        // misspelt, with a language
        let t = anchor(start + 3, |t| has(t) && !t.languages.is_empty())
            .expect("an anchor declares a language");
        let (name, tag) = language_words(t.languages[0], &mut rng);
        let text = format!(
            "{} in {name}",
            misspell(&fill(a.asks[rng.below(a.asks.len())], a.object))
        );
        push(
            text,
            None,
            Intent {
                capabilities: vec![cap],
                languages: vec![tag.into()],
                ..Intent::default()
            },
            "misspelt+language",
        );

        // an explicit capability filter, the text names a domain and a language
        let t = anchor(start + 4, |t| {
            has(t) && t.domain.is_some() && other_language(t).is_some()
        })
        .expect("an anchor has a domain and a language");
        let d = t.domain.unwrap();
        let (name, tag) = language_words(other_language(&t).unwrap(), &mut rng);
        let (_, objects, _) = words_for(d);
        push(
            format!("{} in {name}", rng.pick(objects)),
            Some(FilterSpec {
                capabilities: vec![cap],
                languages: vec![],
            }),
            Intent {
                capabilities: vec![cap],
                languages: vec![tag.into()],
                domain: Some(d),
                ..Intent::default()
            },
            "filter",
        );

        // trust
        let (word, level) = *rng.pick(&[
            ("verified", TrustLevel::DnsVerified),
            ("trusted", TrustLevel::DnsVerified),
            ("key-verified", TrustLevel::KeyVerified),
            ("peer verified", TrustLevel::PeerVerified),
        ]);
        let t = anchor(start + 5, |t| has(t) && t.trust >= level);
        let level = if t.is_some() {
            level
        } else {
            TrustLevel::DnsVerified
        };
        push(
            format!("{word} {}", rng.pick(a.who)),
            None,
            Intent {
                capabilities: vec![cap],
                min_trust: Some(level),
                ..Intent::default()
            },
            "trust",
        );
    }
    for (text, caps, langs, domain, shape) in HANDWRITTEN {
        let intent = Intent {
            capabilities: caps.to_vec(),
            languages: langs.iter().map(|l| l.to_string()).collect(),
            domain: *domain,
            min_trust: None,
        };
        push(text.to_string(), None, intent, shape);
    }
    out
}

type Handwritten = (
    &'static str,
    &'static [&'static str],
    &'static [&'static str],
    Option<&'static str>,
    &'static str,
);

/// Queries written out: the draft's example, other scripts and
/// languages, two capabilities, filler-heavy and terse wordings.
const HANDWRITTEN: &[Handwritten] = &[
    ("I need an agent that can summarize long legal documents in Chinese.", &["summarization"], &["zh"], Some("legal"), "draft"),
    ("summarize an English document", &["summarization"], &["en"], None, "draft"),
    ("中文摘要", &["summarization"], &["zh"], None, "other script"),
    ("翻译成中文", &["translation"], &["zh"], None, "other script"),
    ("日本語の文字起こし", &["speech_to_text"], &["ja"], None, "other script"),
    ("한국어 번역", &["translation"], &["ko"], None, "other script"),
    ("日本語のチャット", &["chat"], &["ja"], None, "other script"),
    ("résumé de documents en français", &["summarization"], &["fr"], None, "other language"),
    ("traducir documentos al español", &["translation"], &["es"], None, "other language"),
    ("zusammenfassung auf deutsch", &["summarization"], &["de"], None, "other language"),
    ("chatbot em português", &["chat"], &["pt"], None, "other language"),
    ("transcribe interviews and translate them", &["speech_to_text", "translation"], &[], None, "two capabilities"),
    ("summarize and translate contracts", &["summarization", "translation"], &[], None, "two capabilities"),
    ("classify and extract entities from news", &["classification", "entity_extraction"], &[], None, "two capabilities"),
    ("tl;dr", &["summarization"], &[], None, "terse"),
    ("ocr", &["ocr"], &[], None, "terse"),
    ("sql", &["sql_generation"], &[], None, "terse"),
    ("chatbot", &["chat"], &[], None, "terse"),
    ("Hi! Could you please recommend any agent which would be able to help me transcribe a podcast?", &["speech_to_text"], &[], None, "chatty"),
    ("is there something that can write my emails for me in German", &["email_drafting"], &["de"], None, "chatty"),
    ("I'm looking for a good Spanish speaking customer service bot for my retail shop", &["customer_support"], &["es"], Some("retail"), "chatty"),
    ("need help making sense of our medical records, in Arabic", &["question_answering"], &["ar"], Some("medical"), "chatty"),
];

/// Every capability a query asks for, for checks.
pub(crate) fn capabilities_asked(queries: &[Query]) -> BTreeSet<&'static str> {
    queries
        .iter()
        .flat_map(|q| q.intent.capabilities.iter().copied())
        .collect()
}
