//! The crawler as a polite client: at most
//! `per_host_concurrency` requests to one host at a time, request starts
//! to one host paced to one per `per_host_interval` with a burst of
//! `per_host_burst`, a host's `Retry-After` honoured (nothing is asked of
//! it until it runs out), and a User-Agent that names agentmesh, its
//! version and, when configured, how to reach the operator.
//!
//! A host is the URL's host name, lowercased: every HTTPS GET (each
//! redirect hop too) and every challenge connection takes a
//! [`HostPermit`] first. Several names on one shared server are several
//! hosts; the rate is per name, as publishers see it in their logs.
//!
//! # The pace: a token bucket
//!
//! Starts are paced by the generic cell rate algorithm, a token bucket
//! kept as one instant: a host (or address) idle long enough may start
//! `burst` requests at once, and after that one per interval. A visit to
//! a domain in every format is several requests (the ADP document and
//! challenge, the A2A card, the ARD manifest, `robots.txt` and the home
//! page); with a burst they start as soon as the concurrency lets them,
//! where spacing each from the last made every visit wait over a second
//! and the ADP document wait behind the other formats. The sustained
//! rate is the interval's, whatever the burst; a burst of 1 spaces every
//! start.
//!
//! # Addresses
//!
//! The address is limited too, so that hostile peers cannot aim the
//! crawler at one address: a thousand names that all resolve to one
//! victim's address would otherwise each get a host's budget, and one
//! gossiped record could aim thousands of fetches at it. Each request is pinned to one checked
//! address ([`super::fetch`] and [`super::challenge`] try a host's
//! addresses one at a time), and its [`HostPermit`] holds a slot of that
//! address as well: at most `per_address_concurrency` requests in flight
//! to one address, their starts paced to one per `per_address_interval`
//! (with a burst of `per_address_burst`), whatever names they were asked
//! under. The address limits are their own knobs
//! (`crawl.per_address_*`), by default looser than a host's (4 at a time
//! and 10 starts a second, against 2 and 4): a shared hosting provider
//! serves many honest domains from one address, and a crawl of them
//! should not be paced as one host. Where both limits apply the tighter
//! one wins. IPv4-mapped IPv6 addresses count as their IPv4 address.
//!
//! A request takes its host's slot and waits for its host's pace first,
//! then takes its address's slot and waits for the address's pace:
//! always in that order, and never holding an address's slot while it
//! waits on its host, so neither two requests can each hold what the
//! other waits for, nor one host's pace hold up the other names on its
//! address. (A host's start is reserved before the address is waited
//! for; after a wait at the address, at most its concurrency of its
//! requests start closer together than its pace.) A host's
//! `Retry-After` holds that host only, never the other names on its
//! address. Idle hosts and addresses (nothing in flight or waiting, no
//! hold, unused for [`IDLE`]) are forgotten once [`MAX_ENTRIES`] of
//! either are remembered.

use std::collections::HashMap;
use std::hash::Hash;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use super::error::CrawlError;

/// The User-Agent of every request without an operator contact.
pub const USER_AGENT: &str = concat!(
    "agentmesh/",
    env!("CARGO_PKG_VERSION"),
    " (agent discovery crawler)"
);

/// Longest `Retry-After` honoured: a host that asks for more is asked
/// again after this.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(24 * 3600);

/// Hosts (and, apart, addresses) remembered before idle ones are
/// forgotten.
pub const MAX_ENTRIES: usize = 10_000;

/// How long a host or address with nothing in flight or waiting and no
/// hold is remembered.
pub const IDLE: Duration = Duration::from_secs(600);

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
    /// One request start to one host per this, sustained.
    pub per_host_interval: Duration,
    /// Request starts to one host that may come at once after it was
    /// idle (at least 1: every start spaced).
    pub per_host_burst: u32,
    /// Requests in flight to one IP address at once, whatever host names
    /// they were asked under (at least 1).
    pub per_address_concurrency: usize,
    /// One request start to one IP address per this, sustained.
    pub per_address_interval: Duration,
    /// Request starts to one IP address that may come at once after it
    /// was idle (at least 1).
    pub per_address_burst: u32,
}

impl Default for Politeness {
    /// Two at a time and four request starts a second per host, a visit
    /// of eight starting at once; four at a time and ten starts a second
    /// per address, sixteen at once.
    fn default() -> Self {
        Self {
            per_host_concurrency: 2,
            per_host_interval: Duration::from_millis(250),
            per_host_burst: 8,
            per_address_concurrency: 4,
            per_address_interval: Duration::from_millis(100),
            per_address_burst: 16,
        }
    }
}

/// One host's or one address's state.
#[derive(Debug)]
struct Slot {
    permits: Arc<Semaphore>,
    /// The bucket, as one instant (the cell rate algorithm's theoretical
    /// arrival time): a request may start once `burst - 1` intervals
    /// before it have passed.
    paced_to: Instant,
    /// Nothing is asked before this (a host's `Retry-After`; never set on
    /// an address).
    hold_until: Option<Instant>,
    last_used: Instant,
}

impl Slot {
    fn new(concurrency: usize, now: Instant) -> Self {
        Self {
            permits: Arc::new(Semaphore::new(concurrency)),
            paced_to: now,
            hold_until: None,
            last_used: now,
        }
    }

    /// Reserves a start at `now` or later under a pace of one per
    /// `interval` with a burst of `burst`, and returns it.
    fn reserve(&mut self, now: Instant, interval: Duration, burst: u32) -> Instant {
        let tolerance = interval.saturating_mul(burst.max(1) - 1);
        let start = self
            .paced_to
            .checked_sub(tolerance)
            .map_or(now, |earliest| earliest.max(now));
        self.paced_to = self.paced_to.max(now) + interval;
        self.last_used = start;
        start
    }

    /// Whether the slot can be forgotten: no request holds or waits for
    /// its semaphore (only the map has it), no hold, unused for [`IDLE`].
    fn idle(&self, now: Instant) -> bool {
        Arc::strong_count(&self.permits) == 1
            && self.hold_until.is_none_or(|t| t <= now)
            && now.duration_since(self.last_used) >= IDLE
    }
}

/// The slot of `key` in `map`, made with `concurrency` permits when new;
/// idle slots are dropped first when the map is full.
fn slot<'a, K: Eq + Hash + Clone>(
    map: &'a mut HashMap<K, Slot>,
    key: &K,
    concurrency: usize,
) -> &'a mut Slot {
    let now = Instant::now();
    if map.len() >= MAX_ENTRIES && !map.contains_key(key) {
        map.retain(|_, s| !s.idle(now));
    }
    map.entry(key.clone())
        .or_insert_with(|| Slot::new(concurrency, now))
}

#[derive(Debug, Default)]
struct State {
    hosts: HashMap<String, Slot>,
    addresses: HashMap<IpAddr, Slot>,
}

/// Per-host and per-address limits, shared by every fetch, probe and
/// challenge of a crawler. Cheap to clone.
#[derive(Debug, Clone)]
pub struct HostLimiter {
    state: Arc<Mutex<State>>,
    limits: Politeness,
}

/// A request slot to one host at one address; both free when it drops.
#[derive(Debug)]
pub struct HostPermit {
    _host: OwnedSemaphorePermit,
    _address: OwnedSemaphorePermit,
}

/// A host as the limiter keys it: lowercase, without a trailing dot.
fn host_key(host: &str) -> String {
    host.trim_end_matches('.').to_ascii_lowercase()
}

impl HostLimiter {
    /// A limiter keeping `limits`.
    pub fn new(limits: Politeness) -> Self {
        Self {
            state: Arc::default(),
            limits: Politeness {
                per_host_concurrency: limits.per_host_concurrency.max(1),
                per_host_burst: limits.per_host_burst.max(1),
                per_address_concurrency: limits.per_address_concurrency.max(1),
                per_address_burst: limits.per_address_burst.max(1),
                ..limits
            },
        }
    }

    /// The limits kept.
    pub fn limits(&self) -> Politeness {
        self.limits
    }

    /// Waits for a slot to `host` at the address `ip` the request is
    /// pinned to: the host's concurrency and pace, then the address's.
    ///
    /// # Errors
    /// [`CrawlError::HostBackoff`] while the host's `Retry-After` holds.
    pub async fn acquire(&self, host: &str, ip: IpAddr) -> Result<HostPermit, CrawlError> {
        let host = host_key(host);
        let ip = ip.to_canonical();
        let limits = self.limits;
        let host_permits = {
            let mut state = self.state.lock().expect("host limiter lock");
            check_hold(&mut state.hosts, &host)?;
            slot(&mut state.hosts, &host, limits.per_host_concurrency)
                .permits
                .clone()
        };
        // The fixed order: host, then address.
        let host_permit = host_permits
            .acquire_owned()
            .await
            .expect("the limiter never closes a semaphore");
        let host_start = {
            let mut state = self.state.lock().expect("host limiter lock");
            // A hold may have come while this request waited its turn.
            check_hold(&mut state.hosts, &host)?;
            slot(&mut state.hosts, &host, limits.per_host_concurrency).reserve(
                Instant::now(),
                limits.per_host_interval,
                limits.per_host_burst,
            )
        };
        tokio::time::sleep_until(host_start).await;
        let address_permits = {
            let mut state = self.state.lock().expect("host limiter lock");
            slot(&mut state.addresses, &ip, limits.per_address_concurrency)
                .permits
                .clone()
        };
        let address_permit = address_permits
            .acquire_owned()
            .await
            .expect("the limiter never closes a semaphore");
        let start = {
            let mut state = self.state.lock().expect("host limiter lock");
            check_hold(&mut state.hosts, &host)?;
            slot(&mut state.addresses, &ip, limits.per_address_concurrency).reserve(
                Instant::now(),
                limits.per_address_interval,
                limits.per_address_burst,
            )
        };
        tokio::time::sleep_until(start).await;
        Ok(HostPermit {
            _host: host_permit,
            _address: address_permit,
        })
    }

    /// Holds `host` for `retry_after` (at most [`MAX_RETRY_AFTER`]): until
    /// then [`HostLimiter::acquire`] refuses it, at any address. Other
    /// names on the same address are not held. Returns the time held.
    pub fn hold(&self, host: &str, retry_after: Duration) -> Duration {
        let held = retry_after.min(MAX_RETRY_AFTER);
        let host = host_key(host);
        let mut state = self.state.lock().expect("host limiter lock");
        let entry = slot(&mut state.hosts, &host, self.limits.per_host_concurrency);
        let until = Instant::now() + held;
        if entry.hold_until.is_none_or(|t| t < until) {
            entry.hold_until = Some(until);
        }
        held
    }

    /// What is left of `host`'s hold, if one holds.
    pub fn held(&self, host: &str) -> Option<Duration> {
        let host = host_key(host);
        let state = self.state.lock().expect("host limiter lock");
        let until = state.hosts.get(&host)?.hold_until?;
        until
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
    }

    /// How many hosts and how many addresses are remembered.
    pub fn remembered(&self) -> (usize, usize) {
        let state = self.state.lock().expect("host limiter lock");
        (state.hosts.len(), state.addresses.len())
    }
}

fn check_hold(hosts: &mut HashMap<String, Slot>, host: &str) -> Result<(), CrawlError> {
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

    const A: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 1));
    const B: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 2));

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
            per_host_burst: 1,
            per_address_concurrency: 64,
            per_address_interval: Duration::ZERO,
            per_address_burst: 1,
        });
        let t0 = Instant::now();
        let a = limiter.acquire("a.test", A).await.unwrap();
        let b = limiter.acquire("A.test.", A).await.unwrap();
        // Starts are a second apart.
        assert_eq!(Instant::now() - t0, Duration::from_secs(1));
        // A third waits for a slot, however long the rate would allow.
        let third = tokio::spawn({
            let limiter = limiter.clone();
            async move {
                let p = limiter.acquire("a.test", A).await.unwrap();
                (Instant::now(), p)
            }
        });
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert!(!third.is_finished(), "two are in flight");
        let other = Instant::now();
        let _c = limiter.acquire("b.test", B).await.unwrap();
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
        match limiter.acquire("a.test", A).await {
            Err(CrawlError::HostBackoff {
                host,
                retry_after_secs,
            }) => {
                assert_eq!(host, "a.test");
                assert_eq!(retry_after_secs, 30);
            }
            other => panic!("expected host_backoff, got {other:?}"),
        }
        // The hold is the host's: another name on its address is asked.
        assert!(limiter.acquire("b.test", A).await.is_ok());
        tokio::time::sleep(Duration::from_secs(31)).await;
        assert_eq!(limiter.held("a.test"), None);
        assert!(limiter.acquire("a.test", A).await.is_ok());
        // Longer than a day is held a day.
        assert_eq!(
            limiter.hold("a.test", Duration::from_secs(10 * 24 * 3600)),
            MAX_RETRY_AFTER
        );
    }

    /// Starts `hosts` requests to names `h{i}.test` all at `ip` (every
    /// other one written as its IPv4-mapped IPv6 form), each held for
    /// `hold`; returns the peak in flight and the starts, sorted.
    async fn many_names_at(
        limiter: &HostLimiter,
        hosts: usize,
        ip: IpAddr,
        hold: Duration,
    ) -> (usize, Vec<Instant>) {
        #[derive(Default)]
        struct Seen {
            in_flight: usize,
            peak: usize,
            starts: Vec<Instant>,
        }
        let seen = Arc::new(Mutex::new(Seen::default()));
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..hosts {
            let (limiter, seen) = (limiter.clone(), seen.clone());
            let ip = match ip {
                IpAddr::V4(v4) if i % 2 == 1 => IpAddr::V6(v4.to_ipv6_mapped()),
                other => other,
            };
            tasks.spawn(async move {
                let permit = limiter.acquire(&format!("h{i}.test"), ip).await.unwrap();
                {
                    let mut s = seen.lock().unwrap();
                    s.in_flight += 1;
                    s.peak = s.peak.max(s.in_flight);
                    s.starts.push(Instant::now());
                }
                tokio::time::sleep(hold).await;
                seen.lock().unwrap().in_flight -= 1;
                drop(permit);
            });
        }
        while let Some(done) = tasks.join_next().await {
            done.unwrap();
        }
        let mut s = std::mem::take(&mut *seen.lock().unwrap());
        s.starts.sort();
        (s.peak, s.starts)
    }

    #[tokio::test(start_paused = true)]
    async fn many_names_on_one_address_get_one_address_budget() {
        let limiter = HostLimiter::new(Politeness {
            per_host_concurrency: 2,
            per_host_interval: Duration::ZERO,
            per_host_burst: 1,
            per_address_concurrency: 3,
            per_address_interval: Duration::from_secs(1),
            per_address_burst: 1,
        });
        let t0 = Instant::now();
        let (peak, starts) = many_names_at(&limiter, 30, A, Duration::from_secs(5)).await;
        assert_eq!(starts.len(), 30);
        assert_eq!(peak, 3, "at most the address's concurrency in flight");
        for pair in starts.windows(2) {
            assert!(
                pair[1] - pair[0] >= Duration::from_secs(1),
                "starts to one address are spaced: {:?}",
                pair[1] - pair[0]
            );
        }
        // Three at a time, five seconds each: ten rounds.
        assert!(Instant::now() - t0 >= Duration::from_secs(50));
        assert_eq!(limiter.remembered(), (30, 1), "the mapped form is A");
    }

    #[tokio::test(start_paused = true)]
    async fn two_addresses_are_limited_apart() {
        let limiter = HostLimiter::new(Politeness {
            per_host_concurrency: 2,
            per_host_interval: Duration::ZERO,
            per_host_burst: 1,
            per_address_concurrency: 1,
            per_address_interval: Duration::from_secs(10),
            per_address_burst: 1,
        });
        let t0 = Instant::now();
        let at_a = limiter.acquire("a.test", A).await.unwrap();
        // Another address waits for nothing, whatever A holds.
        let at_b = limiter.acquire("b.test", B).await.unwrap();
        assert_eq!(Instant::now(), t0, "B is not held up by A");
        // A second name at A waits for A's one slot.
        let second = tokio::spawn({
            let limiter = limiter.clone();
            async move {
                let p = limiter.acquire("c.test", A).await.unwrap();
                (Instant::now(), p)
            }
        });
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert!(!second.is_finished(), "A's slot is taken");
        drop(at_a);
        let (started, p) = second.await.unwrap();
        assert_eq!(started - t0, Duration::from_secs(30));
        // Both addresses under the same load, side by side: each keeps
        // its own concurrency and spacing.
        drop(at_b);
        drop(p);
        let t1 = Instant::now();
        let (a, b) = tokio::join!(
            many_names_at(&limiter, 4, A, Duration::from_secs(1)),
            many_names_at(&limiter, 4, B, Duration::from_secs(1)),
        );
        for (peak, starts) in [a, b] {
            assert_eq!(peak, 1);
            assert_eq!(starts.len(), 4);
            // A's previous start was at 30 s: its next is 10 s later.
            assert_eq!(starts[3] - starts[0], Duration::from_secs(30));
            assert!(starts[0] - t1 <= Duration::from_secs(10));
        }
    }

    #[tokio::test(start_paused = true)]
    async fn idle_addresses_are_forgotten_and_busy_ones_kept() {
        let limiter = HostLimiter::new(Politeness {
            per_host_concurrency: 1,
            per_host_interval: Duration::ZERO,
            per_host_burst: 1,
            per_address_concurrency: 1,
            per_address_interval: Duration::ZERO,
            per_address_burst: 1,
        });
        let busy = limiter.acquire("busy.test", A).await.unwrap();
        for i in 1..MAX_ENTRIES as u32 {
            let ip = IpAddr::V4(std::net::Ipv4Addr::from(0x0a00_0000 + i));
            drop(limiter.acquire("h.test", ip).await.unwrap());
        }
        assert_eq!(limiter.remembered(), (2, MAX_ENTRIES));
        // Nothing is forgotten before it has been idle long enough.
        drop(limiter.acquire("h.test", B).await.unwrap());
        assert_eq!(limiter.remembered().1, MAX_ENTRIES + 1);
        tokio::time::sleep(IDLE).await;
        drop(
            limiter
                .acquire("h.test", "192.0.2.3".parse().unwrap())
                .await
                .unwrap(),
        );
        // The idle ones went; A, still in flight, stays.
        assert_eq!(limiter.remembered().1, 2);
        drop(busy);
        assert!(limiter.acquire("busy.test", A).await.is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_host_starts_its_burst_at_once_then_one_per_interval() {
        let limiter = HostLimiter::new(Politeness {
            per_host_concurrency: 64,
            per_host_interval: Duration::from_secs(1),
            per_host_burst: 4,
            per_address_concurrency: 64,
            per_address_interval: Duration::ZERO,
            per_address_burst: 1,
        });
        let t0 = Instant::now();
        let mut held = Vec::new();
        for _ in 0..4 {
            held.push(limiter.acquire("a.test", A).await.unwrap());
        }
        assert_eq!(Instant::now(), t0, "a burst of four waits for nothing");
        for n in 1..=3 {
            held.push(limiter.acquire("a.test", A).await.unwrap());
            assert_eq!(
                Instant::now() - t0,
                Duration::from_secs(n),
                "after the burst, one start per interval"
            );
        }
        // Idle for the time of a burst, the bucket is full again.
        tokio::time::sleep(Duration::from_secs(4)).await;
        let t1 = Instant::now();
        for _ in 0..4 {
            held.push(limiter.acquire("a.test", A).await.unwrap());
        }
        assert_eq!(Instant::now(), t1);
        // A burst of one spaces every start.
        let strict = HostLimiter::new(Politeness {
            per_host_burst: 1,
            per_host_interval: Duration::from_secs(1),
            per_address_interval: Duration::ZERO,
            ..Politeness::default()
        });
        let t2 = Instant::now();
        drop(strict.acquire("a.test", A).await.unwrap());
        drop(strict.acquire("a.test", A).await.unwrap());
        assert_eq!(Instant::now() - t2, Duration::from_secs(1));
    }

    #[tokio::test(start_paused = true)]
    async fn a_host_waiting_for_its_pace_does_not_hold_up_another_name_on_its_address() {
        // The address has room for both and no spacing of its own.
        let limiter = HostLimiter::new(Politeness {
            per_host_concurrency: 2,
            per_host_interval: Duration::from_secs(10),
            per_host_burst: 1,
            per_address_concurrency: 2,
            per_address_interval: Duration::ZERO,
            per_address_burst: 1,
        });
        let t0 = Instant::now();
        let first = limiter.acquire("slow.test", A).await.unwrap();
        drop(first);
        // slow.test's second request waits ten seconds for its pace...
        let paced = tokio::spawn({
            let limiter = limiter.clone();
            async move {
                let p = limiter.acquire("slow.test", A).await.unwrap();
                (Instant::now(), p)
            }
        });
        tokio::task::yield_now().await;
        // ...holding none of A's slots: two other names start now.
        let soon = Duration::from_secs(1);
        let b = tokio::time::timeout(soon, limiter.acquire("b.test", A)).await;
        let c = tokio::time::timeout(soon, limiter.acquire("c.test", A)).await;
        assert!(
            b.is_ok() && c.is_ok(),
            "other names at A wait for no host's pace"
        );
        assert_eq!(Instant::now(), t0);
        drop(b);
        let (started, _p) = paced.await.unwrap();
        assert_eq!(started - t0, Duration::from_secs(10));
    }
}
