//! The federation judge's throughput: records from the mesh judged (and,
//! when they stand, stored) per second, through
//! `Judge::judge_offered(bytes, None)`, the call `NodeHandler` makes for
//! every gossiped record (`POST /records` calls `Judge::judge`, the same
//! path under `p2p.replication = all`).
//!
//! The records are signed before any clock starts, from a seeded workload
//! (`--seed`, default 44), and are the same bytes in every trial:
//!
//! - first, new agents, shuffled: ADP descriptors with a challenge proof
//!   signed by a trusted peer (25 % of `--records`) and by three untrusted
//!   signers (15 %, claims), AIDIP registrations signed by the trusted peer
//!   (20 %) and by the untrusted signers (15 %, claims);
//! - then, shuffled: updates of held ids by their own signer at a higher
//!   seq (ADP by the trusted peer 5 %, AIDIP by an untrusted signer 5 %),
//!   an untrusted signer's newer copy of an ADP record the trusted peer
//!   signed (5 %), AIDIP records of the trusted peer's ids signed by an
//!   untrusted signer (2.5 %), revocations signed by the agent's own key
//!   (1.25 %) and byte-for-byte duplicates of earlier records (6.25 %).
//!
//! Each trial opens a fresh store (sled on disk, in a temporary directory,
//! with its text index, as a node opens it), a fresh `Judge` with the
//! node's defaults (one trusted peer), judges every record in order and
//! flushes once at the end. With `--threads 2` the records are split by
//! agent, each agent's records in order on one thread, as the node's
//! blocking pool judges several at once. It prints, per trial, records
//! judged per second (the flush apart), the process CPU time per record
//! (every thread: sled's and the text index's writer included), per-record
//! latency p50/p99 and what the judge answered; then the median, min and
//! max of the rate over the trials.
//!
//! Run: `cargo bench --bench judge` (20,000 records, 5 trials, 1 and 2
//! threads), or `cargo bench --bench judge -- --records 20000 --trials 5
//! --threads 1,2 --seed 44`.

#[path = "common/machine.rs"]
mod machine;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use agentmesh::adp::{handshake, AgentDocument};
use agentmesh::aidip::{self, MetadataValidator};
use agentmesh::federation::{Judge, Judgement};
use agentmesh::identity;
use agentmesh::record::{self, DescriptorRecord, SignedRecord, TombstoneReason, TombstoneRecord};
use agentmesh::store::Store;
use agentmesh::testbed::{synthetic_agent, Population, Ports};
use agentmesh::trust::{ChallengeProof, Evidence};
use ed25519_dalek::SigningKey;
use rand::seq::SliceRandom as _;
use rand::SeedableRng as _;

/// A record's lifetime: an hour, as the judge's tests sign them.
const TTL_SECS: u64 = 3600;
/// The store's cache, the node's default order of size.
const CACHE_BYTES: u64 = 64 << 20;

struct Args {
    records: usize,
    trials: usize,
    threads: Vec<usize>,
    seed: u64,
}

impl Args {
    fn parse() -> Self {
        let mut args = Self {
            records: 20_000,
            trials: 5,
            threads: vec![1, 2],
            seed: 44,
        };
        let mut it = std::env::args().skip(1);
        while let Some(a) = it.next() {
            let mut value = || it.next().unwrap_or_else(|| panic!("{a} needs a value"));
            match a.as_str() {
                "--records" => args.records = value().parse().expect("--records N"),
                "--trials" => args.trials = value().parse().expect("--trials N"),
                "--threads" => {
                    args.threads = value()
                        .split(',')
                        .map(|t| t.parse().expect("--threads 1,2"))
                        .collect();
                }
                "--seed" => args.seed = value().parse().expect("--seed N"),
                // `cargo bench` passes `--bench`.
                _ => {}
            }
        }
        assert!(args.records >= 80, "--records must be at least 80");
        args
    }
}

/// One signed record, and the agent it is about (which thread judges it).
struct Prepared {
    bytes: Vec<u8>,
    agent: usize,
}

/// The signers: this node, its one trusted peer, three strangers.
struct Keys {
    own: SigningKey,
    friend: SigningKey,
    strangers: [SigningKey; 3],
}

impl Keys {
    fn new() -> Self {
        Self {
            own: SigningKey::from_bytes(&[1; 32]),
            friend: SigningKey::from_bytes(&[2; 32]),
            strangers: [3, 4, 5].map(|b| SigningKey::from_bytes(&[b; 32])),
        }
    }
}

/// An ADP descriptor of `document` for `agent_id`, key-verified: the
/// challenge proof `proof_key` answered to `signer`'s crawler.
fn adp_body(
    document: &str,
    agent_id: &str,
    seq: u64,
    signer: &SigningKey,
    proof_key: &SigningKey,
) -> DescriptorRecord {
    let doc: AgentDocument = serde_json::from_str(document).expect("the testbed's documents parse");
    let mut body = DescriptorRecord::new(
        doc.to_descriptor(),
        document.to_owned(),
        seq,
        record::unix_now(),
        TTL_SECS,
        Evidence::default(),
    );
    let (verifier, unix_ms, rand) = ("crawler-node".to_owned(), 1_700_000_000_000, [7u8; 16]);
    let nonce = handshake::nonce(&body.doc_sha256, &verifier, unix_ms, &rand);
    let frame = handshake::challenge(&verifier, &signer.verifying_key(), &nonce);
    let answer = handshake::answer(&frame, agent_id, proof_key);
    let signature =
        identity::decode_bytes(answer.signature.as_deref().expect("answers are signed"))
            .expect("the answer's signature is base64");
    body.evidence = Evidence {
        fingerprint: true,
        challenge: Some(ChallengeProof {
            verifier,
            unix_ms,
            rand: rand.to_vec(),
            signature,
        }),
        ..Evidence::default()
    };
    body
}

/// The AIDIP registration of `testbed::synthetic_agent(i)`.
fn aidip_body(validator: &MetadataValidator, i: usize, seq: u64) -> DescriptorRecord {
    let doc = synthetic_agent(i);
    let id = doc["id"]
        .as_str()
        .expect("synthetic agents have an id")
        .to_owned();
    let doc = aidip::with_id(&doc, &id);
    let meta = validator.parse(&doc).expect("synthetic agents are valid");
    DescriptorRecord::new(
        meta.to_descriptor(&id),
        serde_json::to_string(&doc).expect("JSON serialises"),
        seq,
        record::unix_now(),
        TTL_SECS,
        Evidence::default(),
    )
}

fn signed(body: &DescriptorRecord, key: &SigningKey) -> Vec<u8> {
    SignedRecord::sign_descriptor(body, key)
        .expect("the bench's records are within the limits")
        .encode()
}

/// The workload (module doc), in the order it is judged, and what it is
/// made of.
fn workload(n: usize, seed: u64, keys: &Keys) -> (Vec<Prepared>, BTreeMap<&'static str, usize>) {
    let pct = |p: f64| (n as f64 * p / 100.0).round() as usize;
    let (adp_friend, adp_claim) = (pct(25.0), pct(15.0));
    let (aidip_friend, aidip_claim) = (pct(20.0), pct(15.0));
    let (adp_update, aidip_update, adp_over) = (pct(5.0), pct(5.0), pct(5.0));
    let (aidip_foreign, revocations) = (pct(2.5), pct(1.25));
    let duplicates = n
        - (adp_friend
            + adp_claim
            + aidip_friend
            + aidip_claim
            + adp_update
            + aidip_update
            + adp_over
            + aidip_foreign
            + revocations);
    let mut made = BTreeMap::new();
    let population = Population::healthy(seed, adp_friend + adp_claim);
    let ports = Ports {
        https: 443,
        http: 80,
    };
    let validator = MetadataValidator::new();
    let seq = record::next_seq(None);
    let stranger = |i: usize| &keys.strangers[i % keys.strangers.len()];

    // Agents 0..adp_friend + adp_claim are ADP, the rest AIDIP.
    let agents = population.agents();
    let documents: Vec<String> = agents
        .iter()
        .map(|a| serde_json::to_string(&population.document(a, ports)).expect("JSON serialises"))
        .collect();
    let mut first = Vec::new();
    for (i, agent) in agents.iter().enumerate() {
        let signer = if i < adp_friend {
            &keys.friend
        } else {
            stranger(i)
        };
        let body = adp_body(&documents[i], &agent.id(), seq, signer, &agent.key);
        first.push(Prepared {
            bytes: signed(&body, signer),
            agent: i,
        });
    }
    made.insert("ADP, trusted peer", adp_friend);
    made.insert("ADP, untrusted (claim)", adp_claim);
    let aidip_base = agents.len();
    for j in 0..aidip_friend + aidip_claim {
        let signer = if j < aidip_friend {
            &keys.friend
        } else {
            stranger(j)
        };
        first.push(Prepared {
            bytes: signed(&aidip_body(&validator, j, seq), signer),
            agent: aidip_base + j,
        });
    }
    made.insert("AIDIP, trusted peer", aidip_friend);
    made.insert("AIDIP, untrusted (claim)", aidip_claim);

    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut second = Vec::new();
    // Updates by the record's own signer.
    for (i, agent) in agents.iter().take(adp_update).enumerate() {
        let body = adp_body(
            &documents[i],
            &agent.id(),
            seq + 1,
            &keys.friend,
            &agent.key,
        );
        second.push(Prepared {
            bytes: signed(&body, &keys.friend),
            agent: i,
        });
    }
    made.insert("ADP update, same signer, seq + 1", adp_update);
    for j in aidip_friend..aidip_friend + aidip_update.min(aidip_claim) {
        second.push(Prepared {
            bytes: signed(&aidip_body(&validator, j, seq + 1), stranger(j)),
            agent: aidip_base + j,
        });
    }
    made.insert(
        "AIDIP update, same signer, seq + 1",
        aidip_update.min(aidip_claim),
    );
    // An untrusted signer's newer copy of what the trusted peer signed.
    for i in adp_update..(adp_update + adp_over).min(adp_friend) {
        let agent = &agents[i];
        let body = adp_body(&documents[i], &agent.id(), seq + 1, stranger(i), &agent.key);
        second.push(Prepared {
            bytes: signed(&body, stranger(i)),
            agent: i,
        });
    }
    made.insert(
        "ADP, untrusted, over a trusted peer's record, seq + 1",
        (adp_update + adp_over).min(adp_friend) - adp_update,
    );
    // Another signer's record of the trusted peer's AIDIP ids.
    for j in 0..aidip_foreign.min(aidip_friend) {
        second.push(Prepared {
            bytes: signed(&aidip_body(&validator, j, seq + 1), stranger(j)),
            agent: aidip_base + j,
        });
    }
    made.insert(
        "AIDIP, another signer's id, seq + 1",
        aidip_foreign.min(aidip_friend),
    );
    // Revocations by the agent's own key, of claimed ADP agents.
    let revoked = (adp_friend..adp_friend + adp_claim).take(revocations);
    let revoked_n = revoked.len();
    for i in revoked {
        let agent = &agents[i];
        let body = TombstoneRecord {
            agent_id: agent.id(),
            seq: seq + 1,
            issued_at: record::unix_now(),
            reason: TombstoneReason::Revoked,
        };
        second.push(Prepared {
            bytes: SignedRecord::sign_tombstone(&body, &agent.key)
                .expect("a tombstone is within the limits")
                .encode(),
            agent: i,
        });
    }
    made.insert("revocation by the agent's key", revoked_n);
    // Duplicates of first-phase records, byte for byte.
    for _ in 0..duplicates {
        let p = first
            .choose(&mut rng)
            .expect("the first phase is not empty");
        second.push(Prepared {
            bytes: p.bytes.clone(),
            agent: p.agent,
        });
    }
    made.insert("duplicate of an earlier record", duplicates);

    first.shuffle(&mut rng);
    second.shuffle(&mut rng);
    first.extend(second);
    (first, made)
}

/// What a judgement was, for the tally (the variant, a refusal's reason,
/// whether a stored record counts): read from its `Debug` form, so that
/// the bench reads the judge's answers without naming its variants.
fn outcome(j: &Judgement) -> String {
    let text = format!("{j:?}");
    let variant: String = text.chars().take_while(|c| c.is_alphanumeric()).collect();
    match variant.as_str() {
        "Refused" | "Unverifiable" => text,
        "Stored" if text.contains("trusted: true") => "Stored (counted)".to_owned(),
        "Stored" => "Stored (untrusted signer)".to_owned(),
        _ => variant,
    }
}

struct Trial {
    rate: f64,
    cpu_us_per_record: f64,
    p50: Duration,
    p99: Duration,
    flush: Duration,
    outcomes: BTreeMap<String, usize>,
}

fn trial(records: &[Prepared], threads: usize, keys: &Keys) -> anyhow::Result<Trial> {
    let dir = tempfile::tempdir()?;
    let store = Store::open(dir.path(), CACHE_BYTES)?;
    let judge = Judge::new(
        store.clone(),
        keys.own.verifying_key(),
        [keys.friend.verifying_key()],
    );
    let parts: Vec<Vec<&Prepared>> = (0..threads)
        .map(|t| records.iter().filter(|p| p.agent % threads == t).collect())
        .collect();
    let cpu = machine::cpu_secs_of("/proc/self/stat");
    let started = Instant::now();
    let results: Vec<Vec<(Duration, Judgement)>> = std::thread::scope(|s| {
        let handles: Vec<_> = parts
            .iter()
            .map(|part| {
                let judge = &judge;
                s.spawn(move || {
                    part.iter()
                        .map(|p| {
                            let t = Instant::now();
                            let j = judge.judge_offered(&p.bytes, None);
                            (t.elapsed(), j)
                        })
                        .collect()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a judging thread does not panic"))
            .collect()
    });
    let elapsed = started.elapsed();
    let cpu = machine::cpu_secs_of("/proc/self/stat") - cpu;
    let t = Instant::now();
    store.blocking().flush()?;
    let flush = t.elapsed();
    let mut latencies = Vec::with_capacity(records.len());
    let mut outcomes = BTreeMap::new();
    for (d, j) in results.into_iter().flatten() {
        latencies.push(d);
        *outcomes.entry(outcome(&j)).or_default() += 1;
    }
    latencies.sort_unstable();
    let pct = |q: f64| latencies[((latencies.len() as f64 * q).ceil() as usize).saturating_sub(1)];
    drop(judge);
    drop(store);
    Ok(Trial {
        rate: records.len() as f64 / elapsed.as_secs_f64(),
        cpu_us_per_record: cpu * 1e6 / records.len() as f64,
        p50: pct(0.5),
        p99: pct(0.99),
        flush,
        outcomes,
    })
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    println!(
        "judge benchmark: {} records, {} trials, threads {:?}, seed {}",
        args.records, args.trials, args.threads, args.seed
    );
    println!(
        "machine: {} cores, {}; load average {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        machine::cpu_model(),
        machine::load_average()
    );
    let keys = Keys::new();
    let t = Instant::now();
    let (records, made) = workload(args.records, args.seed, &keys);
    println!(
        "signed {} records in {:.1} s:",
        records.len(),
        t.elapsed().as_secs_f64()
    );
    for (what, n) in &made {
        println!("  {n:>6}  {what}");
    }
    for &threads in &args.threads {
        println!("\n{threads} thread(s):");
        let mut rates = Vec::new();
        let mut first_outcomes: Option<BTreeMap<String, usize>> = None;
        for i in 1..=args.trials {
            let r = trial(&records, threads, &keys)?;
            println!(
                "  trial {i}: {:>7.0} records/s, {:>5.1} us CPU per record, p50 {:>6.1} us, p99 {:>7.1} us, flush {:.2} s; load average {}",
                r.rate,
                r.cpu_us_per_record,
                r.p50.as_secs_f64() * 1e6,
                r.p99.as_secs_f64() * 1e6,
                r.flush.as_secs_f64(),
                machine::load_average()
            );
            match &first_outcomes {
                None => {
                    for (what, n) in &r.outcomes {
                        println!("      {n:>6}  {what}");
                    }
                    first_outcomes = Some(r.outcomes);
                }
                Some(o) if *o != r.outcomes => {
                    println!("      (other answers than trial 1: {:?})", r.outcomes);
                }
                Some(_) => {}
            }
            rates.push(r.rate);
        }
        rates.sort_by(f64::total_cmp);
        println!(
            "  judged per second: median {:.0}, min {:.0}, max {:.0} ({} trials)",
            rates[rates.len() / 2],
            rates[0],
            rates[rates.len() - 1],
            rates.len()
        );
    }
    println!("\nload average at the end {}", machine::load_average());
    Ok(())
}
