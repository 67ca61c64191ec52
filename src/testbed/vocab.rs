//! The fixed vocabulary synthetic agents are drawn from: capability ids with
//! their media types, BCP 47 language tags, pricing models and the words
//! agent names are made of. Used only by [`super::population`].

/// One capability the generator can give an agent.
pub(crate) struct CapabilityKind {
    /// The capability id (`snake_case`, as agents publish it).
    pub id: &'static str,
    /// Display name.
    pub name: &'static str,
    /// One-line description.
    pub description: &'static str,
    /// Accepted media types.
    pub input: &'static [&'static str],
    /// Produced media types.
    pub output: &'static [&'static str],
}

const fn cap(
    id: &'static str,
    name: &'static str,
    description: &'static str,
    input: &'static [&'static str],
    output: &'static [&'static str],
) -> CapabilityKind {
    CapabilityKind {
        id,
        name,
        description,
        input,
        output,
    }
}

const TEXT: &[&str] = &["text/plain"];
const TEXT_MD: &[&str] = &["text/plain", "text/markdown"];
const JSON: &[&str] = &["application/json"];
const TEXT_JSON: &[&str] = &["text/plain", "application/json"];
const DOCS: &[&str] = &["application/pdf", "text/plain", "text/html"];
const IMAGES: &[&str] = &["image/png", "image/jpeg"];
const AUDIO: &[&str] = &["audio/wav", "audio/mpeg", "audio/ogg"];
const CODE: &[&str] = &["text/x-diff", "text/plain"];
const TABLES: &[&str] = &["text/csv", "application/json"];

/// The capability vocabulary (30 kinds).
pub(crate) const CAPABILITIES: &[CapabilityKind] = &[
    cap(
        "translation",
        "Translation",
        "Translates text between languages, keeping formatting.",
        TEXT_MD,
        TEXT_MD,
    ),
    cap(
        "summarization",
        "Summarization",
        "Condenses long documents into short abstracts.",
        DOCS,
        TEXT_MD,
    ),
    cap(
        "code_review",
        "Code review",
        "Reviews patches for bugs, style and security issues.",
        CODE,
        JSON,
    ),
    cap(
        "code_generation",
        "Code generation",
        "Writes code from a natural-language specification.",
        TEXT_MD,
        &["text/plain", "text/x-diff"],
    ),
    cap(
        "sentiment_analysis",
        "Sentiment analysis",
        "Scores the sentiment and emotion of short texts.",
        TEXT_JSON,
        JSON,
    ),
    cap(
        "entity_extraction",
        "Entity extraction",
        "Finds people, organisations, places and dates in text.",
        TEXT_JSON,
        JSON,
    ),
    cap(
        "question_answering",
        "Question answering",
        "Answers questions grounded in supplied documents.",
        DOCS,
        TEXT_JSON,
    ),
    cap(
        "speech_to_text",
        "Speech to text",
        "Transcribes speech with timestamps and speaker labels.",
        AUDIO,
        &["text/plain", "text/vtt"],
    ),
    cap(
        "text_to_speech",
        "Text to speech",
        "Reads text aloud in natural-sounding voices.",
        TEXT,
        &["audio/mpeg", "audio/ogg"],
    ),
    cap(
        "image_captioning",
        "Image captioning",
        "Describes the content of photographs and diagrams.",
        IMAGES,
        TEXT,
    ),
    cap(
        "image_generation",
        "Image generation",
        "Creates images from text prompts.",
        TEXT,
        IMAGES,
    ),
    cap(
        "ocr",
        "Text recognition",
        "Extracts text from scanned pages and photos.",
        &["image/png", "image/tiff", "application/pdf"],
        TEXT_JSON,
    ),
    cap(
        "document_parsing",
        "Document parsing",
        "Turns invoices, forms and receipts into structured data.",
        DOCS,
        JSON,
    ),
    cap(
        "legal_review",
        "Legal review",
        "Flags risky clauses in contracts and terms.",
        DOCS,
        JSON,
    ),
    cap(
        "medical_coding",
        "Medical coding",
        "Assigns ICD-10 codes to clinical notes.",
        TEXT,
        JSON,
    ),
    cap(
        "financial_analysis",
        "Financial analysis",
        "Analyses statements and computes key ratios.",
        TABLES,
        JSON,
    ),
    cap(
        "data_visualization",
        "Data visualisation",
        "Draws charts from tabular data.",
        TABLES,
        &["image/svg+xml", "image/png"],
    ),
    cap(
        "sql_generation",
        "SQL generation",
        "Writes SQL queries from questions about a schema.",
        TEXT_JSON,
        &["application/sql"],
    ),
    cap(
        "web_search",
        "Web search",
        "Searches the web and returns ranked, cited results.",
        TEXT,
        JSON,
    ),
    cap(
        "scheduling",
        "Scheduling",
        "Finds meeting slots across calendars.",
        &["text/calendar", "application/json"],
        &["text/calendar"],
    ),
    cap(
        "email_drafting",
        "Email drafting",
        "Drafts and replies to emails in a given tone.",
        TEXT,
        &["message/rfc822", "text/plain"],
    ),
    cap(
        "customer_support",
        "Customer support",
        "Answers customer questions from a knowledge base.",
        TEXT,
        TEXT,
    ),
    cap(
        "tutoring",
        "Tutoring",
        "Explains concepts step by step and checks answers.",
        TEXT_MD,
        TEXT_MD,
    ),
    cap(
        "travel_planning",
        "Travel planning",
        "Plans itineraries within a budget.",
        TEXT_JSON,
        JSON,
    ),
    cap(
        "fraud_detection",
        "Fraud detection",
        "Scores transactions for fraud risk.",
        JSON,
        JSON,
    ),
    cap(
        "log_analysis",
        "Log analysis",
        "Clusters log lines and explains anomalies.",
        &["text/plain", "application/x-ndjson"],
        JSON,
    ),
    cap(
        "security_audit",
        "Security audit",
        "Audits configurations against security baselines.",
        &["application/yaml", "application/json"],
        JSON,
    ),
    cap(
        "research_assistant",
        "Research assistant",
        "Finds and ranks papers for a research question.",
        TEXT,
        JSON,
    ),
    cap(
        "recipe_planning",
        "Recipe planning",
        "Plans meals around diets and what is in the fridge.",
        TEXT,
        TEXT_MD,
    ),
    cap(
        "chat",
        "Conversation",
        "General-purpose conversational assistant.",
        &["text/plain", "image/png"],
        &["text/plain", "text/html"],
    ),
];

/// Language tags (BCP 47) capabilities may list.
pub(crate) const LANGUAGES: &[&str] = &[
    "en", "en-GB", "de", "fr", "es", "it", "pt-BR", "nl", "sv", "pl", "ru", "uk", "tr", "ar", "he",
    "hi", "bn", "zh-Hans", "zh-Hant", "ja", "ko", "vi", "th", "id", "sw",
];

/// Pricing models.
pub(crate) const PRICING_MODELS: &[&str] = &["free", "per_call", "subscription"];

/// Currencies used in pricing details.
pub(crate) const CURRENCIES: &[&str] = &["USD", "EUR", "GBP", "JPY", "CHF"];

/// First words of agent names.
pub(crate) const ADJECTIVES: &[&str] = &[
    "amber", "brisk", "cobalt", "deft", "eager", "fable", "gentle", "hazel", "ivory", "jade",
    "keen", "lucid", "mellow", "nimble", "onyx", "polar", "quiet", "rapid", "sage", "tidal",
    "umber", "vivid", "wry", "young", "zesty", "bold", "calm", "dusky", "early", "frosty",
];

/// Second words of agent names.
pub(crate) const NOUNS: &[&str] = &[
    "falcon", "otter", "maple", "comet", "harbor", "lynx", "quill", "raven", "willow", "badger",
    "cedar", "delta", "ember", "fjord", "glacier", "heron", "iris", "juniper", "kestrel", "lotus",
    "meadow", "nebula", "orchid", "pebble", "quartz", "reef", "spruce", "thistle", "valley",
    "wren",
];

/// Organisation names (`org{n}` gets entry `n % len`), for `owner`.
pub(crate) const ORG_NAMES: &[&str] = &[
    "Acme Labs",
    "Globex",
    "Initech",
    "Umbrella Research",
    "Hooli",
    "Vandelay Industries",
    "Stark Analytics",
    "Wayne Systems",
    "Tyrell Data",
    "Soylent Software",
    "Cyberdyne",
    "Aperture",
];
