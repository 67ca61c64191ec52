//! Crawl reports: the latest report of each agent crawled here (JSON, in
//! `reports`) and its reason codes apart (in `reasons`), which summaries
//! show without reading the report.

use super::error::StoreError;
use super::handles::BlockingStore;
use crate::trust::Reason;

impl BlockingStore {
    /// As [`Store::put_report`], on this thread.
    ///
    /// # Errors
    /// [`StoreError::Sled`].
    pub fn put_report(
        &self,
        id: &str,
        report: &[u8],
        reasons: &[Reason],
    ) -> Result<(), StoreError> {
        self.inner
            .reasons
            .insert(id.as_bytes(), encode_reasons(reasons))?;
        self.inner.reports.insert(id.as_bytes(), report)?;
        Ok(())
    }

    /// As [`Store::reasons`], on this thread.
    ///
    /// # Errors
    /// [`StoreError::Sled`].
    pub fn reasons(&self, id: &str) -> Result<Vec<Reason>, StoreError> {
        Ok(self
            .inner
            .reasons
            .get(id.as_bytes())?
            .map(|v| decode_reasons(&v))
            .unwrap_or_default())
    }

    /// As [`Store::report`], on this thread.
    ///
    /// # Errors
    /// [`StoreError::Sled`].
    pub fn report(&self, id: &str) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.inner.reports.get(id.as_bytes())?.map(|v| v.to_vec()))
    }
}

/// Reason codes as stored: their stable codes, comma-separated.
fn encode_reasons(reasons: &[Reason]) -> Vec<u8> {
    reasons
        .iter()
        .map(|r| r.as_str())
        .collect::<Vec<_>>()
        .join(",")
        .into_bytes()
}

/// The stored reason codes; a code this version does not know (written by
/// a newer one) is skipped.
fn decode_reasons(bytes: &[u8]) -> Vec<Reason> {
    String::from_utf8_lossy(bytes)
        .split(',')
        .filter_map(|code| code.parse().ok())
        .collect()
}

/// Fills `reasons` from the reports of a data directory written before
/// the reasons were kept on their own (their JSON's `reasons` member).
pub(super) fn fill_reasons(reports: &sled::Tree, reasons: &sled::Tree) -> Result<(), StoreError> {
    #[derive(serde::Deserialize)]
    struct Codes {
        #[serde(default)]
        reasons: Vec<String>,
    }
    for entry in reports.iter() {
        let (id, json) = entry?;
        let codes: Vec<Reason> = serde_json::from_slice::<Codes>(&json)
            .map(|c| c.reasons.iter().filter_map(|r| r.parse().ok()).collect())
            .unwrap_or_default();
        reasons.insert(id, encode_reasons(&codes))?;
    }
    Ok(())
}
