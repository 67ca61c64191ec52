#[cfg(feature = "testbed")]
use super::lexicon::Table;
use super::lexicon::SYNONYMS;
use super::phrases::within_one_edit;
use super::*;
use crate::trust::TrustLevel;
#[cfg(feature = "testbed")]
use std::collections::BTreeSet;

fn caps(q: &str) -> Vec<String> {
    understand(q).capabilities
}

fn langs(q: &str) -> Vec<String> {
    understand(q).languages
}

#[test]
fn the_shipped_lexicon_parses() {
    Lexicon::parse(SYNONYMS).unwrap();
}

/// The capability ids the project's generators use: the testbed
/// vocabulary and the synthetic registrations.
#[cfg(feature = "testbed")]
fn vocabulary() -> BTreeSet<String> {
    let mut v: BTreeSet<String> = crate::testbed::vocab::CAPABILITIES
        .iter()
        .map(|c| c.id.to_owned())
        .collect();
    for i in 0..1000 {
        let doc = crate::testbed::synthetic_agent(i);
        for c in doc["capabilities"].as_array().unwrap() {
            v.insert(c.as_str().unwrap().to_owned());
        }
    }
    v
}

#[cfg(feature = "testbed")]
#[test]
fn every_capability_in_the_table_is_in_the_vocabulary_and_back() {
    let table: Table = toml::from_str(SYNONYMS).unwrap();
    let vocabulary = vocabulary();
    for id in table.capabilities.keys().chain(table.hints.keys()) {
        assert!(
            vocabulary.contains(id),
            "synonyms.toml names {id:?}, which no generator uses"
        );
    }
    for id in &vocabulary {
        let phrases = table
            .capabilities
            .get(id)
            .unwrap_or_else(|| panic!("the vocabulary's {id:?} has no phrases"));
        assert!(phrases.len() >= 3, "{id:?} has only {phrases:?}");
        // The id's own wording names it.
        assert_eq!(caps(&id.replace("_", " ")), vec![id.to_owned()], "{id}");
    }
}

#[test]
fn the_drafts_example() {
    let u = understand("I need an agent that can summarize long legal documents in Chinese.");
    assert_eq!(u.languages, ["zh"]);
    assert_eq!(u.capabilities, ["summarization"]);
    assert_eq!(u.min_trust, None);
    assert_eq!(u.text, "summarize long legal documents");
    assert_eq!(
        u.terms,
        ["summarize", "long", "legal", "documents", "summarization"]
    );
    assert!(!u.truncated);
}

#[test]
fn synonyms_map_onto_capabilities() {
    for (q, want) in [
        ("transcribe my meeting recordings", "speech_to_text"),
        ("a chatbot for my website", "chat"),
        ("tl;dr of this thread", "summarization"),
        ("summarise the report", "summarization"),
        ("summaries of news", "summarization"),
        ("read this aloud", "text_to_speech"),
        ("turn speech to text", "speech_to_text"),
        ("turn text to speech", "text_to_speech"),
        ("review my pull requests", "code_review"),
        ("write SQL for my schema", "sql_generation"),
        ("ICD-10 codes for clinical notes", "medical_coding"),
        ("plan a trip to Kyoto", "travel_planning"),
        ("find meeting slots for my team", "scheduling"),
        ("extract text from scanned pages", "ocr"),
        ("detect fraudulent transactions", "fraud_detection"),
        ("help me with homework as a tutor", "tutoring"),
        ("what to cook tonight", "recipe_planning"),
        ("find papers on protein folding", "research_assistant"),
        ("pentest our cloud setup", "security_audit"),
        ("classify support tickets", "classification"),
        ("scrape product prices", "data_extraction"),
        ("draw charts from csv", "data_visualization"),
    ] {
        assert_eq!(caps(q), [want], "{q}");
    }
}

#[test]
fn hints_count_only_without_a_capability_phrase() {
    assert_eq!(caps("summarize my emails"), ["summarization"]);
    assert_eq!(caps("something for my emails"), ["email_drafting"]);
    assert_eq!(caps("translate recipes"), ["translation"]);
    assert_eq!(caps("vegan recipes"), ["recipe_planning"]);
    assert_eq!(caps("agent for contracts"), ["legal_review"]);
}

#[test]
fn several_capabilities_are_all_kept() {
    assert_eq!(
        caps("transcribe and translate interviews"),
        ["speech_to_text", "translation"]
    );
}

#[test]
fn a_capability_word_one_edit_away_still_matches() {
    assert_eq!(caps("summerize this article"), ["summarization"]);
    assert_eq!(caps("transalte my website"), ["translation"]);
    assert_eq!(caps("transcibe a podcast"), ["speech_to_text"]);
    // Short words match exactly only: "chat" is not "chart", "codes"
    // is not "coder".
    assert_eq!(caps("ICD-10 codes"), ["medical_coding"]);
    assert_eq!(caps("chart the sales"), ["data_visualization"]);
    assert!(!caps("cat pictures").contains(&"chat".to_owned()));
}

#[test]
fn language_names_become_constraints() {
    for (q, want) in [
        ("summarize in chinese", "zh"),
        ("Chinese summarizer", "zh"),
        ("中文摘要", "zh"),
        ("translate into French", "fr"),
        ("résumé en français", "fr"),
        ("chatbot that speaks Spanish", "es"),
        ("un chatbot en español", "es"),
        ("Japanese speech recognition", "ja"),
        ("日本語の要約", "ja"),
        ("korean customer support", "ko"),
        ("한국어 번역", "ko"),
        ("legal review in German", "de"),
        ("auf deutsch zusammenfassen", "de"),
        ("summarize an English document", "en"),
        ("tutor in portuguese", "pt"),
        ("brazilian portuguese support bot", "pt-BR"),
        ("italian tutor", "it"),
        ("russian news summaries", "ru"),
        ("arabic text to speech", "ar"),
        ("hindi transcription", "hi"),
        ("traditional chinese translation", "zh-Hant"),
        ("simplified chinese copywriting", "zh-Hans"),
        ("简体中文翻译", "zh-Hans"),
    ] {
        assert_eq!(langs(q), [want], "{q}");
    }
}

#[test]
fn a_language_name_without_context_is_not_a_constraint() {
    for q in [
        "german shepherd breeding tips",
        "thai food recipes",
        "polish my essay",
        "french fries calories",
    ] {
        let u = understand(q);
        assert_eq!(u.languages, Vec::<String>::new(), "{q}");
    }
    // ... and stays in the text to rank with.
    assert_eq!(
        understand("german shepherd breeding").text,
        "german shepherd breeding"
    );
}

#[test]
fn language_lists_and_pairs() {
    assert_eq!(langs("translate from English to Japanese"), ["en", "ja"]);
    assert_eq!(langs("speaks french and german"), ["de", "fr"]);
    assert_eq!(langs("english, spanish documents"), ["en", "es"]);
}

#[test]
fn a_misspelt_language_name_with_context_is_a_constraint() {
    assert_eq!(langs("summaries in chinse"), ["zh"]);
    assert_eq!(langs("translate into japanse"), ["ja"]);
    // A country is not its language.
    assert_eq!(langs("tax agents in germany"), Vec::<String>::new());
}

#[test]
fn trust_words_set_a_minimum_level() {
    let level = |q: &str| understand(q).min_trust;
    assert_eq!(level("verified translator"), Some(TrustLevel::DnsVerified));
    assert_eq!(level("a trusted scheduler"), Some(TrustLevel::DnsVerified));
    assert_eq!(
        level("key-verified code review"),
        Some(TrustLevel::KeyVerified)
    );
    assert_eq!(
        level("peer verified chatbot"),
        Some(TrustLevel::PeerVerified)
    );
    // The highest of several wins.
    assert_eq!(
        level("trusted, peer-verified summarizer"),
        Some(TrustLevel::PeerVerified)
    );
    // Exact words only: a verb is not a trust level.
    assert_eq!(level("an agent that verifies facts"), None);
    assert_eq!(level("translator"), None);
    let u = understand("verified French translator");
    assert_eq!(u.text, "translator");
    assert_eq!(u.languages, ["fr"]);
}

#[test]
fn empty_and_stop_word_queries_understand_nothing() {
    for q in ["", "   ", "?!.", "the a of", "I need an agent that can"] {
        let u = understand(q);
        assert!(u.is_empty(), "{q:?}: {u:?}");
        assert!(u.terms.is_empty(), "{q:?}");
        assert!(!u.truncated);
    }
}

#[test]
fn long_queries_are_cut_at_the_word_bound() {
    let q = "translate ".repeat(MAX_QUERY_WORDS - 1) + "into french";
    // The 64th word is "into": "french" is past the bound.
    let u = understand(&q);
    assert!(u.truncated);
    assert!(u.languages.is_empty());
    assert_eq!(u.capabilities, ["translation"]);
    let fits = "translate ".repeat(MAX_QUERY_WORDS - 2) + "into french";
    let u = understand(&fits);
    assert!(!u.truncated);
    assert_eq!(u.languages, ["fr"]);
}

#[test]
fn long_queries_are_cut_at_the_byte_bound_on_a_character_boundary() {
    // 3-byte characters: 1024 is not a boundary (1023 is).
    assert!(!q_boundary_is_1024());
    let q = "中文".repeat(200);
    let u = understand(&q);
    assert!(u.truncated);
    assert_eq!(u.languages, ["zh"]);
    let q = format!("{} summarize", "x".repeat(MAX_QUERY_BYTES));
    let u = understand(&q);
    assert!(u.truncated);
    assert!(u.capabilities.is_empty(), "the tail was dropped");
}

fn q_boundary_is_1024() -> bool {
    "中文".repeat(200).is_char_boundary(MAX_QUERY_BYTES)
}

#[test]
fn language_constraints_match_by_subtag_prefix() {
    assert!(language_matches("zh", "zh-Hans"));
    assert!(language_matches("zh", "zh-Hant-TW"));
    assert!(language_matches("zh", "ZH"));
    assert!(language_matches("zh-Hant", "zh-hant-tw"));
    assert!(!language_matches("zh-Hant", "zh-Hans"));
    assert!(!language_matches("zh", "zha"));
    assert!(!language_matches("pt-BR", "pt"));
    assert!(!language_matches("zh", "not a tag"));
}

#[test]
fn one_edit_is_one_edit() {
    assert!(within_one_edit("summarize", "summarise"));
    assert!(within_one_edit("chinse", "chinese"));
    assert!(within_one_edit("summarize", "sumarize"));
    assert!(within_one_edit("chinesee", "chinese"));
    assert!(within_one_edit("same", "same"));
    assert!(!within_one_edit("summarize", "summarized!"));
    assert!(within_one_edit("abcdef", "bacdef"));
    assert!(within_one_edit("transalte", "translate"));
    assert!(!within_one_edit("abcdef", "badcef"));
    assert!(!within_one_edit("translate", "transport"));
}

#[test]
fn bad_tables_are_refused() {
    let base = |extra: &str| {
        format!(
            "[capabilities]\ntranslation = [\"translate\"]\n{extra}\n[languages.fr]\nnames = [\"french\"]\n[trust]\nkey-verified = [\"key verified\"]\n"
        )
    };
    assert!(Lexicon::parse(&base("")).is_ok());
    assert!(matches!(
        Lexicon::parse(&base("chat = [\"translate\"]")),
        Err(LexiconError::Ambiguous { .. })
    ));
    assert!(matches!(
        Lexicon::parse(&base("chat = [\"the\"]")),
        Err(LexiconError::Empty { .. })
    ));
    assert!(matches!(
        Lexicon::parse(&base("").replace("languages.fr", "languages.\"f r\"")),
        Err(LexiconError::Language { .. })
    ));
    assert!(matches!(
        Lexicon::parse(&base("").replace("key-verified", "very-verified")),
        Err(LexiconError::Trust { .. })
    ));
    assert!(matches!(
        Lexicon::parse(&base("[extra]")),
        Err(LexiconError::Toml(_))
    ));
}

#[test]
fn a_custom_lexicon_is_used() {
    let lexicon = Lexicon::parse(
        "[capabilities]\nweather = [\"forecast\"]\n[languages.nl]\nnames = [\"dutch\"]\n[trust]\n",
    )
    .unwrap();
    let u = lexicon.understand("a forecast in dutch");
    assert_eq!(u.capabilities, ["weather"]);
    assert_eq!(u.languages, ["nl"]);
    assert_eq!(u.text, "forecast");
}

#[test]
fn objects_imply_a_subject_that_ranks_and_narrows_nothing() {
    let u = understand("summarize patient files");
    assert_eq!(u.capabilities, ["summarization"]);
    assert_eq!(u.text, "summarize patient files medical");
    assert_eq!(u.rest, "patient files medical");
    assert!(u.languages.is_empty());
    // A subject the query already says is not added twice.
    assert_eq!(
        understand("medical patient files").rest,
        "medical patient files"
    );
    // Exact words only: "source code" is not a course, "patent" not a patient.
    assert!(!understand("review source code").rest.contains("education"));
    assert!(!understand("patent filings").rest.contains("medical"));
    // The subjects, as words: implied, or said by the query itself.
    assert_eq!(understand("summarize patient files").subjects, ["medical"]);
    assert_eq!(understand("legal translation").subjects, ["legal"]);
    assert!(understand("summarize emails").subjects.is_empty());
    // Several subjects, each once, in table order.
    assert_eq!(
        understand("translate hotel bookings and bank statements").rest,
        "hotel bookings bank statements finance travel"
    );
}

#[test]
fn a_subject_key_must_be_one_word() {
    let table = |subjects: &str| {
        format!("[capabilities]\ntranslation = [\"translate\"]\n[subjects]\n{subjects}\n[languages.fr]\nnames = [\"french\"]\n[trust]\n")
    };
    let lexicon = Lexicon::parse(&table("legal = [\"nda\"]")).unwrap();
    assert_eq!(lexicon.understand("check my NDA").rest, "check nda legal");
    assert!(matches!(
        Lexicon::parse(&table("\"legal work\" = [\"nda\"]")),
        Err(LexiconError::Empty { .. })
    ));
    assert!(matches!(
        Lexicon::parse(&table("legal = [\"nda\"]\nmedical = [\"nda\"]")),
        Err(LexiconError::Ambiguous { .. })
    ));
}

#[test]
fn phrases_in_other_languages_also_rank_their_english_words() {
    // Words of a language with spaces: exact words, the longest phrase
    // first ("base de datos" is a database, not data); the English words
    // follow in the table's order.
    let u = understand("consultas sql a una base de datos");
    assert_eq!(u.text, "consultas sql una base de datos database query");
    assert!(u.languages.is_empty(), "{u:?}");
    // Unspaced scripts: anywhere in the query; the query's own words stay
    // for records written in its language.
    let u = understand("查询天气预报");
    assert_eq!(u.text, "查询天气预报 forecast query weather");
    assert_eq!(u.rest, u.text);
    let u = understand("브라우저 자동화");
    assert_eq!(u.rest, "브라우저 자동화 automation browser");
    // A phrase of several English words adds each once.
    assert_eq!(
        understand("domótica casa inteligente").rest,
        "domótica casa inteligente smart home"
    );
    // Nothing is narrowed and no capability named by a translation alone.
    let u = understand("mensajes de slack");
    assert!(u.capabilities.is_empty() && u.languages.is_empty(), "{u:?}");
    assert!(u.rest.ends_with("messages"), "{u:?}");
    // An English query is left as it is.
    assert_eq!(understand("weather forecast").rest, "weather forecast");
}

#[test]
fn a_translation_is_one_phrase_under_one_english_key() {
    let table = |translations: &str| {
        format!("[capabilities]\ntranslation = [\"translate\"]\n[translations]\n{translations}\n[languages.fr]\nnames = [\"french\"]\n[trust]\n")
    };
    let lexicon = Lexicon::parse(&table("weather = [\"météo\"]")).unwrap();
    assert_eq!(
        lexicon.understand("météo paris").rest,
        "météo paris weather"
    );
    assert!(matches!(
        Lexicon::parse(&table("weather = [\"tiempo\"]\ntime = [\"tiempo\"]")),
        Err(LexiconError::Ambiguous { .. })
    ));
    assert!(matches!(
        Lexicon::parse(&table("\" \" = [\"tiempo\"]")),
        Err(LexiconError::Empty { .. })
    ));
}
