//! `pad wit <verb>` against a real `pad serve`, case by case against the
//! work-item-tracker contract (docs/work-item-tracker.md): result fields,
//! `schema_version`, exit codes 0 · 2 · 3 · 4 · 5 · 7 · 8, and the adapter
//! directory `pad wit adapter` writes.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::server::TestServer;
use pad_client::{Client, Url};
use pad_core::api::{CreateToken, SetMember};
use pad_core::{ItemPatch, Role, Status};
use serde_json::{Value, json};

const WS: &str = "default";

fn block_on<F: Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f)
}

/// What one `pad wit` run answered.
#[derive(Debug)]
struct Answer {
    code: i32,
    json: Value,
    stderr: String,
}

/// A consumer repo bound to the test server.
struct Consumer<'a> {
    server: &'a TestServer,
    dir: tempfile::TempDir,
    binding: PathBuf,
}

impl<'a> Consumer<'a> {
    fn new(server: &'a TestServer) -> Self {
        Self::with_config(server, json!({"lease_ttl_hours": 1, "pad": {"url": server.url, "workspace": WS}}))
    }

    fn with_config(server: &'a TestServer, config: Value) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let binding = dir.path().join(".work-item-tracker.json");
        let text = json!({"schema_version": "1.0", "provider": "pad", "config": config});
        std::fs::write(&binding, text.to_string()).unwrap();
        Consumer { server, dir, binding }
    }

    fn wit(&self, args: &[&str]) -> Answer {
        self.wit_env(args, &[])
    }

    /// Runs `pad wit ARGS` with the binding in `$WORK_ITEM_TRACKER_BINDING`
    /// and the server's `default` profile (same URL, so its token is used).
    fn wit_env(&self, args: &[&str], env: &[(&str, &str)]) -> Answer {
        let mut cmd = self.server.pad();
        cmd.arg("wit").args(args).env("WORK_ITEM_TRACKER_BINDING", &self.binding).current_dir(self.dir.path());
        for (k, v) in env {
            cmd.env(k, v);
        }
        answer(cmd.output().expect("run pad wit"))
    }
}

fn answer(out: Output) -> Answer {
    let stdout = String::from_utf8(out.stdout).expect("UTF-8 stdout");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let code = out.status.code().expect("exited");
    assert!(!stdout.contains('\r'), "CR on stdout: {stdout:?}");
    let json = if code == 0 {
        assert_eq!(stdout.lines().count(), 1, "one JSON line on stdout: {stdout:?}");
        let v: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout:?}"));
        assert_eq!(v["schema_version"], "1.0", "{v}");
        v
    } else {
        assert_eq!(stdout, "", "a failure prints nothing on stdout (stderr: {stderr})");
        Value::Null
    };
    Answer { code, json, stderr }
}

#[track_caller]
fn ok(a: Answer) -> Value {
    assert_eq!(a.code, 0, "{}", a.stderr);
    a.json
}

#[track_caller]
fn fails(a: Answer, code: i32) -> String {
    assert_eq!(a.code, code, "expected exit {code}: {a:?}");
    a.stderr
}

fn ids(list: &Value) -> Vec<String> {
    list["items"].as_array().unwrap().iter().map(|i| i["id"].as_str().unwrap().to_string()).collect()
}

fn owner(s: &TestServer) -> Client {
    Client::new(Url::parse(&s.url).unwrap(), s.token.clone()).unwrap()
}

/// A member with `role` and a token of their own.
fn member(s: &TestServer, email: &str, role: Role) -> String {
    block_on(async {
        let c = owner(s);
        c.set_member(WS, &SetMember { email: email.into(), role }).await.unwrap();
        c.create_token(WS, &CreateToken { name: email.into(), email: Some(email.into()), scope: None, role: None })
            .await
            .unwrap()
            .token
    })
}

#[test]
fn items_edges_and_lists() {
    let s = TestServer::start();
    let c = Consumer::new(&s);

    let caps = ok(c.wit(&["capabilities"]));
    assert_eq!(caps["provider"], "pad");
    for verb in
        ["create-item", "get-item", "list-items", "list-sub-items", "claim", "release", "reclaim", "capabilities"]
    {
        assert_eq!(caps["verbs"][verb], true, "{verb}");
    }

    fails(c.wit(&["create-item"]), 2);
    fails(c.wit(&["definitely-not-a-verb"]), 2);
    let a = ok(c.wit(&["create-item", "--title", "A", "--body", "text"]));
    assert_eq!(a["id"], "pad:default/TASK#1");
    assert_eq!((&a["state"], &a["type"], &a["blocked_by_count"]), (&json!("open"), &json!("task"), &json!(0)));
    assert_eq!((&a["assignees"], &a["parent_id"]), (&json!([]), &Value::Null));
    assert!(a["url"].as_str().unwrap().starts_with(&s.url), "{a}");
    let a_id = a["id"].as_str().unwrap();

    let b = ok(c.wit(&["create-item", "--title", "B", "--labels", "x, y", "--type", "Bug"]));
    assert_eq!((&b["id"], &b["labels"], &b["type"]), (&json!("pad:default/BUG#1"), &json!(["x", "y"]), &json!("bug")));
    let b_id = b["id"].as_str().unwrap();
    // `--repo <workspace>/<PREFIX>` picks the kind; another workspace is refused.
    let f = ok(c.wit(&["create-item", "--title", "F", "--repo", "default/feat"]));
    assert_eq!((&f["id"], &f["type"]), (&json!("pad:default/FEAT#1"), &json!("feature")));
    fails(c.wit(&["create-item", "--title", "F", "--repo", "other/TASK"]), 2);
    fails(c.wit(&["create-item", "--title", "F", "--repo", "default/NOPE"]), 2);
    fails(c.wit(&["create-item", "--title", "F", "--repo", "default/BUG", "--type", "task"]), 2);

    // Edges at create: parent and an open blocker.
    let cc = ok(c.wit(&["create-item", "--title", "C", "--parent", a_id, "--blocked-by", b_id]));
    assert_eq!((&cc["parent_id"], &cc["blocked_by_count"]), (&json!(a_id), &json!(1)));
    let c_id = cc["id"].as_str().unwrap();
    fails(c.wit(&["create-item", "--title", "D", "--parent", "pad:default/TASK#999999"]), 5);

    fails(c.wit(&["get-item", "not-an-id"]), 2);
    fails(c.wit(&["get-item", "pad:default/TASK#999999"]), 5);
    fails(c.wit(&["get-item", "pad:elsewhere/TASK#1"]), 2);
    assert_eq!(ok(c.wit(&["get-item", a_id]))["title"], "A");

    // link-blocks is idempotent; the count is of open blockers only.
    for _ in 0..2 {
        let l = ok(c.wit(&["link-blocks", b_id, "--blocked-by", a_id]));
        assert_eq!(l, json!({"schema_version": "1.0", "id": b_id, "blocked_by": a_id, "linked": true}));
    }
    assert_eq!(ok(c.wit(&["get-item", b_id]))["blocked_by_count"], 1);
    fails(c.wit(&["link-blocks", b_id, "--blocked-by", "pad:default/TASK#999999"]), 5);

    let l = ok(c.wit(&["add-sub-item", b_id, "--parent", a_id]));
    assert_eq!(l, json!({"schema_version": "1.0", "id": b_id, "parent_id": a_id, "linked": true}));
    ok(c.wit(&["add-sub-item", b_id, "--parent", a_id]));
    fails(c.wit(&["add-sub-item", b_id, "--parent", "pad:default/TASK#999999"]), 5);
    assert_eq!(ok(c.wit(&["get-item", b_id]))["parent_id"], a_id);
    // One parent per item: moving it is not a side effect of linking.
    let e = fails(c.wit(&["add-sub-item", b_id, "--parent", c_id]), 7);
    assert!(e.contains("already a sub-item"), "{e}");

    let children = ok(c.wit(&["list-sub-items", a_id]));
    assert_eq!(ids(&children), [b_id, c_id]);
    assert!(children["items"].as_array().unwrap().iter().all(|i| i["parent_id"] == a_id));
    fails(c.wit(&["list-sub-items", "not-an-id"]), 2);
    fails(c.wit(&["list-sub-items", "pad:default/TASK#999999"]), 5);
    assert_eq!(ids(&ok(c.wit(&["list-sub-items", c_id]))), Vec::<String>::new());

    // Closing A: B's blocker count drops, and A moves to the closed lists.
    block_on(owner(&s).update_item(WS, "TASK-1", &ItemPatch { status: Some(Status::Done), ..Default::default() }))
        .unwrap();
    assert_eq!(ok(c.wit(&["get-item", b_id]))["blocked_by_count"], 0);
    let open = ok(c.wit(&["list-items"]));
    assert_eq!(ids(&open), [b_id, f["id"].as_str().unwrap(), c_id]);
    assert_eq!(ids(&ok(c.wit(&["list-items", "--state", "closed"]))), [a_id]);
    assert_eq!(ids(&ok(c.wit(&["list-items", "--state", "all", "--repo", "default/BUG"]))), [b_id]);
    assert_eq!(ids(&ok(c.wit(&["list-sub-items", a_id, "--state", "closed"]))), Vec::<String>::new());
    fails(c.wit(&["list-items", "--state", "sideways"]), 2);
}

#[test]
fn leases_case_by_case() {
    let s = TestServer::start();
    let c = Consumer::new(&s);
    let a_id = ok(c.wit(&["create-item", "--title", "A"]))["id"].as_str().unwrap().to_string();
    let b_id = ok(c.wit(&["create-item", "--title", "B"]))["id"].as_str().unwrap().to_string();
    let (a, b) = (a_id.as_str(), b_id.as_str());

    let claim = ok(c.wit(&["claim", a, "--session-id", "s1"]));
    assert_eq!(
        (&claim["id"], &claim["holder"], &claim["session_id"]),
        (&json!(a), &json!("owner@localhost"), &json!("s1"))
    );
    assert_eq!(
        (&claim["ttl_hours"], &claim["ttl_minutes"], &claim["ttl_seconds"]),
        (&json!(1), &json!(0), &json!(3600))
    );
    let handle = claim["lease_comment_id"].as_i64().expect("a numeric handle").to_string();
    assert_eq!(ok(c.wit(&["get-item", a]))["assignees"], json!(["owner@localhost"]));

    // Claim never refreshes: another session and the same one both back off.
    let e = fails(c.wit(&["claim", a, "--session-id", "s2"]), 7);
    assert!(e.contains("leased by owner@localhost"), "{e}");
    fails(c.wit(&["claim", a, "--session-id", "s1"]), 7);

    let renewed = ok(c.wit(&["renew-lease", a, "--lease-comment-id", &handle]));
    assert_eq!(renewed["lease_comment_id"].as_i64().unwrap().to_string(), handle);
    assert!(renewed["renewed_at"].as_str() >= claim["renewed_at"].as_str(), "{renewed}");
    // B leased too, at its own first grant: A's handle still renews nothing of B's.
    let b_claim = ok(c.wit(&["claim", b, "--session-id", "s3"]));
    assert_ne!(b_claim["lease_comment_id"].as_i64().unwrap().to_string(), handle);
    fails(c.wit(&["renew-lease", b, "--lease-comment-id", &handle]), 7);
    fails(c.wit(&["release", b, "--lease-comment-id", &handle]), 7);
    fails(c.wit(&["renew-lease", a, "--lease-comment-id", "999999"]), 7);

    // Reclaim never takes a live lease.
    let r = ok(c.wit(&["reclaim", a]));
    assert_eq!(r["reclaimed"], false);
    assert!(r["reason"].as_str().unwrap().contains("live"), "{r}");

    // Another member cannot release it, even with the right handle.
    let other = member(&s, "other@localhost", Role::Editor);
    fails(c.wit_env(&["release", a, "--lease-comment-id", &handle], &[("PAD_TOKEN", &other)]), 7);

    let rel = ok(c.wit(&["release", a, "--lease-comment-id", &handle]));
    assert_eq!((&rel["id"], &rel["released"]), (&json!(a), &json!(true)));
    assert_eq!(rel["lease_comment_id"].as_i64().unwrap().to_string(), handle);
    let again = ok(c.wit(&["release", a, "--lease-comment-id", &handle]));
    assert_eq!(again["released"], false, "{again}");
    assert_eq!(ok(c.wit(&["get-item", a]))["assignees"], json!([]));
    fails(c.wit(&["renew-lease", a, "--lease-comment-id", &handle]), 7);
    // A stale handle under a newer claim is refused, not a no-op.
    let newer = ok(c.wit(&["claim", a, "--session-id", "s4"]));
    assert_ne!(newer["lease_comment_id"].as_i64().unwrap().to_string(), handle);
    fails(c.wit(&["release", a, "--lease-comment-id", &handle]), 7);

    // TTL 0: born expired. The claim answers 0, the lease blocks nobody, and
    // reclaim reports the expired lease.
    let d = ok(c.wit(&["create-item", "--title", "D"]))["id"].as_str().unwrap().to_string();
    let zero = ok(c.wit(&["claim", &d, "--ttl-hours", "0", "--session-id", "s5"]));
    assert_eq!((&zero["ttl_hours"], &zero["ttl_minutes"]), (&json!(0), &json!(0)));
    let zero_handle = zero["lease_comment_id"].as_i64().unwrap().to_string();
    assert_eq!(ok(c.wit(&["get-item", &d]))["assignees"], json!([]));
    let r = ok(c.wit(&["reclaim", &d]));
    assert_eq!(r["reclaimed"], true, "{r}");
    assert!(r["reason"].as_str().unwrap().contains("expired"), "{r}");
    fails(c.wit(&["renew-lease", &d, "--lease-comment-id", &zero_handle]), 7);
    assert_eq!(ok(c.wit(&["release", &d, "--lease-comment-id", &zero_handle]))["released"], false);
    // Never leased: nothing to reclaim.
    let e = ok(c.wit(&["create-item", "--title", "E"]))["id"].as_str().unwrap().to_string();
    assert_eq!(ok(c.wit(&["reclaim", &e]))["reclaimed"], false);

    // Minutes add to hours; pad's 24 h maximum is a provider ceiling (7).
    let half = ok(c.wit(&["claim", &e, "--ttl-hours", "0", "--ttl-minutes", "30"]));
    assert_eq!((&half["ttl_seconds"], &half["ttl_minutes"]), (&json!(1800), &json!(30)));
    let f = ok(c.wit(&["create-item", "--title", "F"]))["id"].as_str().unwrap().to_string();
    let e = fails(c.wit(&["claim", &f, "--ttl-hours", "25"]), 7);
    assert!(e.contains("ceiling"), "{e}");
    fails(c.wit(&["claim", &f, "--ttl-minutes", "60"]), 2);
    fails(c.wit(&["claim", &f, "--ttl-hours", "-1"]), 2);
    fails(c.wit(&["renew-lease", &f]), 2);
    fails(c.wit(&["claim", "pad:default/TASK#999999"]), 5);
}

#[test]
fn binding_and_credentials() {
    let s = TestServer::start();
    let c = Consumer::new(&s);
    ok(c.wit(&["create-item", "--title", "A"]));

    // No binding, a bad one, another provider's: exit 3.
    fails(c.wit_env(&["get-item", "pad:default/TASK#1"], &[("WORK_ITEM_TRACKER_BINDING", "/nonexistent.json")]), 3);
    let write = |name: &str, text: &str| -> PathBuf {
        let p = c.dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let bad = [
        ("not-json", "{"),
        ("github", r#"{"schema_version":"1.0","provider":"github","config":{"lease_ttl_hours":1}}"#),
        ("no-ttl", r#"{"schema_version":"1.0","provider":"pad","config":{}}"#),
        (
            "bad-url",
            r#"{"schema_version":"1.0","provider":"pad","config":{"lease_ttl_hours":1,"pad":{"url":"ftp://x"}}}"#,
        ),
    ];
    for (name, text) in bad {
        let p = write(name, text);
        let e = fails(
            c.wit_env(&["get-item", "pad:default/TASK#1"], &[("WORK_ITEM_TRACKER_BINDING", p.to_str().unwrap())]),
            3,
        );
        assert!(!e.is_empty(), "{name}: says why");
    }
    // Found at the repo root without the variable, never above it.
    let repo = c.dir.path().join("repo");
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    std::fs::create_dir_all(repo.join("sub")).unwrap();
    std::fs::copy(&c.binding, repo.join(".work-item-tracker.json")).unwrap();
    let run_in = |dir: &Path| {
        let mut cmd = s.pad();
        cmd.args(["wit", "get-item", "pad:default/TASK#1"]).current_dir(dir).env_remove("WORK_ITEM_TRACKER_BINDING");
        answer(cmd.env_remove("CLAUDE_PROJECT_DIR").output().unwrap())
    };
    assert_eq!(ok(run_in(&repo.join("sub")))["title"], "A");
    std::fs::remove_file(repo.join(".work-item-tracker.json")).unwrap();
    fails(run_in(&repo.join("sub")), 3);

    // Credentials: a refused token is 4; so is none at all (the profile is
    // for another server, so its token is not sent there).
    fails(c.wit_env(&["get-item", "pad:default/TASK#1"], &[("PAD_TOKEN", "pad_not-a-token")]), 4);
    let elsewhere =
        Consumer::with_config(&s, json!({"lease_ttl_hours": 1, "pad": {"url": "http://127.0.0.1:9", "workspace": WS}}));
    let e = fails(elsewhere.wit(&["get-item", "pad:default/TASK#1"]), 4);
    assert!(e.contains("no token"), "{e}");
    // With a token, a server that is not there is "unavailable" (8).
    fails(elsewhere.wit_env(&["get-item", "pad:default/TASK#1"], &[("PAD_TOKEN", &s.token)]), 8);
    // config.pad.token_env names the variable; unset is 4, set is used.
    let named = Consumer::with_config(
        &s,
        json!({"lease_ttl_hours": 1, "pad": {"url": s.url, "workspace": WS, "token_env": "TRACKER_PAD_TOKEN"}}),
    );
    fails(named.wit(&["get-item", "pad:default/TASK#1"]), 4);
    ok(named.wit_env(&["get-item", "pad:default/TASK#1"], &[("TRACKER_PAD_TOKEN", &s.token)]));

    // The binding's TTL (and its personal overlay's) is the claim default.
    let short = Consumer::with_config(
        &s,
        json!({"lease_ttl_hours": 0, "lease_ttl_minutes": 45, "pad": {"url": s.url, "workspace": WS}}),
    );
    assert_eq!(ok(short.wit(&["claim", "pad:default/TASK#1"]))["ttl_seconds"], 2700);
    std::fs::write(
        short.dir.path().join(".work-item-tracker.local.json"),
        r#"{"config":{"lease_ttl_hours":2,"lease_ttl_minutes":0}}"#,
    )
    .unwrap();
    let b = ok(short.wit(&["create-item", "--title", "B"]))["id"].as_str().unwrap().to_string();
    assert_eq!(ok(short.wit(&["claim", &b]))["ttl_seconds"], 7200);
}

#[test]
fn label_provenance_and_the_adapter_directory() {
    let s = TestServer::start();
    let c = Consumer::new(&s);
    let a = ok(c.wit(&["create-item", "--title", "A", "--labels", "agent-ready"]))["id"].as_str().unwrap().to_string();
    let editor = member(&s, "ed@localhost", Role::Editor);
    block_on(async {
        let ed = Client::new(Url::parse(&s.url).unwrap(), editor.clone()).unwrap();
        let patch = ItemPatch { add_labels: vec!["reviewed".into()], ..Default::default() };
        ed.update_item(WS, "TASK-1", &patch).await.unwrap();
    });

    let p = ok(c.wit(&["label-provenance", &a, "--label", "agent-ready", "--label", "reviewed"]));
    assert_eq!(p["admitted"], true, "{p}");
    assert_eq!(p["labels"][0]["actor"], "owner@localhost");
    assert_eq!((&p["labels"][0]["permission"], &p["labels"][0]["trusted"]), (&json!("admin"), &json!(true)));
    assert_eq!((&p["labels"][1]["actor"], &p["labels"][1]["permission"]), (&json!("ed@localhost"), &json!("write")));
    // A viewer's label does not admit; neither does one the item lacks.
    member(&s, "ed@localhost", Role::Viewer);
    let p = ok(c.wit(&["label-provenance", &a, "--label", "reviewed", "--label", "agent-ready"]));
    assert_eq!(
        (&p["admitted"], &p["labels"][0]["trusted"], &p["labels"][0]["role"]),
        (&json!(false), &json!(false), &json!("viewer"))
    );
    let p = ok(c.wit(&["label-provenance", &a, "--label", "needs-human"]));
    assert_eq!((&p["admitted"], &p["labels"][0]["actor"]), (&json!(false), &Value::Null));
    fails(c.wit(&["label-provenance", &a]), 2);

    // The adapter directory: a manifest equal to `capabilities`, one
    // executable script per verb, each passing arguments and exit codes on.
    let root = c.dir.path().join("adapters");
    let out = s.pad().args(["wit", "adapter"]).arg(&root).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let manifest: Value = serde_json::from_slice(&std::fs::read(root.join("pad/capabilities.json")).unwrap()).unwrap();
    assert_eq!(manifest, ok(c.wit(&["capabilities"])));
    for (verb, enabled) in manifest["verbs"].as_object().unwrap() {
        assert_eq!(enabled, true);
        let script = root.join(format!("pad/{verb}.sh"));
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&script).unwrap().permissions().mode() & 0o111, 0o111, "{verb}");
    }
    // The seam runs each verb as `bash <verb>.sh ARGS`.
    let script = |verb: &str, args: &[&str]| {
        let mut bash = std::process::Command::new("bash");
        bash.arg(root.join(format!("pad/{verb}.sh")))
            .args(args)
            .env("PAD_HOME", &s.home)
            .env("PAD_BIN", env!("CARGO_BIN_EXE_pad"))
            .env("WORK_ITEM_TRACKER_BINDING", &c.binding)
            .env_remove("PAD_TOKEN")
            .env_remove("PAD_URL")
            .env_remove("PAD_PROFILE")
            .env_remove("PAD_WORKSPACE")
            .current_dir(c.dir.path());
        answer(bash.output().unwrap())
    };
    assert_eq!(ok(script("get-item", &[&a]))["id"], json!(a));
    ok(script("claim", &[&a, "--session-id", "x"]));
    fails(script("claim", &[&a, "--session-id", "y"]), 7);
    fails(script("get-item", &["not-an-id"]), 2);
}
