//! `POST /mcp` runs the tools in-process as the caller the request
//! authenticated: one authentication and one rate unit per tool call, and
//! the same answers and refusals as the HTTP API.

use crate::common;

use common::{Answer, TestServer};
use serde_json::{Value, json};

/// One stateless MCP `tools/call`, as a streamable-HTTP client sends it.
async fn tool(s: &TestServer, token: &str, name: &str, arguments: Value) -> Answer {
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": { "name": name, "arguments": arguments } });
    let resp = s
        .http
        .post(format!("{}/mcp", s.url))
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .json(&body)
        .send()
        .await
        .unwrap();
    let (status, headers) = (resp.status(), resp.headers().clone());
    let body = resp.json().await.unwrap_or(Value::Null);
    Answer { status, body, headers }
}

/// The tool's structured result, and whether it is a tool error.
fn result(a: &Answer) -> (&Value, bool) {
    assert_eq!(a.status, 200, "{:?}", a.body);
    let r = &a.body["result"];
    (&r["structuredContent"], r["isError"].as_bool().unwrap_or(false))
}

/// Before, `/mcp` authenticated the request and then called this server
/// back with the caller's token, so each tool call took two units of the
/// caller's rate: with a burst of two, the second call was refused.
#[tokio::test]
async fn a_tool_call_costs_one_rate_unit() {
    // 1 request/s with a burst of 2.
    let s = TestServer::start_with(|st| st.rate = pad_server::limits::RateLimiter::new(Some(1.0))).await;
    for n in 1..=2 {
        let a = tool(&s, &s.owner, "pad_frontier", json!({})).await;
        let (out, is_error) = result(&a);
        assert!(!is_error, "tool call {n} of 2 was refused: {out}");
        assert!(out["items"].is_array(), "{out}");
    }
    // The limit still holds, once per request.
    let a = tool(&s, &s.owner, "pad_frontier", json!({})).await;
    assert_eq!(a.status, 429, "{:?}", a.body);
    assert_eq!(a.code(), "rate_limited");
}

/// A tool's refusal carries the API's code, message and details.
#[tokio::test]
async fn tools_refuse_as_the_api_does() {
    let s = TestServer::start().await;
    let item = s.create_item(&s.owner, "default", "Held").await;
    let claim = format!("/api/v1/workspaces/default/items/{item}/claim");
    assert_eq!(s.post(&s.owner, &claim, json!({"holder": "a", "ttl_seconds": 600})).await.status, 200);

    let http = s.post(&s.owner, &claim, json!({"holder": "b"})).await;
    assert_eq!(http.code(), "lease_held");
    let mcp = tool(&s, &s.owner, "pad_item_claim", json!({"ref": item, "holder": "b"})).await;
    let (out, is_error) = result(&mcp);
    assert!(is_error, "{out}");
    let (api, refused) = (&http.body["error"], &out["error"]);
    assert_eq!(refused["code"], "lease_held");
    assert!(refused["message"].as_str().unwrap().starts_with(api["message"].as_str().unwrap()), "{refused}");
    for field in ["lease_id", "holder", "epoch", "acquired_at", "expires_at", "ttl_seconds"] {
        assert_eq!(refused["details"][field], api["details"][field], "{field}: {refused} vs {api}");
    }

    // Not a member of the workspace: the same not_found, naming nothing more.
    let missing = s.get(&s.owner, "/api/v1/workspaces/nope/items/TASK-1").await;
    let mcp = tool(&s, &s.owner, "pad_item_show", json!({"ref": "TASK-1", "workspace": "nope"})).await;
    let (out, is_error) = result(&mcp);
    assert!(is_error, "{out}");
    assert_eq!(out["error"]["code"], missing.body["error"]["code"]);
    assert!(out["error"]["message"].as_str().unwrap().starts_with(missing.body["error"]["message"].as_str().unwrap()));

    // A ref that is not one: the path's refusal, naming `ref`.
    let bad = s.get(&s.owner, "/api/v1/workspaces/default/items/TASK-0").await;
    let mcp = tool(&s, &s.owner, "pad_item_show", json!({"ref": "TASK-0"})).await;
    let (out, is_error) = result(&mcp);
    assert!(is_error, "{out}");
    assert_eq!(
        (&out["error"]["code"], &out["error"]["details"]["field"]),
        (&json!("validation_failed"), &json!("ref"))
    );
    assert_eq!(bad.body["error"]["details"]["field"], "ref");

    // No credential: 401 before any MCP happens.
    let a =
        s.call(None, reqwest::Method::POST, "/mcp", Some(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})));
    assert_eq!(a.await.status, 401);
}

/// `pad_claim_next` takes `wait` as `wait_seconds` by its other name, and
/// refuses a bad one, or both at once, as the API does (docs/api.md,
/// "Batches and long polls").
#[tokio::test]
async fn claim_next_takes_wait_as_wait_seconds() {
    let s = TestServer::start().await;
    let r = s.create_item(&s.owner, "default", "ready").await;
    let a = tool(&s, &s.owner, "pad_claim_next", json!({"wait": 1})).await;
    let (out, is_error) = result(&a);
    assert!(!is_error, "{out}");
    assert_eq!(out["item"]["ref"], r.as_str(), "{out}");
    for bad in [json!(31), json!(-1)] {
        let a = tool(&s, &s.owner, "pad_claim_next", json!({"wait": bad})).await;
        let (out, is_error) = result(&a);
        assert!(is_error, "{bad}: {out}");
        assert_eq!(
            (&out["error"]["code"], &out["error"]["details"]["field"]),
            (&json!("validation_failed"), &json!("wait")),
            "{bad}: {out}"
        );
    }
    // Not a whole number: refused as the API refuses it, the field named as given.
    for (field, bad) in [("wait", json!(1.5)), ("wait_seconds", json!(1.5)), ("wait", json!("30s"))] {
        let http = s.post(&s.owner, "/api/v1/workspaces/default/claim-next", json!({ field: bad })).await;
        let mcp = tool(&s, &s.owner, "pad_claim_next", json!({ field: bad })).await;
        refused_alike(&http, &mcp, field);
    }

    let a = tool(&s, &s.owner, "pad_claim_next", json!({"wait": 1, "wait_seconds": 1})).await;
    let (out, is_error) = result(&a);
    assert!(is_error, "{out}");
    assert_eq!(out["error"]["code"], "validation_failed", "{out}");
    let message = out["error"]["message"].as_str().unwrap();
    assert!(message.contains("`wait`") && message.contains("`wait_seconds`"), "{message}");
}

/// The MCP refusal `mcp` is the API's `http`: the same code, `details`
/// (`field` naming `field`) and message, which the tool follows with the
/// next step.
fn refused_alike(http: &Answer, mcp: &Answer, field: &str) {
    assert_eq!(http.status, 400, "{field}: {:?}", http.body);
    let (out, is_error) = result(mcp);
    assert!(is_error, "{field}: {out}");
    let (api, refused) = (&http.body["error"], &out["error"]);
    assert_eq!(refused["code"], api["code"], "{field}: {refused} vs {api}");
    assert_eq!(refused["details"], api["details"], "{field}: {refused} vs {api}");
    assert_eq!(refused["details"]["field"], field, "{refused}");
    assert!(refused["message"].as_str().unwrap().starts_with(api["message"].as_str().unwrap()), "{refused} vs {api}");
}

/// A number argument that is not a whole number (a fraction, a string, one
/// past 64 bits) is refused as the API refuses it in a body: `count` and
/// `wait_seconds` with `validation_failed` and their range, a TTL with
/// `invalid_ttl`, the field named where it was given (docs/api.md, "Batches
/// and long polls"). Before, the MCP library refused the arguments with a
/// bare "failed to deserialize parameters", no code, no field.
#[tokio::test]
async fn unreadable_numbers_are_refused_as_the_api_refuses_them() {
    let s = TestServer::start().await;
    let item = s.create_item(&s.owner, "default", "ready").await;
    let api = "/api/v1/workspaces/default";
    for (field, bad) in [
        ("count", json!(1.5)),
        ("count", json!("2")),
        ("count", json!(1e20)),
        ("wait_seconds", json!("30s")),
        ("wait_seconds", json!(1e20)),
        ("ttl_seconds", json!(1.5)),
    ] {
        let http = s.post(&s.owner, &format!("{api}/claim-next"), json!({ field: bad })).await;
        let mcp = tool(&s, &s.owner, "pad_claim_next", json!({ field: bad })).await;
        refused_alike(&http, &mcp, field);
    }
    // Nothing was claimed.
    let shown = s.get(&s.owner, &format!("{api}/items/{item}")).await.body;
    assert_eq!(shown["lease"], Value::Null, "{shown}");

    let claim = json!({"holder": "a", "ttl_seconds": "600"});
    let http = s.post(&s.owner, &format!("{api}/items/{item}/claim"), claim.clone()).await;
    let mcp = tool(&s, &s.owner, "pad_item_claim", json!({"ref": item, "holder": "a", "ttl_seconds": "600"})).await;
    refused_alike(&http, &mcp, "ttl_seconds");

    let a = tool(&s, &s.owner, "pad_item_claim", json!({"ref": item, "holder": "a"})).await;
    let (out, is_error) = result(&a);
    assert!(!is_error, "{out}");
    let epoch = out["lease"]["epoch"].clone();
    let renew = json!({"epoch": epoch, "holder": "a", "ttl_seconds": 1.5});
    let http = s.post(&s.owner, &format!("{api}/items/{item}/renew"), renew.clone()).await;
    let mcp =
        tool(&s, &s.owner, "pad_item_renew", json!({"ref": item, "epoch": epoch, "holder": "a", "ttl_seconds": 1.5}))
            .await;
    refused_alike(&http, &mcp, "ttl_seconds");

    let entry = json!({"ref": item, "epoch": epoch, "ttl_seconds": 1.5});
    let http = s
        .post(
            &s.owner,
            &format!("{api}/leases/renew"),
            json!({"leases": [{"ref": item, "epoch": epoch, "holder": "a", "ttl_seconds": 1.5}]}),
        )
        .await;
    let mcp = tool(&s, &s.owner, "pad_leases_renew", json!({"holder": "a", "leases": [entry]})).await;
    refused_alike(&http, &mcp, "leases[0].ttl_seconds");

    for name in ["complete", "fail"] {
        let next = json!({"ttl_seconds": 2.5});
        let http = s
            .post(&s.owner, &format!("{api}/items/{item}/{name}"), json!({"epoch": epoch, "holder": "a", "next": next}))
            .await;
        let mcp = tool(
            &s,
            &s.owner,
            &format!("pad_item_{name}"),
            json!({"ref": item, "epoch": epoch, "holder": "a", "next": next}),
        )
        .await;
        refused_alike(&http, &mcp, "next.ttl_seconds");
    }
    // The lease is still held, as it was: nothing was renewed or ended.
    let shown = s.get(&s.owner, &format!("{api}/items/{item}")).await.body;
    assert_eq!((&shown["lease"]["holder"], &shown["status"]), (&json!("a"), &json!("open")), "{shown}");

    // The schemas agents read still say integer.
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    let resp = s.http.post(format!("{}/mcp", s.url)).bearer_auth(&s.owner);
    let resp = resp.header("accept", "application/json, text/event-stream").json(&list).send().await.unwrap();
    let tools: Value = resp.json().await.unwrap();
    let tools = tools["result"]["tools"].as_array().unwrap();
    let claim_next = tools.iter().find(|t| t["name"] == "pad_claim_next").unwrap();
    for field in ["count", "wait_seconds", "wait", "ttl_seconds"] {
        let schema = &claim_next["inputSchema"]["properties"][field];
        assert!(schema["type"].as_array().is_some_and(|t| t.contains(&json!("integer"))), "{field}: {schema}");
    }
}

/// `pad_item_renew` and `pad_leases_renew` name a lease by `epoch` or
/// `lease_id` (or both), as the API does (docs/leases.md, L17); with
/// neither, the API's `validation_failed` naming `epoch`.
#[tokio::test]
async fn renew_tools_take_a_lease_id_in_place_of_the_epoch() {
    let s = TestServer::start().await;
    let item = s.create_item(&s.owner, "default", "held").await;
    let a = tool(&s, &s.owner, "pad_item_claim", json!({"ref": item, "holder": "a"})).await;
    let (out, is_error) = result(&a);
    assert!(!is_error, "{out}");
    let (epoch, lease_id) = (out["lease"]["epoch"].clone(), out["lease"]["lease_id"].clone());

    let a = tool(
        &s,
        &s.owner,
        "pad_item_renew",
        json!({"ref": item, "lease_id": lease_id, "holder": "a", "ttl_seconds": 700}),
    )
    .await;
    let (out, is_error) = result(&a);
    assert!(!is_error, "{out}");
    assert_eq!((&out["lease"]["lease_id"], &out["lease"]["ttl_seconds"]), (&lease_id, &json!(700)), "{out}");

    let both = json!({"ref": item, "epoch": epoch, "lease_id": lease_id, "ttl_seconds": 800});
    let a = tool(&s, &s.owner, "pad_leases_renew", json!({"holder": "a", "leases": [both]})).await;
    let (out, is_error) = result(&a);
    assert!(!is_error, "{out}");
    assert_eq!(out["results"][0]["lease"]["ttl_seconds"], 800, "{out}");
    let by_id = json!({"ref": item, "lease_id": lease_id, "ttl_seconds": 900});
    let a = tool(&s, &s.owner, "pad_leases_renew", json!({"holder": "a", "leases": [by_id]})).await;
    let (out, is_error) = result(&a);
    assert!(!is_error, "{out}");
    assert_eq!(out["results"][0]["lease"]["ttl_seconds"], 900, "{out}");
    // Another lease's id is not this one's: lease_lost, as over HTTP.
    let wrong = json!({"ref": item, "lease_id": lease_id.as_i64().unwrap() + 1});
    let a = tool(&s, &s.owner, "pad_leases_renew", json!({"holder": "a", "leases": [wrong]})).await;
    let (out, is_error) = result(&a);
    assert!(!is_error, "{out}");
    assert_eq!(out["results"][0]["error"]["code"], "lease_lost", "{out}");

    // Neither: the API's refusal, for one lease and for many.
    let http =
        s.post(&s.owner, &format!("/api/v1/workspaces/default/items/{item}/renew"), json!({"holder": "a"})).await;
    let mcp = tool(&s, &s.owner, "pad_item_renew", json!({"ref": item, "holder": "a"})).await;
    refused_alike(&http, &mcp, "epoch");
    let a = tool(&s, &s.owner, "pad_leases_renew", json!({"holder": "a", "leases": [{"ref": item}]})).await;
    let (out, is_error) = result(&a);
    assert!(!is_error, "{out}");
    let many = s
        .post(&s.owner, "/api/v1/workspaces/default/leases/renew", json!({"leases": [{"ref": item, "holder": "a"}]}))
        .await;
    assert_eq!(out["results"][0]["error"], many.body["results"][0]["error"], "{out}");
    assert_eq!(out["results"][0]["error"]["details"]["field"], "epoch", "{out}");
}

/// `pad_item_complete`, `pad_item_fail` and `pad_item_release` name the
/// lease by `epoch`, `lease_id`, or both, as the API's ends do
/// (docs/leases.md, L17), and the claims hand the agent its `lease_id`. A
/// `lease_id` that is not the live lease's, alone or beside the right
/// epoch, is the API's refusal and changes nothing; complete and fail with
/// neither are the API's `validation_failed` naming `epoch`. Before, the
/// three took only `epoch`: the library refused `lease_id` as unknown, and
/// complete or fail without an epoch with no code at all.
#[tokio::test]
async fn end_tools_take_a_lease_id_in_place_of_the_epoch() {
    let s = TestServer::start().await;
    let api = "/api/v1/workspaces/default";
    let done = s.create_item(&s.owner, "default", "to complete").await;
    let failed = s.create_item(&s.owner, "default", "to fail").await;
    let released = s.create_item(&s.owner, "default", "to release").await;
    let mut leases = std::collections::HashMap::new();
    let a = tool(&s, &s.owner, "pad_item_claim", json!({"ref": done, "holder": "a"})).await;
    let (out, is_error) = result(&a);
    assert!(!is_error, "{out}");
    leases.insert(done.clone(), out["lease"].clone());
    let a = tool(&s, &s.owner, "pad_claim_next", json!({"holder": "a", "count": 2})).await;
    let (out, is_error) = result(&a);
    assert!(!is_error, "{out}");
    assert_eq!(out["lease"]["lease_id"], out["grants"][0]["lease"]["lease_id"], "{out}");
    for grant in out["grants"].as_array().unwrap() {
        leases.insert(grant["item"]["ref"].as_str().unwrap().to_string(), grant["lease"].clone());
    }
    for lease in leases.values() {
        assert!(lease["lease_id"].is_i64() && lease["epoch"].is_i64(), "{lease}");
    }
    assert_eq!(leases.len(), 3, "{leases:?}");

    let ends = [("complete", &done), ("fail", &failed), ("release", &released)];
    for (name, item) in ends {
        let (epoch, lease_id) = (&leases[item]["epoch"], &leases[item]["lease_id"]);
        let path = format!("{api}/items/{item}/{name}");
        // Another item's lease id: alone, or with this lease's own epoch.
        let other = if item == &done { &leases[&failed]["lease_id"] } else { &leases[&done]["lease_id"] };
        for wrong in [json!({"lease_id": other}), json!({"epoch": epoch, "lease_id": other})] {
            let mut body = json!({"holder": "a"});
            body.as_object_mut().unwrap().extend(wrong.as_object().unwrap().clone());
            let http = s.post(&s.owner, &path, body.clone()).await;
            assert_eq!(http.code(), "lease_lost", "{name} {wrong}: {:?}", http.body);
            body["ref"] = json!(item);
            let mcp = tool(&s, &s.owner, &format!("pad_item_{name}"), body).await;
            let (out, is_error) = result(&mcp);
            assert!(is_error, "{name} {wrong}: {out}");
            assert_eq!(out["error"]["code"], http.body["error"]["code"], "{name} {wrong}: {out}");
        }
        if name != "release" {
            // Neither: the API's refusal. (A release without either is the
            // holder's unfenced release, over HTTP as here: docs/leases.md, L6.)
            let http = s.post(&s.owner, &path, json!({"holder": "a"})).await;
            let mcp = tool(&s, &s.owner, &format!("pad_item_{name}"), json!({"ref": item, "holder": "a"})).await;
            refused_alike(&http, &mcp, "epoch");
        }
        // Nothing changed: the lease is held, the item open, no failure counted.
        let shown = s.get(&s.owner, &format!("{api}/items/{item}")).await.body;
        assert_eq!(shown["lease"]["lease_id"], *lease_id, "{name}: {shown}");
        assert_eq!((&shown["status"], &shown["failures"]), (&json!("open"), &json!(0)), "{name}: {shown}");

        let by_id = json!({"ref": item, "lease_id": lease_id, "holder": "a"});
        let a = tool(&s, &s.owner, &format!("pad_item_{name}"), by_id).await;
        let (out, is_error) = result(&a);
        assert!(!is_error, "{name}: {out}");
        let shown = s.get(&s.owner, &format!("{api}/items/{item}")).await.body;
        assert_eq!(shown["lease"], Value::Null, "{name}: {shown}");
        assert_eq!(shown["last_lease"]["lease_id"], *lease_id, "{name}: {shown}");
    }
    for (item, field, value) in [(&done, "status", json!("done")), (&failed, "failures", json!(1))] {
        let shown = s.get(&s.owner, &format!("{api}/items/{item}")).await.body;
        assert_eq!(shown[field], value, "{shown}");
    }

    // The schemas agents read offer both, and require neither.
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    let resp = s.http.post(format!("{}/mcp", s.url)).bearer_auth(&s.owner);
    let resp = resp.header("accept", "application/json, text/event-stream").json(&list).send().await.unwrap();
    let tools: Value = resp.json().await.unwrap();
    for (name, _) in ends {
        let t = tools["result"]["tools"].as_array().unwrap().iter().find(|t| t["name"] == format!("pad_item_{name}"));
        let schema = &t.unwrap()["inputSchema"];
        for field in ["epoch", "lease_id"] {
            assert!(schema["properties"][field].is_object(), "{name}: {schema}");
            assert!(!schema["required"].as_array().unwrap().contains(&json!(field)), "{name}: {schema}");
        }
    }
}

/// Transport errors of `/mcp` (not JSON-RPC, a wrong `Accept`) answer with
/// the error envelope every route uses, keeping the transport's status and
/// its sentence (docs/api.md, "Errors").
#[tokio::test]
async fn mcp_transport_errors_are_the_error_envelope() {
    let s = TestServer::start().await;
    for (accept, body) in [("text/plain", "{}"), ("application/json, text/event-stream", "not json at all")] {
        let resp = s
            .http
            .post(format!("{}/mcp", s.url))
            .bearer_auth(&s.owner)
            .header("accept", accept)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        let status = resp.status();
        assert!(status.is_client_error(), "{accept}: {status}");
        let v: serde_json::Value = resp.json().await.expect("a JSON body");
        assert!(v["error"]["code"].is_string() && v["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{v}");
    }
}

/// `next` on pad_item_complete and pad_item_fail claims the next item in
/// the same tool call (docs/api.md, "The next item in the same call"): an
/// agent saves a call, and a turn, per item.
#[tokio::test]
async fn an_end_with_next_hands_the_agent_its_next_item() {
    let s = TestServer::start().await;
    let first = s.create_item(&s.owner, "default", "first").await;
    let second = s.create_item(&s.owner, "default", "second").await;
    let third = s.create_item(&s.owner, "default", "third").await;
    let a = tool(&s, &s.owner, "pad_claim_next", json!({"holder": "agent"})).await;
    let (out, is_error) = result(&a);
    assert!(!is_error, "{out}");
    assert_eq!(out["item"]["ref"], first.as_str());
    let epoch = out["lease"]["epoch"].clone();

    // A bad next is refused whole: the lease is still held.
    let bad = json!({"ref": first, "epoch": epoch, "holder": "agent", "next": {"ttl_seconds": 0}});
    let a = tool(&s, &s.owner, "pad_item_complete", bad).await;
    let (out, is_error) = result(&a);
    assert!(is_error, "{out}");
    assert_eq!(out["error"]["details"]["field"], "next.ttl_seconds", "{out}");
    let held = s.get(&s.owner, &format!("/api/v1/workspaces/default/items/{first}")).await.body;
    assert_eq!(held["lease"]["holder"], "agent", "nothing changed: {held}");

    let done = json!({"ref": first, "epoch": epoch, "holder": "agent", "next": {}});
    let a = tool(&s, &s.owner, "pad_item_complete", done).await;
    let (out, is_error) = result(&a);
    assert!(!is_error, "{out}");
    assert_eq!(out["item"]["status"], "done", "{out}");
    assert_eq!(out["next"]["item"]["ref"], second.as_str(), "{out}");
    assert_eq!(out["next"]["lease"]["holder"], "agent", "under the same holder: {out}");

    let epoch = out["next"]["lease"]["epoch"].clone();
    let failed = json!({"ref": second, "epoch": epoch, "holder": "agent", "note": "stuck", "next": {}});
    let a = tool(&s, &s.owner, "pad_item_fail", failed).await;
    let (out, is_error) = result(&a);
    assert!(!is_error, "{out}");
    assert_eq!(out["item"]["failures"], 1, "{out}");
    assert_eq!(out["next"]["item"]["ref"], third.as_str(), "{out}");
}
