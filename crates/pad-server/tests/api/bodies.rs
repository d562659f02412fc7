//! Bodies a route cannot take as they are: each refusal says which field
//! and why, in the envelope every route uses (docs/api.md, "Errors").

use reqwest::Method;
use serde_json::{Value, json};

use crate::common::TestServer;

const WS: &str = "/api/v1/workspaces/default";

/// A workspace setting given a value no setting can have (negative, a
/// fraction, a string, past 32 bits) is `validation_failed` naming the
/// setting and its range, as one out of range is; nothing is written
/// (docs/api.md, "Workspace settings").
#[tokio::test]
async fn settings_of_the_wrong_kind_are_refused_naming_the_setting() {
    let s = TestServer::start().await;
    let before = s.get(&s.owner, WS).await.body["settings"].clone();
    let settings = [
        ("default_ttl_seconds", "1s"),
        ("max_ttl_seconds", "24h"),
        ("quarantine_after_expiries", "1000"),
        ("quarantine_after_failures", "1000"),
        ("max_hold_seconds", "30 days"),
    ];
    for (field, range) in settings {
        for bad in [json!(-5), json!(1.5), json!("60"), json!(4_294_967_296u64), json!(true), json!([1])] {
            // Beside a good value for another setting, which is not written either.
            let other = if field == "quarantine_after_failures" {
                "quarantine_after_expiries"
            } else {
                "quarantine_after_failures"
            };
            let body = json!({ field: bad, other: 7 });
            let a = s.call(Some(&s.owner), Method::PATCH, WS, Some(body)).await;
            assert_eq!(a.status, 400, "{field}={bad}: {:?}", a.body);
            assert_eq!(a.code(), "validation_failed", "{field}={bad}: {:?}", a.body);
            assert_eq!(a.body["error"]["details"]["field"], field, "{field}={bad}: {:?}", a.body);
            let message = a.body["error"]["message"].as_str().unwrap_or_default();
            assert!(message.contains(range) && message.contains(&bad.to_string()), "{field}={bad}: {message}");
        }
    }
    assert_eq!(s.get(&s.owner, WS).await.body["settings"], before, "nothing was written");
    // What is not a setting stays a malformed body, and null leaves a setting as it is.
    let a = s.call(Some(&s.owner), Method::PATCH, WS, Some(json!({"max_hold": 5}))).await;
    assert_eq!((a.status.as_u16(), a.code()), (400, "bad_request"), "{:?}", a.body);
    let a = s
        .call(Some(&s.owner), Method::PATCH, WS, Some(json!({"max_hold_seconds": null, "max_ttl_seconds": 7200})))
        .await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    assert_eq!(a.body["settings"]["max_ttl_seconds"], Value::from(7200));
}

/// `/mcp` with a JSON content type and a body that is not JSON is a
/// malformed body, `400 bad_request` with a message saying so, as on every
/// other route; not `415`, which would say the content type was wrong
/// (docs/api.md, "Errors").
#[tokio::test]
async fn mcp_with_a_malformed_json_body_is_bad_request() {
    let s = TestServer::start().await;
    for body in ["{not json", "", "{\"jsonrpc\": \"2.0\", \"id\": 1,", "[1, 2", "{}"] {
        let resp = s
            .http
            .post(format!("{}/mcp", s.url))
            .bearer_auth(&s.owner)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        let status = resp.status();
        let v: Value = resp.json().await.expect("a JSON body");
        assert_eq!(status, 400, "{body:?}: {v}");
        assert_eq!(v["error"]["code"], "bad_request", "{body:?}: {v}");
        let message = v["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("JSON"), "{body:?}: {message}");
    }
}
