//! The crawler as a polite client: at most
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
//!
//! The address is limited too, so that hostile peers cannot aim the
//! crawler at one address: a thousand names that all resolve to one
//! victim's address would otherwise each get a host's budget, and one
//! gossiped record could aim thousands of fetches at it. Each request is pinned to one checked
//! address ([`super::fetch`] and [`super::challenge`] try a host's
//! addresses one at a time), and its [`HostPermit`] holds a slot of that
//! address as well: at most `per_address_concurrency` requests in flight
//! to one address, their starts `per_address_interval` apart, whatever
//! names they were asked under. The address limits are their own knobs
//! (`crawl.per_address_concurrency`, `crawl.per_address_interval`), by
//! default looser than a host's (4 at a time and 10 starts a second,
//! against 2 and 4): a shared hosting provider serves many honest
//! domains from one address, and a crawl of them should not be paced as
//! one host. Where both limits apply the tighter one wins. IPv4-mapped
//! IPv6 addresses count as their IPv4 address.
//!
//! A request takes its host's slot first, then its address's, always in
//! that order and never holding one address's slot while it waits for
//! another's, so two requests cannot each hold what the other waits for.
//! Its start is then put off until both the host's and the address's
//! spacing allow it, and both are advanced from that start. A host's
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
    /// Least time between the starts of two requests to one host.
    pub per_host_interval: Duration,
    /// Requests in flight to one IP address at once, whatever host names
    /// they were asked under (at least 1).
    pub per_address_concurrency: usize,
    /// Least time between the starts of two requests to one IP address.
    pub per_address_interval: Duration,
}

impl Default for Politeness {
    /// Two at a time and four request starts a second per host; four at a
    /// time and ten starts a second per address.
    fn default() -> Self {
        Self {
            per_host_concurrency: 2,
            per_host_interval: Duration::from_millis(250),
            per_address_concurrency: 4,
            per_address_interval: Duration::from_millis(100),
        }
    }
}

/// One host's or one address's state.
#[derive(Debug)]
struct Slot {
    permits: Arc<Semaphore>,
    /// When the next request may start.
    next_start: Instant,
    /// Nothing is asked before this (a host's `Retry-After`; never set on
    /// an address).
    hold_until: Option<Instant>,
    last_used: Instant,
}

impl Slot {
    fn new(concurrency: usize, now: Instant) -> Self {
        Self {
            permits: Arc::new(Semaphore::new(concurrency)),
            next_start: now,
            hold_until: None,
            last_used: now,
        }
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
                per_address_concurrency: limits.per_address_concurrency.max(1),
                ..limits
            },
        }
    }

    /// The limits kept.
    pub fn limits(&self) -> Politeness {
        self.limits
    }

    /// Waits for a slot to `host` at the address `ip` the request is
    /// pinned to: the host's concurrency, then the address's, then the
    /// later of the two spacings.
    ///
    /// # Errors
    /// [`CrawlError::HostBackoff`] while the host's `Retry-After` holds.
    pub async fn acquire(&self, host: &str, ip: IpAddr) -> Result<HostPermit, CrawlError> {
        let host = host_key(host);
        let ip = ip.to_canonical();
        let limits = self.limits;
        let (host_permits, address_permits) = {
            let mut state = self.state.lock().expect("host limiter lock");
            check_hold(&mut state.hosts, &host)?;
            let h = slot(&mut state.hosts, &host, limits.per_host_concurrency)
                .permits
                .clone();
            let a = slot(&mut state.addresses, &ip, limits.per_address_concurrency)
                .permits
                .clone();
            (h, a)
        };
        // The fixed order: host, then address.
        let host_permit = host_permits
            .acquire_owned()
            .await
            .expect("the limiter never closes a semaphore");
        let address_permit = address_permits
            .acquire_owned()
            .await
            .expect("the limiter never closes a semaphore");
        let start = {
            let mut state = self.state.lock().expect("host limiter lock");
            // A hold may have come while this request waited its turn.
            check_hold(&mut state.hosts, &host)?;
            let now = Instant::now();
            let h_next = slot(&mut state.hosts, &host, limits.per_host_concurrency).next_start;
            let a_next = slot(&mut state.addresses, &ip, limits.per_address_concurrency).next_start;
            let start = now.max(h_next).max(a_next);
            let h = slot(&mut state.hosts, &host, limits.per_host_concurrency);
            h.next_start = start + limits.per_host_interval;
            h.last_used = start;
            let a = slot(&mut state.addresses, &ip, limits.per_address_concurrency);
            a.next_start = start + limits.per_address_interval;
            a.last_used = start;
            start
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
            per_address_concurrency: 64,
            per_address_interval: Duration::ZERO,
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
            per_address_concurrency: 3,
            per_address_interval: Duration::from_secs(1),
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
            per_address_concurrency: 1,
            per_address_interval: Duration::from_secs(10),
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
            per_address_concurrency: 1,
            per_address_interval: Duration::ZERO,
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
}
