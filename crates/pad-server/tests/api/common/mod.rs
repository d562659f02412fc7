//! A real pad server on 127.0.0.1:0 over a fresh SQLite store, and a small
//! JSON client for driving it.

#![allow(dead_code)]

pub use pad_test_support::pg::ScratchDb;
use std::sync::Arc;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

/// The metrics token every test server is started with (docs/operations.md,
/// "Metrics"); [`TestServer::scrape`] sends it.
pub const METRICS_TOKEN: &str = "test-metrics-token";

pub struct TestServer {
    pub url: String,
    pub owner: String,
    pub http: reqwest::Client,
    pub store: Arc<dyn pad_store::Store>,
    _dir: tempfile::TempDir,
    _task: tokio::task::JoinHandle<()>,
}

pub struct Answer {
    pub status: StatusCode,
    pub body: Value,
    pub headers: reqwest::header::HeaderMap,
}

impl Answer {
    pub fn code(&self) -> &str {
        self.body["error"]["code"].as_str().unwrap_or("")
    }
}

impl TestServer {
    pub async fn start() -> Self {
        Self::start_with(|_| {}).await
    }

    /// Starts with the server's state adjusted first (limits, for instance).
    pub async fn start_with(adjust: impl FnOnce(&mut pad_server::AppState)) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("pad.db").display());
        Self::start_inner(dir, &url, adjust).await
    }

    /// A server on the (empty) database `url`.
    pub async fn start_on(url: &str) -> Self {
        Self::start_inner(tempfile::tempdir().unwrap(), url, |_| {}).await
    }

    /// [`TestServer::start_on`] with the server's state adjusted first.
    pub async fn start_on_with(url: &str, adjust: impl FnOnce(&mut pad_server::AppState)) -> Self {
        Self::start_inner(tempfile::tempdir().unwrap(), url, adjust).await
    }

    async fn start_inner(dir: tempfile::TempDir, url: &str, adjust: impl FnOnce(&mut pad_server::AppState)) -> Self {
        let url = url.to_string();
        let store: Arc<dyn pad_store::Store> = pad_backends::open_store(&url).await.unwrap();
        let boot = pad_server::bootstrap(store.as_ref()).await.unwrap().expect("fresh store bootstraps");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut state = pad_server::AppState::new(store.clone());
        // The tests' webhook receivers listen on 127.0.0.1 (docs/webhooks.md,
        // "Where deliveries go"); a test of the refusal turns this off.
        state.webhook_targets = pad_server::webhooks::Targets { allow_private: true };
        state.metrics_token = Some(METRICS_TOKEN.into());
        adjust(&mut state);
        let task = tokio::spawn(async move {
            pad_server::serve_state(state, listener, std::future::pending()).await.unwrap();
        });
        let http = reqwest::Client::builder().pool_max_idle_per_host(128).build().unwrap();
        TestServer { url: format!("http://{addr}"), owner: boot.token, http, store, _dir: dir, _task: task }
    }

    /// A second instance on the database of a running server (`url`),
    /// answering to its owner's token.
    pub async fn join(url: &str, owner: &str) -> Self {
        let store: Arc<dyn pad_store::Store> = pad_backends::open_store(url).await.unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut state = pad_server::AppState::new(store.clone());
        state.metrics_token = Some(METRICS_TOKEN.into());
        let task = tokio::spawn(async move {
            pad_server::serve_state(state, listener, std::future::pending()).await.unwrap();
        });
        let http = reqwest::Client::builder().pool_max_idle_per_host(128).build().unwrap();
        let dir = tempfile::tempdir().unwrap();
        TestServer { url: format!("http://{addr}"), owner: owner.to_string(), http, store, _dir: dir, _task: task }
    }

    /// `GET /metrics` with [`METRICS_TOKEN`]: the exposition text.
    pub async fn scrape(&self) -> String {
        scrape(&self.url).await
    }

    pub async fn call(&self, token: Option<&str>, method: Method, path: &str, body: Option<Value>) -> Answer {
        let mut req = self.http.request(method, format!("{}{path}", self.url));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status();
        let headers = resp.headers().clone();
        let text = resp.text().await.unwrap();
        let body =
            if text.is_empty() { Value::Null } else { serde_json::from_str(&text).unwrap_or(Value::String(text)) };
        Answer { status, body, headers }
    }

    pub async fn get(&self, token: &str, path: &str) -> Answer {
        self.call(Some(token), Method::GET, path, None).await
    }

    pub async fn post(&self, token: &str, path: &str, body: Value) -> Answer {
        self.call(Some(token), Method::POST, path, Some(body)).await
    }

    /// Adds a member with `role` to `ws` and returns a fresh token for it.
    pub async fn member(&self, ws: &str, email: &str, role: &str) -> String {
        let a = self
            .post(&self.owner, &format!("/api/v1/workspaces/{ws}/members"), json!({"email": email, "role": role}))
            .await;
        assert_eq!(a.status, 200, "{:?}", a.body);
        let a = self
            .post(&self.owner, &format!("/api/v1/workspaces/{ws}/tokens"), json!({"name": "t", "email": email}))
            .await;
        assert_eq!(a.status, 201, "{:?}", a.body);
        a.body["token"].as_str().unwrap().to_string()
    }

    /// An unscoped token for an existing user, as `pad admin token` makes one
    /// (the only way a user other than the first gets one).
    pub async fn unscoped_token(&self, email: &str) -> String {
        pad_server::recovery_token(self.store.as_ref(), email).await.unwrap().0
    }

    /// `POST /session` with `token`: the web session's cookies, as a browser
    /// would send them back (`name=value; name=value`).
    pub async fn sign_in(&self, token: &str) -> String {
        let signed = self.call(None, Method::POST, "/api/v1/session", Some(json!({"token": token}))).await;
        assert_eq!(signed.status, 204, "{:?}", signed.body);
        signed
            .headers
            .get_all("set-cookie")
            .iter()
            .map(|v| v.to_str().unwrap().split(';').next().unwrap().to_string())
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// `DELETE /session` for the web session in `cookie`, echoing its CSRF
    /// value as the web UI does (docs/api.md, "Web sessions").
    pub async fn sign_out(&self, cookie: &str) -> reqwest::StatusCode {
        let csrf = cookie.split("; ").find_map(|c| c.strip_prefix("pad_csrf=")).expect("a pad_csrf cookie");
        let r = self.http.delete(format!("{}/api/v1/session", self.url)).header("cookie", cookie);
        r.header("x-csrf-token", csrf).send().await.unwrap().status()
    }

    /// Another account (`other@example.com`) with a workspace of its own,
    /// `other`, subscribed to a receiver on loopback: its token, and the
    /// receiver's listener, which the test answers from.
    pub async fn other_account_with_receiver(&self) -> (String, tokio::net::TcpListener) {
        self.store.ensure_user("other@example.com").await.unwrap();
        let other = self.unscoped_token("other@example.com").await;
        assert_eq!(self.post(&other, "/api/v1/workspaces", json!({ "slug": "other" })).await.status, 201);
        let good = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", good.local_addr().unwrap());
        let a = self.post(&other, "/api/v1/workspaces/other/webhooks", json!({ "url": url })).await;
        assert_eq!(a.status, 201, "{:?}", a.body);
        (other, good)
    }

    pub async fn create_item(&self, token: &str, ws: &str, title: &str) -> String {
        let a = self.post(token, &format!("/api/v1/workspaces/{ws}/items"), json!({"title": title})).await;
        assert_eq!(a.status, 201, "{:?}", a.body);
        a.body["ref"].as_str().unwrap().to_string()
    }
}

/// The stores a test runs on: a fresh SQLite file always, and a scratch
/// PostgreSQL database when `PAD_TEST_DATABASE_URL` names a server.
pub struct Backend {
    pub name: &'static str,
    pub url: String,
    _dir: Option<tempfile::TempDir>,
    _pg: Option<ScratchDb>,
}

pub async fn backends() -> Vec<Backend> {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = format!("sqlite://{}", dir.path().join("pad.db").display());
    let mut all = vec![Backend { name: "sqlite", url: sqlite, _dir: Some(dir), _pg: None }];
    match ScratchDb::create().await {
        Some(db) => all.push(Backend { name: "postgres", url: db.url.clone(), _dir: None, _pg: Some(db) }),
        None => eprintln!("PAD_TEST_DATABASE_URL is unset: PostgreSQL skipped"),
    }
    all
}

/// `GET /metrics` of the server at `url` with [`METRICS_TOKEN`]: the
/// exposition text.
pub async fn scrape(url: &str) -> String {
    let resp = reqwest::Client::new().get(format!("{url}/metrics")).bearer_auth(METRICS_TOKEN).send().await.unwrap();
    assert_eq!(resp.status(), 200, "GET /metrics");
    resp.text().await.unwrap()
}
