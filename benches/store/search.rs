//! Section (b) of the store bench: filter-search latency through
//! `Registry::search_local` (awaited on a one-thread runtime: its hop to the
//! blocking pool included, as the API sees it), against the store's
//! blocking `search` alone, in-memory posting
//! lists (the proposed fix) and a full scan (no index).

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

use agentmesh::descriptor::{self, Descriptor};
use agentmesh::record::RecordBody;
use agentmesh::registry::{Registry, SearchQuery};
use agentmesh::store::{Filter, Store};
use anyhow::ensure;

use super::{measure, RARE_TAG};

/// The page size `POST /agents/search` uses by default.
const SEARCH_LIMIT: usize = 10;
/// Records the full-scan baseline decodes per `Store::search` call.
const SCAN_PAGE: usize = 100;

struct Case {
    name: &'static str,
    filter: Filter,
    limit: usize,
}

fn cases() -> anyhow::Result<Vec<Case>> {
    let case = |name, caps: &[&str], tags: &[&str], langs: &[&str], limit| {
        Ok(Case {
            name,
            filter: Filter::new(
                caps.iter().copied(),
                tags.iter().copied(),
                langs.iter().copied(),
            )
            .map_err(|bad| anyhow::anyhow!("bad language {bad}"))?,
            limit,
        })
    };
    [
        case("cap translation", &["translation"], &[], &[], SEARCH_LIMIT),
        case(
            "cap translation + tag legal",
            &["translation"],
            &["legal"],
            &[],
            SEARCH_LIMIT,
        ),
        case(
            "cap translation + tag legal + lang zh",
            &["translation"],
            &["legal"],
            &["zh"],
            SEARCH_LIMIT,
        ),
        case("rare: tag quantum", &[], &[RARE_TAG], &[], SEARCH_LIMIT),
        case(
            "empty: cap translation + tag finance",
            &["translation"],
            &["finance"],
            &[],
            SEARCH_LIMIT,
        ),
        case(
            "empty: cap teleportation (unknown)",
            &["teleportation"],
            &[],
            &[],
            SEARCH_LIMIT,
        ),
        case("no filter, limit 20", &[], &[], &[], 20),
    ]
    .into_iter()
    .collect()
}

fn query(case: &Case) -> SearchQuery {
    SearchQuery {
        filter: case.filter.clone(),
        query: None,
        after: None,
        limit: case.limit,
        explain: false,
    }
}

/// Whether `d` passes `f`, decided from the record alone (the scan
/// baseline): AND across and within fields, `zh` matching `zh-Hant`.
fn passes(f: &Filter, d: &Descriptor) -> bool {
    f.capabilities.iter().all(|c| d.capabilities.contains(c))
        && f.tags.iter().all(|t| d.tags.contains(t))
        && f.languages.iter().all(|l| {
            d.languages.iter().any(|have| {
                have.eq_ignore_ascii_case(l)
                    || descriptor::primary_language(have).eq_ignore_ascii_case(l)
            })
        })
}

/// The baseline: the same query answered without the index, by walking
/// every record in id order and testing it, stopping at `limit`.
fn scan(store: &Store, f: &Filter, limit: usize) -> anyhow::Result<Vec<String>> {
    let mut out = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = store
            .blocking()
            .search(&Filter::default(), after.as_deref(), SCAN_PAGE)?;
        let Some(last) = page.last() else {
            return Ok(out);
        };
        after = Some(last.body.agent_id().to_owned());
        for agent in &page {
            if let RecordBody::Descriptor(d) = &agent.body {
                if passes(f, &d.descriptor) {
                    out.push(d.agent_id.clone());
                    if out.len() == limit {
                        return Ok(out);
                    }
                }
            }
        }
        if page.len() < SCAN_PAGE {
            return Ok(out);
        }
    }
}

/// The index a fix could keep: every term's posting list in memory, as
/// sorted positions into `ids` (which is in id order). A filter is answered
/// by intersecting the lists, smallest first, and only the winners are read
/// from the store. The bench builds it from a full scan.
struct Postings {
    ids: Vec<String>,
    lists: HashMap<(u8, String), Vec<u32>>,
}

impl Postings {
    fn build(store: &Store) -> anyhow::Result<Self> {
        let mut ids = Vec::new();
        let mut lists: HashMap<(u8, String), Vec<u32>> = HashMap::new();
        let mut after: Option<String> = None;
        loop {
            let page = store
                .blocking()
                .search(&Filter::default(), after.as_deref(), 1000)?;
            let Some(last) = page.last() else { break };
            after = Some(last.body.agent_id().to_owned());
            for agent in &page {
                if let RecordBody::Descriptor(d) = &agent.body {
                    let pos = u32::try_from(ids.len())?;
                    ids.push(d.agent_id.clone());
                    for term in Self::terms(&d.descriptor) {
                        lists.entry(term).or_default().push(pos);
                    }
                }
            }
        }
        Ok(Self { ids, lists })
    }

    /// The terms the store indexes for `d`.
    fn terms(d: &Descriptor) -> BTreeSet<(u8, String)> {
        let mut out = BTreeSet::new();
        out.extend(d.capabilities.iter().map(|t| (b'c', t.clone())));
        out.extend(d.tags.iter().map(|t| (b't', t.clone())));
        for lang in &d.languages {
            out.insert((b'l', lang.to_ascii_lowercase()));
            out.insert((
                b'l',
                descriptor::primary_language(lang).to_ascii_lowercase(),
            ));
        }
        out
    }

    /// `None` for an empty filter (nothing to intersect).
    fn search(
        &self,
        store: &Store,
        f: &Filter,
        limit: usize,
    ) -> anyhow::Result<Option<Vec<String>>> {
        let terms: Vec<(u8, String)> = (f.capabilities.iter().map(|t| (b'c', t.clone())))
            .chain(f.tags.iter().map(|t| (b't', t.clone())))
            .chain(f.languages.iter().map(|t| (b'l', t.to_ascii_lowercase())))
            .collect();
        if terms.is_empty() {
            return Ok(None);
        }
        let mut lists = Vec::with_capacity(terms.len());
        for t in &terms {
            match self.lists.get(t) {
                Some(list) => lists.push(list.as_slice()),
                None => return Ok(Some(Vec::new())),
            }
        }
        lists.sort_by_key(|l| l.len());
        let (driver, rest) = lists.split_first().expect("the filter has a term");
        let mut cursors = vec![0; rest.len()];
        let mut out = Vec::new();
        'candidates: for &pos in *driver {
            for (list, cur) in rest.iter().zip(cursors.iter_mut()) {
                *cur += list[*cur..].partition_point(|&p| p < pos);
                match list.get(*cur) {
                    None => break 'candidates,
                    Some(&p) if p != pos => continue 'candidates,
                    Some(_) => {}
                }
            }
            let id = &self.ids[pos as usize];
            if let Some(agent) = store.blocking().get(id)? {
                out.push(agent.body.agent_id().to_owned());
                if out.len() == limit {
                    break;
                }
            }
        }
        Ok(Some(out))
    }
}

pub(super) fn run(registry: &Registry, store: &Store, n: usize) -> anyhow::Result<()> {
    let cases = cases()?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let t = Instant::now();
    let postings = Postings::build(store)?;
    let postings_build = t.elapsed();
    println!(
        "\n(b) filter search over {n} agents: Registry::search_local, limit 10 (POST /agents/search)"
    );
    println!(
        "{:<38} {:>7} {:>6} {:>9} {:>9} {:>10} {:>10} {:>10} {:>8}",
        "query",
        "matches",
        "iters",
        "p50 us",
        "p99 us",
        "store p50",
        "postings",
        "scan p50",
        "scan/idx"
    );
    let mut mix = Vec::new();
    for case in &cases {
        let q = query(case);
        let all_matches = scan(store, &case.filter, usize::MAX)?;
        let expected = all_matches.len().min(case.limit);
        // Pages come in order of first arrival, the scan in id order: the
        // page must hold as many as it can, all of them matches.
        let matches_all =
            |ids: &[String]| ids.len() == expected && ids.iter().all(|id| all_matches.contains(id));
        let got: Vec<String> = rt
            .block_on(registry.search_local(&q))?
            .items
            .into_iter()
            .map(|s| s.id)
            .collect();
        ensure!(
            matches_all(&got),
            "{}: the index answered {got:?}, not {expected} of the scan's matches",
            case.name
        );
        let from_postings = postings.search(store, &case.filter, case.limit)?;
        ensure!(
            from_postings.as_deref().is_none_or(matches_all),
            "{}: the posting lists answered {from_postings:?}, not {expected} of the scan's matches",
            case.name
        );
        let matches = all_matches.len();
        let api = measure(10, 200, 5_000, Duration::from_secs(2), |_| {
            rt.block_on(registry.search_local(&q))?;
            Ok(())
        })?;
        let raw = measure(10, 200, 5_000, Duration::from_secs(1), |_| {
            store.blocking().search(&case.filter, None, case.limit)?;
            Ok(())
        })?;
        let mem = match from_postings {
            Some(_) => {
                let d = measure(10, 200, 5_000, Duration::from_secs(1), |_| {
                    postings.search(store, &case.filter, case.limit)?;
                    Ok(())
                })?;
                format!("{:.1}", d.p50_us())
            }
            None => "-".into(),
        };
        // The full scan just ran once (above), which warmed it up.
        let full = measure(0, 2, 200, Duration::from_secs(2), |_| {
            scan(store, &case.filter, case.limit)?;
            Ok(())
        })?;
        println!(
            "{:<38} {:>7} {:>6} {:>9.1} {:>9.1} {:>10.1} {:>10} {:>10.1} {:>7.0}x",
            case.name,
            matches,
            api.0.len(),
            api.p50_us(),
            api.p99_us(),
            raw.p50_us(),
            mem,
            full.p50_us(),
            full.p50_us() / api.p50_us()
        );
        mix.push(q);
    }
    let all = measure(10, 500, 7_000, Duration::from_secs(3), |k| {
        rt.block_on(registry.search_local(&mix[k % mix.len()]))?;
        Ok(())
    })?;
    println!(
        "{:<38} {:>7} {:>6} {:>9.1} {:>9.1}",
        "mix: the queries above in turn",
        "-",
        all.0.len(),
        all.p50_us(),
        all.p99_us()
    );
    println!(
        "(store p50: the store's blocking search alone; postings: the same filter over in-memory posting \
         lists, built in {:.1} s; scan: no index, every record decoded in id order)",
        postings_build.as_secs_f64()
    );
    Ok(())
}
