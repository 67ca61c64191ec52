//! Who sees a registration (docs/protocol.md#visibility): public,
//! unlisted and private agents walked over every read route by clients
//! of different rights; owners alone (and the operator) change what they
//! registered; and nothing of an unlisted or private agent reaches
//! another node, trusted or not, by gossip, the DHT or a mesh search,
//! until it is made public.

use std::collections::BTreeSet;

use agentmesh::access::keys::KeyRing;
use agentmesh::access::{Scope, Scopes};
use agentmesh::config::Config;
use agentmesh::node::Node;
use serde_json::{json, Value};

use crate::common::{agent, ids, wait_until, Api};

const ADMIN_TOKEN: &str = "the-admin-token-of-the-visibility-test";
const CAPABILITY: &str = "tide_forecast";

/// A node on loopback, in process, its rate limits off (the walk sends
/// a few hundred requests at once); `tweak` changes the rest.
async fn node(dir: &std::path::Path, tweak: impl FnOnce(&mut Config)) -> Node {
    let mut config = Config {
        data_dir: dir.to_path_buf(),
        ..Config::default()
    };
    config.api.listen = "127.0.0.1:0".parse().unwrap();
    config.api.limits.enabled = false;
    config.p2p.listen = vec!["/ip4/127.0.0.1/tcp/0".into()];
    config.p2p.allow_private_addresses = true;
    config.p2p.search_timeout = std::time::Duration::from_secs(2);
    config.crawl.follow_peers = false;
    tweak(&mut config);
    Node::spawn(config).await.expect("the node starts")
}

fn api(n: &Node) -> Api {
    Api::new(format!("http://{}", n.api_addr()))
}

fn tide_agent(id: &str) -> Value {
    let mut doc = agent(id, &[CAPABILITY], &["ocean"], &["en"]);
    doc["description"] = json!(format!("Tide forecasts for harbours ({id})."));
    doc
}

/// One client of the walk: its API handle, and which of the three
/// agents it may read by id and find in lists and searches.
struct Client {
    name: &'static str,
    api: Api,
    /// May read the private agent (its owner, the client it names, the
    /// operator).
    entitled: bool,
}

impl Client {
    /// The agents a list or a search answers this client: the public
    /// one, the private one when entitled, never the unlisted one.
    fn listed(&self) -> BTreeSet<String> {
        let mut out = BTreeSet::from(["open-tides".to_owned()]);
        if self.entitled {
            out.insert("secret-tides".to_owned());
        }
        out
    }
}

fn set(v: &Value) -> BTreeSet<String> {
    ids(v).into_iter().collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_read_route_shows_each_client_only_what_it_is_entitled_to() {
    let dir = tempfile::tempdir().unwrap();
    let keys = KeyRing::in_dir(dir.path());
    let key = |name: &str, scopes: &[Scope]| {
        let made = keys
            .create(name, scopes.iter().copied().collect::<Scopes>(), None)
            .unwrap();
        (made.key.id, made.token)
    };
    let (_, owner_token) = key("owner", &[Scope::Register, Scope::Read]);
    let (_, rival_token) = key("rival", &[Scope::Register, Scope::Read]);
    let (partner_id, partner_token) = key("partner", &[Scope::Read]);
    let (_, stranger_token) = key("stranger", &[Scope::Read]);
    let node = node(dir.path(), |c| {
        c.api.admin_token = Some(ADMIN_TOKEN.to_owned().into());
    })
    .await;
    let anonymous = api(&node);
    let owner = anonymous.with_token(&owner_token);
    let rival = anonymous.with_token(&rival_token);
    let admin = anonymous.with_token(ADMIN_TOKEN);

    // The owner registers one agent of each visibility.
    let mut open = tide_agent("open-tides");
    open["visibility"] = json!("public");
    owner.post("/agents", &open).await.expect(201);
    let mut unlisted = tide_agent("quiet-tides");
    unlisted["visibility"] = json!("unlisted");
    owner.post("/agents", &unlisted).await.expect(201);
    let mut private = tide_agent("secret-tides");
    private["visibility"] = json!({
        "visibility": "private",
        "clients": [format!("key:{partner_id}")],
    });
    let stored = owner.post("/agents", &private).await;
    // The visibility is the node's, not part of the agent's document.
    assert!(stored.expect(201).get("visibility").is_none(), "{stored:?}");

    let clients = [
        Client {
            name: "anonymous",
            api: anonymous.clone(),
            entitled: false,
        },
        Client {
            name: "stranger (read)",
            api: anonymous.with_token(&stranger_token),
            entitled: false,
        },
        Client {
            name: "rival (register, read)",
            api: rival.clone(),
            entitled: false,
        },
        Client {
            name: "partner (named by the private agent)",
            api: anonymous.with_token(&partner_token),
            entitled: true,
        },
        Client {
            name: "owner",
            api: owner.clone(),
            entitled: true,
        },
        Client {
            name: "operator (admin token)",
            api: admin.clone(),
            entitled: true,
        },
    ];
    for c in &clients {
        let who = c.name;
        // By id: public and unlisted to every reader, private to the
        // entitled; a private agent is unknown to everyone else.
        for (id, shown) in [
            ("open-tides", true),
            ("quiet-tides", true),
            ("secret-tides", c.entitled),
        ] {
            for path in [format!("/agents/{id}"), format!("/agents/{id}/summary")] {
                let r = c.api.get(&path).await;
                if shown {
                    r.expect(200);
                } else {
                    r.expect_error(404, "NotFound");
                }
            }
        }
        // Lists, searches by filter and by text, resolutions: never the
        // unlisted agent, the private one only to the entitled.
        let listed = c.listed();
        let r = c
            .api
            .get(&format!("/agents?capabilities={CAPABILITY}"))
            .await;
        assert_eq!(set(r.expect(200)), listed, "GET /agents as {who}");
        for body in [
            json!({"filters": {"capabilities": [CAPABILITY]}, "scope": "local"}),
            json!({"query": "tide forecasts for harbours", "scope": "local"}),
            json!({"query": "tide forecasts", "scope": "mesh"}),
        ] {
            let r = c.api.post("/agents/search", &body).await;
            assert_eq!(set(r.expect(200)), listed, "search {body} as {who}");
        }
        let r = c
            .api
            .post(
                "/resolve",
                &json!({"intent": "tide forecasts for a harbour", "scope": "local"}),
            )
            .await;
        assert_eq!(
            set(&r.expect(200)["candidates"]),
            listed,
            "resolve as {who}"
        );
    }

    // Who registered an agent changes it; another client with the
    // register scope may not, and does not learn of a private one.
    rival
        .put("/agents/open-tides", &tide_agent("open-tides"))
        .await
        .expect_error(403, "Forbidden");
    rival
        .delete("/agents/open-tides")
        .await
        .expect_error(403, "Forbidden");
    rival
        .put("/agents/secret-tides", &tide_agent("secret-tides"))
        .await
        .expect_error(404, "NotFound");
    rival
        .delete("/agents/secret-tides")
        .await
        .expect_error(404, "NotFound");
    rival
        .post("/agents", &tide_agent("open-tides"))
        .await
        .expect_error(403, "Forbidden");
    rival
        .get("/agents/open-tides/visibility")
        .await
        .expect_error(403, "Forbidden");
    // An update without `visibility` keeps it.
    let mut changed = tide_agent("secret-tides");
    changed["description"] = json!("Tide forecasts, now hourly.");
    owner
        .put("/agents/secret-tides", &changed)
        .await
        .expect(200);
    let view = owner.get("/agents/secret-tides/visibility").await;
    let view = view.expect(200);
    assert_eq!(view["visibility"], "private");
    assert_eq!(view["clients"], json!([format!("key:{partner_id}")]));
    assert!(
        view["owner"].as_str().unwrap().starts_with("key:"),
        "{view}"
    );
    let r = clients[1]
        .api
        .post(
            "/agents/search",
            &json!({"query": "hourly tide forecasts", "scope": "local"}),
        )
        .await;
    assert_eq!(
        set(r.expect(200)),
        BTreeSet::from(["open-tides".to_owned()])
    );
    // The operator may change it too.
    admin
        .put("/agents/secret-tides", &changed)
        .await
        .expect(200);

    // A public agent peers hold cannot be hidden again; a bad visibility
    // names its field.
    owner
        .put("/agents/open-tides/visibility", &json!("private"))
        .await
        .expect_error(409, "InvalidInput");
    let mut bad = tide_agent("odd-tides");
    bad["visibility"] = json!({"visibility": "private", "scopes": ["sailors"]});
    let r = owner.post("/agents", &bad).await;
    r.expect_field_problem("/visibility/scopes/0");
    bad["visibility"] = json!("secret");
    owner
        .post("/agents", &bad)
        .await
        .expect_field_problem("/visibility");
    anonymous
        .get("/agents/odd-tides")
        .await
        .expect_error(404, "NotFound");

    // A suspension of the private agent is told to the entitled only.
    admin
        .put(
            "/admin/agents/secret-tides/suspension",
            &json!({"reason": "checking"}),
        )
        .await
        .expect(200);
    for c in &clients {
        let r = c.api.get("/agents/secret-tides/suspension").await;
        assert_eq!(
            r.expect(200)["suspended"],
            json!(c.entitled),
            "suspension as {}",
            c.name
        );
    }

    // The export keeps the visibility beside the document.
    let export = admin.get("/admin/export").await;
    export.expect(200);
    let line = export
        .text
        .lines()
        .find(|l| l.contains("\"registration\"") && l.contains("\"secret-tides\""))
        .expect("the private agent's registration is exported");
    let line: Value = serde_json::from_str(line).unwrap();
    assert_eq!(line["visibility"], "private");

    // Deleted by its owner, the id is free again.
    owner.delete("/agents/secret-tides").await.expect(204);
    rival
        .post("/agents", &tide_agent("secret-tides"))
        .await
        .expect(201);
    node.shutdown().await.unwrap();
}

/// Whether `n` holds a record of `id` (what gossip or the DHT brought).
async fn holds(n: &Node, id: &str) -> bool {
    n.registry().store().get(id).await.unwrap().is_some()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hidden_agents_never_reach_another_node_until_made_public() {
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = node(dir_a.path(), |_| {}).await;
    let boot = a.listen_addrs().to_vec();
    // B trusts A: a federation partner gets no more than anyone.
    let a_peer = a.peer_id().to_owned();
    let b = node(dir_b.path(), |c| {
        c.p2p.bootstrap = boot;
        c.p2p.trusted_peers = vec![a_peer];
    })
    .await;
    for n in [&a, &b] {
        wait_until("both nodes have a peer", || async {
            n.mesh().status().await.is_ok_and(|s| s.connected_peers > 0)
        })
        .await;
    }
    let (api_a, api_b) = (api(&a), api(&b));
    // Hidden first, then a public one: the publisher sends in order, so
    // once B holds the public agent it would hold anything sent before.
    let mut private = tide_agent("secret-tides");
    private["visibility"] = json!({"visibility": "private", "clients": ["key:0011223344556677"]});
    api_a.post("/agents", &private).await.expect(201);
    let mut unlisted = tide_agent("quiet-tides");
    unlisted["visibility"] = json!("unlisted");
    api_a.post("/agents", &unlisted).await.expect(201);
    api_a
        .post("/agents", &tide_agent("open-tides"))
        .await
        .expect(201);
    wait_until("B holds the public agent by gossip", || async {
        holds(&b, "open-tides").await
    })
    .await;
    // A mesh search on B asks A, whose answer leaves them out; a get on B
    // asks the DHT, which never had them.
    let r = api_b
        .post(
            "/agents/search",
            &json!({"filters": {"capabilities": [CAPABILITY]}, "scope": "mesh"}),
        )
        .await;
    assert_eq!(
        set(r.expect(200)),
        BTreeSet::from(["open-tides".to_owned()])
    );
    assert_eq!(r.header("x-agentmesh-peers-answered"), Some("1"));
    for id in ["secret-tides", "quiet-tides"] {
        api_b
            .get(&format!("/agents/{id}"))
            .await
            .expect_error(404, "NotFound");
        assert!(!holds(&b, id).await, "B holds {id}");
    }
    // The text index may run a commit behind the store.
    let resolve =
        json!({"intent": "tide forecasts", "scope": "mesh", "policy": {"share_intent": true}});
    wait_until("B's text index has the public agent", || async {
        let r = api_b.post("/resolve", &resolve).await;
        !r.expect(200)["candidates"].as_array().unwrap().is_empty()
    })
    .await;
    let r = api_b.post("/resolve", &resolve).await;
    assert_eq!(
        set(&r.expect(200)["candidates"]),
        BTreeSet::from(["open-tides".to_owned()]),
        "{}",
        r.text
    );

    // Made public, the private agent reaches B: the same paths that left
    // it out carry it now.
    api_a
        .put("/agents/secret-tides/visibility", &json!("public"))
        .await
        .expect(200);
    wait_until("B holds the agent made public", || async {
        holds(&b, "secret-tides").await
    })
    .await;
    // A record held is in the filter postings a moment after its write
    // commits (store/write.rs): the search is waited for, not assumed.
    let search = json!({"filters": {"capabilities": [CAPABILITY]}, "scope": "local"});
    let both = BTreeSet::from(["open-tides".to_owned(), "secret-tides".to_owned()]);
    wait_until("B's search finds the agent made public", || async {
        set(api_b.post("/agents/search", &search).await.expect(200)) == both
    })
    .await;
    assert!(!holds(&b, "quiet-tides").await);
    b.shutdown().await.unwrap();
    a.shutdown().await.unwrap();
}
