//! The connection loop. axum's own `serve` has no header-read timeout, so
//! pad drives hyper directly, and bounds what one connection can hold
//! (docs/api.md, "Limits"):
//!
//! - a request must be answered within the request deadline, counted from
//!   its first byte: headers, body and handler together. A client that
//!   trickles its headers or its body (slow loris) is answered 503 and
//!   disconnected; an event stream is exempt once its headers are sent;
//! - at most `max_connections` connections are served at once; past that a
//!   new connection gets a 503 and is closed, so the process never runs out
//!   of file descriptors and answers again as soon as the flood ends;
//! - a client that stops reading its answer is reset once the answer has
//!   made no progress for the request deadline ([`Timed`]), so a slow
//!   reader cannot make the server hold answers for ever;
//! - oversized headers are refused with 431;
//! - shutdown drains in-flight requests before returning.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::http::{HeaderValue, header};
use axum::response::IntoResponse;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use pad_core::api::ErrorCode;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tower::ServiceExt;

use pad_store::Deadline;

use crate::error::ApiError;
use crate::limits::ConnectionLimits;

/// A client gets at most this long to send a request's headers (less when
/// the request deadline is shorter).
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Request line plus headers; larger ones are refused with 431.
pub const MAX_HEADER_BYTES: usize = 64 * 1024;
/// How long shutdown waits for in-flight requests.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(20);
/// Connections being refused at once (each is given a moment to read its
/// 503); past this, refused connections are simply closed.
const REFUSING_MAX: usize = 64;

pub async fn serve_connections(
    listener: TcpListener, app: Router, limits: ConnectionLimits, shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let graceful = GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT.min(limits.request_timeout))
        // `max_buf_size` alone lets a request whose headers arrive in one
        // read exceed it; `max_header_size` checks what was parsed.
        .max_header_size(MAX_HEADER_BYTES)
        .max_buf_size(MAX_HEADER_BYTES);
    let max_connections = limits.effective_max_connections();
    let open = Arc::new(Semaphore::new(max_connections));
    let refusing = Arc::new(Semaphore::new(REFUSING_MAX));
    let busy = busy_response(max_connections);
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        // Out of file descriptors and the like: back off, keep serving.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let Ok(permit) = open.clone().try_acquire_owned() else {
                    refuse(stream, &busy, &refusing);
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let clock = Arc::new(RequestClock::default());
                let io = TokioIo::new(Timed::new(stream, clock.clone(), limits.request_timeout));
                let service = deadline_service(app.clone(), clock, limits.request_timeout, peer.ip());
                let conn = http.serve_connection(io, service);
                let conn = graceful.watch(conn);
                tokio::spawn(async move {
                    let _permit = permit;
                    if let Err(e) = conn.await {
                        tracing::debug!(error = %e, "connection ended with an error");
                    }
                });
            }
            () = &mut shutdown => break,
        }
    }
    drop(listener);
    if tokio::time::timeout(DRAIN_TIMEOUT, graceful.shutdown()).await.is_err() {
        tracing::warn!("shutdown: some connections were still busy after {DRAIN_TIMEOUT:?}");
    }
    Ok(())
}

/// The address of the connection a request came on (its peer; no
/// forwarding header is trusted), for the limits on requests that name no
/// user (docs/api.md, "Limits"). `None` for a request that came through no
/// listener (the router driven directly).
#[derive(Debug, Clone, Copy)]
pub struct ClientIp(pub Option<std::net::IpAddr>);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for ClientIp {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut axum::http::request::Parts, _: &S) -> Result<Self, Infallible> {
        Ok(parts.extensions.get::<ClientIp>().copied().unwrap_or(ClientIp(None)))
    }
}

/// When the request being read began (its first byte), or `None` between
/// requests. Set by [`Timed`], taken by [`deadline_service`].
#[derive(Default)]
struct RequestClock(Mutex<Option<Instant>>);

impl RequestClock {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Instant>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The app, answering 503 `unavailable` (and closing the connection) when a
/// request is not answered by its deadline. Only producing the response is
/// bounded, so an event stream runs on once its headers are sent. The
/// deadline reaches handlers as a request extension ([`Deadline`]): a handler
/// that claimed its commit before the deadline is waited for and answers
/// itself, so a 503 never hides a commit (docs/api.md, "Import").
fn deadline_service(
    app: Router, clock: Arc<RequestClock>, limit: Duration, peer: std::net::IpAddr,
) -> impl hyper::service::Service<
    hyper::Request<hyper::body::Incoming>,
    Response = axum::response::Response,
    Error = Infallible,
    Future = impl Future<Output = Result<axum::response::Response, Infallible>> + Send,
> + Clone {
    hyper::service::service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
        let app = app.clone();
        let clock = clock.clone();
        async move {
            let started = clock.lock().take().unwrap_or_else(Instant::now);
            let shared = Deadline::at(started + limit);
            req.extensions_mut().insert(shared.clone());
            req.extensions_mut().insert(ClientIp(Some(peer)));
            let deadline = tokio::time::Instant::from_std(started + limit);
            let mut handler = std::pin::pin!(app.oneshot(req));
            let answered = match tokio::time::timeout_at(deadline, handler.as_mut()).await {
                Ok(answered) => Ok(answered),
                // A commit claimed in time: its answer is the truth.
                Err(_) if !shared.expire() => Ok(handler.await),
                Err(late) => Err(late),
            };
            let resp = match answered {
                Ok(Ok(resp)) => resp,
                Ok(Err(never)) => match never {},
                Err(_) => {
                    tracing::info!(limit = ?limit, "request not completed before its deadline; closing the connection");
                    let mut resp = ApiError::new(
                        ErrorCode::Unavailable,
                        format!(
                            "the request was not completed within {} s (its body arrived too slowly, or the server is overloaded)",
                            limit.as_secs_f64()
                        ),
                    )
                    .into_response();
                    resp.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
                    resp
                }
            };
            // Whatever is read from here on belongs to the next request.
            *clock.lock() = None;
            Ok(resp)
        }
    })
}

/// The answer past the connection cap: a complete HTTP response with the
/// API's error envelope, written straight to the socket.
fn busy_response(max: usize) -> Vec<u8> {
    let body = serde_json::json!({"error": {
        "code": ErrorCode::Unavailable,
        "message": format!("the server is at its limit of {max} open connections; retry shortly"),
        "details": {},
    }})
    .to_string();
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Answers 503 without reading the request. The socket's send buffer is
/// empty, so the write cannot block. Closing at once, with the request unread,
/// would reset the connection and could destroy the answer before the client
/// reads it, so the client is given a moment to read it, unless many are
/// already being refused.
fn refuse(stream: TcpStream, busy: &[u8], refusing: &Arc<Semaphore>) {
    let _ = stream.try_write(busy);
    let Ok(slot) = refusing.clone().try_acquire_owned() else { return };
    tokio::spawn(async move {
        let _slot = slot;
        let mut stream = stream;
        let _ = stream.shutdown().await;
        let mut sink = [0u8; 4096];
        let _ = tokio::time::timeout(Duration::from_secs(1), async {
            while let Ok(n) = stream.read(&mut sink).await
                && n > 0
            {}
        })
        .await;
    });
}

/// A connection's socket that notes when each request's first byte arrives,
/// and gives up on a client that stops reading: once writes have made no
/// progress for `stall_limit` (the request deadline), the socket is reset
/// and the write fails, so hyper drops the connection and the answer it
/// held (docs/api.md, "Limits"). A reset, not a close: a close would leave
/// the unsent bytes in the kernel until the client reads or goes away.
struct Timed {
    inner: TcpStream,
    clock: Arc<RequestClock>,
    stall_limit: Duration,
    /// Since the first write that could make no progress; none while writes go through.
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl Timed {
    fn new(inner: TcpStream, clock: Arc<RequestClock>, stall_limit: Duration) -> Self {
        Timed { inner, clock, stall_limit, stalled: None }
    }

    /// A write's outcome, unless it has been waiting for the client too long.
    fn bounded<T>(&mut self, cx: &mut Context<'_>, written: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        if written.is_ready() {
            self.stalled = None;
            return written;
        }
        let limit = self.stall_limit;
        let stalled = self.stalled.get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        if stalled.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        let _ = self.inner.set_zero_linger();
        Poll::Ready(Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("the client read nothing of its answer for {limit:?}"),
        )))
    }
}

impl AsyncRead for Timed {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let read = Pin::new(&mut this.inner).poll_read(cx, buf);
        if matches!(read, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.clock.lock().get_or_insert_with(Instant::now);
        }
        read
    }
}

impl AsyncWrite for Timed {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let written = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.bounded(cx, written)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let written = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.bounded(cx, written)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let flushed = Pin::new(&mut this.inner).poll_flush(cx);
        this.bounded(cx, flushed)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}
