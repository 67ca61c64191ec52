//! agentmesh: a federated, peer-to-peer discovery node for AI agents.
//!
//! Module map (see `ARCHITECTURE.md` for how a record flows):
//! - [`config`]: the TOML + environment + flags configuration;
//! - [`net`]: the address policy (which addresses may be connected to);
//! - [`periodic`]: the one loop of the node's periodic background jobs.
//! - [`priority`]: background threads yield the CPU to the ones answering
//!   queries;
//! - [`identity`]: Ed25519 keys, fingerprints, key files, agent ids and
//!   domains, peer ids;
//! - [`descriptor`]: the normalised agent view both formats map into;
//! - [`aidip`]: the AIDIP metadata document and its schema validation;
//! - [`adp`]: the ADP `agent.json` document;
//! - [`formats`]: the other discovery formats (A2A cards, ARD catalogs,
//!   DNS-AID, AID, MCP Registry servers) read into descriptors;
//! - [`verify`]: trust levels and evidence;
//! - [`understand`]: what a natural-language query asks for (languages,
//!   capabilities, trust), from an editable synonym table;
//! - [`crawl`]: DNS, HTTPS and WebSocket crawling of ADP agents;
//! - [`record`]: signed CBOR records (descriptor, tombstone);
//! - [`store`]: the sled store with its secondary indexes;
//! - [`mesh`]: the libp2p mesh (gossip, DHT, search) behind a `MeshClient`;
//! - [`federation`]: judging records that arrive from other nodes;
//! - [`issuer`]: signs, stores, flushes and publishes this node's records;
//! - [`registry`]: registration, lookup and search over the store;
//! - [`resolve`]: intent resolution (`POST /resolve`): intent, context and
//!   policy to candidates with invocation metadata;
//! - [`search`]: federated search, both halves: asking the mesh within one
//!   budget and ranking locally, answering peers from the index;
//! - [`api`]: the HTTP API;
//! - [`node`]: a running node; [`cli`]: the binary's commands (the demo
//!   among them);
//! - `testbed` (feature `testbed`, on by default): the synthetic agent
//!   population the tests, the demo and the simulations crawl.

pub mod adp;
pub mod aidip;
pub mod api;
pub mod cli;
pub mod config;
pub mod crawl;
pub mod descriptor;
pub mod drops;
pub mod federation;
pub mod formats;
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
pub mod understand;
pub mod verify;
