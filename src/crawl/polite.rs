//! The crawler as a polite client (issue 10 point 5): at most
//! `per_host_concurrency` requests to one host at a time, request starts
//! to one host at least `per_host_interval` apart, a host's `Retry-After`
//! honoured (nothing is asked of it until it runs out), and a User-Agent
//! that names agentmesh, its version and, when configured, how to reach
//! the operator.
//!
//! A host is the URL's host name, lowercased: every HTTPS GET (each
//! redirect hop too) and every challenge connection takes a
//! [`HostPermit`] first. Several names on one shared server are several
//! hosts; the rate is per name, as publishers see it in their logs.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use super::CrawlError;

/// The User-Agent of every request without an operator contact.
pub const USER_AGENT: &str = concat!(
    "agentmesh/",
    env!("CARGO_PKG_VERSION"),
    " (agent discovery crawler)"
);

/// Longest `Retry-After` honoured: a host that asks for more is asked
/// again after this.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(24 * 3600);

/// Hosts remembered before idle ones are forgotten.
const MAX_HOSTS: usize = 10_000;

/// How long a host with nothing in flight and no hold is remembered.
const IDLE: Duration = Duration::from_secs(600);

/// The User-Agent: [`USER_AGENT`], with `+contact` (a URL or mail
/// address the operator gives, `crawl.contact`) when there is one.
pub fn user_agent(contact: Option<&str>) -> String {
    match contact.map(str::trim).filter(|c| !c.is_empty()) {
        Some(c) => format!(
            "agentmesh/{} (agent discovery crawler; +{c})",
            env!("CARGO_PKG_VERSION")
        ),
        None => USER_AGENT.to_owned(),
    }
}

/// The limits a [`HostLimiter`] keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Politeness {
    /// Requests in flight to one host at once (at least 1).
    pub per_host_concurrency: usize,
    /// Least time between the starts of two requests to one host.
    pub per_host_interval: Duration,
}

impl Default for Politeness {
    /// Two at a time, four request starts a second per host.
    fn default() -> Self {
        Self {
            per_host_concurrency: 2,
            per_host_interval: Duration::from_millis(250),
        }
    }
}

/// One host's state.
#[derive(Debug)]
struct Host {
    permits: Arc<Semaphore>,
    /// When the next request may start.
    next_start: Instant,
    /// Nothing is asked before this (the host's `Retry-After`).
    hold_until: Option<Instant>,
    last_used: Instant,
}

/// Per-host limits, shared by every fetch and challenge of a crawler.
/// Cheap to clone.
#[derive(Debug, Clone)]
pub struct HostLimiter {
    hosts: Arc<Mutex<HashMap<String, Host>>>,
    limits: Politeness,
}

/// A request slot to one host; the slot frees when it drops.
#[derive(Debug)]
pub struct HostPermit {
    _permit: OwnedSemaphorePermit,
}

impl HostLimiter {
    /// A limiter keeping `limits`.
    pub fn new(limits: Politeness) -> Self {
        Self {
            hosts: Arc::default(),
            limits: Politeness {
                per_host_concurrency: limits.per_host_concurrency.max(1),
                ..limits
            },
        }
    }

    /// The limits kept.
    pub fn limits(&self) -> Politeness {
        self.limits
    }

    /// Waits for a slot to `host` (its concurrency, then its rate).
    ///
    /// # Errors
    /// [`CrawlError::HostBackoff`] while the host's `Retry-After` holds.
    pub async fn acquire(&self, host: &str) -> Result<HostPermit, CrawlError> {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        let permits = {
            let mut hosts = self.hosts.lock().expect("host limiter lock");
            self.check_hold(&mut hosts, &host)?;
            self.entry(&mut hosts, &host).permits.clone()
        };
        let permit = permits
            .acquire_owned()
            .await
            .expect("the limiter never closes a semaphore");
        let start = {
            let mut hosts = self.hosts.lock().expect("host limiter lock");
            // A hold may have come while this request waited its turn.
            self.check_hold(&mut hosts, &host)?;
            let entry = self.entry(&mut hosts, &host);
            let now = Instant::now();
            let start = entry.next_start.max(now);
            entry.next_start = start + self.limits.per_host_interval;
            entry.last_used = start;
            start
        };
        tokio::time::sleep_until(start).await;
        Ok(HostPermit { _permit: permit })
    }

    /// Holds `host` for `retry_after` (at most [`MAX_RETRY_AFTER`]): until
    /// then [`HostLimiter::acquire`] refuses it. Returns the time held.
    pub fn hold(&self, host: &str, retry_after: Duration) -> Duration {
        let held = retry_after.min(MAX_RETRY_AFTER);
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        let mut hosts = self.hosts.lock().expect("host limiter lock");
        let entry = self.entry(&mut hosts, &host);
        let until = Instant::now() + held;
        if entry.hold_until.is_none_or(|t| t < until) {
            entry.hold_until = Some(until);
        }
        held
    }

    /// What is left of `host`'s hold, if one holds.
    pub fn held(&self, host: &str) -> Option<Duration> {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        let hosts = self.hosts.lock().expect("host limiter lock");
        let until = hosts.get(&host)?.hold_until?;
        until
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
    }

    fn check_hold(&self, hosts: &mut HashMap<String, Host>, host: &str) -> Result<(), CrawlError> {
        let Some(entry) = hosts.get_mut(host) else {
            return Ok(());
        };
        let Some(until) = entry.hold_until else {
            return Ok(());
        };
        match until.checked_duration_since(Instant::now()) {
            Some(left) if !left.is_zero() => Err(CrawlError::HostBackoff {
                host: host.to_owned(),
                retry_after_secs: left.as_secs().max(1),
            }),
            _ => {
                entry.hold_until = None;
                Ok(())
            }
        }
    }

    fn entry<'a>(&self, hosts: &'a mut HashMap<String, Host>, host: &str) -> &'a mut Host {
        if hosts.len() >= MAX_HOSTS && !hosts.contains_key(host) {
            let now = Instant::now();
            let limit = self.limits.per_host_concurrency;
            hosts.retain(|_, h| {
                h.permits.available_permits() < limit
                    || h.hold_until.is_some_and(|t| t > now)
                    || now.duration_since(h.last_used) < IDLE
            });
        }
        let now = Instant::now();
        hosts.entry(host.to_owned()).or_insert_with(|| Host {
            permits: Arc::new(Semaphore::new(self.limits.per_host_concurrency)),
            next_start: now,
            hold_until: None,
            last_used: now,
        })
    }
}

/// A `Retry-After` value (RFC 9110 10.2.3): delay-seconds, or an
/// HTTP-date, as the time left from `now`. `None` for anything else.
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if !value.is_empty() && value.len() <= 10 && value.bytes().all(|b| b.is_ascii_digit()) {
        return value.parse::<u64>().ok().map(Duration::from_secs);
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_reads_seconds_and_dates_and_refuses_the_rest() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_480);
        assert_eq!(
            parse_retry_after("120", now),
            Some(Duration::from_secs(120))
        );
        assert_eq!(parse_retry_after(" 0 ", now), Some(Duration::ZERO));
        // 1445412480 is Wed, 21 Oct 2015 07:28:00 GMT.
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:30:00 GMT", now),
            Some(Duration::from_secs(120))
        );
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:00:00 GMT", now),
            Some(Duration::ZERO),
            "a date in the past means now"
        );
        for bad in ["", "-5", "1.5", "soon", "99999999999999999999"] {
            assert_eq!(parse_retry_after(bad, now), None, "{bad:?}");
        }
    }

    #[test]
    fn the_user_agent_names_agentmesh_its_version_and_the_contact() {
        let version = env!("CARGO_PKG_VERSION");
        assert_eq!(
            user_agent(None),
            format!("agentmesh/{version} (agent discovery crawler)")
        );
        assert_eq!(user_agent(Some("  ")), user_agent(None));
        assert_eq!(
            user_agent(Some("https://ops.example/crawler")),
            format!("agentmesh/{version} (agent discovery crawler; +https://ops.example/crawler)")
        );
    }

    #[tokio::test(start_paused = true)]
    async fn one_host_gets_its_concurrency_and_its_rate_and_another_host_is_not_held_up() {
        let limiter = HostLimiter::new(Politeness {
            per_host_concurrency: 2,
            per_host_interval: Duration::from_secs(1),
        });
        let t0 = Instant::now();
        let a = limiter.acquire("a.test").await.unwrap();
        let b = limiter.acquire("A.test.").await.unwrap();
        // Starts are a second apart.
        assert_eq!(Instant::now() - t0, Duration::from_secs(1));
        // A third waits for a slot, however long the rate would allow.
        let third = tokio::spawn({
            let limiter = limiter.clone();
            async move {
                let p = limiter.acquire("a.test").await.unwrap();
                (Instant::now(), p)
            }
        });
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert!(!third.is_finished(), "two are in flight");
        let other = Instant::now();
        let _c = limiter.acquire("b.test").await.unwrap();
        assert_eq!(Instant::now(), other, "another host waits for nothing");
        drop(a);
        let (started, _p) = third.await.unwrap();
        assert_eq!(started - t0, Duration::from_secs(6));
        drop(b);
    }

    #[tokio::test(start_paused = true)]
    async fn a_held_host_is_refused_until_its_retry_after_runs_out() {
        let limiter = HostLimiter::new(Politeness::default());
        assert_eq!(
            limiter.hold("a.test", Duration::from_secs(30)),
            Duration::from_secs(30)
        );
        match limiter.acquire("a.test").await {
            Err(CrawlError::HostBackoff {
                host,
                retry_after_secs,
            }) => {
                assert_eq!(host, "a.test");
                assert_eq!(retry_after_secs, 30);
            }
            other => panic!("expected host_backoff, got {other:?}"),
        }
        assert!(limiter.acquire("b.test").await.is_ok());
        tokio::time::sleep(Duration::from_secs(31)).await;
        assert_eq!(limiter.held("a.test"), None);
        assert!(limiter.acquire("a.test").await.is_ok());
        // Longer than a day is held a day.
        assert_eq!(
            limiter.hold("a.test", Duration::from_secs(10 * 24 * 3600)),
            MAX_RETRY_AFTER
        );
    }
}
