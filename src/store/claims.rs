//! The live claimed records by signer ([`ClaimCounts`]): counted at open
//! with the posting lists, kept after each commit, read by the judge's
//! quotas on untrusted signers (`store/trust.rs`).

use std::collections::HashMap;

/// Live claimed records by signer: what the judge's quotas on untrusted
/// signers read (a hostile signer cannot fill a replicating node).
#[derive(Debug, Default, Clone)]
pub(super) struct ClaimCounts {
    by_signer: HashMap<[u8; 32], u64>,
    total: u64,
}

impl ClaimCounts {
    /// Counts a live claim by `signer`.
    pub(super) fn add(&mut self, signer: [u8; 32]) {
        *self.by_signer.entry(signer).or_default() += 1;
        self.total += 1;
    }

    /// Forgets a live claim by `signer`.
    pub(super) fn remove(&mut self, signer: [u8; 32]) {
        if let Some(n) = self.by_signer.get_mut(&signer) {
            *n -= 1;
            self.total -= 1;
            if *n == 0 {
                self.by_signer.remove(&signer);
            }
        }
    }

    /// The live claims of `signer`, and of every signer together.
    pub(super) fn count(&self, signer: &[u8; 32]) -> (u64, u64) {
        (self.by_signer.get(signer).copied().unwrap_or(0), self.total)
    }
}
