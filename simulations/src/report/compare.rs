//! Summaries read back from their JSON and compared: two side by side
//! ([`side_by_side`]), or many as one Markdown table ([`markdown_table`]).

use serde_json::Value;

/// Two summaries (e.g. the DES and the swarm run of one calibration
/// scenario) side by side, with the difference of each shared metric.
pub fn side_by_side(a: &Value, b: &Value) -> String {
    let rows = [
        ("engine", "/engine"),
        ("scenario", "/scenario"),
        ("nodes", "/nodes"),
        ("agents", "/agents"),
        ("searches", "/searches"),
        ("recall", "/recall"),
        ("  normal", "/recall_by_kind/normal"),
        ("  eclipsed", "/recall_by_kind/eclipsed"),
        ("taken over", "/taken_over"),
        ("searches taken over", "/searches_taken_over"),
        ("latency p50 ms", "/latency_ms/p50"),
        ("latency p95 ms", "/latency_ms/p95"),
        ("latency p99 ms", "/latency_ms/p99"),
        ("requests per lookup", "/requests_per_lookup"),
        ("  of which failed", "/failed_requests_per_lookup"),
        ("messages per search", "/messages_per_search"),
        ("propagation p50 ms", "/propagation_ms/p50"),
        ("propagation p95 ms", "/propagation_ms/p95"),
        ("propagation p99 ms", "/propagation_ms/p99"),
        ("revocation p50 ms", "/revocation_ms/p50"),
        ("revocation p99 ms", "/revocation_ms/p99"),
        ("propagation coverage", "/propagation_coverage"),
        ("revocation coverage", "/revocation_coverage"),
        ("stale results", "/stale_results"),
        ("bootstrap s", "/bootstrap_s"),
        ("wall s", "/wall_s"),
        ("peak RSS MiB", "/peak_rss_mb"),
    ];
    let show = |v: Option<&Value>| match v {
        Some(Value::Number(n)) => format!("{:.4}", n.as_f64().unwrap_or(f64::NAN)),
        Some(Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
        None => "-".into(),
    };
    let mut t = format!("{:<22} {:>14} {:>14} {:>12}\n", "metric", "A", "B", "B - A");
    for (name, ptr) in rows {
        let (x, y) = (a.pointer(ptr), b.pointer(ptr));
        let diff = match (x.and_then(Value::as_f64), y.and_then(Value::as_f64)) {
            (Some(x), Some(y)) => format!("{:+.4}", y - x),
            _ => String::new(),
        };
        t += &format!("{name:<22} {:>14} {:>14} {diff:>12}\n", show(x), show(y));
    }
    t
}

/// A Markdown table of several summaries, one row each (the results page).
pub fn markdown_table(summaries: &[Value]) -> String {
    let num = |v: &Value, ptr: &str, digits: usize| {
        v.pointer(ptr)
            .and_then(Value::as_f64)
            .map_or("-".to_owned(), |x| format!("{x:.digits$}"))
    };
    let mut t = String::from(
        "| scenario | engine | nodes | agents | searches | recall | latency p50 / p95 / p99 ms | requests per lookup | messages per search | propagation p50 / p95 / p99 ms | revocation p50 / p99 ms | stale | lookup hops p50 / p95 | wall s | peak RSS MiB |\n\
         | --- | --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | --- | --- | ---: | --- | ---: | ---: |\n",
    );
    for s in summaries {
        let str_of = |ptr: &str| {
            s.pointer(ptr)
                .and_then(Value::as_str)
                .unwrap_or("-")
                .to_owned()
        };
        t += &format!(
            "| {} | {} | {} | {} | {} | {} | {} / {} / {} | {} | {} | {} / {} / {} | {} / {} | {} | {} / {} | {} | {} |\n",
            str_of("/scenario"),
            str_of("/engine"),
            num(s, "/nodes", 0),
            num(s, "/agents", 0),
            num(s, "/searches", 0),
            num(s, "/recall", 4),
            num(s, "/latency_ms/p50", 0),
            num(s, "/latency_ms/p95", 0),
            num(s, "/latency_ms/p99", 0),
            num(s, "/requests_per_lookup", 1),
            num(s, "/messages_per_search", 1),
            num(s, "/propagation_ms/p50", 0),
            num(s, "/propagation_ms/p95", 0),
            num(s, "/propagation_ms/p99", 0),
            num(s, "/revocation_ms/p50", 0),
            num(s, "/revocation_ms/p99", 0),
            num(s, "/stale_results", 0),
            num(s, "/lookups/hops/p50", 0),
            num(s, "/lookups/hops/p95", 0),
            num(s, "/wall_s", 1),
            num(s, "/peak_rss_mb", 0),
        );
    }
    t
}
