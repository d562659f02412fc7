//! `pad setup <agent>`: parse the flags, run the plan in `crate::setup`,
//! say what happened to each file.

use std::path::PathBuf;

use clap::Args;

use crate::error::CliError;
use crate::output::{self, Format};
use crate::setup::{self, Mode, Scope};

#[derive(Debug, Args)]
#[command(after_help = "Agents: claude (Claude Code), codex (Codex CLI), cursor (Cursor), gemini (Gemini CLI).\n\
Exit codes: 0 done, or with --check installed and current; 1 with --check when something is missing or \
differs; 2 unknown agent; 3 a config file that does not parse or cannot be written (nothing is changed).")]
pub struct SetupArgs {
    /// claude, codex, cursor or gemini
    #[arg(required_unless_present = "list", value_name = "AGENT")]
    pub agent: Option<String>,
    /// List the agents and the files setup writes for each
    #[arg(long, conflicts_with_all = ["check", "remove", "global"])]
    pub list: bool,
    /// The user's own configuration (in $HOME) instead of the current directory's
    #[arg(long)]
    pub global: bool,
    /// Say whether pad is installed and current; exit 1 when not
    #[arg(long, conflicts_with = "remove")]
    pub check: bool,
    /// Take out exactly what setup added
    #[arg(long)]
    pub remove: bool,
    /// The command the agent runs to start pad's MCP server [default: `pad` when
    /// it is this binary on PATH, else this binary's absolute path]
    #[arg(long, value_name = "PATH")]
    pub command: Option<String>,
}

/// `--check` found something missing or out of date.
const EXIT_NOT_CURRENT: i32 = 1;

pub fn run(a: SetupArgs, format: Format) -> Result<(), CliError> {
    let home = std::env::var_os("HOME").filter(|h| !h.is_empty()).map(PathBuf::from).or_else(std::env::home_dir);
    if a.list {
        return list(home.unwrap_or_else(|| PathBuf::from("~")), format);
    }
    let agent = setup::agent(a.agent.as_deref().unwrap_or_default())?;
    let scope = if a.global {
        let home = home.ok_or_else(|| CliError::config("cannot tell where your home directory is: set HOME"))?;
        let codex_home = std::env::var_os("CODEX_HOME").filter(|h| !h.is_empty()).map(PathBuf::from);
        Scope::Global { home, codex_home }
    } else {
        let cwd = std::env::current_dir().map_err(|e| CliError::config(format!("no current directory: {e}")))?;
        Scope::Project(cwd)
    };
    let mode = match (a.check, a.remove) {
        (true, _) => Mode::Check,
        (_, true) => Mode::Remove,
        _ => Mode::Install,
    };
    let command = a.command.unwrap_or_else(setup::default_command);
    let outcomes = setup::run(agent, &scope, &command, mode)?;
    match format {
        Format::Json => output::print_json(&outcomes)?,
        Format::Table => {
            let mut text = String::new();
            for o in &outcomes {
                let detail = o.detail.as_deref().map(|d| format!(": {d}")).unwrap_or_default();
                text.push_str(&format!("{}: {} {}{detail}\n", agent.name, o.action, o.path.display()));
            }
            if mode == Mode::Install && matches!(scope, Scope::Global { .. }) && agent.name == "cursor" {
                text.push_str(
                    "cursor: Cursor keeps user rules in its settings; the project rule is `pad setup cursor`\n",
                );
            }
            output::print(&text)?;
        }
    }
    if mode == Mode::Check && outcomes.iter().any(|o| o.action != "current") {
        return Err(CliError::Exit(EXIT_NOT_CURRENT));
    }
    Ok(())
}

fn list(home: PathBuf, format: Format) -> Result<(), CliError> {
    let agents = setup::listing(&home);
    match format {
        Format::Json => {
            let json: Vec<_> = agents
                .iter()
                .map(|(a, project, global)| serde_json::json!({ "agent": a.name, "title": a.title, "project": project, "global": global }))
                .collect();
            output::print_json(&json)
        }
        Format::Table => {
            let mut text = String::new();
            for (a, project, global) in &agents {
                let show =
                    |paths: &Vec<PathBuf>| paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ");
                text.push_str(&format!(
                    "{:<7} {}\n        project: {}\n        --global: {}\n",
                    a.name,
                    a.title,
                    show(project),
                    show(global)
                ));
            }
            output::print(&text)
        }
    }
}
