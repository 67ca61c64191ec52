//! Keeps the README's walkthrough true: every command of its
//! `## Walkthrough` section is run against a real node and must answer the
//! status and the body the README shows.
//!
//! The convention the section follows:
//!
//! - a ```` ```sh ```` block holds ONE `curl` command against
//!   `http://127.0.0.1:7700` (lines may end with `\` to continue; `-d @file`
//!   paths are relative to the repository root), and its last line is a
//!   comment with the expected status, e.g. `# 201 Created`;
//! - the ```` ```json ```` block that follows (if any; none for a 204) shows
//!   the response body, or part of it: every key the README shows must be
//!   in the answer with the same value, arrays have the same length and
//!   match element by element, and the string `"..."` matches any value.
//!
//! The commands run in order against one node on a random port, with `sh
//! -c` from the repository root; the port is substituted, and `-o <file>
//! -w '%{http_code}'` captures the body and the status.

use crate::common;

use std::path::Path;

use common::{repo_root, run, TestNode, DEADLINE};
use serde_json::Value;

mod reference;

/// The address the README's commands use.
const README_ADDR: &str = "127.0.0.1:7700";
/// The heading of the section that is run.
const HEADING: &str = "## Walkthrough";

/// One command of the walkthrough and what it must answer.
#[derive(Debug, Clone, PartialEq)]
struct Step {
    /// README line of the command's opening fence (1-based).
    line: usize,
    /// The command, continuation lines included, without the status line.
    command: String,
    /// The status the README promises.
    status: u16,
    /// README line of the body's fence and the body it shows.
    body: Option<(usize, Value)>,
}

/// A fenced code block: its language, the line of its opening fence
/// (1-based) and its lines.
struct Block<'a> {
    lang: &'a str,
    line: usize,
    lines: Vec<&'a str>,
}

/// The fenced blocks of the README section under `heading` (a `## `
/// line), up to the next heading of the same or a higher level.
fn section_blocks<'a>(readme: &'a str, heading: &str) -> Result<Vec<Block<'a>>, String> {
    let lines: Vec<&str> = readme.lines().collect();
    let start = lines
        .iter()
        .position(|l| l.trim_end() == heading)
        .ok_or_else(|| format!("README.md has no {heading:?} section"))?;
    let mut blocks = Vec::new();
    let mut open: Option<Block> = None;
    for (i, line) in lines.iter().enumerate().skip(start + 1) {
        let fence = line.trim_start().strip_prefix("```");
        match (&mut open, fence) {
            (None, Some(info)) => {
                open = Some(Block {
                    lang: info.trim(),
                    line: i + 1,
                    lines: Vec::new(),
                })
            }
            (Some(_), Some(_)) => blocks.push(open.take().expect("a block is open")),
            (Some(block), None) => block.lines.push(line),
            // A heading of the same or a higher level ends the section
            // (outside code blocks, where `# 201 Created` is a comment).
            (None, None) if line.starts_with("## ") || line.starts_with("# ") => break,
            (None, None) => {}
        }
    }
    if let Some(block) = open {
        return Err(format!(
            "README.md line {}: the code block is never closed",
            block.line
        ));
    }
    Ok(blocks)
}

/// The expected status from a comment line like `# 201 Created`.
fn status_comment(line: &str) -> Option<u16> {
    let rest = line.trim().strip_prefix('#')?.trim_start();
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    (digits.len() == 3).then(|| digits.parse().ok()).flatten()
}

/// Parses the walkthrough into steps.
fn walkthrough(readme: &str) -> Result<Vec<Step>, String> {
    let mut steps: Vec<Step> = Vec::new();
    let blocks = section_blocks(readme, HEADING)
        .map_err(|e| format!("{e} (the walkthrough this test runs)"))?;
    for block in blocks {
        match block.lang {
            "sh" | "bash" | "shell" | "console" => {
                let mut lines = block.lines.clone();
                while lines.last().is_some_and(|l| l.trim().is_empty()) {
                    lines.pop();
                }
                let status = lines.pop().and_then(status_comment).ok_or_else(|| {
                    format!(
                        "README.md line {}: the last line of a walkthrough command block must be \
                         a comment with the expected status, like `# 201 Created`",
                        block.line
                    )
                })?;
                let Some(first) = lines.first() else {
                    return Err(format!(
                        "README.md line {}: the block has a status but no command",
                        block.line
                    ));
                };
                if !first.trim_start().starts_with("curl ") {
                    return Err(format!(
                        "README.md line {}: a walkthrough command block must hold one curl \
                         command, found {first:?}",
                        block.line
                    ));
                }
                if let Some(l) = lines[..lines.len() - 1]
                    .iter()
                    .find(|l| !l.trim_end().ends_with('\\'))
                {
                    return Err(format!(
                        "README.md line {}: a walkthrough command block must hold ONE command \
                         (continue lines with a trailing backslash); {l:?} ends a command early",
                        block.line
                    ));
                }
                steps.push(Step {
                    line: block.line,
                    command: lines.join("\n"),
                    status,
                    body: None,
                });
            }
            "json" => {
                let text = block.lines.join("\n");
                let value: Value = serde_json::from_str(&text).map_err(|e| {
                    format!(
                        "README.md line {}: the json block is not JSON ({e}); write \"...\" \
                         for values that vary",
                        block.line
                    )
                })?;
                match steps.last_mut() {
                    Some(step) if step.body.is_none() => step.body = Some((block.line, value)),
                    _ => {
                        return Err(format!(
                            "README.md line {}: a json block must follow a command block \
                             (one body per command)",
                            block.line
                        ))
                    }
                }
            }
            _ => {}
        }
    }
    if steps.is_empty() {
        return Err(format!(
            "README.md's {HEADING:?} section has no command blocks (```sh with one curl \
             command and a `# 200 OK` status line)"
        ));
    }
    Ok(steps)
}

/// Whether `actual` contains `expected`: objects by key (extra keys in
/// `actual` are fine), arrays element by element with the same length,
/// numbers by value, and the string `"..."` matches anything. The error
/// names the JSON pointer of the first difference.
fn contains(expected: &Value, actual: &Value, at: &str) -> Result<(), String> {
    match (expected, actual) {
        (Value::String(s), _) if s == "..." => Ok(()),
        (Value::Object(e), Value::Object(a)) => {
            for (k, ev) in e {
                let path = format!("{at}/{k}");
                let av = a
                    .get(k)
                    .ok_or_else(|| format!("{path}: missing from the answer"))?;
                contains(ev, av, &path)?;
            }
            Ok(())
        }
        (Value::Array(e), Value::Array(a)) => {
            if e.len() != a.len() {
                return Err(format!(
                    "{}: the README shows {} elements, the answer has {}",
                    if at.is_empty() { "/" } else { at },
                    e.len(),
                    a.len()
                ));
            }
            for (i, (ev, av)) in e.iter().zip(a).enumerate() {
                contains(ev, av, &format!("{at}/{i}"))?;
            }
            Ok(())
        }
        (Value::Number(e), Value::Number(a)) if e.as_f64() == a.as_f64() => Ok(()),
        _ if expected == actual => Ok(()),
        _ => Err(format!(
            "{}: the README shows {expected}, the answer has {actual}",
            if at.is_empty() { "/" } else { at }
        )),
    }
}

/// Runs one step against the node at `addr`; `out` is a scratch file.
fn run_step(step: &Step, addr: &str, out: &Path) -> Result<(), String> {
    let base = format!("http://{addr}");
    let command = step
        .command
        .replace(&format!("http://{README_ADDR}"), &base)
        .replace("http://localhost:7700", &base);
    if !command.contains(&base) {
        return Err(format!("the command does not call http://{README_ADDR}"));
    }
    let _ = std::fs::remove_file(out);
    let full = format!("{command} -o '{}' -w '%{{http_code}}'", out.display());
    let done = run(
        std::process::Command::new("sh")
            .arg("-c")
            .arg(&full)
            .current_dir(repo_root()),
        DEADLINE,
        &format!("sh -c {full:?}"),
    );
    if !done.status.success() {
        return Err(format!(
            "the command failed with {}: {}",
            done.status,
            done.stderr.trim()
        ));
    }
    let status = done.stdout.trim();
    let mut body = std::fs::read_to_string(out).unwrap_or_default();
    // `curl -i` puts the headers in the body.
    if body.starts_with("HTTP/") {
        body = body
            .split_once("\r\n\r\n")
            .map_or(String::new(), |(_, b)| b.to_owned());
    }
    if status != step.status.to_string() {
        return Err(format!(
            "the README says status {}, the node answered {status} with {body}",
            step.status
        ));
    }
    match &step.body {
        None if step.status == 204 && !body.is_empty() => Err(format!("204 with a body: {body}")),
        None => Ok(()),
        Some((line, expected)) => {
            let actual: Value = serde_json::from_str(&body)
                .map_err(|e| format!("the answer is not JSON ({e}): {body}"))?;
            contains(expected, &actual, "").map_err(|diff| {
                format!(
                    "the answer does not match the json block at README.md line {line}: {diff}\n\
                     README shows: {expected}\nthe node answered: {actual}"
                )
            })
        }
    }
}

#[test]
fn readme_walkthrough_is_true() {
    let path = repo_root().join("README.md");
    let readme = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let steps = walkthrough(&readme).unwrap_or_else(|e| panic!("{e}"));
    let node = TestNode::start();
    let scratch = tempfile::tempdir().expect("a scratch directory");
    let out = scratch.path().join("body");
    let mut failures = Vec::new();
    for step in &steps {
        if let Err(e) = run_step(step, &node.addr().to_string(), &out) {
            failures.push(format!(
                "README.md line {} ({}):\n  {e}",
                step.line,
                step.command.lines().next().unwrap_or_default().trim()
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} walkthrough commands do not do what README.md says:\n\n{}",
        failures.len(),
        steps.len(),
        failures.join("\n\n")
    );
}

// The checker itself: it must accept what is true and reject what is not.

const SAMPLE: &str = r#"# x

## Walkthrough

Register:

```sh
curl -s -X POST http://127.0.0.1:7700/agents \
  -H 'content-type: application/json' \
  -d @proto/examples/aidip/valid/translator-draft-example.json
# 201 Created
```

```json
{"id": "agent-12345", "tags": ["..."]}
```

```sh
curl -s -X DELETE http://127.0.0.1:7700/agents/agent-12345
# 204 No Content
```

## Next

```sh
curl -s http://127.0.0.1:7700/health
# 200 OK
```
"#;

#[test]
fn walkthrough_parser_reads_commands_statuses_and_bodies() {
    let steps = walkthrough(SAMPLE).unwrap();
    assert_eq!(steps.len(), 2, "the next section is not part of it");
    assert_eq!(steps[0].line, 7);
    assert_eq!(steps[0].status, 201);
    assert!(steps[0].command.starts_with("curl -s -X POST"));
    assert!(steps[0].command.ends_with("translator-draft-example.json"));
    assert_eq!(
        steps[0].body,
        Some((
            14,
            serde_json::json!({"id": "agent-12345", "tags": ["..."]})
        ))
    );
    assert_eq!(steps[1].status, 204);
    assert_eq!(steps[1].body, None);
}

#[test]
fn walkthrough_parser_rejects_what_it_cannot_check() {
    let cases = [
        ("# x\n\n## Usage\n", "no \"## Walkthrough\" section"),
        ("## Walkthrough\n\ntext only\n", "no command blocks"),
        (
            "## Walkthrough\n```sh\ncurl -s http://127.0.0.1:7700/health\n```\n",
            "expected status",
        ),
        (
            "## Walkthrough\n```sh\ncargo run -- node\n# 200 OK\n```\n",
            "one curl",
        ),
        (
            "## Walkthrough\n```sh\ncurl http://127.0.0.1:7700/a\ncurl http://127.0.0.1:7700/b\n# 200 OK\n```\n",
            "ONE command",
        ),
        ("## Walkthrough\n```json\n{}\n```\n", "must follow a command"),
        (
            "## Walkthrough\n```sh\ncurl http://127.0.0.1:7700/a\n# 200 OK\n```\n```json\n[{...}]\n```\n",
            "not JSON",
        ),
        (
            "## Walkthrough\n```sh\ncurl http://127.0.0.1:7700/a\n# 200 OK\n",
            "never closed",
        ),
    ];
    for (text, expected) in cases {
        let err = walkthrough(text).expect_err(text);
        assert!(err.contains(expected), "{text:?}: {err}");
    }
}

#[test]
fn contains_matches_subsets_and_rejects_differences() {
    use serde_json::json;
    let actual = json!({
        "id": "a", "score": 0.5, "n": 1,
        "trust": {"level": "unverified", "attested_by": ["ed25519:ab"]},
        "list": [{"id": "x", "extra": true}, {"id": "y"}]
    });
    for ok in [
        json!({}),
        json!({"id": "a"}),
        json!({"score": "...", "n": 1.0}),
        json!({"trust": {"level": "unverified", "attested_by": ["..."]}}),
        json!({"list": [{"id": "x"}, {}]}),
        json!("..."),
    ] {
        contains(&ok, &actual, "").unwrap_or_else(|e| panic!("{ok}: {e}"));
    }
    for (bad, at) in [
        (json!({"id": "b"}), "/id"),
        (json!({"missing": 1}), "/missing"),
        (json!({"n": "1"}), "/n"),
        (json!({"list": [{"id": "x"}]}), "/list"),
        (json!({"list": [{"id": "y"}, {"id": "x"}]}), "/list/0/id"),
        (json!({"trust": {"attested_by": []}}), "/trust/attested_by"),
        (json!([]), "/"),
    ] {
        let err = contains(&bad, &actual, "").expect_err(&bad.to_string());
        assert!(err.starts_with(at), "{bad}: {err}");
    }
}

#[test]
fn runner_detects_wrong_statuses_and_bodies() {
    let text = "## Walkthrough\n\
        ```sh\ncurl -s http://127.0.0.1:7700/agents/nobody\n# 200 OK\n```\n\
        ```sh\ncurl -s http://127.0.0.1:7700/health\n# 200 OK\n```\n\
        ```json\n{\"status\": \"degraded\"}\n```\n\
        ```sh\ncurl -s \\\n  http://127.0.0.1:7700/health\n# 200 OK\n```\n\
        ```json\n{\"status\": \"ok\", \"records\": 0, \"peer_id\": \"...\"}\n```\n\
        ```sh\ncurl -s http://example.invalid/health\n# 200 OK\n```\n";
    let steps = walkthrough(text).unwrap();
    let node = TestNode::start();
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path().join("body");
    let addr = node.addr().to_string();
    let results: Vec<Result<(), String>> = steps.iter().map(|s| run_step(s, &addr, &out)).collect();
    let err = results[0].as_ref().expect_err("a wrong status is caught");
    assert!(err.contains("answered 404"), "{err}");
    let err = results[1].as_ref().expect_err("a wrong body is caught");
    assert!(err.contains("/status"), "{err}");
    results[2].as_ref().expect("a true step passes");
    let err = results[3].as_ref().expect_err("only the node is called");
    assert!(err.contains("127.0.0.1:7700"), "{err}");
}
