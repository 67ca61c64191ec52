//! Reading a scenario file: TOML parsed, then validated; a refusal
//! ([`ScenarioError`]) names the file, the key and the reason.

use std::path::{Path, PathBuf};

use super::file::Scenario;

/// A refused scenario: which file, which key, why.
#[derive(Debug)]
pub struct ScenarioError {
    /// The file read.
    pub file: PathBuf,
    /// The key at fault (dotted path), or `-` for the file as a whole.
    pub key: String,
    /// Why it is refused.
    pub reason: String,
}

impl std::error::Error for ScenarioError {}

impl std::fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: key `{}`: {}",
            self.file.display(),
            self.key,
            self.reason
        )
    }
}

impl Scenario {
    /// Reads and validates `path`.
    ///
    /// # Errors
    /// A [`ScenarioError`] naming the file, the key and the reason.
    pub fn load(path: &Path) -> Result<Self, ScenarioError> {
        let text = std::fs::read_to_string(path).map_err(|e| ScenarioError {
            file: path.to_owned(),
            key: "-".into(),
            reason: format!("cannot read: {e}"),
        })?;
        Self::parse(&text, path)
    }

    /// Parses and validates `text`, read from `path`.
    ///
    /// # Errors
    /// A [`ScenarioError`] naming the file, the key and the reason.
    pub fn parse(text: &str, path: &Path) -> Result<Self, ScenarioError> {
        if text.len() > 1 << 20 {
            return Err(ScenarioError {
                file: path.to_owned(),
                key: "-".into(),
                reason: "over 1 MiB".into(),
            });
        }
        let scenario: Scenario = toml::from_str(text).map_err(|e| ScenarioError {
            file: path.to_owned(),
            key: key_of(&e, text),
            reason: e.message().to_owned(),
        })?;
        scenario.validate().map_err(|(key, reason)| ScenarioError {
            file: path.to_owned(),
            key: key.into(),
            reason,
        })?;
        Ok(scenario)
    }
}

/// The dotted key a TOML error points at, from its span (best effort).
fn key_of(e: &toml::de::Error, text: &str) -> String {
    let msg = e.message();
    // serde's unknown-field message names the field.
    if let Some(rest) = msg.strip_prefix("unknown field `") {
        if let Some(end) = rest.find('`') {
            return with_table(e, text, &rest[..end]);
        }
    }
    if let Some(rest) = msg.strip_prefix("missing field `") {
        if let Some(end) = rest.find('`') {
            return with_table(e, text, &rest[..end]);
        }
    }
    match e.span() {
        Some(span) => {
            let line_start = text[..span.start].rfind('\n').map_or(0, |i| i + 1);
            let line = &text[line_start..];
            let key = line
                .split('=')
                .next()
                .unwrap_or("")
                .trim()
                .trim_matches(['[', ']']);
            with_table(e, text, key)
        }
        None => "-".into(),
    }
}

/// Prefixes `key` with the `[table]` the error's span sits in.
fn with_table(e: &toml::de::Error, text: &str, key: &str) -> String {
    let Some(span) = e.span() else {
        return key.to_owned();
    };
    let before = &text[..span.start.min(text.len())];
    let table = before.lines().rev().find_map(|l| {
        let l = l.trim();
        l.strip_prefix('[')
            .map(|t| t.trim_start_matches('[').trim_end_matches(']').trim())
    });
    match table {
        Some(t) if !t.is_empty() && t != key && !key.starts_with(t) => format!("{t}.{key}"),
        _ => key.to_owned(),
    }
}
