//! The transparency log's costs (docs/protocol.md#log, docs/answers.md),
//! each against a baseline in the same run:
//! - an import of `AGENTMESH_BENCH_LOG_AGENTS` (default 1000000) node-signed
//!   registrations, in batches of 1000 as `agentmesh import` writes them,
//!   into two stores side by side: one without the log, one with it
//!   (each chunk of records goes to both, so both see the same machine);
//!   entries appended per second, and what the log adds to import time;
//! - the store's size on disk after both imports, and the log's own
//!   bytes (its three trees' keys and values): storage per million;
//! - a signed answer of 10 results: its size, the inclusion proofs'
//!   share, and the offline check's time (median of 200).
//!
//! `cargo bench --bench tlog`; stores under `AGENTMESH_BENCH_DIR` (default:
//! the system temp directory).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentmesh::aidip::{self, MetadataValidator};
use agentmesh::answer::{self, CheckOptions, NodeInfo, Payload, RequestInfo, ResultProof};
use agentmesh::record::{self, DescriptorRecord, RecordBody, SignedRecord};
use agentmesh::store::{Expect, Origin, Store, StoreOptions};
use agentmesh::testbed::synthetic_agent;
use agentmesh::tlog::Notary;
use agentmesh::trust::Evidence;
use anyhow::Context as _;
use ed25519_dalek::SigningKey;

const CHUNK: usize = 10_000;
const BATCH: usize = 1000;

fn main() -> anyhow::Result<()> {
    let n: usize = std::env::var("AGENTMESH_BENCH_LOG_AGENTS")
        .ok()
        .map(|v| v.parse())
        .transpose()
        .context("AGENTMESH_BENCH_LOG_AGENTS is a number")?
        .unwrap_or(1_000_000);
    let root = match std::env::var_os("AGENTMESH_BENCH_DIR") {
        Some(d) => tempfile::tempdir_in(d)?,
        None => tempfile::tempdir()?,
    };
    let key = SigningKey::from_bytes(&[42; 32]);
    let open = |name: &str, logged: bool| {
        Store::open_with(
            &root.path().join(name),
            &StoreOptions {
                cache_bytes: 256 << 20,
                log_signer: logged.then(|| key.verifying_key().to_bytes()),
                ..StoreOptions::default()
            },
        )
    };
    let (plain, logged) = (open("plain", false)?, open("logged", true)?);
    let validator = MetadataValidator::new();
    let (mut plain_time, mut logged_time) = (Duration::ZERO, Duration::ZERO);
    let mut done = 0;
    while done < n {
        let chunk: Vec<(SignedRecord, RecordBody)> = (done..(done + CHUNK).min(n))
            .map(|i| prepare(&validator, &key, i))
            .collect::<anyhow::Result<_>>()?;
        plain_time += put(&plain, &chunk)?;
        logged_time += put(&logged, &chunk)?;
        done += chunk.len();
    }
    let rate = |t: Duration| n as f64 / t.as_secs_f64();
    println!("## import of {n} node-signed registrations, batches of {BATCH} (each flushed)");
    println!("| store | time | records/s |");
    println!("| --- | ---: | ---: |");
    println!(
        "| without the log | {:.1} s | {:.0} |",
        plain_time.as_secs_f64(),
        rate(plain_time)
    );
    println!(
        "| with the log | {:.1} s | {:.0} |",
        logged_time.as_secs_f64(),
        rate(logged_time)
    );
    println!(
        "the log adds {:+.1} % to import time; entries appended at {:.0}/s\n",
        (logged_time.as_secs_f64() / plain_time.as_secs_f64() - 1.0) * 100.0,
        rate(logged_time)
    );

    let (size, _) = logged.blocking().log_head()?;
    anyhow::ensure!(size == n as u64, "the log holds {size} entries, not {n}");
    let records: Vec<Vec<u8>> = (0..10)
        .map(|i| {
            let id = synthetic_agent(i * (n / 10))["id"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            logged
                .blocking()
                .get(&id)
                .map(|a| a.expect("an imported agent").record.encode())
        })
        .collect::<Result<_, _>>()?;
    let envelope = answer_of(&logged, &key, &records)?;
    let check_times: Vec<Duration> = (0..200)
        .map(|_| {
            let t = Instant::now();
            let report = answer::check(&envelope, &CheckOptions::default());
            assert!(report.ok, "{:?}", report.failures);
            t.elapsed()
        })
        .collect();
    let proof_bytes: usize = {
        let (_, _, proofs) = logged.blocking().log_proofs(&records)?;
        proofs.iter().flatten().map(|(_, p)| p.len() * 44).sum()
    };
    println!("## a signed answer of 10 results, log of {n} entries");
    println!(
        "{} bytes in all ({} of them the 10 inclusion proofs, base64); checked offline in {:.2} ms (median of 200)\n",
        envelope.len(),
        proof_bytes,
        median(check_times).as_secs_f64() * 1000.0
    );

    plain.close_blocking()?;
    logged.close_blocking()?;
    let (plain_bytes, logged_bytes) = (
        du(&root.path().join("plain"))?,
        du(&root.path().join("logged"))?,
    );
    println!("## storage");
    println!(
        "without the log {:.0} MiB, with it {:.0} MiB: {:.0} MiB per million entries on disk",
        mib(plain_bytes),
        mib(logged_bytes),
        mib(logged_bytes.saturating_sub(plain_bytes)) * 1e6 / n as f64
    );
    Ok(())
}

/// Registration `i` of the synthetic population, signed by `key`.
fn prepare(
    validator: &MetadataValidator,
    key: &SigningKey,
    i: usize,
) -> anyhow::Result<(SignedRecord, RecordBody)> {
    let doc = synthetic_agent(i);
    let id = doc["id"].as_str().context("an id")?.to_owned();
    let doc = aidip::with_id(&doc, &id);
    let meta = validator
        .parse(&doc)
        .map_err(|p| anyhow::anyhow!("agent {id}: {p:?}"))?;
    let body = DescriptorRecord::new(
        meta.to_descriptor(&id),
        serde_json::to_string(&doc)?,
        record::next_seq(None),
        record::unix_now(),
        7 * 24 * 3600,
        Evidence::default(),
    );
    let signed = SignedRecord::sign_descriptor(&body, key)?;
    Ok((signed, RecordBody::Descriptor(Box::new(body))))
}

/// Puts `chunk` in batches of [`BATCH`], each flushed; the time taken.
fn put(store: &Store, chunk: &[(SignedRecord, RecordBody)]) -> anyhow::Result<Duration> {
    let t = Instant::now();
    for batch in chunk.chunks(BATCH) {
        for outcome in store
            .blocking()
            .put_batch(batch, Origin::Local, Expect::Any)
        {
            outcome?;
        }
        store.blocking().flush()?;
    }
    Ok(t.elapsed())
}

/// A signed answer of `records` as a node answers one (docs/answers.md).
fn answer_of(store: &Store, key: &SigningKey, records: &[Vec<u8>]) -> anyhow::Result<Vec<u8>> {
    let notary = Notary::new("agentmesh/bench", Arc::new(key.clone()))?;
    let (size, root, proofs) = store.blocking().log_proofs(records)?;
    let mut shown = Vec::new();
    let results = records
        .iter()
        .zip(proofs)
        .map(|(bytes, proof)| {
            let id = SignedRecord::decode(bytes)?.body()?.agent_id().to_owned();
            shown.push(serde_json::json!({"id": id, "trust": {"level": "unverified"}}));
            Ok(ResultProof::new(id, bytes, proof))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let request = RequestInfo::new("POST", "/agents/search", b"{}");
    let payload = Payload {
        v: answer::VERSION,
        node: NodeInfo {
            peer_id: agentmesh::identity::peer_id_of_public(&key.verifying_key()),
            log_origin: "agentmesh/bench".into(),
        },
        time: record::unix_now(),
        request_hash: request.hash(),
        request,
        checkpoint: String::from_utf8(notary.sign(size, root).to_vec())?,
        trusted_signers: vec![],
        answer: serde_json::Value::Array(shown),
        results,
    };
    let sealed = answer::seal(&serde_json::to_vec(&payload)?, key);
    Ok(serde_json::to_vec(&sealed)?)
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort_unstable();
    times[times.len() / 2]
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// The bytes of the files under `dir`.
fn du(dir: &Path) -> anyhow::Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let meta = entry.metadata()?;
        total += if meta.is_dir() {
            du(&entry.path())?
        } else {
            meta.len()
        };
    }
    Ok(total)
}
