//! The fetcher's HTTPS clients, one per host, port and address, kept a
//! while so that the documents of one domain (ADP's, the A2A card, the
//! ARD catalog, JWKS, ...) ride one TLS connection instead of a handshake
//! each. Each client stays pinned to its one checked address (its
//! resolver refuses every other name), so sharing it changes nothing the
//! address policy decided; it keeps as many idle connections as
//! requests may be in flight to one host (`crawl.per_host_concurrency`),
//! for [`IDLE`]. Two fetches of a host that ask for its client at once
//! get the same one.
//!
//! A new client's first request goes alone ([`Shared::opening`]): the
//! others wait for it, so the TLS session its handshake got is there to
//! resume when a second connection opens, instead of two full handshakes
//! (a server signature and a certificate chain checked each) started at
//! the same moment.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedRwLockWriteGuard, RwLock};

/// How long an idle connection is kept for the next fetch of its host.
pub(super) const IDLE: Duration = Duration::from_secs(5);
/// Most clients kept (the least recently used goes first).
pub(super) const MAX_CLIENTS: usize = 256;

/// A client's key: the host it is for, the port and the one address.
type Key = (String, u16, IpAddr);

/// A client kept: when it was last handed out, and its first request's
/// gate (held for writing while that request runs).
#[derive(Debug)]
struct Kept {
    client: reqwest::Client,
    used: Instant,
    opened: Arc<RwLock<()>>,
}

/// The client handed out, with what its first request holds.
#[derive(Debug)]
pub(super) struct Shared {
    /// The host's client.
    pub(super) client: reqwest::Client,
    /// For the fetch that made the client: held while its first request
    /// runs.
    pub(super) opening: Option<OwnedRwLockWriteGuard<()>>,
    opened: Arc<RwLock<()>>,
}

impl Shared {
    /// Waits until the client's first request is done (at once for that
    /// request itself, and for every one after it).
    pub(super) async fn opened(&self) {
        if self.opening.is_none() {
            drop(self.opened.read().await);
        }
    }
}

/// The clients kept.
#[derive(Debug, Default)]
pub(super) struct Clients {
    held: Mutex<HashMap<Key, Kept>>,
}

impl Clients {
    /// The client for `host`, `port` and `ip`: the one kept, else one
    /// `make` builds, kept from now on (and then [`Shared::opening`] is
    /// the caller's).
    ///
    /// # Errors
    /// What `make` fails with.
    pub(super) fn get<E>(
        &self,
        (host, port, ip): (&str, u16, IpAddr),
        make: impl FnOnce() -> Result<reqwest::Client, E>,
    ) -> Result<Shared, E> {
        let now = Instant::now();
        let key = (host.to_owned(), port, ip);
        if let Some(kept) = self.lock().get_mut(&key) {
            return Ok(kept.hand_out(now));
        }
        let client = make()?;
        let mut held = self.lock();
        // Another fetch of the host made one meanwhile (a domain's first
        // documents are asked at once): theirs is kept and shared.
        if let Some(kept) = held.get_mut(&key) {
            return Ok(kept.hand_out(now));
        }
        // Clients unused for longer than their idle connections live hold
        // nothing worth keeping; then the least recently used.
        held.retain(|_, kept| now.duration_since(kept.used) < IDLE * 2);
        if held.len() >= MAX_CLIENTS {
            if let Some(oldest) = held.iter().min_by_key(|(_, kept)| kept.used) {
                let oldest = oldest.0.clone();
                held.remove(&oldest);
            }
        }
        let opened = Arc::new(RwLock::new(()));
        let opening = opened
            .clone()
            .try_write_owned()
            .expect("a new lock is free");
        held.insert(
            key,
            Kept {
                client: client.clone(),
                used: now,
                opened: opened.clone(),
            },
        );
        Ok(Shared {
            client,
            opening: Some(opening),
            opened,
        })
    }

    /// How many clients are kept.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Kept>> {
        self.held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Kept {
    fn hand_out(&mut self, now: Instant) -> Shared {
        self.used = now;
        Shared {
            client: self.client.clone(),
            opening: None,
            opened: self.opened.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The client of a host, port and address is made once and handed
    /// out again; another key gets its own; past [`MAX_CLIENTS`] the
    /// least recently used goes, so the table never grows beyond it.
    #[test]
    fn a_client_is_made_once_per_key_and_the_table_is_bounded() {
        let clients = Clients::default();
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        let made = std::cell::Cell::new(0);
        let make = || -> Result<reqwest::Client, ()> {
            made.set(made.get() + 1);
            Ok(reqwest::Client::new())
        };
        let first = clients.get(("a.test", 443, ip), make).unwrap();
        let again = clients.get(("a.test", 443, ip), make).unwrap();
        assert_eq!(made.get(), 1);
        assert!(first.opening.is_some(), "the maker's first request opens");
        assert!(again.opening.is_none());
        drop((first, again));
        clients.get(("a.test", 8443, ip), make).unwrap();
        clients.get(("b.test", 443, ip), make).unwrap();
        assert_eq!(made.get(), 3);
        for i in 0..MAX_CLIENTS + 8 {
            clients.get((&format!("h{i}.test"), 443, ip), make).unwrap();
        }
        assert_eq!(clients.len(), MAX_CLIENTS);
        // Two that ask at once share the first one kept: the second
        // made is dropped.
        let before = made.get();
        let second = clients.get(("d.test", 443, ip), || {
            clients.get(("d.test", 443, ip), make)?;
            make()
        });
        assert!(second.is_ok());
        assert_eq!(made.get(), before + 2, "made twice");
        clients.get(("d.test", 443, ip), make).unwrap();
        assert_eq!(made.get(), before + 2, "and one kept");
        assert_eq!(clients.len(), MAX_CLIENTS);
        // A failure to make one keeps nothing.
        let failed = clients.get(("c.test", 443, ip), || Err::<reqwest::Client, _>("no"));
        assert_eq!(failed.unwrap_err(), "no");
    }

    /// The fetches after a new client's first wait for it to be done,
    /// and then for nothing.
    #[tokio::test(start_paused = true)]
    async fn a_new_clients_first_request_goes_alone() {
        let clients = Clients::default();
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        let make = || Ok::<_, ()>(reqwest::Client::new());
        let first = clients.get(("a.test", 443, ip), make).unwrap();
        let second = clients.get(("a.test", 443, ip), make).unwrap();
        let soon = Duration::from_secs(1);
        first.opened().await;
        assert!(
            tokio::time::timeout(soon, second.opened()).await.is_err(),
            "the second waits while the first runs"
        );
        drop(first);
        assert!(tokio::time::timeout(soon, second.opened()).await.is_ok());
        let third = clients.get(("a.test", 443, ip), make).unwrap();
        assert!(tokio::time::timeout(soon, third.opened()).await.is_ok());
    }
}
