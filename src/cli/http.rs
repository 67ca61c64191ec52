//! What the commands that talk to a running node's HTTP API share
//! (`status`, `search`): the `--api` and `--timeout` flags, one client
//! with that deadline, and how a node that cannot be reached or answers
//! with an error is told to the user (and which exit status follows).

use std::process::ExitCode;
use std::time::Duration;

use std::error::Error as _;

use anyhow::Context as _;
use clap::Args;
use serde_json::Value;

/// Where a node's API answers unless `--api` says otherwise (`node`'s
/// default `api.listen`).
pub(super) const DEFAULT_API: &str = "http://127.0.0.1:7700";

/// The longest answer read (a page of `api.max_limit` results is a few
/// MiB at most).
const MAX_ANSWER_BYTES: usize = 32 << 20;

/// Exit status when the node answered with an error (its error object is
/// printed).
pub(super) const EXIT_REFUSED: u8 = 1;
/// Exit status when the node could not be reached, did not answer
/// within `--timeout`, or answered more than [`MAX_ANSWER_BYTES`].
pub(super) const EXIT_UNREACHABLE: u8 = 2;

/// The node to talk to.
#[derive(Debug, Clone, Args)]
pub struct ApiArgs {
    /// The node's API.
    #[arg(long, default_value = DEFAULT_API, value_name = "URL")]
    pub api: String,
    /// Seconds to wait for each of the node's answers before giving up.
    #[arg(long, default_value_t = 10, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub timeout: u64,
    /// A file whose first line is the credential sent to the node
    /// (`Authorization: Bearer`): an API key, a JWT or the admin token.
    #[arg(long, value_name = "FILE", env = "AGENTMESH_TOKEN_FILE")]
    pub token_file: Option<std::path::PathBuf>,
}

/// A client bound to one node's API.
pub(super) struct NodeApi {
    client: reqwest::Client,
    base: String,
    timeout: Duration,
    token: Option<String>,
}

/// A node's answer, read whole.
pub(super) struct Answer {
    /// The status.
    pub(super) status: reqwest::StatusCode,
    /// The headers.
    pub(super) headers: reqwest::header::HeaderMap,
    /// The body.
    pub(super) text: String,
}

impl Answer {
    /// The body as JSON (`Null` when it is not JSON).
    pub(super) fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or(Value::Null)
    }
}

/// Why a request got no answer to use; [`Failure::report`] prints it and
/// answers the exit status.
pub(super) enum Failure {
    /// No answer: refused, reset, timed out, not HTTP.
    Unreachable { url: String, why: String },
    /// An answer that is not a success.
    Refused { url: String, answer: Answer },
}

impl Failure {
    /// Prints what went wrong on stderr and answers the exit status.
    pub(super) fn report(self) -> ExitCode {
        match self {
            Self::Unreachable { url, why } => {
                eprintln!("error: cannot reach the node at {url}: {why}");
                ExitCode::from(EXIT_UNREACHABLE)
            }
            Self::Refused { url, answer } => {
                eprintln!("{}", refusal_text(&url, &answer));
                ExitCode::from(EXIT_REFUSED)
            }
        }
    }
}

/// `error: the node answered 400 Bad Request at URL: Code: message`, then
/// each problem of `details` on its own line (`  /field: message`).
fn refusal_text(url: &str, answer: &Answer) -> String {
    let body = answer.json();
    let error = &body["error"];
    let mut text = format!("error: {url} answered {}", answer.status);
    match (error["code"].as_str(), error["message"].as_str()) {
        (Some(code), Some(message)) => text.push_str(&format!(": {code}: {message}")),
        _ if !answer.text.trim().is_empty() => {
            text.push_str(&format!(": {}", answer.text.trim()));
        }
        _ => {}
    }
    for problem in error["details"].as_array().into_iter().flatten() {
        let field = problem["field"].as_str().unwrap_or_default();
        let message = problem["message"]
            .as_str()
            .map_or_else(|| problem.to_string(), str::to_owned);
        if field.is_empty() {
            text.push_str(&format!("\n  {message}"));
        } else {
            text.push_str(&format!("\n  {field}: {message}"));
        }
    }
    text
}

/// The first line of `path`, trimmed, for a secret given in a file
/// (`flag` names it in the error).
///
/// # Errors
/// When the file cannot be read or its first line is empty.
pub(super) fn first_line(path: &std::path::Path, flag: &str) -> anyhow::Result<String> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("{flag} {}", path.display()))?;
    let line = text.lines().next().unwrap_or_default().trim();
    anyhow::ensure!(
        !line.is_empty(),
        "{flag} {}: its first line is empty",
        path.display()
    );
    Ok(line.to_owned())
}

/// An error and its causes, `a: b: c` (reqwest's own text leaves out why
/// a connection failed).
fn causes(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let s_text = s.to_string();
        if !text.contains(&s_text) {
            text.push_str(&format!(": {s_text}"));
        }
        source = s.source();
    }
    text
}

impl NodeApi {
    /// A client for `args.api` that gives up after `args.timeout`.
    ///
    /// # Errors
    /// When the HTTP client cannot be built.
    pub(super) fn new(args: &ApiArgs) -> anyhow::Result<Self> {
        let timeout = Duration::from_secs(args.timeout);
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            .build()
            .context("building the HTTP client")?;
        let token = args
            .token_file
            .as_deref()
            .map(|path| first_line(path, "--token-file"))
            .transpose()?;
        Ok(Self {
            client,
            base: args.api.trim_end_matches('/').to_owned(),
            timeout,
            token,
        })
    }

    /// `POST {api}{path}` with a JSON body and extra headers.
    pub(super) async fn post_with(
        &self,
        path: &str,
        body: &Value,
        headers: reqwest::header::HeaderMap,
    ) -> Result<Answer, Failure> {
        let url = format!("{}{path}", self.base);
        self.send(self.client.post(&url).json(body).headers(headers), url)
            .await
    }

    /// `GET {api}{path}`.
    pub(super) async fn get(&self, path: &str) -> Result<Answer, Failure> {
        let url = format!("{}{path}", self.base);
        self.send(self.client.get(&url), url).await
    }

    /// `POST {api}{path}` with a JSON body.
    pub(super) async fn post(&self, path: &str, body: &Value) -> Result<Answer, Failure> {
        let url = format!("{}{path}", self.base);
        self.send(self.client.post(&url).json(body), url).await
    }

    async fn send(&self, request: reqwest::RequestBuilder, url: String) -> Result<Answer, Failure> {
        let request = match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        };
        let unreachable = |e: reqwest::Error, url: String| {
            let why = if e.is_timeout() {
                format!("no answer within {} s (--timeout)", self.timeout.as_secs())
            } else {
                // reqwest's own line repeats the URL; its causes say why.
                e.source().map_or_else(|| e.to_string(), causes)
            };
            Failure::Unreachable { url, why }
        };
        let response = match request.send().await {
            Ok(r) => r,
            Err(e) => return Err(unreachable(e, url)),
        };
        let status = response.status();
        let headers = response.headers().clone();
        let mut response = response;
        let mut bytes = Vec::new();
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) if bytes.len() + chunk.len() > MAX_ANSWER_BYTES => {
                    let why = format!("its answer is longer than {} MiB", MAX_ANSWER_BYTES >> 20);
                    return Err(Failure::Unreachable { url, why });
                }
                Ok(Some(chunk)) => bytes.extend_from_slice(&chunk),
                Ok(None) => break,
                Err(e) => return Err(unreachable(e, url)),
            }
        }
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let answer = Answer {
            status,
            headers,
            text,
        };
        if status.is_success() {
            Ok(answer)
        } else {
            Err(Failure::Refused { url, answer })
        }
    }

    /// The API's base URL, as given.
    pub(super) fn base(&self) -> &str {
        &self.base
    }
}

/// The width of the terminal stdout writes to; 100 columns when it is
/// not a terminal (`COLUMNS` when set).
pub(super) fn terminal_width() -> usize {
    if let Some((_, cols)) = console::Term::stdout().size_checked() {
        return usize::from(cols).max(40);
    }
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse::<usize>().ok())
        .filter(|&c| c >= 40)
        .unwrap_or(100)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(status: u16, text: &str) -> Answer {
        Answer {
            status: reqwest::StatusCode::from_u16(status).unwrap(),
            headers: reqwest::header::HeaderMap::new(),
            text: text.to_owned(),
        }
    }

    #[test]
    fn a_refusal_names_the_url_the_status_the_code_and_each_problem() {
        let text = refusal_text(
            "http://n/agents/search",
            &answer(
                400,
                r#"{"error":{"code":"InvalidInput","message":"bad language","details":[{"field":"/filters/supported_languages/0","message":"not BCP 47"}]}}"#,
            ),
        );
        assert_eq!(
            text,
            "error: http://n/agents/search answered 400 Bad Request: InvalidInput: bad language\n  \
             /filters/supported_languages/0: not BCP 47"
        );
    }

    #[test]
    fn a_refusal_that_is_not_the_error_object_shows_its_text() {
        assert_eq!(
            refusal_text("http://n/health", &answer(502, "bad gateway\n")),
            "error: http://n/health answered 502 Bad Gateway: bad gateway"
        );
        assert_eq!(
            refusal_text("http://n/health", &answer(503, "")),
            "error: http://n/health answered 503 Service Unavailable"
        );
    }
}
