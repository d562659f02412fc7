//! `/metrics` is bounded (docs/operations.md, "Metrics"): at most 50
//! workspaces get series of their own, the rest are summed into
//! `workspace="other"`. It answers only requests bearing
//! `PAD_METRICS_TOKEN`, and nothing at all while that is unset. And the bearer scheme's case does not matter
//! on any route (docs/api.md, "Tokens").

use crate::common;

use common::TestServer;
use reqwest::Method;

#[tokio::test]
async fn a_scrape_stays_small_with_thousands_of_workspaces() {
    let mut metrics = None;
    let s = TestServer::start_with(|state| metrics = Some(state.metrics.clone())).await;
    let metrics = metrics.unwrap();
    for i in 0..2000 {
        let ws = format!("a-workspace-slug-of-some-length-{i:04}");
        metrics.count(&ws, pad_server::metrics::LeaseCount::Claim);
        metrics.held(&ws, chrono::Duration::seconds(3));
        metrics.claim_latency(&ws, std::time::Duration::from_millis(2));
    }
    let text = s.scrape().await;
    assert!(text.len() < 200_000, "{} bytes", text.len());
    assert!(text.contains("pad_lease_claims_total{workspace=\"other\"} 1950\n"), "{}", &text[..2000]);
}

/// Finding: the cap counted workspaces, not bytes, so 50 of the longest
/// slugs (63 characters, docs/api.md, "Limits") with every series filled
/// took the scrape past 200 KB. The named workspaces are now bounded by the
/// bytes they take; the rest still sum into `other`, losing no count.
#[tokio::test]
async fn a_scrape_stays_small_with_thousands_of_long_workspace_slugs() {
    let mut metrics = None;
    let s = TestServer::start_with(|state| metrics = Some(state.metrics.clone())).await;
    let metrics = metrics.unwrap();
    for i in 0..2000u64 {
        let ws = format!("{}-{i:04}", "s".repeat(58));
        assert_eq!(ws.len(), 63);
        for what in pad_server::metrics::LeaseCount::ALL {
            metrics.count(&ws, what);
        }
        // Long figures in every bucket and sum.
        for secs in [0.001, 0.01, 0.1, 1.0, 10.0, 100.0, 1000.0, 10_000.0, 100_000.0] {
            metrics.held(&ws, chrono::Duration::milliseconds((secs * 1000.0) as i64 + i as i64));
            metrics.claim_latency(&ws, std::time::Duration::from_secs_f64(secs / 1000.0 + i as f64 * 1e-9));
        }
    }
    let text = s.scrape().await;
    assert!(text.len() < 200_000, "{} bytes", text.len());
    let claims: u64 = text
        .lines()
        .filter(|l| l.starts_with("pad_lease_claims_total{"))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(claims, 2000, "every claim is counted, named or in other");
}

/// Without `PAD_METRICS_TOKEN` nothing is exposed: every scrape, with or
/// without a credential (even a workspace owner's API token), answers 401 in
/// the error envelope, says how to turn metrics on, and names no series.
#[tokio::test]
async fn metrics_are_closed_until_a_metrics_token_is_set() {
    let mut metrics = None;
    let s = TestServer::start_with(|state| {
        state.metrics_token = None;
        metrics = Some(state.metrics.clone());
    })
    .await;
    metrics.unwrap().count("secret-tenant", pad_server::metrics::LeaseCount::Claim);
    let url = format!("{}/metrics", s.url);
    let owner = format!("Bearer {}", s.owner);
    for auth in [None, Some(""), Some("Bearer "), Some("Bearer pad_not-a-token"), Some(owner.as_str())] {
        let mut req = s.http.get(&url);
        if let Some(a) = auth {
            req = req.header("authorization", a);
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status(), 401, "{auth:?}");
        let text = resp.text().await.unwrap();
        assert!(!text.contains("pad_") && !text.contains("secret-tenant"), "{auth:?}: {text}");
        let body: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(body["error"]["code"], "unauthorized", "{body}");
        assert!(body["error"]["details"].is_object(), "{body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains("PAD_METRICS_TOKEN") && message.contains("Authorization: Bearer"), "{message}");
    }
}

/// With `PAD_METRICS_TOKEN` set, only that token scrapes: not an API token,
/// not another scheme, not the bare value.
#[tokio::test]
async fn the_metrics_token_is_required_when_set() {
    let s = TestServer::start_with(|state| state.metrics_token = Some("scrape-secret".into())).await;
    let url = format!("{}/metrics", s.url);
    let owner = format!("Bearer {}", s.owner);
    for auth in
        [None, Some("Bearer wrong"), Some("Basic c2NyYXBlLXNlY3JldA=="), Some("scrape-secret"), Some(owner.as_str())]
    {
        let mut req = s.http.get(&url);
        if let Some(a) = auth {
            req = req.header("authorization", a);
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status(), 401, "{auth:?}");
        let body: serde_json::Value = resp.json().await.unwrap();
        assert_eq!(body["error"]["code"], "unauthorized", "{body}");
        assert!(body["error"]["details"].is_object(), "{body}");
    }
    for auth in ["Bearer scrape-secret", "bearer scrape-secret", "BEARER scrape-secret"] {
        let resp = s.http.get(&url).header("authorization", auth).send().await.unwrap();
        assert_eq!(resp.status(), 200, "{auth}");
    }
}

#[tokio::test]
async fn the_bearer_scheme_is_case_insensitive() {
    let s = TestServer::start().await;
    for scheme in ["Bearer", "bearer", "BEARER", "bEaReR"] {
        let resp = s
            .http
            .request(Method::GET, format!("{}/api/v1/me", s.url))
            .header("authorization", format!("{scheme} {}", s.owner))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200, "{scheme}");
    }
}
