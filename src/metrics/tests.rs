use super::*;

#[tokio::test]
async fn counters_render_with_their_labels() {
    let m = Metrics::new();
    m.request(Some("/agents/{id}"), &axum::http::Method::GET, 404);
    m.request(None, &axum::http::Method::GET, 404);
    m.request(None, &axum::http::Method::from_bytes(b"BREW").unwrap(), 405);
    m.crawled(false, &[Reason::TxtMissing]);
    m.crawled(true, &[]);
    m.crawl_job_done(Duration::from_millis(30));
    m.searched(false, Duration::from_millis(2));
    m.probed("not_protocol");
    let text = m.render().await;
    for line in [
        "agentmesh_http_requests_total{route=\"/agents/{id}\",method=\"GET\",status=\"404\"} 1",
        "agentmesh_http_requests_total{route=\"unmatched\",method=\"GET\",status=\"404\"} 1",
        "agentmesh_http_requests_total{route=\"unmatched\",method=\"other\",status=\"405\"} 1",
        "agentmesh_crawls_total{outcome=\"stored\"} 1",
        "agentmesh_crawls_total{outcome=\"not_stored\"} 1",
        "agentmesh_crawl_reasons_total{reason=\"txt_missing\"} 1",
        "agentmesh_crawl_job_duration_seconds_bucket{le=\"0.05\"} 1",
        "agentmesh_crawl_job_duration_seconds_count 1",
        "agentmesh_search_duration_seconds_count{scope=\"local\"} 1",
        "agentmesh_crawl_probes_total{result=\"not_protocol\"} 1",
    ] {
        assert!(text.lines().any(|l| l == line), "no {line} in\n{text}");
    }
    assert!(text.ends_with("# EOF\n"), "{text}");
}

#[tokio::test]
async fn the_mesh_counters_render_failed_requests_by_kind_and_cause() {
    let m = Metrics::new();
    let stats = MeshStats::default();
    stats.kad_query_done("get_providers", "ok", 9, 2);
    stats.request_failed("dial_failure");
    stats.request_failed("connection_closed");
    stats.request_failed("dial_failure");
    let _ = m.inner.mesh_stats.set(stats);
    let text = m.render().await;
    for line in [
        "agentmesh_dht_queries_total{kind=\"get_providers\",outcome=\"ok\"} 1",
        "agentmesh_dht_requests_sent_total{kind=\"get_providers\"} 9",
        "agentmesh_dht_requests_failed_total{kind=\"get_providers\"} 2",
        "agentmesh_mesh_search_requests_failed_total{reason=\"dial_failure\"} 2",
        "agentmesh_mesh_search_requests_failed_total{reason=\"connection_closed\"} 1",
    ] {
        assert!(text.lines().any(|l| l == line), "no {line} in\n{text}");
    }
}
