//! An agentmesh node against peers that are not agentmesh: plain
//! rust-libp2p swarms built here from libp2p's own behaviours (Kademlia on
//! agentmesh's protocol name, identify or none), with none of agentmesh's
//! mesh code. They stand for the go-libp2p and py-libp2p DHT clients an
//! open mesh meets:
//!
//! - the provider records the node announces (ADD_PROVIDER) carry
//!   addresses, and a client that knows nothing else dials the provider
//!   at them;
//! - a search never asks a peer that does not speak the search protocol,
//!   so such a peer cannot make an answer partial;
//! - a `PUT_VALUE` from such a peer, with a fresh identity of its own,
//!   goes through the same judge as gossip and `POST /records`: it cannot
//!   take over a registration, and a forged ADP record it stores is a
//!   claim, never proven trust.

use crate::common;
use crate::common::{wait_until, DEADLINE};

use std::time::{Duration, Instant};

use agentmesh::config::Config;
use agentmesh::mesh::{KAD_PROTOCOL, SEARCH_PROTOCOL};
use agentmesh::node::Node;
use futures_util::StreamExt;
use libp2p::kad::store::MemoryStore;
use libp2p::kad::{self, ProviderRecord};
use libp2p::multiaddr::Protocol;
use libp2p::swarm::dial_opts::DialOpts;
use libp2p::swarm::{NetworkBehaviour, SwarmEvent};
use libp2p::{identify, noise, tcp, yamux, Multiaddr, PeerId, StreamProtocol, Swarm};
use serde_json::json;

/// A DHT client: Kademlia in server mode on agentmesh's protocol, inbound
/// records and provider announcements handed to the test (`FilterBoth`),
/// and identify unless `identify` is false. It is returned once its
/// listener is up: identify sends the listen addresses known when it runs
/// and does not push later ones, so a client that dialled before its
/// listener reported would be identified without an address and never
/// enter the node's routing table (a loaded machine made that race real).
#[derive(NetworkBehaviour)]
struct Client {
    kad: kad::Behaviour<MemoryStore>,
    identify: libp2p::swarm::behaviour::toggle::Toggle<identify::Behaviour>,
}

async fn client(identify: bool) -> Swarm<Client> {
    let mut swarm = libp2p::SwarmBuilder::with_new_identity()
        .with_tokio()
        .with_tcp(
            tcp::Config::default().nodelay(true),
            noise::Config::new,
            yamux::Config::default,
        )
        .expect("a TCP transport")
        .with_behaviour(|key| {
            let peer = key.public().to_peer_id();
            let mut config = kad::Config::new(StreamProtocol::new(KAD_PROTOCOL));
            config.set_record_filtering(kad::StoreInserts::FilterBoth);
            let identify = identify.then(|| {
                identify::Behaviour::new(identify::Config::new(
                    "/plain-dht-client/1.0.0".into(),
                    key.public(),
                ))
            });
            Client {
                kad: kad::Behaviour::with_config(peer, MemoryStore::new(peer), config),
                identify: identify.into(),
            }
        })
        .expect("the behaviour")
        .with_swarm_config(|c| c.with_idle_connection_timeout(Duration::from_secs(60)))
        .build();
    swarm.behaviour_mut().kad.set_mode(Some(kad::Mode::Server));
    swarm
        .listen_on("/ip4/127.0.0.1/tcp/0".parse().unwrap())
        .expect("listening");
    drive("the client's listen address", &mut swarm, |e| {
        matches!(e, SwarmEvent::NewListenAddr { .. }).then_some(())
    })
    .await;
    swarm
}

async fn node() -> (Node, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config {
        data_dir: dir.path().join("data"),
        ..Config::default()
    };
    config.api.listen = "127.0.0.1:0".parse().unwrap();
    config.p2p.listen = vec!["/ip4/127.0.0.1/tcp/0".into()];
    config.p2p.allow_private_addresses = true;
    config.p2p.search_timeout = Duration::from_secs(2);
    config.crawl.follow_peers = false;
    (Node::spawn(config).await.expect("the node starts"), dir)
}

fn node_addr(node: &Node) -> Multiaddr {
    node.listen_addrs()[0].parse().unwrap()
}

fn without_peer(addr: &Multiaddr) -> Multiaddr {
    addr.iter()
        .filter(|p| !matches!(p, Protocol::P2p(_)))
        .collect()
}

async fn register(node: &Node, id: &str, capability: &str) {
    let doc = json!({
        "id": id, "name": format!("agent {id}"), "description": "a test agent",
        "capabilities": [capability], "tags": ["forecast"], "endpoint": "https://agents.example/x",
        "inputs": {"type": "object"}, "outputs": {"type": "object"}
    });
    let status = reqwest::Client::new()
        .post(format!("http://{}/agents", node.api_addr()))
        .json(&doc)
        .send()
        .await
        .unwrap()
        .status();
    assert!(status.is_success(), "registration answered {status}");
}

/// Drives `swarm` until `pick` returns something, for at most [`DEADLINE`].
async fn drive<T>(
    what: &str,
    swarm: &mut Swarm<Client>,
    mut pick: impl FnMut(SwarmEvent<ClientEvent>) -> Option<T>,
) -> T {
    let run = async {
        loop {
            if let Some(found) = pick(swarm.select_next_some().await) {
                return found;
            }
        }
    };
    tokio::time::timeout(DEADLINE, run)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_dht_client_gets_provider_records_it_can_dial() {
    let (node, _dir) = node().await;
    let node_peer: PeerId = node.peer_id().parse().unwrap();
    let at = node_addr(&node);
    let mut dht = client(true).await;
    dht.dial(at.clone()).unwrap();

    // The node learns the client from identify and puts it in its routing
    // table (the client is driven meanwhile); the registration's provider
    // announcements then reach it.
    let until = Instant::now() + DEADLINE;
    let mut tick = tokio::time::interval(Duration::from_millis(50));
    loop {
        tokio::select! {
            _ = dht.select_next_some() => {}
            _ = tick.tick() => {
                let status = node.mesh().status().await.unwrap();
                if status.routing_table_peers >= 1 {
                    break;
                }
                if Instant::now() >= until {
                    // What the node knows of the client says which step
                    // failed: no identify, no kad protocol, no address.
                    let peers = node.mesh().peers().await.unwrap();
                    let seen: Vec<_> = peers
                        .iter()
                        .map(|p| (p.agent_version.clone(), p.protocols.clone(), p.addrs.clone()))
                        .collect();
                    panic!("the node never added the client to its routing table; its peers: {seen:?}");
                }
            }
        }
    }
    register(&node, "weather-1", "weather_forecast").await;
    let record: ProviderRecord = drive("an ADD_PROVIDER from the node", &mut dht, |e| match e {
        SwarmEvent::Behaviour(ClientEvent::Kad(kad::Event::InboundRequest {
            request:
                kad::InboundRequest::AddProvider {
                    record: Some(record),
                },
        })) => Some(record),
        _ => None,
    })
    .await;
    assert_eq!(record.provider, node_peer);
    assert!(
        record
            .addresses
            .iter()
            .any(|a| without_peer(a) == without_peer(&at)),
        "the provider record names the node's listen address: {:?}",
        record.addresses
    );
    let status = node.mesh().status().await.unwrap();
    assert_eq!(status.external_addresses, vec![without_peer(&at)]);

    // A client that knows only the provider record reaches the provider.
    let mut fresh = client(false).await;
    let opts = DialOpts::peer_id(record.provider)
        .addresses(record.addresses.clone())
        .build();
    fresh.dial(opts).unwrap();
    let connected = drive("a connection to the provider", &mut fresh, |e| match e {
        SwarmEvent::ConnectionEstablished { peer_id, .. } => Some(peer_id),
        SwarmEvent::OutgoingConnectionError { error, .. } => panic!("dial failed: {error}"),
        _ => None,
    })
    .await;
    assert_eq!(connected, node_peer);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_never_asks_a_peer_that_does_not_speak_the_search_protocol() {
    let (asker, _a) = node().await;
    let (other, _b) = node().await;
    register(&other, "weather-2", "weather_forecast").await;

    // Two plain DHT clients, one identified and one that never identifies,
    // connected to the asker; and one agentmesh node.
    let mut identified = client(true).await;
    let mut silent = client(false).await;
    identified.dial(node_addr(&asker)).unwrap();
    silent.dial(node_addr(&asker)).unwrap();
    let clients = tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = identified.select_next_some() => {}
                _ = silent.select_next_some() => {}
            }
        }
    });
    asker.mesh().dial(node_addr(&other)).await.unwrap();
    let other_peer: PeerId = other.peer_id().parse().unwrap();
    wait_until(
        "the asker has three peers and the agentmesh one identified",
        || async {
            let peers = asker.mesh().peers().await.unwrap();
            peers.len() == 3
                && peers.iter().any(|p| {
                    p.peer_id == other_peer && p.protocols.iter().any(|s| s == SEARCH_PROTOCOL)
                })
        },
    )
    .await;

    // With a capability, the providers are asked; without one (tags
    // only), every connected peer that speaks the search protocol. Either
    // way only the agentmesh peer is asked, it answers, and the answer is
    // whole.
    for filters in [
        json!({"capabilities": ["weather_forecast"]}),
        json!({"tags": ["forecast"]}),
    ] {
        let response = reqwest::Client::new()
            .post(format!("http://{}/agents/search", asker.api_addr()))
            .json(&json!({ "filters": filters }))
            .send()
            .await
            .unwrap();
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .map(|v| v.to_str().unwrap().to_owned())
        };
        assert_eq!(
            header("x-agentmesh-peers-asked").as_deref(),
            Some("1"),
            "{filters}"
        );
        assert_eq!(
            header("x-agentmesh-peers-answered").as_deref(),
            Some("1"),
            "{filters}"
        );
        assert_eq!(
            header("x-agentmesh-partial").as_deref(),
            Some("false"),
            "{filters}"
        );
        assert_eq!(header("x-agentmesh-unanswered"), None, "{filters}");
        let found: serde_json::Value = response.json().await.unwrap();
        assert_eq!(found[0]["id"], "weather-2", "{filters}");
    }
    clients.abort();
}

/// `POST /agents/search` with `filters`, in the node's own scope.
async fn search_local(node: &Node, filters: &serde_json::Value) -> serde_json::Value {
    reqwest::Client::new()
        .post(format!("http://{}/agents/search", node.api_addr()))
        .json(&json!({"filters": filters, "scope": "local"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// `PUT_VALUE` of `value` under `id`'s agent key, sent by `dht` to the
/// node at `at` only; answers once the node replied.
async fn put_value(
    dht: &mut Swarm<Client>,
    node: PeerId,
    at: &Multiaddr,
    id: &str,
    value: Vec<u8>,
) {
    dht.behaviour_mut().kad.add_address(&node, at.clone());
    let key = kad::RecordKey::new(&agentmesh::mesh::agent_key(id));
    dht.behaviour_mut().kad.put_record_to(
        kad::Record::new(key, value),
        std::iter::once(node),
        kad::Quorum::One,
    );
    drive("the node's answer to PUT_VALUE", dht, |e| match e {
        SwarmEvent::Behaviour(ClientEvent::Kad(kad::Event::OutboundQueryProgressed {
            result: kad::QueryResult::PutRecord(result),
            ..
        })) => Some(result.is_ok()),
        _ => None,
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_dht_client_can_neither_take_over_an_agent_nor_make_a_forgery_look_proven() {
    let (node, _dir) = node().await;
    let node_peer: PeerId = node.peer_id().parse().unwrap();
    let at = without_peer(&node_addr(&node));
    register(&node, "weather-3", "weather_forecast").await;
    let mut dht = client(true).await;
    let stranger = agentmesh::identity::generate();

    // The registration, signed by the stranger's key, newer: refused as
    // someone else's.
    put_value(
        &mut dht,
        node_peer,
        &at,
        "weather-3",
        common::signed_registration(
            "weather-3",
            "https://evil.example/x",
            agentmesh::record::next_seq(None),
            &stranger,
        ),
    )
    .await;
    let refused = |reason: &'static str| {
        let url = format!("http://{}/peers", node.api_addr());
        async move {
            let peers: serde_json::Value = reqwest::get(url).await.unwrap().json().await.unwrap();
            peers["records"]["refused"][reason].as_u64().unwrap_or(0)
        }
    };
    wait_until(
        "the node refuses the takeover as local_registration",
        || async { refused("local_registration").await >= 1 },
    )
    .await;

    // A forged ADP agent, every flag set, under the agent's key: held as
    // the stranger's claim, never as proven.
    let population = agentmesh::testbed::Population::healthy(31, 1);
    let agent = &population.agents()[0];
    let doc = population.document(
        agent,
        agentmesh::testbed::Ports {
            https: 443,
            http: 80,
        },
    );
    let capability = doc.to_descriptor().capabilities[0].clone();
    let forged = common::with_key(&serde_json::to_string(&doc).unwrap(), &stranger);
    let mut body = agentmesh::record::DescriptorRecord::new(
        serde_json::from_str::<agentmesh::adp::AgentDocument>(&forged)
            .unwrap()
            .to_descriptor(),
        forged.clone(),
        agentmesh::record::next_seq(None),
        agentmesh::record::unix_now(),
        3600,
        Default::default(),
    );
    body.evidence.dnssec = true;
    body.evidence.fingerprint = true;
    let record = agentmesh::record::SignedRecord::sign_descriptor(&body, &stranger)
        .unwrap()
        .encode();
    put_value(&mut dht, node_peer, &at, &agent.id(), record).await;
    let query = json!({"capabilities": [capability]});
    wait_until("the node holds the forgery", || async {
        search_local(&node, &query)
            .await
            .as_array()
            .is_some_and(|a| !a.is_empty())
    })
    .await;
    let found = search_local(&node, &query).await;
    assert_eq!(found[0]["trust"]["level"], "unverified", "{found}");
    assert_eq!(
        found[0]["trust"]["claimed"]["level"], "dns-verified",
        "{found}"
    );
    let at_floor = search_local(
        &node,
        &json!({"capabilities": [capability], "min_trust": "dns-verified"}),
    )
    .await;
    assert_eq!(at_floor, json!([]));
}
