//! TLS to a database on this host (docs/operations.md, "Sizing the
//! PostgreSQL pool"): a URL that names no `sslmode` reaches a loopback
//! database without TLS, even where the server offers TLS (which the
//! driver would otherwise take); a URL that names a mode gets that mode.

use crate::common;

use pad_core::NewItem;
use pad_postgres::PgStore;
use pad_store::{Actor, Store};
use sqlx::Connection;

/// (connections with TLS, connections) of the database's other sessions
/// whose `application_name` is `app`.
async fn sessions(admin: &mut sqlx::PgConnection, app: &str) -> (i64, i64) {
    sqlx::query_as(
        "SELECT count(*) FILTER (WHERE s.ssl), count(*) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid)
         WHERE a.application_name = $1 AND a.pid <> pg_backend_pid()",
    )
    .bind(app)
    .fetch_one(admin)
    .await
    .unwrap()
}

/// Opens a store on `url` and makes it use both of its pools: a read, and a
/// claim (the lease calls' own connections).
async fn busy_store(url: &str, slug: &str) -> PgStore {
    let store = PgStore::open_with(url, 4).await.unwrap();
    let owner = Actor { user_id: store.ensure_user("owner@example.com").await.unwrap().id };
    let ws = store.create_workspace(slug, slug, owner).await.unwrap();
    let item = store.create_item(&ws, owner, &NewItem { title: "one".into(), ..Default::default() }).await.unwrap();
    store.claim(&ws, &item.item_ref, &common::claim(owner, "w", false)).await.unwrap();
    store
}

#[tokio::test]
async fn a_database_on_this_host_is_reached_without_tls_unless_the_url_names_a_mode() {
    let Some(db) = common::ScratchDb::create().await else {
        return eprintln!("SKIPPED a_database_on_this_host_is_reached_without_tls: {} is not set", common::ENV);
    };
    if db.url.contains('?') || std::env::var_os("PGSSLMODE").is_some() {
        return eprintln!("SKIPPED a_database_on_this_host_is_reached_without_tls: the URL or PGSSLMODE names options");
    }
    let mut admin = sqlx::PgConnection::connect(&db.url).await.unwrap();
    let offered: String = sqlx::query_scalar("SHOW ssl").fetch_one(&mut admin).await.unwrap();
    let host = db.url.split('@').nth(1).unwrap_or(&db.url);
    if offered != "on" || !(host.starts_with("127.") || host.starts_with("localhost") || host.starts_with("[::1]")) {
        return eprintln!(
            "SKIPPED a_database_on_this_host_is_reached_without_tls: the server offers no TLS, or is not on this host"
        );
    }

    let plain = busy_store(&format!("{}?application_name=pad-plain", db.url), "plain").await;
    let (tls, all) = sessions(&mut admin, "pad-plain").await;
    assert!(all >= 2, "the store's pools hold connections: {all}");
    assert_eq!(tls, 0, "{tls} of {all} connections to this host used TLS");
    plain.close().await;

    let named = busy_store(&format!("{}?application_name=pad-tls&sslmode=require", db.url), "tls").await;
    let (tls, all) = sessions(&mut admin, "pad-tls").await;
    assert!(all >= 2, "the store's pools hold connections: {all}");
    assert_eq!(tls, all, "a named sslmode is obeyed");
    named.close().await;
}

/// A server that accepts connections only over TLS (`hostssl` alone in
/// `pg_hba.conf`) on this host: the attempt without TLS is refused, and pad
/// connects with TLS as the URL allows, for every pool.
#[tokio::test]
async fn a_database_on_this_host_that_refuses_plain_connections_is_reached_with_tls() {
    let Some(cluster) = pad_test_support::pg::PrivateCluster::init_tls_only() else {
        return eprintln!(
            "SKIPPED a_database_that_refuses_plain_connections: no PostgreSQL 15 binaries, runuser or openssl"
        );
    };
    let url = cluster.url();
    let refused = sqlx::PgConnection::connect(&format!("{url}?sslmode=disable")).await;
    assert!(refused.is_err(), "the cluster must refuse plain connections for this test to mean anything");
    let store = busy_store(&format!("{url}?application_name=pad-fallback"), "fallback").await;
    let mut admin = sqlx::PgConnection::connect(&format!("{url}?sslmode=require")).await.unwrap();
    let (tls, all) = sessions(&mut admin, "pad-fallback").await;
    assert!(all >= 2, "the store's pools hold connections: {all}");
    assert_eq!(tls, all, "every connection over TLS");
    store.close().await;
}
