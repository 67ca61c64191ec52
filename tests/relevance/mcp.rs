//! The second relevance set: real MCP server descriptions written by third
//! parties (`mcp/corpus.ndjson`, where they come from and their licence in
//! `mcp/SOURCE.md`), natural queries (`mcp/queries.tsv`) and graded
//! judgements made by reading the descriptions (`mcp/judgements.tsv`).
//!
//! - [`load`]: the corpus into a real store through the importer, as
//!   `agentmesh import --format mcp-registry` brings it in;
//! - [`node`]: the node's search (`Registry::search_local`, text and filter as
//!   the API sends them);
//! - [`Bm25`]: the baseline the targets are measured against, a plain BM25 (tantivy's
//!   default tokenizer, no stemming, no boosts) over name, title and
//!   description;
//! - [`grep`]: a keyword grep, the third ranker the judging pool is drawn
//!   from;
//! - [`pool`]: the union of the three rankers' top [`POOL_DEPTH`] per
//!   query, what a judge reads.
//!
//! The files are parsed strictly: a malformed line, an unknown shape or
//! topic, a grade outside 0..=3 or a judgement of an agent the corpus does
//! not hold is an error naming the file and line.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, ensure, Context as _};
use serde_json::Value;
use tantivy::collector::TopDocs;
use tantivy::query::{BooleanQuery, Occur, Query as TextQuery, QueryParser, TermQuery};
use tantivy::schema::{IndexRecordOption, Schema, Value as _, STORED, STRING, TEXT};
use tantivy::{doc, Index, TantivyDocument, Term};

use agentmesh::issuer::Issuer;
use agentmesh::registry::import::{
    ImportFormat, ImportLimits, ImportSummary, Importer, LineResult, Outcome,
};
use agentmesh::registry::{Registry, SearchQuery};
use agentmesh::store::{Filter, Store};

use super::eval::{search_ids, Asked, Judged};

/// The directory of the set's files.
pub(crate) fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/relevance/mcp")
}

/// How a query is worded.
pub(crate) const SHAPES: &[&str] = &[
    "plain",      // the words a user would type first
    "synonym",    // other words for the same need
    "misspelled", // a typo or two
    "language",   // a human language named in words ("in spanish")
    "zh",         // written in Chinese
    "ja",         // written in Japanese
    "ko",         // written in Korean
    "es",         // written in Spanish
    "filtered",   // with an explicit tag filter
];

/// The shapes written in a language other than English.
pub(crate) const OTHER_LANGUAGES: &[&str] = &["zh", "ja", "ko", "es"];

/// Results a ranker returns into the scores (the nDCG cut-off).
pub(crate) const TOP: usize = 10;

/// Results of each ranker pooled for judging, per query.
pub(crate) const POOL_DEPTH: usize = 20;

/// Longest line of the set's TSV files, in bytes.
const MAX_TSV_LINE: usize = 1024;

/// One query of the set.
#[derive(Debug, Clone)]
pub(crate) struct Query {
    /// Its id in `queries.tsv` (1, 2, 3 …).
    pub(crate) n: usize,
    /// What it asks for, one of `topics.tsv`.
    pub(crate) topic: String,
    pub(crate) shape: &'static str,
    /// Tags the explicit filter demands (the API's `filters.tags`).
    pub(crate) tags: Vec<String>,
    pub(crate) text: String,
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

/// One server of the corpus, as the baselines see it.
#[derive(Debug, Clone)]
pub(crate) struct Server {
    /// The agent id the importer gives it (`mcp:{name}`).
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) title: Option<String>,
    pub(crate) description: String,
    /// `mcp` and the packages' registry types, as the descriptor's tags.
    pub(crate) tags: Vec<String>,
}

impl Server {
    /// Name, title and description: what the baselines search.
    fn text(&self) -> String {
        let title = self.title.as_deref().unwrap_or_default();
        format!("{} {title} {}", self.name, self.description)
    }
}

/// The lines of a TSV file that are not blank or `#` comments, numbered
/// from 1, each split on tabs into exactly `fields` fields.
fn tsv(path: &Path, fields: usize) -> anyhow::Result<Vec<(usize, Vec<String>)>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("{}", path.display()))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let at = || format!("{}:{}", path.display(), i + 1);
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        ensure!(
            line.len() <= MAX_TSV_LINE,
            "{}: longer than {MAX_TSV_LINE} bytes",
            at()
        );
        let cols: Vec<String> = line.split('\t').map(str::to_owned).collect();
        ensure!(
            cols.len() == fields,
            "{}: {} fields, {fields} expected",
            at(),
            cols.len()
        );
        ensure!(
            cols.iter().all(|c| !c.trim().is_empty()),
            "{}: an empty field",
            at()
        );
        out.push((i + 1, cols));
    }
    Ok(out)
}

/// The topics of `topics.tsv` (topic → what a relevant server does).
pub(crate) fn topics(path: &Path) -> anyhow::Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for (line, cols) in tsv(path, 2)? {
        let [topic, what]: [String; 2] = cols.try_into().expect("two fields, checked");
        ensure!(
            out.insert(topic.clone(), what).is_none(),
            "{}:{line}: topic {topic} twice",
            path.display()
        );
    }
    Ok(out)
}

/// The queries of `queries.tsv`: `id, topic, shape, filter, text`, ids
/// 1, 2, 3 … in order, the filter `-` or `tags=a,b`.
pub(crate) fn queries(
    path: &Path,
    topics: &BTreeMap<String, String>,
) -> anyhow::Result<Vec<Query>> {
    let mut out = Vec::new();
    for (line, cols) in tsv(path, 5)? {
        let at = format!("{}:{line}", path.display());
        let [id, topic, shape, filter, text]: [String; 5] =
            cols.try_into().expect("five fields, checked");
        let id: usize = id.parse().with_context(|| format!("{at}: id {id:?}"))?;
        ensure!(
            id == out.len() + 1,
            "{at}: id {id}, {} expected",
            out.len() + 1
        );
        ensure!(topics.contains_key(&topic), "{at}: unknown topic {topic:?}");
        let Some(shape) = SHAPES.iter().find(|s| **s == shape) else {
            bail!("{at}: unknown shape {shape:?} (one of {SHAPES:?})");
        };
        let tags = match filter.as_str() {
            "-" => Vec::new(),
            f => match f.strip_prefix("tags=") {
                Some(tags) if !tags.is_empty() => tags.split(',').map(str::to_owned).collect(),
                _ => bail!("{at}: filter {f:?} is neither - nor tags=a,b"),
            },
        };
        ensure!(
            (*shape == "filtered") != tags.is_empty(),
            "{at}: a filtered query has a filter, and only it"
        );
        out.push(Query {
            n: id,
            topic,
            shape,
            tags,
            text,
        });
    }
    Ok(out)
}

/// The judgements of `judgements.tsv` (`query id, agent id, grade`) over
/// `queries`: every query judged, every judged agent in the corpus, each
/// pair once. Unjudged agents count as 0.
pub(crate) fn judgements(
    path: &Path,
    queries: Vec<Query>,
    corpus: &[Server],
) -> anyhow::Result<Vec<Judged<Query>>> {
    let ids: BTreeSet<&str> = corpus.iter().map(|s| s.id.as_str()).collect();
    let mut grades: Vec<HashMap<String, u8>> = vec![HashMap::new(); queries.len()];
    for (line, cols) in tsv(path, 3)? {
        let at = format!("{}:{line}", path.display());
        let [q, id, grade]: [String; 3] = cols.try_into().expect("three fields, checked");
        let q: usize = q.parse().with_context(|| format!("{at}: query id {q:?}"))?;
        ensure!((1..=queries.len()).contains(&q), "{at}: no query {q}");
        ensure!(ids.contains(id.as_str()), "{at}: {id} is not in the corpus");
        let grade: u8 = grade
            .parse()
            .with_context(|| format!("{at}: grade {grade:?}"))?;
        ensure!(grade <= 3, "{at}: grade {grade} (0 to 3)");
        ensure!(
            grades[q - 1].insert(id.clone(), grade).is_none(),
            "{at}: query {q} and {id} judged twice"
        );
    }
    let unjudged: Vec<usize> = (0..queries.len())
        .filter(|i| grades[*i].is_empty())
        .map(|i| i + 1)
        .collect();
    ensure!(unjudged.is_empty(), "queries never judged: {unjudged:?}");
    Ok(queries
        .into_iter()
        .zip(grades)
        .map(|(q, g)| Judged::new(q, g))
        .collect())
}

/// The servers of `corpus.ndjson`, as the importer will name them.
pub(crate) fn corpus(path: &Path) -> anyhow::Result<Vec<Server>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("{}", path.display()))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let at = || format!("{}:{}", path.display(), i + 1);
        let v: Value = serde_json::from_str(line).with_context(at)?;
        let string = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
        let name = string("name").with_context(|| format!("{}: no name", at()))?;
        let description =
            string("description").with_context(|| format!("{}: no description", at()))?;
        let mut tags = vec!["mcp".to_owned()];
        for p in v
            .get("packages")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(t) = p.get("registryType").and_then(Value::as_str) {
                tags.push(t.to_owned());
            }
        }
        out.push(Server {
            id: format!("{}{name}", agentmesh::formats::mcp::ID_PREFIX),
            name,
            title: string("title"),
            description,
            tags,
        });
    }
    Ok(out)
}

/// A registry holding the corpus, in a temporary directory.
pub(crate) struct Loaded {
    pub(crate) registry: Registry,
    pub(crate) summary: ImportSummary,
    _dir: tempfile::TempDir,
}

/// Imports `corpus.ndjson` into a fresh store with the importer, as
/// `agentmesh import --format mcp-registry` does (validated, issued in
/// batches, flushed), then waits until the text index holds it all.
pub(crate) async fn load(path: &Path) -> anyhow::Result<Loaded> {
    let dir = tempfile::tempdir()?;
    let store = Store::open(dir.path(), 64 << 20)?;
    let key = Arc::new(ed25519_dalek::SigningKey::from_bytes(&[7u8; 32]));
    let issuer = Issuer::new(store.clone(), key, Duration::from_secs(24 * 3600));
    let registry = Registry::new(issuer);
    let importer = Importer::new(registry.clone(), ImportLimits::default())
        .with_format(ImportFormat::McpRegistry);
    let file = tokio::fs::File::open(path)
        .await
        .with_context(|| format!("{}", path.display()))?;
    let (tx, mut rx) = tokio::sync::mpsc::channel::<LineResult>(1024);
    let drain = tokio::spawn(async move {
        let mut refused = Vec::new();
        while let Some(r) = rx.recv().await {
            if r.outcome == Outcome::Refused {
                refused.push(format!("line {}: {:?} {:?}", r.line, r.id, r.problems));
            }
        }
        refused
    });
    let summary = importer.run(tokio::io::BufReader::new(file), tx).await;
    let refused = drain.await?;
    ensure!(refused.is_empty(), "the importer refused: {refused:#?}");
    store.flush().await?;
    store.sync_text().await?;
    Ok(Loaded {
        registry,
        summary,
        _dir: dir,
    })
}

/// The node's search: the text and the explicit filter, as the API sends
/// them to `Registry::search_local` (which understands the text itself).
pub(crate) async fn node(registry: &Registry, q: &Query, limit: usize) -> Vec<String> {
    let search = SearchQuery {
        filter: Filter::new([], q.tags.iter().map(String::as_str), []).expect("no languages"),
        query: Some(q.text.clone()),
        after: None,
        limit,
        explain: false,
    };
    search_ids(registry, &search).await
}

/// Runs the node's search for every query, a few at once; the answers by
/// query number.
pub(crate) async fn node_all(registry: &Registry, qs: &[&Query], limit: usize) -> Vec<Vec<String>> {
    use futures_util::stream::{self, StreamExt};
    let mut answers: Vec<(usize, Vec<String>)> = stream::iter(qs)
        .map(|q| async move { (q.n, node(registry, q, limit).await) })
        .buffer_unordered(4)
        .collect()
        .await;
    answers.sort_by_key(|(n, _)| *n);
    answers.into_iter().map(|(_, a)| a).collect()
}

/// The plain BM25 baseline: one tantivy index in memory, name, title and
/// description in one text field under tantivy's default tokenizer
/// (lower-cased words, no stemming), tags as exact terms for the filter.
pub(crate) struct Bm25 {
    index: Index,
    reader: tantivy::IndexReader,
    id: tantivy::schema::Field,
    text: tantivy::schema::Field,
    tags: tantivy::schema::Field,
}

impl Bm25 {
    pub(crate) fn new(corpus: &[Server]) -> anyhow::Result<Self> {
        let mut schema = Schema::builder();
        let id = schema.add_text_field("id", STRING | STORED);
        let text = schema.add_text_field("text", TEXT);
        let tags = schema.add_text_field("tags", STRING);
        let index = Index::create_in_ram(schema.build());
        let mut writer = index.writer_with_num_threads(1, 30_000_000)?;
        for s in corpus {
            let mut d = doc!(id => s.id.clone(), text => s.text());
            for t in &s.tags {
                d.add_text(tags, t);
            }
            writer.add_document(d)?;
        }
        writer.commit()?;
        let reader = index.reader()?;
        Ok(Self {
            index,
            reader,
            id,
            text,
            tags,
        })
    }

    /// The top `limit` ids for `q`, inside its tag filter.
    pub(crate) fn search(&self, q: &Query, limit: usize) -> Vec<String> {
        let parser = QueryParser::for_index(&self.index, vec![self.text]);
        let (parsed, _errors) = parser.parse_query_lenient(&q.text);
        let mut clauses = vec![(Occur::Must, parsed)];
        for t in &q.tags {
            let tag = TermQuery::new(
                Term::from_field_text(self.tags, t),
                IndexRecordOption::Basic,
            );
            clauses.push((Occur::Must, Box::new(tag) as Box<dyn TextQuery>));
        }
        let searcher = self.reader.searcher();
        let top = searcher
            .search(
                &BooleanQuery::new(clauses),
                &TopDocs::with_limit(limit).order_by_score(),
            )
            .expect("an in-memory search succeeds");
        top.into_iter()
            .filter_map(|(_, addr)| {
                let d: TantivyDocument = searcher.doc(addr).ok()?;
                d.get_first(self.id)
                    .and_then(|v| v.as_str())
                    .map(str::to_owned)
            })
            .collect()
    }
}

/// The words of a text for the grep: lower-cased runs of letters and
/// digits of at least three characters, and each pair of neighbouring CJK
/// characters.
fn grep_words(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let lower = text.to_lowercase();
    for run in lower.split(|c: char| !c.is_alphanumeric()) {
        let chars: Vec<char> = run.chars().collect();
        if chars.iter().any(|c| is_cjk(*c)) {
            for pair in chars.windows(2) {
                out.insert(pair.iter().collect());
            }
        } else if chars.len() >= 3 {
            out.insert(run.to_owned());
        }
    }
    out
}

fn is_cjk(c: char) -> bool {
    matches!(c as u32, 0x3040..=0x30FF | 0x3400..=0x9FFF | 0xAC00..=0xD7AF | 0xF900..=0xFAFF)
}

/// The keyword grep: servers inside the filter whose name, title or
/// description contains the most of the query's words (as substrings),
/// ties in corpus order.
pub(crate) fn grep(corpus: &[Server], q: &Query, limit: usize) -> Vec<String> {
    let words = grep_words(&q.text);
    let mut hits: Vec<(usize, usize)> = corpus
        .iter()
        .enumerate()
        .filter(|(_, s)| q.tags.iter().all(|t| s.tags.contains(t)))
        .filter_map(|(i, s)| {
            let hay = s.text().to_lowercase();
            let n = words
                .iter()
                .filter(|w| hay.contains(String::as_str(w)))
                .count();
            (n > 0).then_some((n, i))
        })
        .collect();
    hits.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    hits.into_iter()
        .take(limit)
        .map(|(_, i)| corpus[i].id.clone())
        .collect()
}

/// The judging pool of each query: the union of the top [`POOL_DEPTH`] of
/// the node, the plain BM25 and the grep, in first-seen order.
pub(crate) async fn pool(
    registry: &Registry,
    bm25: &Bm25,
    corpus: &[Server],
    qs: &[Query],
) -> Vec<Vec<String>> {
    let all: Vec<&Query> = qs.iter().collect();
    let node = node_all(registry, &all, POOL_DEPTH).await;
    qs.iter()
        .zip(node)
        .map(|(q, node)| {
            let mut seen = BTreeSet::new();
            node.into_iter()
                .chain(bm25.search(q, POOL_DEPTH))
                .chain(grep(corpus, q, POOL_DEPTH))
                .filter(|id| seen.insert(id.clone()))
                .collect()
        })
        .collect()
}

/// The agents judged for each of `queries` queries in `judgements.tsv`,
/// grade 0 included (what [`judgements`] checks; here only collected).
pub(crate) fn judged_pool(path: &Path, queries: usize) -> anyhow::Result<Vec<BTreeSet<String>>> {
    let mut out = vec![BTreeSet::new(); queries];
    for (line, cols) in tsv(path, 3)? {
        let q: usize = cols[0]
            .parse()
            .with_context(|| format!("{}:{line}", path.display()))?;
        ensure!(
            (1..=queries).contains(&q),
            "{}:{line}: no query {q}",
            path.display()
        );
        out[q - 1].insert(cols[1].clone());
    }
    Ok(out)
}
