//! The connection loop. axum's own `serve` has no header-read timeout, so
//! pad drives hyper directly: a client that trickles its headers (slow loris)
//! or sends oversized ones is cut off without holding a task forever, and
//! shutdown drains in-flight requests before returning.

use std::future::Future;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;

/// A client gets this long to send a request's headers.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Request line plus headers; larger ones are refused with 431.
pub const MAX_HEADER_BYTES: usize = 64 * 1024;
/// How long shutdown waits for in-flight requests.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(20);

pub async fn serve_connections(
    listener: TcpListener,
    app: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let graceful = GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new()).header_read_timeout(HEADER_READ_TIMEOUT).max_buf_size(MAX_HEADER_BYTES);
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let stream = match accepted {
                    Ok((stream, _)) => stream,
                    Err(e) => {
                        // Out of file descriptors and the like: back off, keep serving.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                let conn = http.serve_connection(TokioIo::new(stream), TowerToHyperService::new(app.clone()));
                let conn = graceful.watch(conn);
                tokio::spawn(async move {
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
