//! agentmesh: a federated, peer-to-peer discovery node for AI agents.
//!
//! Module map, from the bottom layer up (`ARCHITECTURE.md` gives the
//! layers, what each file holds and how a record flows):
//! - [`identity`]: Ed25519 keys, fingerprints, key files, agent ids and
//!   domains, peer ids;
//! - [`trust`]: trust levels, the evidence behind them, the crawl's
//!   reason codes;
//! - [`descriptor`]: the normalised agent view every format maps into;
//! - [`net`]: the address policy (which addresses may be connected to);
//! - [`tlog`]: the transparency log's formats: tile paths, signed-note
//!   checkpoints, witness cosignatures;
//! - [`priority`]: background threads yield the CPU to the ones answering
//!   queries;
//! - [`periodic`]: the one loop of the node's periodic background jobs;
//! - [`drops`]: what a bounded queue dropped, counted and warned of;
//! - [`semantic`]: the optional semantic ranking model (feature
//!   `semantic`: a local static embedding model);
//! - [`config`]: the TOML + environment + flags configuration;
//! - [`understand`]: what a natural-language query asks for (languages,
//!   capabilities, trust), from editable word lists and a synonym table;
//! - [`aidip`]: the AIDIP metadata document and its schema validation;
//! - [`record`]: signed CBOR records (descriptor, tombstone, transfer);
//! - [`formats`]: the other discovery formats (A2A cards, ARD catalogs,
//!   DNS-AID, AID, MCP Registry servers) read into descriptors;
//! - [`adp`]: the ADP `agent.json` document, its check, the challenge
//!   handshake, key rotation;
//! - [`store`]: the sled store, its secondary indexes and the text index;
//! - [`access`]: who may do what through the API: scopes, API keys,
//!   bearer JWTs;
//! - [`answer`]: signed answers (records, evidence and log proofs in one
//!   envelope) and their offline check;
//! - `testbed` (feature `testbed`, on by default): the synthetic agent
//!   population the tests, the demo and the simulations crawl;
//! - [`mesh`]: the libp2p mesh (gossip, DHT, search) behind a `MeshClient`;
//! - [`issuer`]: signs, stores, flushes and publishes this node's records;
//! - [`registry`]: registration, lookup and local search over the store;
//! - [`metrics`]: the node's Prometheus registry;
//! - [`crawl`]: DNS, HTTPS and WebSocket crawling of ADP agents and the
//!   other formats, and revisiting them;
//! - [`search`]: federated search, both halves: asking the mesh within one
//!   budget and ranking locally, answering peers from the index;
//! - [`witness`]: witnessing peers' transparency logs over the mesh
//!   (checkpoints checked, cosigned, equivocations kept);
//! - [`federation`]: judging records that arrive from other nodes;
//! - [`resolve`]: intent resolution (`POST /resolve`): intent, context and
//!   policy to candidates with invocation metadata;
//! - [`gateway`]: calls to agents through this node
//!   (`POST /agents/{id}/invoke`);
//! - [`api`]: the HTTP API;
//! - [`node`]: a running node, its parts wired once; [`cli`]: the binary's
//!   commands (the demo among them).

pub mod access;
pub mod adp;
pub mod aidip;
pub mod answer;
pub mod api;
pub mod cli;
pub mod config;
pub mod crawl;
pub mod descriptor;
pub mod dnssec;
pub mod drops;
pub mod federation;
pub mod formats;
pub mod gateway;
pub mod identity;
pub mod issuer;
pub mod mesh;
pub mod metrics;
pub mod net;
pub mod node;
pub mod periodic;
pub mod priority;
pub mod record;
pub mod registry;
pub mod resolve;
pub mod search;
pub mod semantic;
pub mod store;
#[cfg(feature = "testbed")]
pub mod testbed;
pub mod tlog;
pub mod trust;
pub mod understand;
pub mod witness;
