//! What a run reports: the [`Summary`] (`summary.json`, and the last line
//! of stdout under `--json`) made the same way from either engine's
//! outcome, the CSV series, the published reference figures printed beside
//! the simulated ones, and [`side_by_side`] for two summaries (a DES run
//! and a swarm run of one calibration scenario).

//!
//! One module per output: the summary (`summary`), its text form
//! (`text`), the CSV series (`series`) and the comparison of summaries
//! (`compare`).

mod compare;
mod series;
mod summary;
mod text;

pub use compare::{markdown_table, side_by_side};
pub use series::{write_csv, Series};
pub use summary::{
    peak_rss_mb, percentile, recall_of, LookupSummary, Percentiles, Reference, Summary,
};
