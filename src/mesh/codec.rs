//! [`CountingCodec`]: the search protocol's CBOR codec (libp2p's
//! `request_response::cbor` codec, with the size bounds of [`super::wire`])
//! wrapped so that every request and response it writes or reads is
//! counted, message and bytes, in [`MeshStats`]. The bytes are the CBOR
//! payload of each stream (what the codec moves), not noise or yamux
//! framing. Built by `behaviour.rs`; nothing else uses it.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use libp2p::futures::{AsyncRead, AsyncWrite};
use libp2p::request_response::{self, cbor};
use libp2p::StreamProtocol;

use super::stats::MeshStats;
use super::wire::{SearchRequest, SearchResponse};

/// The CBOR search codec, counting what it moves.
#[derive(Clone)]
pub struct CountingCodec {
    inner: cbor::codec::Codec<SearchRequest, SearchResponse>,
    stats: MeshStats,
}

impl CountingCodec {
    /// Wraps `inner`; counts go to `stats`.
    pub(crate) fn new(
        inner: cbor::codec::Codec<SearchRequest, SearchResponse>,
        stats: MeshStats,
    ) -> Self {
        Self { inner, stats }
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

impl request_response::Codec for CountingCodec {
    type Protocol = StreamProtocol;
    type Request = SearchRequest;
    type Response = SearchResponse;

    async fn read_request<T>(&mut self, p: &Self::Protocol, io: &mut T) -> io::Result<SearchRequest>
    where
        T: AsyncRead + Unpin + Send,
    {
        let mut counted = Counted::new(io);
        let read = self.inner.read_request(p, &mut counted).await;
        self.stats.search_wire(false, counted.bytes);
        read
    }

    async fn read_response<T>(
        &mut self,
        p: &Self::Protocol,
        io: &mut T,
    ) -> io::Result<SearchResponse>
    where
        T: AsyncRead + Unpin + Send,
    {
        let mut counted = Counted::new(io);
        let read = self.inner.read_response(p, &mut counted).await;
        self.stats.search_wire(false, counted.bytes);
        read
    }

    async fn write_request<T>(
        &mut self,
        p: &Self::Protocol,
        io: &mut T,
        req: SearchRequest,
    ) -> io::Result<()>
    where
        T: AsyncWrite + Unpin + Send,
    {
        let mut counted = Counted::new(io);
        let written = self.inner.write_request(p, &mut counted, req).await;
        self.stats.search_wire(true, counted.bytes);
        written
    }

    async fn write_response<T>(
        &mut self,
        p: &Self::Protocol,
        io: &mut T,
        res: SearchResponse,
    ) -> io::Result<()>
    where
        T: AsyncWrite + Unpin + Send,
    {
        let mut counted = Counted::new(io);
        let written = self.inner.write_response(p, &mut counted, res).await;
        self.stats.search_wire(true, counted.bytes);
        written
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use libp2p::futures::io::Cursor;
    use libp2p::request_response::Codec as _;

    #[tokio::test]
    async fn counts_what_it_writes_and_reads() {
        let stats = MeshStats::default();
        let mut codec = CountingCodec::new(cbor::codec::Codec::default(), stats.clone());
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
