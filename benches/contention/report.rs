//! What the bench reports: the machine and CPU figures it reads from
//! `/proc`, the table it prints per run, and the medians over the runs.

use std::time::Instant;

use serde_json::{json, Value};

use crate::procs::{Node, Testbed};

pub(crate) use crate::machine::load_average;

/// Cores, CPU model and load average, as JSON.
pub(crate) fn machine() -> Value {
    let cpu = crate::machine::cpu_model();
    json!({
        "nproc": std::thread::available_parallelism().map_or(0, |n| n.get()),
        "cpu": cpu,
        "load_average": load_average(),
    })
}

/// SHA-256 of the binary, so a JSON file says which build it measured.
pub(crate) fn sha256_of(path: &std::path::Path) -> anyhow::Result<String> {
    use sha2::Digest as _;
    let bytes = std::fs::read(path)?;
    Ok(hex::encode(sha2::Sha256::digest(&bytes)))
}

/// CPU seconds used so far by A, B, the testbed and this bench, and by
/// the whole machine.
pub(crate) struct CpuSnap {
    at: Instant,
    procs: [f64; 4],
    /// Busy (user, nice, system, irq, softirq, steal) and iowait seconds
    /// of all cores, from the first line of `/proc/stat`.
    machine: (f64, f64),
}

fn machine_cpu() -> (f64, f64) {
    let ticks: Vec<f64> = std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|s| s.lines().next().map(str::to_owned))
        .map(|l| {
            l.split_whitespace()
                .skip(1)
                .filter_map(|t| t.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    let t = |i: usize| ticks.get(i).copied().unwrap_or(f64::NAN) / 100.0;
    (t(0) + t(1) + t(2) + t(5) + t(6) + t(7), t(4))
}

pub(crate) fn cpu_now(a: &Node, b: &Node, tb: &Testbed) -> CpuSnap {
    CpuSnap {
        at: Instant::now(),
        procs: [
            a.proc.cpu_secs(),
            b.proc.cpu_secs(),
            tb.proc.cpu_secs(),
            crate::machine::cpu_secs_of("/proc/self/stat"),
        ],
        machine: machine_cpu(),
    }
}

/// Cores used between two snapshots; `others` is the machine's busy time
/// less that of the bench's processes (other people's work on a shared
/// machine).
pub(crate) fn cpu_json(before: &CpuSnap, after: &CpuSnap) -> Value {
    let secs = (after.at - before.at).as_secs_f64();
    let core = |i: usize| (after.procs[i] - before.procs[i]) / secs;
    let busy = (after.machine.0 - before.machine.0) / secs;
    let ours: f64 = (0..4).map(core).sum();
    json!({
        "node_a": core(0),
        "node_b": core(1),
        "testbed": core(2),
        "bench": core(3),
        "machine_busy": busy,
        "machine_iowait": (after.machine.1 - before.machine.1) / secs,
        "others": busy - ours,
    })
}

/// Milliseconds, two decimals below 100.
fn ms(v: &Value) -> String {
    v.as_f64().map_or("-".into(), |m| {
        if m >= 100.0 {
            format!("{m:.0}")
        } else {
            format!("{m:.2}")
        }
    })
}

/// A count, or "-" when there is none.
fn int(v: &Value) -> String {
    v.as_f64().map_or("-".into(), |x| format!("{x:.0}"))
}

fn probe_cells(p: &Value) -> String {
    format!(
        "{:>6} {:>8} {:>8} {:>8} {:>8} {:>4}",
        int(&p["count"]),
        ms(&p["p50_ms"]),
        ms(&p["p95_ms"]),
        ms(&p["p99_ms"]),
        ms(&p["max_ms"]),
        int(&p["errors"])
    )
}

/// Prints one run (or the medians, same shape) as a compact table.
pub(crate) fn print_run(r: &Value) {
    println!(
        "{:<7} | {:^49} | {:^49} | cores used",
        "", "GET /agents/{id} (ms)", "mesh search (ms)"
    );
    println!(
        "{:<7} | {:>6} {:>8} {:>8} {:>8} {:>8} {:>4} | {:>6} {:>8} {:>8} {:>8} {:>8} {:>4} | A    others",
        "phase", "n", "p50", "p95", "p99", "max", "err", "n", "p50", "p95", "p99", "max", "err"
    );
    for phase in ["idle", "loaded"] {
        let p = &r[phase];
        println!(
            "{:<7} | {} | {} | {:.2} {:.2}",
            phase,
            probe_cells(&p["get"]),
            probe_cells(&p["mesh_search"]),
            p["cpu_cores"]["node_a"].as_f64().unwrap_or(f64::NAN),
            p["cpu_cores"]["others"].as_f64().unwrap_or(f64::NAN),
        );
    }
    let l = &r["loaded"];
    let c = &l["cpu_cores"];
    println!(
        "loaded window: {} registrations acknowledged ({:.0}/s, p50 {} ms, p99 {} ms, {} errors); \
         crawl: {} of {} domains stored ({:.0}/s), {} of {} jobs done; B gained {} records",
        int(&l["registrations"]["acknowledged_in_window"]),
        l["registrations"]["acknowledged_per_sec"]
            .as_f64()
            .unwrap_or(f64::NAN),
        ms(&l["registrations"]["p50_ms"]),
        ms(&l["registrations"]["p99_ms"]),
        int(&l["registrations"]["errors"]),
        int(&l["crawl"]["stored_in_window"]),
        int(&l["crawl"]["queued"]),
        l["crawl"]["stored_per_sec"].as_f64().unwrap_or(f64::NAN),
        int(&l["crawl"]["jobs_done"]),
        int(&l["crawl"]["jobs_queued"]),
        match (
            l["b_records_after"].as_f64(),
            l["b_records_before"].as_f64()
        ) {
            (Some(after), Some(before)) => format!("{:.0}", after - before),
            _ => "-".into(),
        },
    );
    println!(
        "CPU in the loaded window (cores): A {:.2}, B {:.2}, testbed {:.2}, bench {:.2}; \
         others {:.2} (iowait {:.2}); mesh searches partial/no peer/empty: {}/{}/{} idle, {}/{}/{} loaded",
        c["node_a"].as_f64().unwrap_or(f64::NAN),
        c["node_b"].as_f64().unwrap_or(f64::NAN),
        c["testbed"].as_f64().unwrap_or(f64::NAN),
        c["bench"].as_f64().unwrap_or(f64::NAN),
        c["others"].as_f64().unwrap_or(f64::NAN),
        c["machine_iowait"].as_f64().unwrap_or(f64::NAN),
        int(&r["idle"]["mesh_search"]["partial"]),
        int(&r["idle"]["mesh_search"]["no_peer_asked"]),
        int(&r["idle"]["mesh_search"]["empty"]),
        int(&l["mesh_search"]["partial"]),
        int(&l["mesh_search"]["no_peer_asked"]),
        int(&l["mesh_search"]["empty"]),
    );
    for (phase, what) in [
        ("idle", "get"),
        ("idle", "mesh_search"),
        ("loaded", "get"),
        ("loaded", "mesh_search"),
    ] {
        if let Some(e) = r[phase][what]["first_error"].as_str() {
            println!("first error, {phase} {what}: {e}");
        }
    }
    if let Some(e) = l["registrations"]["first_error"].as_str() {
        println!("first error, registrations: {e}");
    }
    for phase in ["idle", "loaded"] {
        for node in ["node_a", "node_b"] {
            let w = &r[phase]["warnings"][node];
            if w["count"].as_f64().unwrap_or(0.0) > 0.0 {
                let first = w["first"]
                    .as_str()
                    .map(|f| format!(", first: {f}"))
                    .unwrap_or_default();
                println!(
                    "{node} logged {} warnings in the {phase} window{first}",
                    int(&w["count"]),
                );
            }
        }
    }
}

/// The median over the runs of every number in a run's report (same
/// shape; strings and timelines left out).
pub(crate) fn medians(runs: &[Value]) -> Value {
    fn at<'a>(v: &'a Value, path: &[String]) -> Option<&'a Value> {
        path.iter().try_fold(v, |v, k| v.get(k))
    }
    fn walk(runs: &[Value], path: &mut Vec<String>, template: &Value) -> Value {
        match template {
            Value::Object(m) => {
                let mut out = serde_json::Map::new();
                for (k, v) in m {
                    path.push(k.clone());
                    let med = walk(runs, path, v);
                    path.pop();
                    if !med.is_null() {
                        out.insert(k.clone(), med);
                    }
                }
                Value::Object(out)
            }
            Value::Number(_) => {
                let mut v: Vec<f64> = runs
                    .iter()
                    .filter_map(|r| at(r, path).and_then(Value::as_f64))
                    .collect();
                v.sort_by(f64::total_cmp);
                v.get(v.len() / 2).map_or(Value::Null, |m| json!(m))
            }
            _ => Value::Null,
        }
    }
    match runs.first() {
        Some(first) => walk(runs, &mut Vec::new(), first),
        None => Value::Null,
    }
}
