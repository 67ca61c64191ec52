//! What the bench sends: the two probes it measures (`GET /agents/{id}`
//! and a mesh-scope `POST /agents/search`), the registration burst and the
//! crawl that load the node meanwhile, a `/health` monitor, and the
//! latency summary. Every loop stops at its deadline or its count,
//! whichever comes first.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng as _};
use serde_json::{json, Value};

/// Time allowed for one request; a request that takes longer counts as
/// an error (and its time as a latency of at least this much: see
/// [`Samples`]).
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The capability only node B's agents have.
pub(crate) const B_CAPABILITY: &str = "contention_probe_b_only";

/// An HTTP client for one role (its own connection pool).
pub(crate) fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(REQUEST_TIMEOUT)
        .pool_max_idle_per_host(256)
        .build()
        .expect("a reqwest client with these options builds")
}

/// A registration document: `testbed::synthetic_agent(n)` under `id`, with
/// `capability` instead of its own when given.
pub(crate) fn document(id: &str, n: usize, capability: Option<&str>) -> Value {
    let mut doc = agentmesh::testbed::synthetic_agent(n);
    doc["id"] = json!(id);
    if let Some(cap) = capability {
        doc["capabilities"] = json!([cap]);
    }
    doc
}

/// Latencies of the requests that succeeded, and the failures.
#[derive(Debug, Default, Clone)]
pub(crate) struct Samples {
    /// Microseconds, one per successful request, in completion order.
    pub(crate) micros: Vec<u64>,
    /// Requests that failed (transport error, timeout, unexpected status).
    pub(crate) errors: u64,
    /// The first failure, for the report.
    pub(crate) first_error: Option<String>,
}

impl Samples {
    fn ok(&mut self, took: Duration) {
        self.micros.push(took.as_micros() as u64);
    }

    fn fail(&mut self, what: String) {
        self.errors += 1;
        if self.first_error.is_none() {
            self.first_error = Some(what);
        }
    }

    fn merge(&mut self, other: Samples) {
        self.micros.extend(other.micros);
        self.errors += other.errors;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
    }

    /// Count, p50, p95, p99 and max (milliseconds, nearest rank) and the
    /// error count, as JSON.
    pub(crate) fn summary(&self, window: Duration) -> Value {
        let mut v = self.micros.clone();
        v.sort_unstable();
        let q = |p: f64| -> Value {
            if v.is_empty() {
                return Value::Null;
            }
            let i = ((v.len() - 1) as f64 * p).round() as usize;
            json!(v[i] as f64 / 1000.0)
        };
        json!({
            "count": v.len(),
            "per_sec": v.len() as f64 / window.as_secs_f64(),
            "p50_ms": q(0.50),
            "p95_ms": q(0.95),
            "p99_ms": q(0.99),
            "max_ms": v.last().map(|m| *m as f64 / 1000.0),
            "errors": self.errors,
            "first_error": self.first_error,
        })
    }
}

/// How the two probes run.
#[derive(Debug, Clone)]
pub(crate) struct ProbeSetup {
    pub(crate) url: String,
    /// The ids `GET` picks from, uniformly at random.
    pub(crate) ids: Arc<Vec<String>>,
    pub(crate) get_concurrency: usize,
    /// Requests per second per GET worker (0: back to back).
    pub(crate) get_rate_per_worker: f64,
    pub(crate) search_concurrency: usize,
    /// Searches per second per search worker (0: back to back).
    pub(crate) search_rate_per_worker: f64,
    pub(crate) seed: u64,
}

/// What the probes measured in one window.
#[derive(Debug, Default)]
pub(crate) struct ProbeResult {
    pub(crate) get: Samples,
    pub(crate) search: Samples,
    /// Mesh searches whose answer named fewer peers answering than asked
    /// (`x-agentmesh-partial: true`), or that asked no peer at all.
    pub(crate) search_partial: u64,
    pub(crate) search_no_peer_asked: u64,
    /// Mesh searches that returned no agent.
    pub(crate) search_empty: u64,
}

/// Sleeps until the next slot of a worker paced at `rate` per second,
/// after a request that started at `started`.
async fn pace(started: Instant, rate: f64) {
    if rate > 0.0 {
        tokio::time::sleep_until((started + Duration::from_secs_f64(1.0 / rate)).into()).await;
    }
}

/// Runs the probes for `window` on the current runtime; at most
/// `max_requests` per worker.
pub(crate) async fn probes(
    setup: ProbeSetup,
    window: Duration,
    max_requests: usize,
) -> ProbeResult {
    let end = Instant::now() + window;
    let get_client = client();
    let search_client = client();
    let mut gets = Vec::new();
    for w in 0..setup.get_concurrency {
        let (http, s) = (get_client.clone(), setup.clone());
        gets.push(tokio::spawn(async move {
            let mut rng = StdRng::seed_from_u64(s.seed.wrapping_mul(1000).wrapping_add(w as u64));
            let mut samples = Samples::default();
            for _ in 0..max_requests {
                if Instant::now() >= end {
                    break;
                }
                let id = &s.ids[rng.gen_range(0..s.ids.len())];
                let started = Instant::now();
                match http.get(format!("{}/agents/{id}", s.url)).send().await {
                    Ok(r) if r.status() == reqwest::StatusCode::OK => match r.bytes().await {
                        Ok(_) => samples.ok(started.elapsed()),
                        Err(e) => samples.fail(format!("GET {id}: body: {e}")),
                    },
                    Ok(r) => samples.fail(format!("GET {id}: status {}", r.status())),
                    Err(e) => samples.fail(format!("GET {id}: {e}")),
                }
                pace(started, s.get_rate_per_worker).await;
            }
            samples
        }));
    }
    let mut searches = Vec::new();
    for _ in 0..setup.search_concurrency {
        let (http, s) = (search_client.clone(), setup.clone());
        searches.push(tokio::spawn(async move {
            let body = json!({
                "filters": {"capabilities": [B_CAPABILITY]},
                "scope": "mesh",
                "top": 10,
            });
            let mut out = ProbeResult::default();
            for _ in 0..max_requests {
                if Instant::now() >= end {
                    break;
                }
                let started = Instant::now();
                match http
                    .post(format!("{}/agents/search", s.url))
                    .json(&body)
                    .send()
                    .await
                {
                    Ok(r) if r.status() == reqwest::StatusCode::OK => {
                        let header = |name: &str| {
                            r.headers()
                                .get(name)
                                .and_then(|v| v.to_str().ok())
                                .map(str::to_owned)
                        };
                        let partial = header("x-agentmesh-partial").as_deref() == Some("true");
                        let asked: usize = header("x-agentmesh-peers-asked")
                            .and_then(|v| v.parse().ok())
                            .unwrap_or(0);
                        match r.json::<Value>().await {
                            Ok(items) => {
                                out.search.ok(started.elapsed());
                                out.search_partial += u64::from(partial);
                                out.search_no_peer_asked += u64::from(asked == 0);
                                let n = items.as_array().map_or(0, Vec::len);
                                out.search_empty += u64::from(n == 0);
                            }
                            Err(e) => out.search.fail(format!("search: body: {e}")),
                        }
                    }
                    Ok(r) => out.search.fail(format!("search: status {}", r.status())),
                    Err(e) => out.search.fail(format!("search: {e}")),
                }
                pace(started, s.search_rate_per_worker).await;
            }
            out
        }));
    }
    let mut result = ProbeResult::default();
    for g in gets {
        result
            .get
            .merge(g.await.expect("a GET worker does not panic"));
    }
    for s in searches {
        let s = s.await.expect("a search worker does not panic");
        result.search.merge(s.search);
        result.search_partial += s.search_partial;
        result.search_no_peer_asked += s.search_no_peer_asked;
        result.search_empty += s.search_empty;
    }
    result
}

/// Runs [`probes`] on a thread of its own with a current-thread runtime,
/// so the load generators' tasks never delay a probe's wake-up in a
/// shared run queue (the cores are still shared).
pub(crate) fn spawn_probes(
    setup: ProbeSetup,
    window: Duration,
    max_requests: usize,
) -> std::thread::JoinHandle<ProbeResult> {
    std::thread::Builder::new()
        .name("probes".into())
        .spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a current-thread runtime builds")
                .block_on(probes(setup, window, max_requests))
        })
        .expect("the probe thread starts")
}

/// Registers `count` documents made by `make(i)` on `url` with
/// `concurrency` in flight; fails on the first refusal. For the preload.
pub(crate) async fn register_all(
    http: &reqwest::Client,
    url: &str,
    count: usize,
    concurrency: usize,
    make: impl Fn(usize) -> Value + Send + Sync + 'static,
) -> anyhow::Result<()> {
    let next = Arc::new(AtomicUsize::new(0));
    let make = Arc::new(make);
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..concurrency.max(1) {
        let (http, url, next, make) = (http.clone(), url.to_owned(), next.clone(), make.clone());
        workers.spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= count {
                    return Ok(());
                }
                let r = http
                    .post(format!("{url}/agents"))
                    .json(&make(i))
                    .send()
                    .await?;
                if r.status() != reqwest::StatusCode::CREATED {
                    let status = r.status();
                    anyhow::bail!(
                        "registration {i}: {status}: {}",
                        r.text().await.unwrap_or_default()
                    );
                }
            }
        });
    }
    while let Some(r) = workers.join_next().await {
        r??;
    }
    Ok(())
}

/// The registration burst: `concurrency` workers registering new agents
/// (`burst-{run}-{i}`), back to back or, when `rate` (per second, all
/// workers together) is above zero, paced, until `stop` is set, `deadline`
/// passes or `max` were sent.
pub(crate) struct Burst {
    pub(crate) stop: Arc<AtomicBool>,
    pub(crate) created: Arc<AtomicU64>,
    workers: Vec<tokio::task::JoinHandle<Samples>>,
}

impl Burst {
    pub(crate) fn start(
        url: &str,
        run: usize,
        concurrency: usize,
        rate: f64,
        max: usize,
        deadline: Duration,
    ) -> Self {
        let rate_per_worker = rate / concurrency.max(1) as f64;
        let http = client();
        let stop = Arc::new(AtomicBool::new(false));
        let created = Arc::new(AtomicU64::new(0));
        let next = Arc::new(AtomicUsize::new(0));
        let end = Instant::now() + deadline;
        let workers = (0..concurrency)
            .map(|_| {
                let (http, url) = (http.clone(), url.to_owned());
                let (stop, created, next) = (stop.clone(), created.clone(), next.clone());
                tokio::spawn(async move {
                    let mut samples = Samples::default();
                    while !stop.load(Ordering::Relaxed) && Instant::now() < end {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= max {
                            break;
                        }
                        let doc = document(&format!("burst-{run}-{i:06}"), i, None);
                        let started = Instant::now();
                        match http.post(format!("{url}/agents")).json(&doc).send().await {
                            Ok(r) if r.status() == reqwest::StatusCode::CREATED => {
                                let _ = r.bytes().await;
                                created.fetch_add(1, Ordering::Relaxed);
                                samples.ok(started.elapsed());
                            }
                            Ok(r) => samples.fail(format!("register {i}: status {}", r.status())),
                            Err(e) => samples.fail(format!("register {i}: {e}")),
                        }
                        pace(started, rate_per_worker).await;
                    }
                    samples
                })
            })
            .collect();
        Self {
            stop,
            created,
            workers,
        }
    }

    /// Stops the workers and waits for the requests in flight (each
    /// bounded by [`REQUEST_TIMEOUT`]).
    pub(crate) async fn finish(self) -> Samples {
        self.stop.store(true, Ordering::Relaxed);
        let mut all = Samples::default();
        for w in self.workers {
            all.merge(w.await.expect("a burst worker does not panic"));
        }
        all
    }
}

/// Queues `domains` for crawling on `url` (`POST /crawl`, 1000 per
/// request, the API's limit); answers how many were queued.
pub(crate) async fn queue_crawl(
    http: &reqwest::Client,
    url: &str,
    domains: &[String],
) -> anyhow::Result<usize> {
    let mut queued = 0;
    for chunk in domains.chunks(1000) {
        let r = http
            .post(format!("{url}/crawl"))
            .json(&json!({ "domains": chunk }))
            .send()
            .await?;
        if r.status() != reqwest::StatusCode::ACCEPTED {
            let status = r.status();
            anyhow::bail!(
                "POST /crawl: {status}: {}",
                r.text().await.unwrap_or_default()
            );
        }
        queued += chunk.len();
    }
    Ok(queued)
}

/// One `/health` sample: seconds since the window opened, and the node's
/// record count.
pub(crate) type HealthSample = (f64, u64);

/// Polls `GET /health` once a second, at 0, 1, .. `window` seconds
/// (whole seconds); answers the record counts (a failed poll is skipped).
pub(crate) async fn monitor(url: String, window: Duration) -> Vec<HealthSample> {
    let http = client();
    let started = Instant::now();
    let mut out = Vec::new();
    for k in 0..=window.as_secs() {
        tokio::time::sleep_until((started + Duration::from_secs(k)).into()).await;
        let at = started.elapsed().as_secs_f64();
        if let Ok(r) = http.get(format!("{url}/health")).send().await {
            if let Ok(h) = r.json::<Value>().await {
                if let Some(n) = h["records"].as_u64() {
                    out.push((at, n));
                }
            }
        }
    }
    out
}
