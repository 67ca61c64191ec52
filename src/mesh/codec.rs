//! [`CountingCodec`]: the search and log protocols' CBOR codec (libp2p's
//! `request_response::cbor` codec, with the size bounds of [`super::wire`]
//! and [`super::log`]) wrapped so that every request and response it
//! writes or reads is counted, message and bytes, in [`MeshStats`]. The bytes are the CBOR
//! payload of each stream (what the codec moves), not noise or yamux
//! framing. Built by `behaviour.rs`; nothing else uses it.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use libp2p::futures::{AsyncRead, AsyncWrite};
use libp2p::request_response::{self, cbor};
use libp2p::StreamProtocol;

use super::log::{LogRequest, LogResponse, MAX_LOG_REQUEST_BYTES, MAX_LOG_RESPONSE_BYTES};
use super::stats::MeshStats;
use super::wire::{SearchRequest, SearchResponse, MAX_REQUEST_BYTES, MAX_RESPONSE_BYTES};

/// A CBOR codec, counting what it moves.
pub struct CountingCodec<Req, Resp> {
    inner: cbor::codec::Codec<Req, Resp>,
    stats: MeshStats,
    /// Which counters: [`MeshStats::search_wire`] or [`MeshStats::log_wire`].
    count: fn(&MeshStats, bool, u64),
}

impl<Req, Resp> Clone for CountingCodec<Req, Resp> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            stats: self.stats.clone(),
            count: self.count,
        }
    }
}

impl CountingCodec<SearchRequest, SearchResponse> {
    /// The codec the search behaviour runs: CBOR, a request at most
    /// [`MAX_REQUEST_BYTES`] and a response at most [`MAX_RESPONSE_BYTES`].
    pub(crate) fn bounded(stats: MeshStats) -> Self {
        let cbor = cbor::codec::Codec::default()
            .set_request_size_maximum(MAX_REQUEST_BYTES)
            .set_response_size_maximum(MAX_RESPONSE_BYTES);
        Self {
            inner: cbor,
            stats,
            count: MeshStats::search_wire,
        }
    }
}

impl CountingCodec<LogRequest, LogResponse> {
    /// The codec the log behaviour runs, within the log protocol's bounds.
    pub(crate) fn bounded_log(stats: MeshStats) -> Self {
        let cbor = cbor::codec::Codec::default()
            .set_request_size_maximum(MAX_LOG_REQUEST_BYTES)
            .set_response_size_maximum(MAX_LOG_RESPONSE_BYTES);
        Self {
            inner: cbor,
            stats,
            count: MeshStats::log_wire,
        }
    }
}

/// Reads `bytes` as one search stream's request, with the node's codec and
/// its bounds (the event loop then runs [`SearchRequest::check`]). For the
/// fuzz target `fuzz/fuzz_targets/mesh_wire.rs`.
///
/// # Errors
/// The codec's error: over the size bound, or not a request.
#[doc(hidden)]
pub fn read_request(bytes: &[u8]) -> io::Result<SearchRequest> {
    use request_response::Codec as _;
    let mut codec = CountingCodec::bounded(MeshStats::default());
    let p = StreamProtocol::new(super::SEARCH_PROTOCOL);
    let mut io = libp2p::futures::io::Cursor::new(bytes);
    now(codec.read_request(&p, &mut io))
}

/// Reads `bytes` as one search stream's response, as [`read_request`]
/// reads a request (the caller then runs [`SearchResponse::bound`]).
///
/// # Errors
/// The codec's error: over the size bound, or not a response.
#[doc(hidden)]
pub fn read_response(bytes: &[u8]) -> io::Result<SearchResponse> {
    use request_response::Codec as _;
    let mut codec = CountingCodec::bounded(MeshStats::default());
    let p = StreamProtocol::new(super::SEARCH_PROTOCOL);
    let mut io = libp2p::futures::io::Cursor::new(bytes);
    now(codec.read_response(&p, &mut io))
}

/// Runs a read from memory, which never waits, to its end.
fn now<T>(read: impl std::future::Future<Output = T>) -> T {
    let mut read = std::pin::pin!(read);
    match read
        .as_mut()
        .poll(&mut Context::from_waker(std::task::Waker::noop()))
    {
        Poll::Ready(out) => out,
        Poll::Pending => unreachable!("a read from an in-memory cursor never waits"),
    }
}

/// An I/O stream that counts the bytes read from or written to it.
struct Counted<'a, T> {
    io: &'a mut T,
    bytes: u64,
}

impl<'a, T> Counted<'a, T> {
    fn new(io: &'a mut T) -> Self {
        Self { io, bytes: 0 }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Counted<'_, T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let polled = Pin::new(&mut *this.io).poll_read(cx, buf);
        if let Poll::Ready(Ok(n)) = &polled {
            this.bytes += *n as u64;
        }
        polled
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Counted<'_, T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let polled = Pin::new(&mut *this.io).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = &polled {
            this.bytes += *n as u64;
        }
        polled
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.io).poll_flush(cx)
    }

    fn poll_close(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.io).poll_close(cx)
    }
}

impl<Req, Resp> request_response::Codec for CountingCodec<Req, Resp>
where
    Req: Send + serde::Serialize + serde::de::DeserializeOwned,
    Resp: Send + serde::Serialize + serde::de::DeserializeOwned,
{
    type Protocol = StreamProtocol;
    type Request = Req;
    type Response = Resp;

    async fn read_request<T>(&mut self, p: &Self::Protocol, io: &mut T) -> io::Result<Req>
    where
        T: AsyncRead + Unpin + Send,
    {
        let mut counted = Counted::new(io);
        let read = self.inner.read_request(p, &mut counted).await;
        (self.count)(&self.stats, false, counted.bytes);
        read
    }

    async fn read_response<T>(&mut self, p: &Self::Protocol, io: &mut T) -> io::Result<Resp>
    where
        T: AsyncRead + Unpin + Send,
    {
        let mut counted = Counted::new(io);
        let read = self.inner.read_response(p, &mut counted).await;
        (self.count)(&self.stats, false, counted.bytes);
        read
    }

    async fn write_request<T>(&mut self, p: &Self::Protocol, io: &mut T, req: Req) -> io::Result<()>
    where
        T: AsyncWrite + Unpin + Send,
    {
        let mut counted = Counted::new(io);
        let written = self.inner.write_request(p, &mut counted, req).await;
        (self.count)(&self.stats, true, counted.bytes);
        written
    }

    async fn write_response<T>(
        &mut self,
        p: &Self::Protocol,
        io: &mut T,
        res: Resp,
    ) -> io::Result<()>
    where
        T: AsyncWrite + Unpin + Send,
    {
        let mut counted = Counted::new(io);
        let written = self.inner.write_response(p, &mut counted, res).await;
        (self.count)(&self.stats, true, counted.bytes);
        written
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use libp2p::futures::io::Cursor;
    use libp2p::request_response::Codec as _;

    #[test]
    fn reads_from_memory_as_the_node_reads_a_stream_and_keeps_its_bounds() {
        let request = SearchRequest {
            capabilities: vec!["translation".into()],
            limit: 10,
            ..Default::default()
        };
        let mut bytes = Vec::new();
        ciborium::into_writer(&request, &mut bytes).unwrap();
        assert_eq!(read_request(&bytes).unwrap(), request);
        assert!(
            read_response(&bytes).is_err(),
            "a request is not a response"
        );
        let long = SearchRequest {
            query: Some("x".repeat(MAX_REQUEST_BYTES as usize)),
            ..request.clone()
        };
        let mut over = Vec::new();
        ciborium::into_writer(&long, &mut over).unwrap();
        assert!(read_request(&over).is_err(), "over the request bound");
        assert!(
            read_request(&bytes[..bytes.len() - 1]).is_err(),
            "cut short"
        );
    }

    #[tokio::test]
    async fn counts_what_it_writes_and_reads() {
        let stats = MeshStats::default();
        let mut codec = CountingCodec::bounded(stats.clone());
        let p = StreamProtocol::new(super::super::SEARCH_PROTOCOL);
        let request = SearchRequest {
            capabilities: vec!["translation".into()],
            limit: 10,
            ..Default::default()
        };
        let mut buf = Cursor::new(Vec::new());
        codec
            .write_request(&p, &mut buf, request.clone())
            .await
            .unwrap();
        let written = buf.get_ref().len() as u64;
        assert!(written > 0);
        buf.set_position(0);
        assert_eq!(codec.read_request(&p, &mut buf).await.unwrap(), request);
        let w = stats.snapshot().search_wire;
        assert_eq!((w.messages_sent, w.bytes_sent), (1, written));
        assert_eq!((w.messages_received, w.bytes_received), (1, written));
    }
}
