//! The node's crawl queue: an actor that owns a [`Crawler`] and the store
//! handle, and crawls the domains it is sent in order of arrival (each
//! job's domains concurrently). [`CrawlQueue`] is the cheap, cloneable
//! handle: `POST /crawl` and the configured seeds talk to it.

use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::scheduler::Scheduler;
use super::{CrawlReport, Crawler};
use crate::issuer::Issuer;
use crate::metrics::Metrics;

/// A job: domains, and where to send the reports if the caller waits.
struct Job {
    domains: Vec<String>,
    /// Follow the crawled agents' peers (as configured), or not (a
    /// re-verification the mesh asked for never does).
    follow: bool,
    reply: Option<oneshot::Sender<Vec<CrawlReport>>>,
}

/// Errors from the queue handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum QueueError {
    /// The queue holds as many jobs as it may; try later.
    #[error("the crawl queue is full")]
    Full,
    /// The node is shutting down.
    #[error("the crawler has stopped")]
    Stopped,
}

/// Handle to the crawl queue. Cheap to clone.
#[derive(Debug, Clone)]
pub struct CrawlQueue {
    tx: mpsc::Sender<Job>,
    scheduler: Option<Scheduler>,
}

/// What the queue holds now (`GET /health`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct QueueStatus {
    /// Jobs waiting to start (a job is the domains of one request, the
    /// seeds or a revisit round; the one running is not counted).
    pub jobs_waiting: usize,
    /// Most jobs that may wait.
    pub capacity: usize,
    /// The recrawl schedule, when the node recrawls.
    pub schedule: Option<super::scheduler::ScheduleCounts>,
}

/// How the queue runs jobs.
#[derive(Debug, Clone, Copy)]
pub struct QueueOptions {
    /// Jobs that may wait.
    pub capacity: usize,
    /// Follow verified peers listed by crawled agents.
    pub follow_peers: bool,
    /// Most domains one job may grow to with peers.
    pub max_domains_per_job: usize,
}

impl CrawlQueue {
    /// Starts the actor; it stops when `cancel` fires or every handle is
    /// dropped. Each report and each job's duration go to `metrics`.
    pub fn spawn(
        crawler: Crawler,
        issuer: Issuer,
        options: QueueOptions,
        scheduler: Option<Scheduler>,
        metrics: Metrics,
        cancel: CancellationToken,
    ) -> (Self, tokio::task::JoinHandle<()>) {
        let (tx, mut rx) = mpsc::channel::<Job>(options.capacity.max(1));
        let handle = Self {
            tx,
            scheduler: scheduler.clone(),
        };
        let task = tokio::spawn(
            async move {
                loop {
                    let job = tokio::select! {
                        () = cancel.cancelled() => break,
                        job = rx.recv() => match job {
                            Some(job) => job,
                            None => break,
                        },
                    };
                    let count = job.domains.len();
                    let started = std::time::Instant::now();
                    let reports = tokio::select! {
                        () = cancel.cancelled() => break,
                        reports = crawler.crawl_many(&issuer, job.domains, options.follow_peers && job.follow, options.max_domains_per_job.max(count), |r| metrics.crawled(r.stored, &r.reasons)) => reports,
                    };
                    metrics.crawl_job_done(started.elapsed());
                    tracing::info!(requested = count, crawled = reports.len(), stored = reports.iter().filter(|r| r.stored).count(), "crawl job done");
                    if let Some(scheduler) = &scheduler {
                        schedule(scheduler, &reports).await;
                    }
                    if let Some(reply) = job.reply {
                        let _ = reply.send(reports);
                    }
                }
                tracing::debug!("crawl queue stopped");
            }
            .instrument(tracing::info_span!("crawl_queue")),
        );
        (handle, task)
    }

    /// When `domain` is visited next and what the last visits found, when
    /// the node recrawls.
    pub fn schedule(&self, domain: &str) -> Option<super::scheduler::DomainState> {
        self.scheduler.as_ref()?.state(domain)
    }

    /// The jobs waiting and the recrawl schedule's counts.
    pub fn status(&self) -> QueueStatus {
        QueueStatus {
            jobs_waiting: self.tx.max_capacity() - self.tx.capacity(),
            capacity: self.tx.max_capacity(),
            schedule: self.scheduler.as_ref().map(Scheduler::counts),
        }
    }

    /// Queues `domains` and returns at once.
    ///
    /// # Errors
    /// [`QueueError::Full`] or [`QueueError::Stopped`].
    pub fn enqueue(&self, domains: Vec<String>) -> Result<(), QueueError> {
        self.send(Job {
            domains,
            follow: true,
            reply: None,
        })
    }

    /// Queues one domain to crawl without following its agents' peers
    /// (a re-verification) and returns at once.
    ///
    /// # Errors
    /// [`QueueError::Full`] or [`QueueError::Stopped`].
    pub fn enqueue_one(&self, domain: String) -> Result<(), QueueError> {
        self.send(Job {
            domains: vec![domain],
            follow: false,
            reply: None,
        })
    }

    fn send(&self, job: Job) -> Result<(), QueueError> {
        self.tx.try_send(job).map_err(|e| match e {
            mpsc::error::TrySendError::Full(_) => QueueError::Full,
            mpsc::error::TrySendError::Closed(_) => QueueError::Stopped,
        })
    }

    /// Queues `domains` and waits for their reports.
    ///
    /// # Errors
    /// [`QueueError::Full`] or [`QueueError::Stopped`].
    pub async fn crawl(&self, domains: Vec<String>) -> Result<Vec<CrawlReport>, QueueError> {
        let (reply, rx) = oneshot::channel();
        self.send(Job {
            domains,
            follow: true,
            reply: Some(reply),
        })?;
        rx.await.map_err(|_| QueueError::Stopped)
    }
}

/// Hands a job's reports to the recrawl scheduler, domain by domain.
async fn schedule(scheduler: &Scheduler, reports: &[CrawlReport]) {
    let mut by_domain: std::collections::BTreeMap<&str, Vec<CrawlReport>> =
        std::collections::BTreeMap::new();
    for r in reports {
        by_domain.entry(&r.domain).or_default().push(r.clone());
    }
    for (domain, reports) in by_domain {
        if let Err(e) = scheduler.observe(domain, &reports).await {
            tracing::warn!(domain, error = %e, "could not schedule the next visit");
        }
    }
}
