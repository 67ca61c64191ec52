//! `agentmesh verify` and `agentmesh crawl`: the crawler from the command
//! line.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use clap::Args;

use super::CrawlArgs;
use crate::config::Config;
use crate::crawl::{CrawlReport, Crawler, CrawlerOptions, StepOutcome};
use crate::identity;
use crate::issuer::Issuer;
use crate::trust::TrustLevel;

/// Flags of `verify`.
#[derive(Debug, Clone, Args)]
pub struct VerifyArgs {
    /// The agent's domain (or `agent:{domain}`).
    pub domain: String,
    /// Print one JSON object instead of the step table.
    #[arg(long)]
    pub json: bool,
    /// TOML config file (its [crawl] section applies).
    #[arg(long, env = "AGENTMESH_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// How the crawler connects (resolvers, trust roots, private targets).
    #[command(flatten)]
    pub crawl: CrawlArgs,
}

/// Flags of `crawl`.
#[derive(Debug, Clone, Args)]
pub struct CrawlCmdArgs {
    /// Domains to crawl.
    pub domains: Vec<String>,
    /// A file of domains, one per line (`#` starts a comment).
    #[arg(long, value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// Store crawled agents here (a node started on it serves them).
    #[arg(long, env = "AGENTMESH_DATA_DIR", value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Domains crawled at once.
    #[arg(long, default_value_t = 64)]
    pub concurrency: usize,
    /// Also crawl the verified peers that crawled agents list.
    #[arg(long)]
    pub follow_peers: bool,
    /// Most domains crawled in all (with --follow-peers).
    #[arg(long, default_value_t = 100_000)]
    pub max_domains: usize,
    /// Print one JSON report per line instead of the summary.
    #[arg(long)]
    pub json: bool,
    /// TOML config file.
    #[arg(long, env = "AGENTMESH_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// How the crawler connects (resolvers, trust roots, private targets).
    #[command(flatten)]
    pub crawl: CrawlArgs,
}

fn load_config(file: Option<&std::path::Path>, crawl: &CrawlArgs) -> anyhow::Result<Config> {
    let mut c = Config::load(file, std::env::vars())?;
    crawl.apply(&mut c);
    c.validate()?;
    Ok(c)
}

/// Runs `verify`: exit 0 at key-verified or better, 1 below, 2 for a
/// usage error.
///
/// # Errors
/// When the crawler cannot be set up.
pub(super) async fn verify(args: VerifyArgs) -> anyhow::Result<ExitCode> {
    let config = load_config(args.config.as_deref(), &args.crawl)?;
    if let Err(e) = crate::identity::normalise_domain(&args.domain) {
        eprintln!("error: {e}");
        return Ok(ExitCode::from(2));
    }
    // An ephemeral verifier identity: the proof names it, nothing is stored.
    let key = identity::generate();
    let verifier = crate::identity::peer_id_of(&key);
    let crawler = Crawler::new(
        CrawlerOptions::from_config(&config.crawl),
        Arc::new(key),
        verifier,
    )?;
    let report = crawler.verify_with_peers(&args.domain).await.report;
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).expect("a report always serialises")
        );
    } else {
        print_report(&report);
    }
    Ok(if report.level() >= TrustLevel::KeyVerified {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn print_report(r: &CrawlReport) {
    println!("verify {}", r.agent_id);
    for s in &r.steps {
        print_step(s, "  ");
    }
    let e = &r.trust.evidence;
    let yes = |b: bool| if b { "yes" } else { "no" };
    println!(
        "trust: {} (dnssec {}, fingerprint {}, challenge {}, mutual peer {})",
        r.trust.level,
        yes(e.dnssec),
        yes(e.fingerprint),
        yes(e.challenge),
        yes(e.mutual_peer)
    );
    if !r.reasons.is_empty() {
        let reasons: Vec<&str> = r.reasons.iter().map(|r| r.as_str()).collect();
        println!("reasons: {}", reasons.join(", "));
    }
    for check in &r.peer_checks {
        let mutual = if check.mutual {
            "mutual"
        } else if check.lists_back {
            "lists it back, not key-verified"
        } else {
            "does not list it back"
        };
        println!(
            "peer {} ({}, {mutual})",
            check.agent_id, check.report.trust.level
        );
        for s in &check.report.steps {
            print_step(s, "    ");
        }
    }
}

fn print_step(s: &crate::crawl::Step, indent: &str) {
    let mark = match s.outcome {
        StepOutcome::Ok => "ok  ",
        StepOutcome::Failed => "FAIL",
        StepOutcome::Skipped => "skip",
    };
    let reason = s.reason.map(|r| format!(" [{r}]")).unwrap_or_default();
    println!(
        "{indent}{mark} {:<12} {:>8.1} ms  {}{reason}",
        s.step, s.ms, s.detail
    );
}

fn read_domains(args: &CrawlCmdArgs) -> anyhow::Result<Vec<String>> {
    let mut domains = args.domains.clone();
    if let Some(path) = &args.file {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        domains.extend(
            text.lines()
                .map(|l| l.split('#').next().unwrap_or_default().trim())
                .filter(|l| !l.is_empty())
                .map(str::to_owned),
        );
    }
    Ok(domains)
}

/// Runs `crawl`: crawls, stores, prints a summary by level and reason.
///
/// # Errors
/// When the store or the crawler cannot be set up.
pub(super) async fn crawl(args: CrawlCmdArgs) -> anyhow::Result<ExitCode> {
    let mut config = load_config(args.config.as_deref(), &args.crawl)?;
    if let Some(d) = &args.data_dir {
        config.data_dir = d.clone();
    }
    let domains = read_domains(&args)?;
    if domains.is_empty() {
        eprintln!("error: no domains given (arguments or --file)");
        return Ok(ExitCode::from(2));
    }
    let (store, key) = super::open_data_dir(&config).await?;
    let verifier = crate::identity::peer_id_of(&key);
    let mut options = CrawlerOptions::from_config(&config.crawl);
    options.concurrency = args.concurrency.max(1);
    let key = Arc::new(key);
    // The same issuer as a node's: records get the configured lifetime.
    let issuer = Issuer::new(store, key.clone(), config.store.record_ttl);
    let crawler = Crawler::new(options, key, verifier)?;

    let asked = domains.len();
    let bar = indicatif::ProgressBar::new_spinner();
    if !std::io::stderr().is_terminal() || args.json {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    bar.set_style(
        indicatif::ProgressStyle::with_template(&format!(
            "{{spinner}} {{pos}} agents reported from {asked} domains and their peers, {{per_sec}}, {{elapsed}} {{msg}}"
        ))
        .expect("the progress template is valid"),
    );
    let started = std::time::Instant::now();
    let json = args.json;
    let reports = crawler
        .crawl_many(&issuer, domains, args.follow_peers, args.max_domains, |r| {
            bar.inc(1);
            if json {
                println!(
                    "{}",
                    serde_json::to_string(r).expect("a report always serialises")
                );
            }
        })
        .await;
    bar.finish_and_clear();
    let elapsed = started.elapsed();
    if !json {
        print_summary(&reports, asked, elapsed, &config.data_dir);
    }
    Ok(ExitCode::SUCCESS)
}

/// Above this many reports the summary leaves out the table of agents.
const MAX_AGENTS_LISTED: usize = 100;

fn print_summary(
    reports: &[CrawlReport],
    asked: usize,
    elapsed: std::time::Duration,
    data_dir: &std::path::Path,
) {
    let mut levels: BTreeMap<TrustLevel, usize> = BTreeMap::new();
    let mut reasons: BTreeMap<&str, usize> = BTreeMap::new();
    let mut formats: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for r in reports {
        *levels.entry(r.level()).or_default() += 1;
        if let Some(first) = r.reasons.first() {
            *reasons.entry(first.as_str()).or_default() += 1;
        }
        let f = formats.entry(r.source_format.as_str()).or_default();
        f.0 += 1;
        f.1 += usize::from(r.stored);
    }
    let stored = reports.iter().filter(|r| r.stored).count();
    println!(
        "crawled {asked} domains in {:.1} s: {} agents reported ({:.0}/s); {stored} records stored in {}",
        elapsed.as_secs_f64(),
        reports.len(),
        reports.len() as f64 / elapsed.as_secs_f64().max(1e-9),
        data_dir.display()
    );
    if reports.len() <= MAX_AGENTS_LISTED {
        println!(
            "
agents:"
        );
        for r in reports {
            let reason = r.reasons.first().map_or("", |r| r.as_str());
            println!(
                "  {:<48} {:<13} {:<14} {reason}",
                r.agent_id,
                r.source_format.as_str(),
                r.level().as_str()
            );
        }
    }
    println!(
        "
by source format (reported, stored):"
    );
    for (format, (n, kept)) in &formats {
        println!("  {format:<14} {n:>7} {kept:>7}");
    }
    println!("\nby trust level:");
    for (level, n) in &levels {
        println!("  {:<14} {n:>7}", level.as_str());
    }
    if !reasons.is_empty() {
        println!("\nby failure reason (first failure of each agent):");
        let mut sorted: Vec<_> = reasons.into_iter().collect();
        sorted.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        for (reason, n) in sorted {
            println!("  {reason:<24} {n:>7}");
        }
    }
}
