//! A hostile member's input, over HTTP: bodies that are not one JSON object,
//! invisible characters, `blocked_by` cycles, and whether the OpenAPI
//! document states the limits the server enforces (docs/reliability.md,
//! "Hostile member").

use crate::common;

use common::TestServer;
use reqwest::Method;
use serde_json::{Value, json};

const WS: &str = "/api/v1/workspaces/default";

async fn raw(s: &TestServer, method: Method, path: &str, body: &[u8]) -> (u16, Value) {
    let resp = s
        .http
        .request(method, format!("{}{path}", s.url))
        .bearer_auth(&s.owner)
        .header("content-type", "application/json")
        .body(body.to_vec())
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// An array is not read positionally as a body (`[null, null, true, "r"]`
/// to `/release` once meant `force: true, reason: "r"` and broke a lease),
/// and nothing may follow the object.
#[tokio::test]
async fn bodies_must_be_one_json_object_and_nothing_after_it() {
    let s = TestServer::start().await;
    let r = s.create_item(&s.owner, "default", "one").await;
    let claimed = s.post(&s.owner, &format!("{WS}/items/{r}/claim"), json!({"holder": "runner-a"})).await;
    assert_eq!(claimed.status, 200, "{:?}", claimed.body);

    let release = format!("{WS}/items/{r}/release");
    let items = format!("{WS}/items");
    let item = format!("{WS}/items/{r}");
    let next = format!("{WS}/claim-next");
    let cases: Vec<(Method, &str, &[u8], &str)> = vec![
        (Method::POST, &release, br#"[null, null, true, "r"]"#, "an array"),
        (Method::POST, &release, br#"  ["runner-a"]"#, "an array"),
        (Method::POST, &release, br#""runner-a""#, "a string"),
        (Method::POST, &release, b"42", "a number"),
        (Method::POST, &release, b"null", "null"),
        (Method::POST, &release, b"true", "a boolean"),
        (Method::POST, &items, br#"{"title": "x"} trailing garbage"#, "found more after it"),
        (Method::POST, &items, br#"{"title": "x"}{"title": "y"}"#, "found more after it"),
        (Method::POST, &items, br#"{"title": "x"}]"#, "found more after it"),
        (Method::PATCH, &item, br#"{"title": "y"} x"#, "found more after it"),
        (Method::POST, &next, br#"{"filter": [[], [], [], null, null, true]}"#, "filter"),
    ];
    for (method, path, body, says) in cases {
        let (status, answer) = raw(&s, method.clone(), path, body).await;
        let text = String::from_utf8_lossy(body);
        assert_eq!(status, 400, "{method} {path} {text}: {answer}");
        assert_eq!(answer["error"]["code"], "bad_request", "{text}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{text}: {message}");
    }
    // The lease was not broken, nothing was created or changed.
    let item = s.get(&s.owner, &format!("{WS}/items/{r}")).await.body;
    assert_eq!(item["lease"]["holder"], "runner-a");
    assert_eq!(item["title"], "one");
    assert_eq!(s.get(&s.owner, &items).await.body["items"].as_array().unwrap().len(), 1);
    // Where serde could not tell which field it was in (the body ended
    // before a key), no field is named; a body broken inside a TTL is a
    // broken body, not a TTL refusal (L8 is about numbers).
    for body in [&br#"{"title": "x""#[..], br#"{"title": "x","#, br#"{"#] {
        let (status, answer) = raw(&s, Method::POST, &items, body).await;
        assert_eq!((status, &answer["error"]["code"]), (400, &json!("bad_request")), "{answer}");
        assert_eq!(answer["error"]["details"].get("field"), None, "{answer}");
    }
    for body in [&br#"{"holder": "b", "ttl_seconds": tru}"#[..], br#"{"ttl_seconds": 1.5, "holder": }"#] {
        let (status, answer) = raw(&s, Method::POST, &format!("{WS}/items/{r}/claim"), body).await;
        assert_eq!((status, &answer["error"]["code"]), (400, &json!("bad_request")), "{answer}");
    }
    // Whitespace around the one object is fine.
    let (status, answer) = raw(&s, Method::POST, &items, b" \n{\"title\": \"two\"}\n ").await;
    assert_eq!(status, 201, "{answer}");
}

/// Zero-width and bidirectional characters in one-line fields are refused
/// with `validation_failed`, the field and the character named.
#[tokio::test]
async fn invisible_characters_are_refused_naming_the_character() {
    let s = TestServer::start().await;
    let r = s.create_item(&s.owner, "default", "one").await;
    let cases: Vec<(String, Value, &str, &str)> = vec![
        (format!("{WS}/items"), json!({"title": "invoice \u{202E}fdp.exe"}), "title", "U+202E RIGHT-TO-LEFT OVERRIDE"),
        (
            format!("{WS}/items"),
            json!({"title": "ok", "labels": ["ops\u{200B}"]}),
            "labels[0]",
            "U+200B ZERO WIDTH SPACE",
        ),
        (format!("{WS}/items/{r}/claim"), json!({"holder": "runner\u{2060}-a"}), "holder", "U+2060 WORD JOINER"),
        (format!("{WS}/items/{r}/claim"), json!({"session_id": "\u{FEFF}s1"}), "session_id", "U+FEFF"),
        (format!("{WS}/items/{r}/release"), json!({"holder": "a\u{200F}"}), "holder", "U+200F RIGHT-TO-LEFT MARK"),
        ("/api/v1/workspaces".into(), json!({"slug": "ops", "name": "Ops\u{2067}"}), "name", "U+2067"),
        (format!("{WS}/tokens"), json!({"name": "ci\u{200C}"}), "name", "U+200C ZERO WIDTH NON-JOINER"),
    ];
    for (path, body, field, names) in cases {
        let a = s.post(&s.owner, &path, body.clone()).await;
        assert_eq!((a.status.as_u16(), a.code()), (400, "validation_failed"), "{path} {body}: {:?}", a.body);
        assert_eq!(a.body["error"]["details"]["field"], field, "{body}");
        let message = a.body["error"]["message"].as_str().unwrap();
        assert!(message.contains(names) && message.contains("invisible"), "{message}");
    }
    let patch =
        s.call(Some(&s.owner), Method::PATCH, &format!("{WS}/items/{r}"), Some(json!({"title": "x\u{2029}y"}))).await;
    assert_eq!((patch.status.as_u16(), patch.code()), (400, "validation_failed"));
    // Nothing was written.
    let item = s.get(&s.owner, &format!("{WS}/items/{r}")).await.body;
    assert!(item.get("lease").is_none() && item["title"] == "one", "{item}");
    assert_eq!(s.get(&s.owner, "/api/v1/workspaces").await.body["workspaces"].as_array().unwrap().len(), 1);
    // Bodies may carry them (right-to-left text needs its marks), and titles
    // may use any script or an emoji sequence.
    let fine = json!({"title": "שלום 👩\u{200D}💻", "body": "\u{202B}עברית\u{202C}"});
    assert_eq!(s.post(&s.owner, &format!("{WS}/items"), fine).await.status, 201);
}

/// `blocked_by` cycles are refused with `validation_failed`, naming the field
/// and the cycle; the store's conformance suite covers both backends.
/// A path ref that is not one (`TASK-1-2`, `TASK-0`, a stray character) is
/// refused before the store is called, naming the field `ref`, and changes
/// nothing; a valid ref is read case-insensitively (docs/api.md, "Items").
#[tokio::test]
async fn malformed_refs_in_the_path_are_refused_naming_ref() {
    let s = TestServer::start().await;
    let r = s.create_item(&s.owner, "default", "one").await;
    let events_before = s.get(&s.owner, &format!("{WS}/events")).await.body;
    for bad in ["TASK-1-2", "TASK-0", "TASK-01", "TASK-%C2%A0", "-1", "task"] {
        for (method, suffix, body) in [
            (Method::GET, "", None),
            (Method::PATCH, "", Some(json!({"title": "x"}))),
            (Method::POST, "/claim", Some(json!({"holder": "runner-a"}))),
            (Method::POST, "/comments", Some(json!({"body": "hi"}))),
        ] {
            let path = format!("{WS}/items/{bad}{suffix}");
            let a = s.call(Some(&s.owner), method.clone(), &path, body).await;
            assert_eq!((a.status.as_u16(), a.code()), (400, "validation_failed"), "{method} {path}: {:?}", a.body);
            assert_eq!(a.body["error"]["details"]["field"], "ref", "{method} {path}: {:?}", a.body);
        }
    }
    assert_eq!(s.get(&s.owner, &format!("{WS}/events")).await.body, events_before, "nothing was written");
    let lower = s.get(&s.owner, &format!("{WS}/items/{}", r.to_lowercase())).await;
    assert_eq!((lower.status.as_u16(), lower.body["ref"].as_str()), (200, Some(r.as_str())));
}

#[tokio::test]
async fn blocked_by_cycles_are_refused_naming_the_cycle() {
    let s = TestServer::start().await;
    for t in ["one", "two", "three"] {
        s.create_item(&s.owner, "default", t).await;
    }
    let s = &s;
    let patch = |r: &str, blockers: Value| {
        let path = format!("{WS}/items/{r}");
        async move { s.call(Some(&s.owner), Method::PATCH, &path, Some(json!({"blocked_by": blockers}))).await }
    };
    assert_eq!(patch("TASK-1", json!(["TASK-2"])).await.status, 200);
    assert_eq!(patch("TASK-2", json!(["TASK-3"])).await.status, 200);
    let a = patch("TASK-3", json!(["TASK-1"])).await;
    assert_eq!((a.status.as_u16(), a.code()), (400, "validation_failed"), "{:?}", a.body);
    assert_eq!(a.body["error"]["details"]["field"], "blocked_by");
    let message = a.body["error"]["message"].as_str().unwrap();
    assert!(message.contains("blocked_by: would create a cycle: TASK-3 → TASK-1 → TASK-2 → TASK-3"), "{message}");
    assert_eq!(s.get(&s.owner, &format!("{WS}/items/TASK-3")).await.body["blocked_by"], json!([]));
}

/// At most 100 blockers (docs/api.md, "Limits"), counted on the list an
/// update would leave: `add_blocked_by` of 100 twice once gave an item 200.
/// The update past the cap is `validation_failed` on `add_blocked_by`,
/// naming the cap and the count, and writes nothing; a removal in the same
/// update makes room. On both backends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn add_blocked_by_cannot_grow_an_item_past_100_blockers() {
    for b in common::backends().await {
        let s = TestServer::start_on(&b.url).await;
        let target = s.create_item(&s.owner, "default", "target").await;
        let mut blockers = Vec::new();
        for n in 0..101 {
            blockers.push(s.create_item(&s.owner, "default", &format!("blocker {n}")).await);
        }
        let path = format!("{WS}/items/{target}");
        let patch = |body: Value| s.call(Some(&s.owner), Method::PATCH, &path, Some(body));
        let first = patch(json!({"add_blocked_by": blockers[..60]})).await;
        assert_eq!(first.status, 200, "{}: {:?}", b.name, first.body);
        let before = s.get(&s.owner, &format!("{path}/history")).await.body;
        let over = patch(json!({"add_blocked_by": blockers[60..]})).await;
        assert_eq!((over.status.as_u16(), over.code()), (400, "validation_failed"), "{}: {:?}", b.name, over.body);
        assert_eq!(over.body["error"]["details"]["field"], "add_blocked_by", "{}", b.name);
        let message = over.body["error"]["message"].as_str().unwrap();
        assert!(message.contains("100") && message.contains("101"), "{}: {message}", b.name);
        let item = s.get(&s.owner, &path).await.body;
        assert_eq!(item["blocked_by"].as_array().unwrap().len(), 60, "{}: nothing written", b.name);
        assert_eq!(s.get(&s.owner, &format!("{path}/history")).await.body, before, "{}: no version", b.name);
        let room = patch(json!({"add_blocked_by": blockers[60..], "remove_blocked_by": [blockers[0]]})).await;
        assert_eq!(room.status, 200, "{}: {:?}", b.name, room.body);
        assert_eq!(room.body["blocked_by"].as_array().unwrap().len(), 100, "{}", b.name);
    }
}

/// The limits the server enforces are stated in `/openapi.json`, so clients
/// generated from it (and schemathesis) agree with the server.
#[tokio::test]
async fn the_openapi_document_states_the_enforced_limits() {
    let s = TestServer::start().await;
    let spec = s.call(None, Method::GET, "/openapi.json", None).await.body;
    let schema = |name: &str| spec["components"]["schemas"][name].clone();
    let prop = |name: &str, field: &str| schema(name)["properties"][field].clone();
    let check = |v: Value, key: &str, want: i64, what: &str| {
        assert_eq!(v[key].as_i64(), Some(want), "{what}.{key}: {v}");
    };
    for (name, field, min, max) in [
        ("NewItem", "title", 1, 500),
        ("ItemPatch", "title", 1, 500),
        ("ClaimBody", "holder", 1, 200),
        ("ClaimBody", "session_id", 1, 200),
        ("RenewBody", "holder", 1, 200),
        ("ReleaseBody", "holder", 1, 200),
        ("ClaimNextBody", "holder", 1, 200),
        ("ClaimNextBody", "session_id", 1, 200),
        ("CreateWorkspace", "slug", 1, 63),
        ("CreateWorkspace", "name", 1, 200),
        ("CreateKind", "name", 1, 32),
        ("CreateKind", "prefix", 1, 10),
        ("CreateToken", "name", 1, 200),
        ("SetMember", "email", 3, 254),
        ("NewItem", "assignee", 3, 254),
    ] {
        let p = prop(name, field);
        check(p.clone(), "minLength", min, &format!("{name}.{field}"));
        check(p, "maxLength", max, &format!("{name}.{field}"));
    }
    check(prop("NewItem", "body"), "maxLength", 256 * 1024, "NewItem.body");
    check(prop("NewComment", "body"), "maxLength", 64 * 1024, "NewComment.body");
    check(prop("NewItem", "labels"), "maxItems", 50, "NewItem.labels");
    check(prop("NewItem", "labels")["items"].clone(), "maxLength", 64, "NewItem.labels[]");
    check(prop("NewItem", "labels")["items"].clone(), "minLength", 1, "NewItem.labels[]");
    check(prop("ItemPatch", "labels"), "maxItems", 50, "ItemPatch.labels");
    for body in ["ClaimBody", "RenewBody", "ClaimNextBody"] {
        check(prop(body, "ttl_seconds"), "minimum", 1, body);
        check(prop(body, "ttl_seconds"), "maximum", 86400, body);
    }
    // Query limits: `limit` of the item list and the frontier, of the event page.
    for (path, max) in [
        ("/api/v1/workspaces/{ws}/items", 500),
        ("/api/v1/workspaces/{ws}/frontier", 500),
        ("/api/v1/workspaces/{ws}/events", 1000),
    ] {
        let params = spec["paths"][path]["get"]["parameters"].as_array().unwrap();
        let limit = params.iter().find(|p| p["name"] == "limit").unwrap_or_else(|| panic!("{path}: no limit"));
        check(limit["schema"].clone(), "minimum", 1, path);
        check(limit["schema"].clone(), "maximum", max, path);
    }
    // Every string a request body takes is bounded.
    let mut unbounded = Vec::new();
    for (name, s) in spec["components"]["schemas"].as_object().unwrap() {
        let request =
            ["NewItem", "ItemPatch", "NewComment", "CreateWorkspace", "CreateKind", "SetMember", "CreateToken"]
                .contains(&name.as_str())
                || (name.ends_with("Body") && name != "ErrorBody")
                || name == "FrontierFilter";
        // `NewSession` is left out: its token is only hashed and compared,
        // bounded by the body limit.
        if !request {
            continue;
        }
        for (field, p) in s["properties"].as_object().into_iter().flatten() {
            let ty = p["type"].to_string();
            if ty.contains("string")
                && p.get("format").is_none()
                && p.get("enum").is_none()
                && p.get("maxLength").is_none()
            {
                unbounded.push(format!("{name}.{field}"));
            }
            if ty.contains("array") && p.get("maxItems").is_none() {
                unbounded.push(format!("{name}.{field}[]"));
            }
        }
    }
    assert!(unbounded.is_empty(), "request fields without a stated bound: {unbounded:?}");
}

/// Finding: the anonymous buckets were one per instance, so one client's
/// flood of bad sign-ins locked every user out of signing in. They are per
/// client address now (docs/api.md, "Limits"): a client on 127.0.0.2 spends
/// its sign-ins (a bucket of 5 that does not refill during the test), and a
/// valid sign-in from 127.0.0.1 still succeeds, as does a scrape.
#[tokio::test]
async fn one_clients_flood_of_bad_sign_ins_does_not_lock_out_another() {
    let s =
        TestServer::start_with(|st| st.anonymous = pad_server::limits::AnonymousLimiter::with_burst(1.0 / 3600.0, 5.0))
            .await;
    let flooder =
        reqwest::Client::builder().local_address("127.0.0.2".parse::<std::net::IpAddr>().unwrap()).build().unwrap();
    let mut refused = false;
    for _ in 0..10 {
        let r = flooder
            .post(format!("{}/api/v1/session", s.url))
            .json(&serde_json::json!({"token": "pad_not-a-token"}))
            .send()
            .await
            .unwrap();
        if r.status() == 429 {
            refused = true;
            break;
        }
        assert_eq!(r.status(), 401);
    }
    assert!(refused, "the flood was never limited");
    s.sign_in(&s.owner).await;
    s.scrape().await;
}

/// Sign-ins, sign-outs and `/metrics` name no user, so the per-user rate
/// limit cannot bound them: each has a bucket per client address
/// (docs/api.md, "Limits"). A flood gets 429 with Retry-After, in the error
/// envelope.
#[tokio::test]
async fn anonymous_sign_ins_sign_outs_and_scrapes_are_rate_limited() {
    let s = TestServer::start().await;
    let burst = (2.0 * pad_server::limits::ANONYMOUS_PER_SECOND) as usize;
    for (method, path, body) in [
        (Method::POST, "/api/v1/session", Some(serde_json::json!({"token": "pad_not-a-token"}))),
        (Method::DELETE, "/api/v1/session", None),
        (Method::GET, "/metrics", None),
    ] {
        let mut limited = None;
        // A request would have to take 50 ms for the bucket to keep up: it never does.
        for _ in 0..burst * 25 {
            let a = s.call(None, method.clone(), path, body.clone()).await;
            if a.status == 429 {
                limited = Some(a);
                break;
            }
        }
        let a = limited.unwrap_or_else(|| panic!("{method} {path}: never limited"));
        assert_eq!(a.code(), "rate_limited", "{method} {path}");
        assert!(a.headers.contains_key("retry-after"), "{method} {path}");
    }
}
