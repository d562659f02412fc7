//! `pad setup <agent>` on real files: a project that already holds the
//! user's own servers, keys, prose and comments keeps every byte of them,
//! a second run changes nothing, `--check` tells current from not, and
//! `--remove` gives back the files byte for byte.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const AGENTS: [&str; 4] = ["claude", "codex", "cursor", "gemini"];

/// The user's files before setup, one set for every agent.
const USER_FILES: &[(&str, &str)] = &[
    (
        ".mcp.json",
        "{\n  \"mcpServers\": {\n    \"github\": {\n      \"command\": \"npx\",\n      \"args\": [\"-y\", \"@modelcontextprotocol/server-github\"],\n      \"env\": {\"GITHUB_TOKEN\": \"${GITHUB_TOKEN}\"}\n    }\n  }\n}\n",
    ),
    ("CLAUDE.md", "# Project notes\n\nRun `make check` before every commit.\n"),
    (
        ".codex/config.toml",
        "# Codex settings for this repository\nmodel = \"o4-mini\"  # fast enough\n\n[mcp_servers.docs]\ncommand = \"docs-mcp\"\nargs = [\"--port\", \"0\"]\n\n[profiles.slow]\nmodel = \"o3\"\n",
    ),
    ("AGENTS.md", "Use conventional commits.\nNo trailing newline here"),
    (".cursor/mcp.json", "{\"mcpServers\":{\"browser\":{\"url\":\"http://localhost:3000/mcp\"}}}"),
    (".cursor/rules/style.mdc", "---\nalwaysApply: true\n---\nTabs, not spaces.\n"),
    (
        ".gemini/settings.json",
        "{\n\t\"theme\": \"GitHub\",\n\t\"mcpServers\": {},\n\t\"contextFileName\": \"GEMINI.md\"\n}",
    ),
    ("GEMINI.md", "Answer briefly.\n\n"),
];

/// `PATH` with the directory of the `pad` under test first, as after
/// `cargo install`: setup then writes plain `pad` as the command.
fn path_with_pad() -> std::ffi::OsString {
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_pad")).parent().unwrap().to_path_buf();
    let rest = std::env::var_os("PATH").unwrap_or_default();
    std::env::join_paths(std::iter::once(bin_dir).chain(std::env::split_paths(&rest))).unwrap()
}

fn pad(dir: &Path, home: &Path, args: &[&str]) -> Output {
    pad_with_path(dir, home, args, &path_with_pad())
}

fn pad_with_path(dir: &Path, home: &Path, args: &[&str], path: &std::ffi::OsStr) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pad"))
        .args(args)
        .current_dir(dir)
        .env("HOME", home)
        .env("PATH", path)
        .env_remove("CODEX_HOME")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .expect("run pad")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// Every file under `root`, by relative path, with its bytes; directories too (as None).
fn snapshot(root: &Path) -> BTreeMap<PathBuf, Option<Vec<u8>>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let rel = path.strip_prefix(root).unwrap().to_path_buf();
            if path.is_dir() {
                out.insert(rel, None);
                stack.push(path);
            } else {
                out.insert(rel, Some(std::fs::read(&path).unwrap()));
            }
        }
    }
    out
}

fn write_all(root: &Path, files: &[(&str, &str)]) {
    for (rel, content) in files {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
}

fn read(root: &Path, rel: &str) -> String {
    std::fs::read_to_string(root.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The MCP file and instruction file of each agent at project level.
fn files_of(agent: &str) -> (&'static str, &'static str) {
    match agent {
        "claude" => (".mcp.json", "CLAUDE.md"),
        "codex" => (".codex/config.toml", "AGENTS.md"),
        "cursor" => (".cursor/mcp.json", ".cursor/rules/pad.mdc"),
        "gemini" => (".gemini/settings.json", "GEMINI.md"),
        _ => unreachable!(),
    }
}

/// pad's server entry as the agent will read it: (command, args).
fn server_entry(root: &Path, agent: &str) -> (String, Vec<String>) {
    let (mcp, _) = files_of(agent);
    let text = read(root, mcp);
    if agent == "codex" {
        let doc: toml::Table = toml::from_str(&text).unwrap_or_else(|e| panic!("{mcp} is not TOML: {e}\n{text}"));
        let pad = doc["mcp_servers"]["pad"].as_table().expect("[mcp_servers.pad]");
        let args = pad["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_string()).collect();
        (pad["command"].as_str().unwrap().to_string(), args)
    } else {
        let doc: serde_json::Value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{mcp} is not JSON: {e}\n{text}"));
        let pad = &doc["mcpServers"]["pad"];
        let args = pad["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_string()).collect();
        (pad["command"].as_str().unwrap().to_string(), args)
    }
}

#[test]
fn setup_keeps_user_content_is_idempotent_and_removes_byte_for_byte() {
    for agent in AGENTS {
        let dir = tempfile::tempdir().unwrap();
        let (project, home) = (dir.path().join("project"), dir.path().join("home"));
        std::fs::create_dir_all(&home).unwrap();
        write_all(&project, USER_FILES);
        let before = snapshot(&project);

        let out = pad(&project, &home, &["setup", agent]);
        assert!(out.status.success(), "{agent}: {}", text(&out));
        let (mcp, instructions) = files_of(agent);
        assert!(text(&out).contains(mcp), "{agent}: {}", text(&out));

        // The server entry starts `pad mcp`, in the agent's own format.
        let (command, args) = server_entry(&project, agent);
        assert_eq!((command.as_str(), args[0].as_str()), ("pad", "mcp"), "{agent}");
        // The user's own servers and keys are all still there.
        match agent {
            "claude" => {
                let doc: serde_json::Value = serde_json::from_str(&read(&project, mcp)).unwrap();
                assert_eq!(doc["mcpServers"]["github"]["env"]["GITHUB_TOKEN"], "${GITHUB_TOKEN}");
                assert_eq!(doc["mcpServers"]["pad"]["type"], "stdio");
            }
            "codex" => {
                let t = read(&project, mcp);
                assert!(
                    t.starts_with("# Codex settings for this repository\nmodel = \"o4-mini\"  # fast enough\n"),
                    "{t}"
                );
                let doc: toml::Table = toml::from_str(&t).unwrap();
                assert_eq!(doc["mcp_servers"]["docs"]["command"].as_str(), Some("docs-mcp"));
                assert_eq!(doc["profiles"]["slow"]["model"].as_str(), Some("o3"));
            }
            "cursor" => {
                let doc: serde_json::Value = serde_json::from_str(&read(&project, mcp)).unwrap();
                assert_eq!(doc["mcpServers"]["browser"]["url"], "http://localhost:3000/mcp");
                assert_eq!(
                    read(&project, ".cursor/rules/style.mdc"),
                    "---\nalwaysApply: true\n---\nTabs, not spaces.\n"
                );
                assert!(read(&project, instructions).starts_with("---\ndescription: "));
            }
            "gemini" => {
                let doc: serde_json::Value = serde_json::from_str(&read(&project, mcp)).unwrap();
                assert_eq!(
                    (doc["theme"].as_str(), doc["contextFileName"].as_str()),
                    (Some("GitHub"), Some("GEMINI.md"))
                );
            }
            _ => unreachable!(),
        }
        // The instructions: the user's prose first, then pad's marked section.
        let instr = read(&project, instructions);
        if let Some((_, prose)) = USER_FILES.iter().find(|(p, _)| *p == instructions) {
            assert!(instr.starts_with(prose), "{agent}: {instr}");
        }
        for needle in ["<!-- BEGIN pad", "<!-- END pad -->", "pad_claim_next", "lease_lost", "lease_held", "heartbeat"]
        {
            assert!(instr.to_lowercase().contains(&needle.to_lowercase()), "{agent}: no {needle} in\n{instr}");
        }
        // Nothing else in the project changed.
        let installed = snapshot(&project);
        for (path, content) in &before {
            if content.is_some() && ![mcp, instructions].contains(&path.to_str().unwrap()) {
                assert_eq!(installed.get(path), Some(content), "{agent}: {} changed", path.display());
            }
        }

        let again = pad(&project, &home, &["setup", agent]);
        assert!(again.status.success(), "{}", text(&again));
        assert_eq!(snapshot(&project), installed, "{agent}: a second run changed something");
        assert!(text(&again).contains("unchanged") && !text(&again).contains("updated"), "{}", text(&again));

        let check = pad(&project, &home, &["setup", agent, "--check"]);
        assert_eq!(check.status.code(), Some(0), "{agent}: {}", text(&check));
        assert!(text(&check).contains("current"), "{}", text(&check));

        let removed = pad(&project, &home, &["setup", agent, "--remove"]);
        assert!(removed.status.success(), "{}", text(&removed));
        assert_eq!(snapshot(&project), before, "{agent}: --remove did not give back the files byte for byte");

        let check = pad(&project, &home, &["setup", agent, "--check"]);
        assert_eq!(check.status.code(), Some(1), "{agent}: {}", text(&check));
        assert!(text(&check).contains("missing"), "{}", text(&check));
    }
}

#[test]
fn in_an_empty_project_setup_creates_and_remove_deletes_everything() {
    for agent in AGENTS {
        let dir = tempfile::tempdir().unwrap();
        let (project, home) = (dir.path().join("p"), dir.path().join("h"));
        std::fs::create_dir_all(&project).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        let out = pad(&project, &home, &["setup", agent]);
        assert!(out.status.success(), "{}", text(&out));
        assert!(text(&out).contains("created"), "{}", text(&out));
        server_entry(&project, agent);
        assert_eq!(pad(&project, &home, &["setup", agent, "--check"]).status.code(), Some(0));
        let out = pad(&project, &home, &["setup", agent, "--remove"]);
        assert!(out.status.success(), "{}", text(&out));
        assert!(snapshot(&project).is_empty(), "{agent} left {:?}", snapshot(&project).keys().collect::<Vec<_>>());
        assert!(snapshot(&home).is_empty());
    }
}

#[test]
fn global_setup_writes_in_home_and_leaves_the_project_alone() {
    let dir = tempfile::tempdir().unwrap();
    let (project, home) = (dir.path().join("p"), dir.path().join("h"));
    std::fs::create_dir_all(&project).unwrap();
    // Claude Code's own state file, with user-scope servers of the user's.
    write_all(
        &home,
        &[
            (
                ".claude.json",
                "{\n  \"numStartups\": 12,\n  \"projects\": {\"/src/app\": {\"mcpServers\": {}}},\n  \"mcpServers\": {\"mine\": {\"command\": \"x\"}}\n}\n",
            ),
            (".codex/config.toml", "# mine\n"),
        ],
    );
    let before = snapshot(&home);
    for agent in AGENTS {
        let out = pad(&project, &home, &["setup", agent, "--global"]);
        assert!(out.status.success(), "{agent}: {}", text(&out));
        assert_eq!(pad(&project, &home, &["setup", agent, "--global", "--check"]).status.code(), Some(0));
    }
    let claude: serde_json::Value = serde_json::from_str(&read(&home, ".claude.json")).unwrap();
    assert_eq!(claude["mcpServers"]["pad"]["args"][0], "mcp");
    assert_eq!(
        (claude["numStartups"].as_i64(), claude["mcpServers"]["mine"]["command"].as_str()),
        (Some(12), Some("x"))
    );
    assert!(claude["projects"]["/src/app"]["mcpServers"].as_object().unwrap().is_empty());
    for rel in
        [".claude/CLAUDE.md", ".codex/AGENTS.md", ".gemini/GEMINI.md", ".gemini/settings.json", ".cursor/mcp.json"]
    {
        assert!(home.join(rel).is_file(), "{rel}");
    }
    assert!(snapshot(&project).is_empty(), "--global wrote into the project");
    for agent in AGENTS {
        let out = pad(&project, &home, &["setup", agent, "--global", "--remove"]);
        assert!(out.status.success(), "{agent}: {}", text(&out));
    }
    assert_eq!(snapshot(&home), before);
}

#[test]
fn check_says_what_differs() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().to_path_buf();
    assert!(pad(&project, &project, &["setup", "claude"]).status.success());
    let stale = read(&project, ".mcp.json").replace("\"command\": \"pad\"", "\"command\": \"/old/pad\"");
    std::fs::write(project.join(".mcp.json"), &stale).unwrap();
    let check = pad(&project, &project, &["setup", "claude", "--check"]);
    assert_eq!(check.status.code(), Some(1));
    assert!(text(&check).contains("differs") && text(&check).contains("/old/pad"), "{}", text(&check));
    // Setup brings it back to current, in place.
    assert!(pad(&project, &project, &["setup", "claude"]).status.success());
    assert_eq!(pad(&project, &project, &["setup", "claude", "--check"]).status.code(), Some(0));
    let json = pad(&project, &project, &["--format", "json", "setup", "claude", "--check"]);
    let outcomes: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(outcomes[0]["action"], "current");
}

#[test]
fn an_unknown_agent_lists_the_known_ones() {
    let dir = tempfile::tempdir().unwrap();
    let out = pad(dir.path(), dir.path(), &["setup", "copilot"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out).contains("unknown agent `copilot`: pad setup knows claude, codex, cursor, gemini"),
        "{}",
        text(&out)
    );
    assert!(snapshot(dir.path()).is_empty());
    let list = pad(dir.path(), dir.path(), &["setup", "--list"]);
    assert!(list.status.success());
    for agent in AGENTS {
        assert!(text(&list).contains(agent));
    }
}

#[test]
fn a_config_that_does_not_parse_is_refused_and_nothing_is_written() {
    for (agent, rel, broken) in [
        ("claude", ".mcp.json", "{\"mcpServers\": {\"a\": 1,}}"),
        ("gemini", ".gemini/settings.json", "// a comment\n{}"),
        ("cursor", ".cursor/mcp.json", "{\"mcpServers\": []}"),
        ("codex", ".codex/config.toml", "model = \"o3\"\n[mcp_servers\n"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        write_all(dir.path(), &[(rel, broken)]);
        let before = snapshot(dir.path());
        let out = pad(dir.path(), dir.path(), &["setup", agent]);
        assert_eq!(out.status.code(), Some(3), "{agent}: {}", text(&out));
        assert!(text(&out).contains(rel) && text(&out).contains("changed nothing"), "{}", text(&out));
        assert_eq!(snapshot(dir.path()), before, "{agent}: something was written");
        assert_eq!(pad(dir.path(), dir.path(), &["setup", agent, "--remove"]).status.code(), Some(3));
    }
}

#[test]
fn an_unwritable_directory_is_a_clear_error_and_nothing_is_left_half_written() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("ro");
    write_all(&project, &[(".mcp.json", "{}\n")]);
    // The MCP file is writable, the directory is not: CLAUDE.md cannot be
    // created, so the .mcp.json change must be undone.
    std::fs::set_permissions(project.join(".mcp.json"), std::fs::Permissions::from_mode(0o666)).unwrap();
    std::fs::set_permissions(&project, std::fs::Permissions::from_mode(0o555)).unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let before = snapshot(&project);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_pad"));
    // root writes anywhere: drop to nobody when the tests run as root.
    if unsafe { libc::geteuid() } == 0 {
        cmd = Command::new("setpriv");
        cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups", env!("CARGO_BIN_EXE_pad")]);
    }
    let out = cmd
        .args(["setup", "claude"])
        .current_dir(&project)
        .env("HOME", &project)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    std::fs::set_permissions(&project, std::fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let message = text(&out);
    assert!(message.contains("cannot write") && message.contains("CLAUDE.md"), "{message}");
    assert!(message.contains("ermission denied") && message.contains("nothing was changed"), "{message}");
    assert_eq!(snapshot(&project), before);
}

/// Without `pad` on the agent's `PATH`, setup writes the running binary's
/// absolute path; `--check` reports a server entry whose command cannot be
/// found.
#[test]
fn without_pad_on_path_setup_writes_its_own_absolute_path() {
    let exe = std::fs::canonicalize(env!("CARGO_BIN_EXE_pad")).unwrap();
    let empty = tempfile::tempdir().unwrap();
    let no_pad = std::env::join_paths([empty.path(), Path::new("/usr/bin"), Path::new("/bin")]).unwrap();
    for agent in AGENTS {
        let dir = tempfile::tempdir().unwrap();
        let project = dir.path().to_path_buf();
        let out = pad_with_path(&project, &project, &["setup", agent], &no_pad);
        assert!(out.status.success(), "{agent}: {}", text(&out));
        let (command, args) = server_entry(&project, agent);
        assert_eq!((Path::new(&command), args[0].as_str()), (exe.as_path(), "mcp"), "{agent}");
        let check = pad_with_path(&project, &project, &["setup", agent, "--check"], &no_pad);
        assert_eq!(check.status.code(), Some(0), "{agent}: {}", text(&check));

        // An entry running plain `pad`, which this PATH does not have.
        let plain = pad_with_path(&project, &project, &["setup", agent, "--command", "pad"], &no_pad);
        assert!(plain.status.success(), "{agent}: {}", text(&plain));
        let check = pad_with_path(&project, &project, &["setup", agent, "--check", "--command", "pad"], &no_pad);
        assert_eq!(check.status.code(), Some(1), "{agent}: {}", text(&check));
        assert!(text(&check).contains("not-found") && text(&check).contains("`pad`"), "{agent}: {}", text(&check));
        // With pad on PATH the same entry is current.
        let check = pad(&project, &project, &["setup", agent, "--check"]);
        assert_eq!(check.status.code(), Some(0), "{agent}: {}", text(&check));
    }
}
