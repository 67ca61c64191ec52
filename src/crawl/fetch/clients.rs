//! The fetcher's HTTPS clients, one per host, port and address, kept a
//! while so that the documents of one domain (ADP's, the A2A card, the
//! ARD catalog, JWKS, ...) ride one TLS connection instead of a handshake
//! each. Each client stays pinned to its one checked address (its
//! resolver refuses every other name), so sharing it changes nothing the
//! address policy decided; it keeps as many idle connections as
//! requests may be in flight to one host (`crawl.per_host_concurrency`),
//! for [`IDLE`]. Two fetches of a host that ask for its client at once
//! get the same one.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long an idle connection is kept for the next fetch of its host.
pub(super) const IDLE: Duration = Duration::from_secs(5);
/// Most clients kept (the least recently used goes first).
pub(super) const MAX_CLIENTS: usize = 256;

/// A client's key: the host it is for, the port and the one address.
type Key = (String, u16, IpAddr);

/// The clients kept, with when each was last handed out.
#[derive(Debug, Default)]
pub(super) struct Clients {
    held: Mutex<HashMap<Key, (reqwest::Client, Instant)>>,
}

impl Clients {
    /// The client for `host`, `port` and `ip`: the one kept, else one
    /// `make` builds, kept from now on.
    ///
    /// # Errors
    /// What `make` fails with.
    pub(super) fn get<E>(
        &self,
        (host, port, ip): (&str, u16, IpAddr),
        make: impl FnOnce() -> Result<reqwest::Client, E>,
    ) -> Result<reqwest::Client, E> {
        let now = Instant::now();
        let key = (host.to_owned(), port, ip);
        {
            let mut held = self.lock();
            if let Some((client, used)) = held.get_mut(&key) {
                *used = now;
                return Ok(client.clone());
            }
        }
        let client = make()?;
        let mut held = self.lock();
        // Another fetch of the host made one meanwhile (a domain's first
        // documents are asked at once): theirs is kept and shared.
        if let Some((kept, used)) = held.get_mut(&key) {
            *used = now;
            return Ok(kept.clone());
        }
        // Clients unused for longer than their idle connections live hold
        // nothing worth keeping; then the least recently used.
        held.retain(|_, (_, used)| now.duration_since(*used) < IDLE * 2);
        if held.len() >= MAX_CLIENTS {
            if let Some(oldest) = held.iter().min_by_key(|(_, (_, used))| *used) {
                let oldest = oldest.0.clone();
                held.remove(&oldest);
            }
        }
        held.insert(key, (client.clone(), now));
        Ok(client)
    }

    /// How many clients are kept.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, (reqwest::Client, Instant)>> {
        self.held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
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
        clients.get(("a.test", 443, ip), make).unwrap();
        clients.get(("a.test", 443, ip), make).unwrap();
        assert_eq!(made.get(), 1);
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
}
