//! How pad reaches its database: TLS or not (docs/operations.md, "Sizing
//! the PostgreSQL pool", TLS).
//!
//! Left to the driver, a URL without `sslmode` means `prefer`: TLS whenever
//! the server offers it. Over loopback that encrypts traffic no one else can
//! read, at a CPU cost on both sides of every round trip, on the machine
//! that also runs the database. So a database on this host, reached by a URL (and
//! environment) that names no `sslmode`, is reached without TLS, unless the
//! server refuses such a connection (a `hostssl`-only `pg_hba.conf`): then
//! pad connects as the URL says. A URL or `PGSSLMODE` that names a mode is
//! always obeyed.

use std::net::IpAddr;

use sqlx::Connection;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgSslMode};

/// The options to try first, when they differ from `given` (what `url`
/// says): plain TCP for a database on this host whose URL and environment
/// leave `sslmode` to the driver.
pub(crate) fn plain_first(url: &str, given: &PgConnectOptions) -> Option<PgConnectOptions> {
    let named = url_names_sslmode(url) || std::env::var_os("PGSSLMODE").is_some();
    let loopback = given.get_socket().is_none() && is_loopback(given.get_host());
    (!named && loopback).then(|| given.clone().ssl_mode(PgSslMode::Disable))
}

/// The options pad connects with: `plain` when the server accepts a
/// connection so, else `given`. Only a refusal of the connection itself
/// (`pg_hba.conf`: SQLSTATE class 28) turns to `given`; any other failure
/// keeps `plain` and is reported by the first real use, as it would be.
pub(crate) async fn choose(plain: PgConnectOptions, given: PgConnectOptions) -> PgConnectOptions {
    match PgConnection::connect_with(&plain).await {
        Ok(conn) => {
            let _ = conn.close().await;
            plain
        }
        Err(sqlx::Error::Database(e)) if e.code().is_some_and(|c| c.starts_with("28")) => {
            tracing::info!(
                "the database refused a connection without TLS ({e}); connecting with TLS as the URL allows"
            );
            given
        }
        Err(_) => plain,
    }
}

/// Whether the URL's query names an `sslmode` (libpq's spelling, or
/// sqlx's `ssl-mode`).
fn url_names_sslmode(url: &str) -> bool {
    let query = url.split_once('?').map_or("", |(_, q)| q);
    query.split('&').any(|pair| {
        let key = pair.split_once('=').map_or(pair, |(k, _)| k);
        key.eq_ignore_ascii_case("sslmode") || key.eq_ignore_ascii_case("ssl-mode")
    })
}

/// `localhost`, or a loopback address (127.0.0.0/8, ::1).
fn is_loopback(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost") || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `url` is tried without TLS first.
    fn plain(url: &str) -> bool {
        let given: PgConnectOptions = url.parse().unwrap();
        let first = plain_first(url, &given);
        assert!(first.iter().all(|o| matches!(o.get_ssl_mode(), PgSslMode::Disable)), "{url}");
        first.is_some()
    }

    #[test]
    fn a_database_on_this_host_is_tried_without_tls_unless_a_mode_is_named() {
        if std::env::var_os("PGSSLMODE").is_some() {
            eprintln!("SKIPPED: PGSSLMODE is set, which names a mode for every URL");
            return;
        }
        for url in [
            "postgres://pad@127.0.0.1:5432/pad",
            "postgres://pad@localhost/pad",
            "postgresql://pad@127.0.0.2/pad",
            "postgres://pad@[::1]:5432/pad",
        ] {
            assert!(plain(url), "{url}");
        }
        for url in [
            "postgres://pad@db.internal:5432/pad",
            "postgres://pad@10.0.0.5/pad",
            "postgres://pad@127.0.0.1/pad?sslmode=require",
            "postgres://pad@localhost/pad?application_name=x&sslmode=prefer",
            "postgres://pad@localhost/pad?ssl-mode=verify-full",
            "postgres://pad@localhost/pad?host=/var/run/postgresql",
        ] {
            assert!(!plain(url), "{url}");
        }
    }
}
