//! `pad setup <agent>`: wires pad into an AI coding agent, in the agent's
//! own files and formats: its MCP configuration gets a server that starts
//! `pad mcp`, and its instruction file a section, between markers, saying how
//! to take and finish work under a lease (docs/agents.md).
//!
//! Nothing the user wrote is touched: every edit is a splice that `--remove`
//! undoes byte for byte, with nothing remembered in between; a file setup
//! created is deleted again, with the directories it needed if they are left
//! empty. A file that does not parse is refused before anything is written,
//! and a write that fails puts back what was already written.

mod json;
mod markdown;
mod toml;

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::{CliError, Exit};

/// The server's name in every agent's configuration.
pub const SERVER_NAME: &str = "pad";

#[derive(Debug, Clone, Copy)]
pub struct Agent {
    pub name: &'static str,
    pub title: &'static str,
}

pub const AGENTS: [Agent; 4] = [
    Agent { name: "claude", title: "Claude Code" },
    Agent { name: "codex", title: "Codex CLI" },
    Agent { name: "cursor", title: "Cursor" },
    Agent { name: "gemini", title: "Gemini CLI" },
];

pub fn agent(name: &str) -> Result<Agent, CliError> {
    AGENTS.iter().copied().find(|a| a.name.eq_ignore_ascii_case(name)).ok_or_else(|| {
        let known: Vec<&str> = AGENTS.iter().map(|a| a.name).collect();
        CliError::usage(format!("unknown agent `{name}`: pad setup knows {}", known.join(", ")))
    })
}

/// Project level (a directory, normally the repository root) or the user's level (a home directory).
#[derive(Debug, Clone)]
pub enum Scope {
    Project(PathBuf),
    Global { home: PathBuf, codex_home: Option<PathBuf> },
}

impl Scope {
    fn base(&self) -> &Path {
        match self {
            Scope::Project(root) => root,
            Scope::Global { home, .. } => home,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Install,
    Check,
    Remove,
}

#[derive(Debug, Clone)]
enum Kind {
    /// A server in a JSON `mcpServers` object.
    Json { entry: String },
    /// `[mcp_servers.pad]` in a TOML file.
    Toml { command: String, args: Vec<String> },
    /// A marked section in a markdown file.
    Section,
    /// A file that is entirely pad's.
    Whole { content: String },
}

#[derive(Debug, Clone)]
struct Target {
    path: PathBuf,
    kind: Kind,
}

/// The files `agent` uses at `scope`, with what pad puts in each.
fn targets(agent: Agent, scope: &Scope, command: &str) -> Vec<Target> {
    let args = vec!["mcp".to_string(), "--agent".to_string(), agent.name.to_string()];
    let quoted = |s: &str| serde_json::to_string(s).unwrap_or_default();
    let json_args = args.iter().map(|a| quoted(a)).collect::<Vec<_>>().join(", ");
    // Claude Code writes the transport explicitly; the others take command/args as stdio.
    let entry = if agent.name == "claude" {
        format!("{{\"type\": \"stdio\", \"command\": {}, \"args\": [{json_args}]}}", quoted(command))
    } else {
        format!("{{\"command\": {}, \"args\": [{json_args}]}}", quoted(command))
    };
    let json = |path: PathBuf| Target { path, kind: Kind::Json { entry: entry.clone() } };
    let section = |path: PathBuf| Target { path, kind: Kind::Section };
    let toml = |path: PathBuf| Target { path, kind: Kind::Toml { command: command.to_string(), args: args.clone() } };
    match (agent.name, scope) {
        ("claude", Scope::Project(root)) => vec![json(root.join(".mcp.json")), section(root.join("CLAUDE.md"))],
        ("claude", Scope::Global { home, .. }) => {
            vec![json(home.join(".claude.json")), section(home.join(".claude/CLAUDE.md"))]
        }
        ("codex", Scope::Project(root)) => vec![toml(root.join(".codex/config.toml")), section(root.join("AGENTS.md"))],
        ("codex", Scope::Global { home, codex_home }) => {
            let dir = codex_home.clone().unwrap_or_else(|| home.join(".codex"));
            vec![toml(dir.join("config.toml")), section(dir.join("AGENTS.md"))]
        }
        ("cursor", Scope::Project(root)) => vec![
            json(root.join(".cursor/mcp.json")),
            Target { path: root.join(".cursor/rules/pad.mdc"), kind: Kind::Whole { content: markdown::cursor_rule() } },
        ],
        // Cursor keeps user-level rules in its settings, not in a file.
        ("cursor", Scope::Global { home, .. }) => vec![json(home.join(".cursor/mcp.json"))],
        ("gemini", Scope::Project(root)) => {
            vec![json(root.join(".gemini/settings.json")), section(root.join("GEMINI.md"))]
        }
        ("gemini", Scope::Global { home, .. }) => {
            vec![json(home.join(".gemini/settings.json")), section(home.join(".gemini/GEMINI.md"))]
        }
        _ => unreachable!("every agent in AGENTS has its files"),
    }
}

/// The command a server entry runs (docs/agents.md, "`pad setup <agent>`"):
/// plain `pad` when that finds this very binary on `PATH`, so an upgrade in
/// place is picked up; otherwise this binary's absolute path, since the
/// agent would not find `pad` (or would start another one).
pub fn default_command() -> String {
    let Ok(exe) = std::env::current_exe().and_then(std::fs::canonicalize) else { return "pad".into() };
    match find_command("pad").and_then(|p| std::fs::canonicalize(p).ok()) {
        Some(found) if found == exe => "pad".into(),
        _ => exe.to_string_lossy().into_owned(),
    }
}

/// Where `command` resolves the way a shell would: a name with a `/` as a
/// path (relative to the current directory), a bare name on `PATH`; only an
/// executable file counts.
fn find_command(command: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let runnable = |p: &Path| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    if command.is_empty() {
        return None;
    }
    if command.contains('/') {
        let p = PathBuf::from(command);
        return runnable(&p).then_some(p);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(command)).find(|p| runnable(p))
}

/// `--check`: a server entry whose command cannot be found is reported,
/// since the agent could not start it: as `not-found` when the entry is
/// otherwise current, and in the detail of one that `differs`.
fn unrunnable(p: &Path, what: &str, command: Option<&str>, found: Outcome) -> Outcome {
    let Some(cmd) = command.filter(|c| find_command(c).is_none()) else { return found };
    let place = if cmd.contains('/') { "no such executable" } else { "not found on PATH" };
    let why = format!("{what} runs `{cmd}`: {place}");
    match found.detail {
        Some(detail) if found.action == "differs" => outcome(p, "differs", Some(format!("{detail}; {why}"))),
        _ => outcome(p, "not-found", Some(why)),
    }
}

/// What happened (or, with `--check`, what was found) to one file.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub path: PathBuf,
    /// created, updated, unchanged, removed, deleted, absent; with --check:
    /// current, missing, differs, not-found (the entry's command).
    pub action: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// One file's planned change: its text before and after (`None`: no file).
struct Change {
    path: PathBuf,
    before: Option<String>,
    after: Option<String>,
    outcome: Outcome,
}

fn refused(path: &Path, why: impl std::fmt::Display) -> CliError {
    CliError::new(
        Exit::Config,
        format!("{}: {why}; pad setup changed nothing (fix or move the file, then run it again)", path.display()),
    )
}

fn read(path: &Path) -> Result<Option<String>, CliError> {
    match std::fs::read(path) {
        Ok(bytes) => String::from_utf8(bytes).map(Some).map_err(|_| refused(path, "not UTF-8 text")),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(refused(path, format!("cannot read it ({e})"))),
    }
}

fn outcome(path: &Path, action: &'static str, detail: Option<String>) -> Outcome {
    Outcome { path: path.to_path_buf(), action, detail }
}

/// Reads and checks one file and works out its new text; writes nothing.
fn plan(t: &Target, mode: Mode) -> Result<Change, CliError> {
    let before = read(&t.path)?;
    let p = &t.path;
    let (after, check): (Option<String>, Outcome) = match &t.kind {
        Kind::Json { entry } => {
            let expected: serde_json::Value = serde_json::from_str(entry).expect("entry is JSON");
            match before.as_deref() {
                None => {
                    let created = json::created("mcpServers", SERVER_NAME, entry);
                    (Some(created), outcome(p, "missing", Some("no such file".into())))
                }
                Some(text) => {
                    let doc = json::validate(text, "mcpServers").map_err(|e| refused(p, e))?;
                    let found = match json::find(&doc, "mcpServers", SERVER_NAME, &expected) {
                        json::Found::Current => outcome(p, "current", None),
                        json::Found::Absent => outcome(p, "missing", Some("no `mcpServers.pad` entry".into())),
                        json::Found::Differs(v) => {
                            outcome(p, "differs", Some(format!("`mcpServers.pad` is {v}, expected {expected}")))
                        }
                    };
                    let command = doc.get("mcpServers").and_then(|s| s.get(SERVER_NAME)).and_then(|e| e.get("command"));
                    let found = unrunnable(p, "`mcpServers.pad`", command.and_then(|c| c.as_str()), found);
                    let after = match mode {
                        Mode::Remove => json::remove(text, "mcpServers", SERVER_NAME, entry),
                        _ => Some(json::install(text, "mcpServers", SERVER_NAME, entry)),
                    };
                    (after, found)
                }
            }
        }
        Kind::Toml { command, args } => {
            let text = before.as_deref().unwrap_or("");
            let doc = toml::parse(text).map_err(|e| refused(p, e))?;
            let found = match (before.is_some(), toml::find(&doc, SERVER_NAME, command, args)) {
                (false, _) => outcome(p, "missing", Some("no such file".into())),
                (true, toml::Found::Current) => outcome(p, "current", None),
                (true, toml::Found::Absent) => outcome(p, "missing", Some("no [mcp_servers.pad] table".into())),
                (true, toml::Found::Differs(now)) => outcome(
                    p,
                    "differs",
                    Some(format!("[mcp_servers.pad] is `{now}`, expected command {command:?}, args {args:?}")),
                ),
            };
            let written = doc.get("mcp_servers").and_then(|s| s.get(SERVER_NAME)).and_then(|e| e.get("command"));
            let found = unrunnable(p, "[mcp_servers.pad]", written.and_then(|c| c.as_str()), found);
            let after = match mode {
                Mode::Remove => before.as_deref().and_then(|t| toml::remove(t, doc, SERVER_NAME, command, args)),
                _ => Some(toml::install(text, doc, SERVER_NAME, command, args)),
            };
            (after, found)
        }
        Kind::Section => {
            let found = match before.as_deref().map(markdown::find).transpose().map_err(|e| refused(p, e))? {
                None => outcome(p, "missing", Some("no such file".into())),
                Some(None) => outcome(p, "missing", Some("no pad section".into())),
                Some(Some(section)) if section == markdown::block() => outcome(p, "current", None),
                Some(Some(_)) => outcome(p, "differs", Some("the pad section is not the current text".into())),
            };
            let after = match mode {
                Mode::Remove => before.as_deref().and_then(markdown::remove),
                _ => Some(markdown::install(before.as_deref())),
            };
            (after, found)
        }
        Kind::Whole { content } => {
            let found = match before.as_deref() {
                None => outcome(p, "missing", Some("no such file".into())),
                Some(text) if text == content => outcome(p, "current", None),
                Some(_) => outcome(p, "differs", Some("not the current rule text".into())),
            };
            let after = match mode {
                // Only a file carrying pad's marker is pad's to delete.
                Mode::Remove => before.clone().filter(|text| !text.contains(markdown::BEGIN)),
                _ => Some(content.clone()),
            };
            (after, found)
        }
    };
    let outcome = match mode {
        Mode::Check => check,
        _ => outcome(
            p,
            match (&before, &after) {
                (b, a) if b == a => "unchanged",
                (None, Some(_)) => "created",
                (Some(_), None) => "deleted",
                (Some(_), Some(_)) if mode == Mode::Remove => "removed",
                _ => "updated",
            },
            None,
        ),
    };
    Ok(Change { path: t.path.clone(), before, after, outcome })
}

/// Runs `mode` for `agent` at `scope`: every file is read and checked
/// before the first is written.
pub fn run(agent: Agent, scope: &Scope, command: &str, mode: Mode) -> Result<Vec<Outcome>, CliError> {
    let changes: Vec<Change> =
        targets(agent, scope, command).iter().map(|t| plan(t, mode)).collect::<Result<_, _>>()?;
    if mode == Mode::Check {
        return Ok(changes.into_iter().map(|c| c.outcome).collect());
    }
    let base = scope.base();
    let mut done: Vec<&Change> = Vec::new();
    for change in &changes {
        if change.before == change.after {
            continue;
        }
        if let Err(e) = write(change, base) {
            // A file this run was creating goes, with any directories made for it.
            if change.before.is_none() {
                let _ = write(&Change { after: None, ..clone(change) }, base);
            }
            for undone in done.iter().rev() {
                let _ = write(
                    &Change { before: undone.after.clone(), after: undone.before.clone(), ..clone(undone) },
                    base,
                );
            }
            return Err(CliError::new(
                Exit::Config,
                format!("cannot write {}: {e}; nothing was changed", change.path.display()),
            ));
        }
        done.push(change);
    }
    Ok(changes.into_iter().map(|c| c.outcome).collect())
}

fn clone(c: &Change) -> Change {
    Change { path: c.path.clone(), before: c.before.clone(), after: c.after.clone(), outcome: c.outcome.clone() }
}

/// Writes in place (an existing file keeps its mode, owner and links), or
/// deletes the file and then the directories under `base` it leaves empty.
fn write(change: &Change, base: &Path) -> std::io::Result<()> {
    match &change.after {
        Some(text) => {
            if let Some(dir) = change.path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            std::fs::write(&change.path, text)
        }
        None => {
            match std::fs::remove_file(&change.path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
            let mut dir = change.path.parent();
            while let Some(d) = dir.filter(|d| d.starts_with(base) && *d != base) {
                if std::fs::remove_dir(d).is_err() {
                    break;
                }
                dir = d.parent();
            }
            Ok(())
        }
    }
}

/// The files each agent uses, for `--list`.
pub fn listing(home: &Path) -> Vec<(Agent, Vec<PathBuf>, Vec<PathBuf>)> {
    let project = Scope::Project(PathBuf::from("."));
    let global = Scope::Global { home: home.to_path_buf(), codex_home: None };
    AGENTS
        .iter()
        .map(|&a| {
            let paths = |s: &Scope| targets(a, s, "pad").into_iter().map(|t| t.path).collect::<Vec<_>>();
            (a, paths(&project), paths(&global))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_agents_list_the_known_ones() {
        let Err(e) = agent("copilot") else { panic!() };
        let (code, message) = (e.exit_code(), e.to_string());
        assert_eq!(code, 2);
        assert!(message.contains("claude, codex, cursor, gemini"), "{message}");
        assert_eq!(agent("Claude").unwrap().name, "claude");
    }

    #[test]
    fn every_agent_has_an_mcp_file_and_instructions_at_project_level() {
        for a in AGENTS {
            let t = targets(a, &Scope::Project(PathBuf::from("/p")), "pad");
            assert!(matches!(t[0].kind, Kind::Json { .. } | Kind::Toml { .. }), "{}", a.name);
            assert!(matches!(t[1].kind, Kind::Section | Kind::Whole { .. }), "{}", a.name);
        }
    }
}
