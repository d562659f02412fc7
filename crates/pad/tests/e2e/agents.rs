//! pad for AI agents end to end: Claude Code's MCP server started from the
//! `.mcp.json` that `pad setup claude` wrote, driven by the official MCP
//! Python SDK against a real `pad serve` (two sessions of one user never
//! share a lease); and `pad prime`, the brief an agent reads first.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::server::TestServer;

fn python() -> Option<std::path::PathBuf> {
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/pyenv/bin/python");
    if python.exists() {
        return Some(python);
    }
    if std::env::var_os("PAD_SKIP_MCP_TESTS").is_some() {
        eprintln!("SKIPPED: PAD_SKIP_MCP_TESTS is set and the MCP Python SDK is not installed");
        return None;
    }
    panic!("the MCP Python SDK is not installed: run scripts/setup-python-tests (scripts/test does)");
}

#[test]
fn claude_code_config_starts_pad_and_two_sessions_never_share_a_lease() {
    let Some(python) = python() else { return };
    let server = TestServer::start();
    let project = tempfile::tempdir().unwrap();
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_pad")).parent().unwrap().to_path_buf();
    let path = std::env::join_paths(
        std::iter::once(bin_dir).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())),
    )
    .unwrap();

    let setup = Command::new(env!("CARGO_BIN_EXE_pad"))
        .args(["setup", "claude"])
        .current_dir(project.path())
        .env("HOME", project.path())
        .output()
        .unwrap();
    assert!(setup.status.success(), "{}", String::from_utf8_lossy(&setup.stderr));

    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new(&python)
        .arg(root.join("e2e/agent_client.py"))
        .env("PAD_URL", &server.url)
        .env("PAD_TOKEN", &server.token)
        .env("PAD_HOME", &server.home)
        .env("PAD_PROJECT", project.path())
        .env("PATH", path)
        .output()
        .expect("run the MCP client");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "MCP client failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("agents: 1 passed, 0 failed"), "{stdout}");
}

#[test]
fn prime_names_the_callers_lease_and_the_next_ready_item() {
    let server = TestServer::start();
    let run = |args: &[&str]| {
        let out = server.pad().args(args).env("PAD_HOLDER", "agent-a").output().unwrap();
        assert!(out.status.success(), "pad {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    run(&["item", "create", "Port the parser", "--priority", "high"]);
    run(&["item", "create", "Write the docs"]);
    run(&["item", "create", "Decide the licence", "--priority", "critical", "--label", "needs-human"]);
    run(&["item", "create", "Someone else's"]);
    run(&["item", "claim", "TASK-1", "--ttl", "10m"]);
    let other = server.pad().args(["item", "claim", "TASK-4", "--holder", "agent-b"]).output().unwrap();
    assert!(other.status.success());
    // A failed attempt: counted as failing, and not ready until its retry time.
    run(&["item", "create", "Flaky"]);
    let claim = server.pad().args(["item", "claim", "TASK-5", "--holder", "agent-c"]).output().unwrap();
    assert!(claim.status.success());
    let fail = ["item", "fail", "TASK-5", "--epoch", "1", "--holder", "agent-c", "--note", "hangs"];
    let failed = server.pad().args(fail).output().unwrap();
    assert!(failed.status.success(), "{}", String::from_utf8_lossy(&failed.stderr));

    let brief = run(&["prime"]);
    assert!(brief.lines().count() < 60, "{} lines:\n{brief}", brief.lines().count());
    assert!(brief.contains("holder `agent-a`") && brief.contains("owner@localhost"), "{brief}");
    let lease = brief.lines().find(|l| l.starts_with("- TASK-1 ")).unwrap_or_else(|| panic!("no lease line:\n{brief}"));
    assert!(lease.contains("epoch 1") && (lease.contains("in 9m") || lease.contains("in 10m")), "{lease}");
    assert!(!brief.contains("- TASK-4 "), "another holder's lease is not the caller's:\n{brief}");
    let ready = brief.split("Ready for you").nth(1).unwrap();
    assert!(ready.lines().nth(1).unwrap().starts_with("- TASK-2 "), "{brief}");
    assert!(!ready.contains("TASK-3"), "needs-human is not ready for an agent:\n{brief}");
    assert!(brief.contains("never claim these): 1. Failing (retried later): 1."), "{brief}");
    assert!(!ready.contains("TASK-5"), "a failed item waits for its retry time:\n{brief}");
    assert!(brief.contains("pad_claim_next") && brief.contains("pad_item_renew"), "{brief}");

    let json: serde_json::Value = serde_json::from_str(&run(&["prime", "--format", "json"])).unwrap();
    assert_eq!((json["holder"].as_str(), json["user"].as_str()), (Some("agent-a"), Some("owner@localhost")));
    assert_eq!(json["leases"].as_array().unwrap().len(), 1, "{json}");
    assert_eq!(json["leases"][0]["ref"], "TASK-1");
    let left = json["leases"][0]["expires_in_seconds"].as_i64().unwrap();
    assert!((540..=600).contains(&left), "{left}");
    assert_eq!(json["ready"][0]["ref"], "TASK-2");
    assert_eq!((json["quarantined"].as_u64(), json["failing"].as_u64()), (Some(1), Some(1)));
    assert_eq!(json["tools"].as_array().unwrap().len(), 5);
}
