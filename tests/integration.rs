//! The integration tests, one binary: each file under `tests/` is a
//! module of it (one link of the crate instead of one per file, and one
//! harness, `common`). Run one file's tests with a filter, e.g.
//! `cargo test --test integration -- hostile::`.

mod bind;
mod common;

mod a2a_interop;
mod access;
mod answers;
mod api;
mod ard_api;
mod audit;
mod backup;
mod cli;
mod crawl;
mod dnssec_bind;
mod dnssec_in_process;
mod explorer;
mod faults;
mod federation;
mod formats;
mod freshness;
mod gateway;
mod gateway_adp;
mod gateway_interop;
mod hostile;
mod import_mcp;
mod layers;
mod limits;
mod liveness_mesh;
mod mcp_registry;
mod mesh;
mod mtls;
mod nginx;
mod observe;
mod openapi;
mod operator;
mod partition;
mod probe;
mod readme;
mod relevance;
mod relevance_mcp;
mod resolve;
#[cfg(feature = "semantic")]
mod semantic;
mod third_party;
mod tlog;
mod visibility;
mod witness;
