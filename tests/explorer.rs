//! The web explorer in a real browser: headless Chromium (Debian's
//! `chromium`, which `.ci/run` installs) loads the explorer of a real
//! `agentmesh node` that crawled a testbed population, runs a search from
//! a search link, and opens an agent page (and the page of an agent a
//! stranger forged, whose claim must show as unproven), and the peers
//! page of a node that caught a peer equivocating; the test reads the DOM the
//! page rendered (Chromium's `--dump-dom` after the page's own fetches
//! ran) and checks what it shows, and saves screenshots of the search,
//! agent and peers pages under `target/explorer/`.
//!
//! Without Chromium the test says so and passes, except under CI, where
//! it fails.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{testbed_with_ca, TestNode};
use serde_json::json;

/// Chromium's binary, if installed.
fn chromium() -> Option<PathBuf> {
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .find_map(|name| common::on_path(name))
}

/// Runs headless Chromium on `url` with `extra` flags, letting the page's
/// scripts and fetches run for up to `budget_ms` of virtual time; answers
/// stdout. A deadline bounds the whole run.
fn headless(browser: &Path, profile: &Path, url: &str, extra: &[&str], budget_ms: u32) -> String {
    let budget = format!("--virtual-time-budget={budget_ms}");
    let profile = format!("--user-data-dir={}", profile.display());
    let mut args = vec![
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-extensions",
        "--disable-dev-shm-usage",
        &budget,
        &profile,
    ];
    args.extend_from_slice(extra);
    args.push(url);
    let out = common::run(
        Command::new(browser).args(&args),
        Duration::from_secs(60),
        "headless chromium",
    );
    out.assert_success("headless chromium");
    out.stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Chromium (apt-get install chromium)"]
async fn a_browser_searches_the_explorer_and_opens_an_agent_page() {
    let browser = common::needs(chromium(), "Chromium", "apt-get install chromium");
    let (testbed, dir, ca) = testbed_with_ca(33, 12).await;
    let node = tokio::task::block_in_place(|| TestNode::builder().crawling(&testbed, &ca).start());
    let api = node.api();
    let agents = testbed.population().agents();
    let domains: Vec<&str> = agents.iter().map(|a| a.domain.as_str()).collect();
    api.post("/crawl", &json!({"domains": domains, "wait": true}))
        .await
        .expect(200);
    let agent = &agents[0];
    let capability = &agent.capabilities[0].id;
    let base = format!("http://{}", node.addr());
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("explorer");
    std::fs::create_dir_all(&shots).unwrap();
    let profile = dir.path().join("chromium");

    let (browser_ref, profile_ref) = (&browser, &profile);
    let render = |url: String| {
        let (b, p) = (browser_ref.clone(), profile_ref.clone());
        tokio::task::spawn_blocking(move || headless(&b, &p, &url, &["--dump-dom"], 8000))
    };

    // A search by capability, in this node's scope: the agent is listed
    // with its trust level and a link to its page.
    let search = format!("{base}/#/search?capability={capability}&scope=local");
    let dom = render(search.clone()).await.unwrap();
    let item = format!("data-id=\"{}\"", agent.id());
    assert!(
        dom.contains(&item),
        "the results list {}:\n{dom}",
        agent.id()
    );
    assert!(dom.contains(&agent.name), "the result shows the name");
    assert!(dom.contains("key-verified"), "and its trust level");
    assert!(
        dom.contains("crawled by this node"),
        "and where it came from"
    );
    assert!(
        dom.contains(&format!(
            "href=\"#/agent/{}\"",
            agent.id().replace(':', "%3A")
        )),
        "and links to the agent's page"
    );

    // The agent page: the verification chain step by step, and the
    // document.
    let page = format!("{base}/#/agent/{}", agent.id());
    let dom = render(page.clone()).await.unwrap();
    for needle in [
        "Verification chain",
        "dns_txt",
        "fingerprint",
        "challenge",
        agent.domain.as_str(),
        "freshness",
        "fresh, checked",
    ] {
        assert!(
            dom.contains(needle),
            "the agent page shows {needle:?}:\n{dom}"
        );
    }
    assert!(
        !dom.contains("class=\"error\" role=\"alert\">"),
        "no error shown"
    );

    // A stranger's forged record, every flag claimed: listed as what this
    // node counts, the claim shown apart as unproven, on the list and on
    // the agent's page.
    let other = agentmesh::testbed::Population::healthy(77, 1);
    let victim = &other.agents()[0];
    let doc = serde_json::to_string(&other.document(
        victim,
        agentmesh::testbed::Ports {
            https: 443,
            http: 80,
        },
    ))
    .unwrap();
    let stranger = agentmesh::identity::generate();
    let forged = common::claim_everything(
        &common::with_key(&doc, &stranger),
        agentmesh::record::next_seq(None),
        3600,
        &stranger,
        &stranger,
    );
    api.post_raw("/records", Some("application/cbor"), forged)
        .await
        .expect(201);
    let claimed_capability = &victim.capabilities[0].id;
    let dom = render(format!(
        "{base}/#/search?capability={claimed_capability}&scope=local"
    ))
    .await
    .unwrap();
    assert!(
        dom.contains(&format!("data-id=\"{}\"", victim.id())),
        "the claimed agent is listed:\n{dom}"
    );
    assert!(
        dom.contains("claims peer-verified (unproven)"),
        "its claim is shown as one:\n{dom}"
    );
    assert!(dom.contains("level-unverified"), "at the level counted");
    let dom = render(format!("{base}/#/agent/{}", victim.id()))
        .await
        .unwrap();
    assert!(
        dom.contains("a signer this node does not trust; not proven here, not counted"),
        "the agent page says who claims what:\n{dom}"
    );

    // Screenshots of the three pages, phone-sized and desktop.
    for (name, url, size) in [
        ("search", search, "1200,900"),
        ("agent", page, "1200,1400"),
        ("peers", format!("{base}/#/peers"), "1200,700"),
        (
            "search-phone",
            format!("{base}/#/search?capability={capability}&scope=local"),
            "390,844",
        ),
    ] {
        let file = shots.join(format!("{name}.png"));
        let shot = format!("--screenshot={}", file.display());
        let window = format!("--window-size={size}");
        let (b, p) = (browser.clone(), profile.clone());
        tokio::task::spawn_blocking(move || {
            headless(&b, &p, &url, &[&shot, &window, "--hide-scrollbars"], 8000)
        })
        .await
        .unwrap();
        let bytes = std::fs::read(&file).unwrap_or_else(|e| panic!("{name}.png: {e}"));
        assert!(bytes.starts_with(b"\x89PNG"), "{name}.png is a PNG");
    }
    testbed.shutdown().await;
}

/// A private agent on a node with credentials: the explorer, which a
/// browser runs without any, neither lists it nor shows its page, while
/// the public agent beside it is listed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Chromium (apt-get install chromium)"]
async fn the_explorer_never_shows_a_private_agent_to_a_browser() {
    let browser = common::needs(chromium(), "Chromium", "apt-get install chromium");
    let token = "the-explorer-test-admin-token";
    let node = tokio::task::block_in_place(|| {
        TestNode::start_with_env(&[("AGENTMESH_API__ADMIN_TOKEN", token)])
    });
    let admin = node.api().with_token(token);
    for (id, visibility) in [
        ("open-tides", json!("public")),
        (
            "secret-tides",
            json!({"visibility": "private", "clients": ["key:0011223344556677"]}),
        ),
    ] {
        let mut doc = common::agent(id, &["tide_forecast"], &[], &["en"]);
        doc["description"] = json!(format!("Tide forecasts for harbours ({id})."));
        doc["visibility"] = visibility;
        admin.post("/agents", &doc).await.expect(201);
    }
    let base = format!("http://{}", node.addr());
    let profile = tempfile::tempdir().unwrap();
    let render = |url: String| {
        let (b, p) = (browser.clone(), profile.path().to_path_buf());
        tokio::task::spawn_blocking(move || headless(&b, &p, &url, &["--dump-dom"], 8000))
    };
    for search in [
        format!("{base}/#/search?capability=tide_forecast&scope=local"),
        format!("{base}/#/search?q=tide%20forecasts%20for%20harbours&scope=mesh"),
    ] {
        let dom = render(search).await.unwrap();
        assert!(
            dom.contains("data-id=\"open-tides\""),
            "the public agent is listed:\n{dom}"
        );
        assert!(
            !dom.contains("secret-tides"),
            "the private one is not:\n{dom}"
        );
    }
    let dom = render(format!("{base}/#/agent/secret-tides"))
        .await
        .unwrap();
    assert!(
        !dom.contains("Tide forecasts for harbours (secret-tides)"),
        "its page shows nothing of it:\n{dom}"
    );
    assert!(
        dom.contains("not found"),
        "and says it is not found:\n{dom}"
    );
}

/// The agent page's invoke form, run from an invoke link: the call goes
/// through the node's gateway to a real agent, and the answer (or the
/// refusal) is shown.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Chromium (apt-get install chromium)"]
async fn the_explorer_invokes_an_agent_through_the_node() {
    use agentmesh::testbed::agents::AidipMode;
    let browser = common::needs(chromium(), "Chromium", "apt-get install chromium");
    let common::TestAgents {
        agents,
        dir,
        ca_file,
    } = common::test_agents().await;
    let node = tokio::task::block_in_place(|| {
        TestNode::builder()
            .calling(&[agents.addr().port()], &ca_file)
            .start()
    });
    let doc = agents.aidip_document("echoer", AidipMode::Ok, "none");
    node.api().post("/agents", &doc).await.expect(201);
    let base = format!("http://{}", node.addr());
    let profile = dir.path().join("chromium");
    let render = |url: String| {
        let (b, p) = (browser.clone(), profile.clone());
        tokio::task::spawn_blocking(move || headless(&b, &p, &url, &["--dump-dom"], 8000))
    };
    let input = "%7B%22text%22%3A%22from%20the%20browser%22%7D";
    let dom = render(format!(
        "{base}/#/agent/echoer?operation=echo&input={input}"
    ))
    .await
    .unwrap();
    assert!(dom.contains("Invoke through this node"), "the form:\n{dom}");
    assert!(dom.contains("id=\"invoke-output\""), "the answer:\n{dom}");
    assert!(dom.contains("from the browser"), "the agent's echo:\n{dom}");
    assert!(dom.contains("not probed"), "the liveness row:\n{dom}");
    assert!(dom.contains("no other node"), "the checked-by row:\n{dom}");
    assert!(
        agents
            .seen()
            .iter()
            .any(|s| String::from_utf8_lossy(&s.body).contains("from the browser")),
        "the agent was called"
    );
    // An input the operation's schema refuses: the refusal is shown.
    let dom = render(format!("{base}/#/agent/echoer?operation=echo&input=%7B%7D"))
        .await
        .unwrap();
    assert!(dom.contains("id=\"invoke-error\""), "{dom}");
    assert!(dom.contains("400"), "{dom}");
}

/// A peer whose log shows two histories (the split-view test hook) is
/// shown on the peers page as caught, with where its proof is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Chromium (apt-get install chromium)"]
async fn the_peers_page_shows_a_peer_caught_equivocating() {
    let browser = common::needs(chromium(), "Chromium", "apt-get install chromium");
    let private = ("AGENTMESH_P2P__ALLOW_PRIVATE_ADDRESSES", "true");
    let quick = ("AGENTMESH_P2P__WITNESS_INTERVAL", "200ms");
    let a = tokio::task::block_in_place(|| {
        TestNode::start_with_env(&[private, quick, ("AGENTMESH_TEST_SPLIT_VIEW", "1")])
    });
    let a_api = a.api();
    let a_addr = a_api.get("/health").await.expect(200)["listen_addrs"][0]
        .as_str()
        .unwrap()
        .to_owned();
    let b = tokio::task::block_in_place(|| {
        TestNode::builder()
            .env(private.0, private.1)
            .env(quick.0, quick.1)
            .args(&["--bootstrap", &a_addr])
            .start()
    });
    let b_api = b.api();
    a_api
        .post(
            "/agents",
            &common::agent("split", &["translation"], &[], &["en"]),
        )
        .await
        .expect(201);
    common::wait_until("B to catch A", || async {
        let peers = b_api.get("/peers").await;
        peers.expect(200)["witness"]["equivocated"]
            .as_array()
            .is_some_and(|e| !e.is_empty())
    })
    .await;
    let profile = tempfile::tempdir().unwrap();
    let url = format!("http://{}/#/peers", b.addr());
    let p = profile.path().to_path_buf();
    let dom =
        tokio::task::spawn_blocking(move || headless(&browser, &p, &url, &["--dump-dom"], 8000))
            .await
            .unwrap();
    assert!(
        dom.contains(&format!("data-equivocated=\"{}\"", a.peer_id())),
        "A is listed as caught:\n{dom}"
    );
    assert!(
        dom.contains("caught signing two histories of their log"),
        "and the page says what that means:\n{dom}"
    );
}
