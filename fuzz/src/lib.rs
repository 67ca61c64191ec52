//! What the fuzz targets share: fixed keys, the one judge of a process and
//! its store, and how a target cuts its input into the pieces a parser
//! takes. The seed writer (`src/bin/seeds.rs`) uses the same keys, so a
//! seed signed here is one the targets can check.

use std::sync::OnceLock;

use agentmesh::federation::Judge;
use agentmesh::store::{Store, StoreOptions, TextIndexOpen};
use ed25519_dalek::SigningKey;

/// This node's key (the judge's own).
pub fn node_key() -> SigningKey {
    SigningKey::from_bytes(&[0x01; 32])
}

/// A peer in the judge's `trusted_peers`: its evidence counts.
pub fn trusted_key() -> SigningKey {
    SigningKey::from_bytes(&[0x02; 32])
}

/// A stranger: any other signer.
pub fn stranger_key() -> SigningKey {
    SigningKey::from_bytes(&[0x03; 32])
}

/// The verifier id of the challenge target's handshakes.
pub const VERIFIER: &str = "12D3KooWFuzzVerifier";
/// The agent the challenge target challenges.
pub const CHALLENGED: &str = "agent:fuzz.example";

/// The nonce of the challenge target's handshake (`handshake::nonce` of a
/// zero document digest, at a fixed time, with zero random bytes).
pub fn challenge_nonce() -> String {
    agentmesh::adp::handshake::nonce(&[0; 32], VERIFIER, 1_700_000_000_000, &[0; 16])
}

/// The judge of this process, over one store (opened once: a store per
/// input would measure sled, not the judge). Records it accepts stay, so
/// later inputs meet a held record. libFuzzer ends the process with
/// `exit`, which drops no static, so the store's directory is named after
/// the process and the directories of processes that have ended are
/// removed here, at the next start.
pub fn judge() -> &'static Judge {
    static JUDGE: OnceLock<Judge> = OnceLock::new();
    JUDGE.get_or_init(|| {
        let parent = std::env::temp_dir().join("agentmesh-fuzz-judge");
        if let Ok(entries) = std::fs::read_dir(&parent) {
            for e in entries.flatten() {
                let pid = e.file_name().to_string_lossy().into_owned();
                if !std::path::Path::new("/proc").join(&pid).exists() {
                    let _ = std::fs::remove_dir_all(e.path());
                }
            }
        }
        let dir = parent.join(std::process::id().to_string());
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a directory for the fuzz store");
        let options = StoreOptions {
            cache_bytes: 16 << 20,
            text_index: TextIndexOpen::AtFirstSearch,
            max_bytes: None,
            log_signer: None,
        };
        let store = Store::open_with(&dir, &options).expect("the fuzz store opens");
        Judge::new(
            store,
            node_key().verifying_key(),
            [trusted_key().verifying_key()],
        )
    })
}

/// `data` as text records, one a line (a DNS answer's TXT strings, as the
/// resolver hands them over), invalid UTF-8 replaced.
pub fn lines(data: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(data)
        .split('\n')
        .map(str::to_owned)
        .collect()
}

/// The first byte of `data` as a selector, and the rest.
pub fn selector(data: &[u8]) -> Option<(u8, &[u8])> {
    data.split_first().map(|(s, rest)| (*s, rest))
}
