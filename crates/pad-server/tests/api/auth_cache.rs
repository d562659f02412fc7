//! The authentication cache (docs/operations.md, "Authentication cache"):
//! it saves the store reads of a returning caller, and never outlives a
//! change made through the same instance. Each test runs on SQLite and,
//! when `PAD_TEST_DATABASE_URL` is set, on PostgreSQL. The cache is given a
//! minute-long TTL, so only the invalidation can explain a refusal.

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{TestServer, backends};
use pad_server::auth_cache::AuthCache;
use reqwest::Method;
use serde_json::json;

const DEFAULT: &str = "/api/v1/workspaces/default";
const LONG: Duration = Duration::from_secs(60);

async fn start(url: &str, ttl: Duration, cap: usize) -> TestServer {
    TestServer::start_on_with(url, |s| s.auth_cache = Arc::new(AuthCache::new(ttl, cap))).await
}

/// The value of series `name` in `/metrics`.
async fn metric(url: &str, name: &str) -> u64 {
    let text = common::scrape(url).await;
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|v| v.strip_prefix(' ')))
        .unwrap_or_else(|| panic!("no {name} in /metrics"))
        .parse()
        .unwrap()
}

async fn token_id(s: &TestServer, token: &str) -> i64 {
    s.get(token, &format!("{DEFAULT}/tokens")).await.body["tokens"][0]["id"].as_i64().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn returning_callers_are_answered_without_store_reads() {
    for b in backends().await {
        let s = start(&b.url, LONG, 64).await;
        let (hits, misses) =
            (metric(&s.url, "pad_auth_cache_hits_total").await, metric(&s.url, "pad_auth_cache_misses_total").await);
        for _ in 0..10 {
            assert_eq!(s.get(&s.owner, &format!("{DEFAULT}/items")).await.status, 200, "{}", b.name);
        }
        // The first request reads the token and the membership; the nine
        // after it read neither.
        assert_eq!(metric(&s.url, "pad_auth_cache_misses_total").await - misses, 2, "{}", b.name);
        assert_eq!(metric(&s.url, "pad_auth_cache_hits_total").await - hits, 18, "{}", b.name);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_token_is_refused_on_the_next_request() {
    for b in backends().await {
        let s = start(&b.url, LONG, 64).await;
        let editor = s.member("default", "editor@example.com", "editor").await;
        let id = token_id(&s, &editor).await;
        assert_eq!(s.get(&editor, DEFAULT).await.status, 200, "{}", b.name);
        let a = s.call(Some(&s.owner), Method::DELETE, &format!("{DEFAULT}/tokens/{id}"), None).await;
        assert_eq!(a.status, 204, "{}: {:?}", b.name, a.body);
        let a = s.get(&editor, DEFAULT).await;
        assert_eq!((a.status.as_u16(), a.code()), (401, "unauthorized"), "{}: served after its revocation", b.name);

        // Revoking your own token through itself.
        let own = s.post(&s.owner, &format!("{DEFAULT}/tokens"), json!({"name": "own", "scope": "workspace"})).await;
        let (own, id) = (own.body["token"].as_str().unwrap().to_string(), own.body["id"].as_i64().unwrap());
        assert_eq!(s.get(&own, DEFAULT).await.status, 200, "{}", b.name);
        assert_eq!(s.call(Some(&own), Method::DELETE, &format!("{DEFAULT}/tokens/{id}"), None).await.status, 204);
        assert_eq!(s.get(&own, DEFAULT).await.status, 401, "{}", b.name);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_out_session_is_refused_on_the_next_request() {
    for b in backends().await {
        let s = start(&b.url, LONG, 64).await;
        let cookie = s.sign_in(&s.owner).await;
        let me = || s.http.get(format!("{}{DEFAULT}/items", s.url)).header("cookie", &cookie).send();
        assert_eq!(me().await.unwrap().status(), 200, "{}", b.name);
        assert_eq!(s.sign_out(&cookie).await, 204, "{}", b.name);
        assert_eq!(me().await.unwrap().status(), 401, "{}: the session outlived sign-out", b.name);
    }
}

/// A sign-out whose cookie names no session (anyone may send one, with a
/// CSRF value derived from the cookie: docs/api.md, "Web sessions") revokes
/// nothing, so it announces no change of authorization: the open event
/// streams, which check their access again on each change, are not woken
/// to read the store. A real sign-out still announces one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sign_out_naming_no_session_announces_no_change() {
    for b in backends().await {
        let cache = Arc::new(AuthCache::new(LONG, 64));
        let s = TestServer::start_on_with(&b.url, |s| s.auth_cache = Arc::clone(&cache)).await;
        let mut changes = cache.changes();
        let unknown = "pads_no-such-session";
        let cookie = format!("pad_session={unknown}; pad_csrf={}", pad_server::session::csrf_for(unknown));
        assert_eq!(s.sign_out(&cookie).await, 204, "{}", b.name);
        assert!(!changes.has_changed().unwrap(), "{}: an unknown session's sign-out woke the streams", b.name);

        let cookie = s.sign_in(&s.owner).await;
        assert_eq!(s.sign_out(&cookie).await, 204, "{}", b.name);
        assert!(changes.has_changed().unwrap(), "{}: a sign-out announced no change", b.name);
        changes.borrow_and_update();
        // Signing the same session out again revokes nothing.
        assert_eq!(s.sign_out(&cookie).await, 204, "{}", b.name);
        assert!(!changes.has_changed().unwrap(), "{}: a second sign-out woke the streams", b.name);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lowered_role_applies_to_the_next_request() {
    for b in backends().await {
        let s = start(&b.url, LONG, 64).await;
        let editor = s.member("default", "editor@example.com", "editor").await;
        s.create_item(&editor, "default", "while an editor").await;
        let a = s
            .post(&s.owner, &format!("{DEFAULT}/members"), json!({"email": "editor@example.com", "role": "viewer"}))
            .await;
        assert_eq!(a.status, 200, "{}: {:?}", b.name, a.body);
        let a = s.post(&editor, &format!("{DEFAULT}/items"), json!({"title": "as a viewer"})).await;
        assert_eq!((a.status.as_u16(), a.code()), (403, "forbidden"), "{}: the old role was served", b.name);
        assert_eq!(a.body["error"]["details"]["role"], "viewer", "{}", b.name);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_member_is_refused_on_the_next_request() {
    for b in backends().await {
        let s = start(&b.url, LONG, 64).await;
        s.member("default", "leaving@example.com", "editor").await;
        // Unscoped, so the token outlives the membership and only the
        // membership answers.
        let leaving = s.unscoped_token("leaving@example.com").await;
        assert_eq!(s.get(&leaving, DEFAULT).await.status, 200, "{}", b.name);
        let a = s.call(Some(&s.owner), Method::DELETE, &format!("{DEFAULT}/members/leaving@example.com"), None).await;
        assert_eq!(a.status, 204, "{}: {:?}", b.name, a.body);
        let a = s.get(&leaving, DEFAULT).await;
        assert_eq!((a.status.as_u16(), a.code()), (404, "not_found"), "{}: the membership outlived removal", b.name);
        assert_eq!(s.get(&leaving, "/api/v1/me").await.status, 200, "{}: the token itself lives on", b.name);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_credentials_never_grow_the_cache_past_its_cap() {
    for b in backends().await {
        let s = start(&b.url, LONG, 8).await;
        let mut first = None;
        for n in 0..30 {
            let t = s
                .post(&s.owner, &format!("{DEFAULT}/tokens"), json!({"name": format!("t{n}"), "scope": "workspace"}))
                .await;
            assert_eq!(t.status, 201, "{}: {:?}", b.name, t.body);
            let token = t.body["token"].as_str().unwrap().to_string();
            assert_eq!(s.get(&token, DEFAULT).await.status, 200, "{}", b.name);
            first.get_or_insert(token);
            let entries = metric(&s.url, "pad_auth_cache_entries").await;
            assert!(entries <= 16, "{}: {entries} entries for two maps of 8", b.name);
        }
        // The first token, used once, was pushed out by the newer ones.
        let misses = metric(&s.url, "pad_auth_cache_misses_total").await;
        assert_eq!(s.get(first.as_deref().unwrap(), DEFAULT).await.status, 200, "{}", b.name);
        assert!(metric(&s.url, "pad_auth_cache_misses_total").await > misses, "{}", b.name);
    }
}

/// Another instance on the same store learns of a revocation only when its
/// entry ends: at most its TTL after the revoke (docs/api.md, "Tokens").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_instance_refuses_a_revoked_token_within_its_ttl() {
    const TTL: Duration = Duration::from_secs(3);
    for b in backends().await {
        let a = start(&b.url, LONG, 64).await;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let other = format!("http://{}", listener.local_addr().unwrap());
        let mut state = pad_server::AppState::new(a.store.clone());
        state.auth_cache = Arc::new(AuthCache::new(TTL, 64));
        let task = tokio::spawn(pad_server::serve_state(state, listener, std::future::pending()));
        let get = |token: String| a.http.get(format!("{other}{DEFAULT}")).bearer_auth(token).send();

        let editor = a.member("default", "editor@example.com", "editor").await;
        let id = token_id(&a, &editor).await;
        // B's entry ends TTL after its read started, which lies between these.
        let warm_start = Instant::now();
        assert_eq!(get(editor.clone()).await.unwrap().status(), 200, "{}", b.name);
        let warm_end = Instant::now();
        let r = a.call(Some(&a.owner), Method::DELETE, &format!("{DEFAULT}/tokens/{id}"), None).await;
        assert_eq!(r.status, 204, "{}", b.name);
        let revoked = Instant::now();
        assert_eq!(a.get(&editor, DEFAULT).await.status, 401, "{}: the revoking instance", b.name);
        let status = get(editor.clone()).await.unwrap().status();
        if warm_start.elapsed() < TTL - Duration::from_millis(500) {
            assert_eq!(status, 200, "{}: the other instance's entry was live, so it answered from it", b.name);
        }
        tokio::time::sleep((warm_end + TTL).saturating_duration_since(Instant::now())).await;
        assert_eq!(get(editor.clone()).await.unwrap().status(), 401, "{}: served past the TTL", b.name);
        println!("{}: the other instance refused the revoked token {:?} after the revoke", b.name, revoked.elapsed());
        task.abort();
    }
}
