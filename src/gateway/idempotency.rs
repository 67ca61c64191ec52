//! `Idempotency-Key` for calls through the gateway: a client that
//! retries a call with the same key within `gateway.idempotency_window`
//! gets the first call's answer again instead of a second call. Keys are
//! kept per caller and agent (one client's key never answers another's
//! call), with a digest of the request body: the same key with another
//! body is refused (422), as is a retry while the first call still runs
//! (409).
//!
//! Kept in memory, bounded: at most [`MAX_KEYS`] keys and
//! [`MAX_BYTES`] of kept answers, the oldest forgotten first; an answer
//! larger than [`MAX_ANSWER_BYTES`] is remembered as having run, and a
//! retry of it is refused (409) rather than run twice. A restart forgets
//! every key.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use bytes::Bytes;
use sha2::{Digest as _, Sha256};
use tokio::time::Instant;

/// Most keys kept.
pub const MAX_KEYS: usize = 10_000;
/// Most bytes of answers kept, all keys together.
pub const MAX_BYTES: usize = 64 << 20;
/// Largest answer kept for a replay.
pub const MAX_ANSWER_BYTES: usize = 1 << 20;
/// Longest key accepted, characters.
pub const MAX_KEY_CHARS: usize = 255;

/// An answer as kept for a replay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kept {
    /// Its status.
    pub status: u16,
    /// Its headers worth replaying (content type, the gateway's own).
    pub headers: Vec<(String, String)>,
    /// Its body; `None` when it was too large to keep.
    pub body: Option<Bytes>,
}

/// What a call with a key is to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// Run the call (no call with this key ran), then [`Keys::done`].
    Run,
    /// Answer this, the first call's answer.
    Replay(Kept),
    /// Refuse: the first call with this key still runs.
    InFlight,
    /// Refuse: the key came with another body.
    Mismatch,
}

#[derive(Debug)]
enum State {
    Running,
    Done(Kept),
}

#[derive(Debug)]
struct Entry {
    digest: [u8; 32],
    at: Instant,
    state: State,
}

/// `(caller, agent, key)`.
type Slot = (String, String, String);

/// The keys kept.
#[derive(Debug)]
pub struct Keys {
    window: Duration,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    entries: HashMap<Slot, Entry>,
    /// Keys by arrival, oldest first (for expiry and eviction).
    order: VecDeque<(Slot, Instant)>,
    bytes: usize,
}

/// Whether `key` is an acceptable `Idempotency-Key`: 1 to
/// [`MAX_KEY_CHARS`] visible ASCII characters.
pub fn valid_key(key: &str) -> bool {
    !key.is_empty()
        && key.chars().count() <= MAX_KEY_CHARS
        && key.chars().all(|c| c.is_ascii_graphic() || c == ' ')
}

impl Keys {
    /// Keys kept for `window`.
    pub fn new(window: Duration) -> Self {
        Self {
            window,
            inner: Mutex::new(Inner::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// What a call of `caller` to `agent` with `key` and `body` is to do.
    pub fn claim(&self, caller: &str, agent: &str, key: &str, body: &[u8]) -> Claim {
        let now = Instant::now();
        let digest: [u8; 32] = Sha256::digest(body).into();
        let slot = (caller.to_owned(), agent.to_owned(), key.to_owned());
        let mut inner = self.lock();
        inner.expire(now, self.window);
        if let Some(entry) = inner.entries.get(&slot) {
            return match (&entry.state, entry.digest == digest) {
                (_, false) => Claim::Mismatch,
                (State::Running, true) => Claim::InFlight,
                (State::Done(kept), true) => Claim::Replay(kept.clone()),
            };
        }
        while inner.entries.len() >= MAX_KEYS {
            if !inner.evict_oldest() {
                break;
            }
        }
        inner.entries.insert(
            slot.clone(),
            Entry {
                digest,
                at: now,
                state: State::Running,
            },
        );
        inner.order.push_back((slot, now));
        Claim::Run
    }

    /// The call claimed with `key` ended with `kept`.
    pub fn done(&self, caller: &str, agent: &str, key: &str, mut kept: Kept) {
        if kept
            .body
            .as_ref()
            .is_some_and(|b| b.len() > MAX_ANSWER_BYTES)
        {
            kept.body = None;
        }
        let size = kept.body.as_ref().map_or(0, Bytes::len);
        let slot = (caller.to_owned(), agent.to_owned(), key.to_owned());
        let mut inner = self.lock();
        while inner.bytes + size > MAX_BYTES {
            if !inner.evict_oldest() {
                break;
            }
        }
        if let Some(entry) = inner.entries.get_mut(&slot) {
            entry.state = State::Done(kept);
            inner.bytes += size;
        }
    }

    /// The call claimed with `key` did not run (refused before it was
    /// sent): a retry may run it.
    pub fn forget(&self, caller: &str, agent: &str, key: &str) {
        let slot = (caller.to_owned(), agent.to_owned(), key.to_owned());
        let mut inner = self.lock();
        if let Some(e) = inner.entries.remove(&slot) {
            inner.bytes -= kept_size(&e);
        }
    }

    /// Keys kept now.
    pub fn len(&self) -> usize {
        self.lock().entries.len()
    }

    /// Whether no key is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn kept_size(e: &Entry) -> usize {
    match &e.state {
        State::Done(k) => k.body.as_ref().map_or(0, Bytes::len),
        State::Running => 0,
    }
}

impl Inner {
    /// Drops the keys older than `window`.
    fn expire(&mut self, now: Instant, window: Duration) {
        while let Some((slot, at)) = self.order.front().cloned() {
            if now.saturating_duration_since(at) < window {
                break;
            }
            self.order.pop_front();
            self.remove_if_at(&slot, at);
        }
    }

    /// Drops the oldest key; `false` when none is left.
    fn evict_oldest(&mut self) -> bool {
        match self.order.pop_front() {
            Some((slot, at)) => {
                self.remove_if_at(&slot, at);
                true
            }
            None => false,
        }
    }

    /// Removes `slot` if it is still the entry that arrived `at` (a key
    /// forgotten and claimed again has a newer arrival).
    fn remove_if_at(&mut self, slot: &Slot, at: Instant) {
        if self.entries.get(slot).is_some_and(|e| e.at == at) {
            if let Some(e) = self.entries.remove(slot) {
                self.bytes -= kept_size(&e);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(body: &str) -> Kept {
        Kept {
            status: 200,
            headers: vec![("content-type".into(), "application/json".into())],
            body: Some(Bytes::from(body.to_owned())),
        }
    }

    #[test]
    fn a_retry_replays_the_first_answer_and_nothing_else_does() {
        let keys = Keys::new(Duration::from_secs(60));
        assert_eq!(keys.claim("key:a", "agent", "k1", b"{}"), Claim::Run);
        assert_eq!(keys.claim("key:a", "agent", "k1", b"{}"), Claim::InFlight);
        keys.done("key:a", "agent", "k1", kept("1"));
        assert_eq!(
            keys.claim("key:a", "agent", "k1", b"{}"),
            Claim::Replay(kept("1"))
        );
        assert_eq!(
            keys.claim("key:a", "agent", "k1", b"{\"x\":1}"),
            Claim::Mismatch
        );
        // Another caller's key, another agent: their own.
        assert_eq!(keys.claim("key:b", "agent", "k1", b"{}"), Claim::Run);
        assert_eq!(keys.claim("key:a", "other", "k1", b"{}"), Claim::Run);
        // A call refused before it ran may be tried again.
        keys.forget("key:a", "other", "k1");
        assert_eq!(keys.claim("key:a", "other", "k1", b"{}"), Claim::Run);
    }

    #[test]
    fn keys_expire_after_the_window_and_large_answers_are_not_kept() {
        let keys = Keys::new(Duration::ZERO);
        assert_eq!(keys.claim("c", "a", "k", b""), Claim::Run);
        keys.done("c", "a", "k", kept("1"));
        assert_eq!(keys.claim("c", "a", "k", b""), Claim::Run, "expired");
        let keys = Keys::new(Duration::from_secs(60));
        assert_eq!(keys.claim("c", "a", "big", b""), Claim::Run);
        let mut big = kept("");
        big.body = Some(Bytes::from(vec![b' '; MAX_ANSWER_BYTES + 1]));
        keys.done("c", "a", "big", big);
        match keys.claim("c", "a", "big", b"") {
            Claim::Replay(k) => assert!(k.body.is_none()),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_table_is_bounded() {
        let keys = Keys::new(Duration::from_secs(600));
        for i in 0..(MAX_KEYS + 10) {
            assert_eq!(keys.claim("c", "a", &format!("k{i}"), b""), Claim::Run);
        }
        assert_eq!(keys.len(), MAX_KEYS);
        assert!(valid_key("retry-7f3a"));
        assert!(!valid_key(""));
        assert!(!valid_key("bad\nkey"));
        assert!(!valid_key(&"k".repeat(MAX_KEY_CHARS + 1)));
    }
}
