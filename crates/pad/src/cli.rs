//! The command line's top level (README.md): the global options and the
//! list of commands. Each command's own flags live with it in `commands/`,
//! which also does the work.

use clap::{Args, Parser, Subcommand};

use crate::commands::admin::AdminCommand;
use crate::commands::auth::AuthCommand;
use crate::commands::db::DbCommand;
use crate::commands::guard::GuardArgs;
use crate::commands::item::ItemCommand;
use crate::commands::mcp::McpArgs;
use crate::commands::member::MemberCommand;
use crate::commands::prime::PrimeArgs;
use crate::commands::run::{DrainArgs, RunArgs};
use crate::commands::serve::ServeArgs;
use crate::commands::setup::SetupArgs;
use crate::commands::token::TokenCommand;
use crate::commands::transfer::{ExportArgs, ImportArgs};
use crate::commands::watch::WatchArgs;
use crate::commands::webhook::WebhookCommand;
use crate::commands::workspace::WorkspaceCommand;
use crate::output::Format;

#[derive(Debug, Parser)]
#[command(name = "pad", version, about = "A work-item tracker with execution leases", propagate_version = true)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// Where to connect and how to print. Each flag beats its environment
/// variable, which beats `.pad.toml`, which beats the profile.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Global options")]
pub struct GlobalArgs {
    /// Output format; `json` prints only JSON on stdout
    #[arg(long, global = true, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Same as --format json, as gh spells it
    #[arg(long, global = true, conflicts_with = "format")]
    pub json: bool,
    /// Workspace slug [env: PAD_WORKSPACE]
    #[arg(short = 'w', long, global = true, value_name = "SLUG")]
    pub workspace: Option<String>,
    /// Profile in $PAD_HOME/credentials.toml [env: PAD_PROFILE] [default: default]
    #[arg(long, global = true, value_name = "NAME")]
    pub profile: Option<String>,
    /// Server URL [env: PAD_URL] [default: http://127.0.0.1:7777]
    #[arg(long, global = true, value_name = "URL")]
    pub url: Option<String>,
}

// Parsed once per process: boxing the big variant would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the server (SQLite in $PAD_HOME by default)
    Serve(ServeArgs),
    /// Benchmark pad on a fresh store behind its own server (docs/benchmarks.md)
    Bench(pad_bench::Options),
    /// Create, list, change and lease work items
    #[command(subcommand)]
    Item(ItemCommand),
    /// List, show and create workspaces
    #[command(subcommand)]
    Workspace(WorkspaceCommand),
    /// Workspace membership
    #[command(subcommand)]
    Member(MemberCommand),
    /// API tokens
    #[command(subcommand)]
    Token(TokenCommand),
    /// Send the workspace's events to URLs (owners; docs/webhooks.md)
    #[command(subcommand)]
    Webhook(WebhookCommand),
    /// Sign in to a server and see who you are
    #[command(subcommand)]
    Auth(AuthCommand),
    /// Claim an item, run a command under its lease, release it
    Run(RunArgs),
    /// Claim ready items one after another and run a command on each
    Drain(DrainArgs),
    /// Run a side effect (a push, a deploy) only while a lease is live, and stop it
    /// before the lease can expire
    Guard(GuardArgs),
    /// Print the workspace's events as they happen (Ctrl-C stops)
    Watch(WatchArgs),
    /// Write a workspace's items, with comments, history and links, as JSON Lines
    Export(ExportArgs),
    /// Create the items of `pad export` (or `gh issue list --json …`) output, all or nothing
    Import(ImportArgs),
    /// Move the store to another database, or back it up (docs/operations.md)
    #[command(subcommand)]
    Db(DbCommand),
    /// Offline administration, run on the server's machine against its store
    #[command(subcommand)]
    Admin(AdminCommand),
    /// The work-item-tracker contract's verbs, served by pad (docs/work-item-tracker.md)
    #[command(subcommand)]
    Wit(crate::commands::wit::WitCommand),
    /// Serve pad's tools to an AI agent over MCP on stdin/stdout
    Mcp(McpArgs),
    /// The brief an AI agent reads at session start: who, leases, ready work
    Prime(PrimeArgs),
    /// Wire pad into an AI coding agent: its MCP config and instructions
    Setup(SetupArgs),
    /// Print a shell completion script
    #[command(after_long_help = COMPLETIONS_INSTALL)]
    Completions {
        /// The shell to print the script for
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

/// Where each shell looks for completions, so `pad completions --help` says
/// how to install them, not only how to print them (README.md, "Shell completions").
const COMPLETIONS_INSTALL: &str = "\
Install (then open a new shell):
  bash:  mkdir -p ~/.local/share/bash-completion/completions && pad completions bash > ~/.local/share/bash-completion/completions/pad
  zsh:   mkdir -p ~/.zfunc && pad completions zsh > ~/.zfunc/_pad
         and in ~/.zshrc, before `compinit`: fpath=(~/.zfunc $fpath)
  fish:  pad completions fish > ~/.config/fish/completions/pad.fish";

/// A tip for `pad run TASK-1 make test`: the command must follow `--`, and
/// clap's own message ("unexpected argument 'make'") does not say so.
pub fn missing_separator_tip(e: &clap::Error, args: &[String]) -> Option<String> {
    let runner = args.iter().skip(1).find(|a| matches!(a.as_str(), "run" | "drain"))?;
    let wrong =
        matches!(e.kind(), clap::error::ErrorKind::UnknownArgument | clap::error::ErrorKind::MissingRequiredArgument);
    (wrong && !args.iter().any(|a| a == "--")).then(|| {
        let example = if runner == "run" { "pad run TASK-1 -- make test" } else { "pad drain -- make test" };
        format!("tip: put `--` before the command to run, e.g. `{example}`")
    })
}

/// The refusal of `pad drain --wait 30s`: on drain, `--wait` is `--follow`
/// by another name, a flag, where `pad item claim-next --wait` takes a
/// duration; clap's own words ("unexpected argument '30s' found", or
/// "unexpected value '30s' for '--follow'") say neither. `None` for any
/// other refusal, and for a word after `--wait` on a line without `--`,
/// which is more likely the command to run (`missing_separator_tip`).
pub fn drain_wait_given_a_value(e: &clap::Error, args: &[String]) -> Option<String> {
    use clap::error::ErrorKind;
    if !matches!(e.kind(), ErrorKind::UnknownArgument | ErrorKind::TooManyValues) {
        return None;
    }
    let options: Vec<&str> = args.iter().skip(1).map(String::as_str).take_while(|a| *a != "--").collect();
    let after_drain = &options[options.iter().position(|a| *a == "drain")? + 1..];
    let separated = options.len() < args.len() - 1;
    let value = after_drain.iter().find_map(|a| a.strip_prefix("--wait=")).or_else(|| {
        let given = after_drain.windows(2).find(|w| w[0] == "--wait")?[1];
        (!given.starts_with('-') && (separated || given.starts_with(|c: char| c.is_ascii_digit()))).then_some(given)
    })?;
    Some(format!(
        "error: drain's `--wait` takes no value (got `{value}`): it is `--follow` by another name, which keeps \
         draining as work arrives, waiting for it while none is ready, until Ctrl-C\n\
         tip: `pad drain --wait -- CMD`; to wait for one item, at most 30s, use `pad item claim-next --wait 30s`"
    ))
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;
    use pad_core::api::TtlSeconds;

    use super::*;
    use crate::commands::run::{ExitCodeMap, JOBS_MAX};

    #[test]
    fn cli_is_consistent() {
        Cli::command().debug_assert();
    }

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("pad").chain(args.iter().copied()))
    }

    #[test]
    fn json_is_format_json_and_conflicts_with_another_format() {
        assert!(parse(&["item", "list", "--json"]).unwrap().global.json);
        assert!(parse(&["item", "list", "--json", "--format", "table"]).is_err());
    }

    #[test]
    fn a_zero_ttl_in_minutes_or_hours_names_its_own_flag() {
        for flag in ["--ttl-minutes", "--ttl-hours"] {
            let e = parse(&["item", "claim", "TASK-1", flag, "0"]).unwrap_err().to_string();
            assert!(e.contains(flag), "{e}");
        }
    }

    #[test]
    fn a_forgotten_separator_gets_the_tip() {
        for line in [&["pad", "run", "TASK-1", "sh", "-c", "true"][..], &["pad", "drain", "make"]] {
            let args: Vec<String> = line.iter().map(ToString::to_string).collect();
            let e = Cli::try_parse_from(&args).unwrap_err();
            assert!(missing_separator_tip(&e, &args).unwrap().contains("`--`"), "{line:?}");
        }
        let args: Vec<String> = ["pad", "item", "list", "extra"].iter().map(ToString::to_string).collect();
        assert_eq!(missing_separator_tip(&Cli::try_parse_from(&args).unwrap_err(), &args), None);
    }

    #[test]
    fn ttl_spellings_are_exclusive() {
        let e = parse(&["item", "claim", "TASK-1", "--ttl", "5m", "--ttl-minutes", "5"]).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        let Cli { command: Command::Item(ItemCommand::Claim(c)), .. } =
            parse(&["item", "claim", "task-1", "--ttl-hours", "2"]).unwrap()
        else {
            panic!()
        };
        assert_eq!((c.item.item_ref.to_string(), c.ttl.seconds()), ("TASK-1".to_string(), Some(TtlSeconds(7200))));
    }

    #[test]
    fn drain_jobs_is_bounded_and_follow_has_an_alias() {
        let drain = |args: &[&str]| match parse(args) {
            Ok(Cli { command: Command::Drain(d), .. }) => Ok((d.jobs, d.follow)),
            Ok(_) => panic!("not a drain"),
            Err(e) => Err(e.exit_code()),
        };
        assert_eq!(drain(&["drain", "--", "true"]), Ok((1, false)));
        assert_eq!(drain(&["drain", "--jobs", "4", "--follow", "--", "true"]), Ok((4, true)));
        assert_eq!(drain(&["drain", "-j", "32", "--wait", "--", "true"]), Ok((JOBS_MAX, true)));
        assert_eq!(drain(&["drain", "--jobs", "0", "--", "true"]), Err(2));
        assert_eq!(drain(&["drain", "--jobs", "33", "--", "true"]), Err(2));
    }

    #[test]
    fn force_needs_a_reason() {
        assert!(parse(&["item", "release", "TASK-1", "--force"]).is_err());
        assert!(parse(&["item", "release", "TASK-1", "--force", "--reason", "stuck"]).is_ok());
    }

    #[test]
    fn run_and_drain_take_the_command_after_double_dash() {
        let Cli { command: Command::Run(r), .. } =
            parse(&["run", "task-3", "--ttl", "3s", "--done-on-success", "--", "sh", "-c", "echo --ttl"]).unwrap()
        else {
            panic!()
        };
        assert_eq!(r.item.item_ref.to_string(), "TASK-3");
        assert_eq!((r.worker.ttl.seconds(), r.worker.done_on_success), (Some(TtlSeconds(3)), true));
        assert_eq!(r.worker.command, ["sh", "-c", "echo --ttl"]);
        assert!(parse(&["run", "TASK-3"]).is_err(), "CMD is required");
        assert!(parse(&["run", "TASK-3", "sleep", "1"]).is_err(), "CMD only after --");

        let Cli { command: Command::Drain(d), .. } =
            parse(&["drain", "--kind", "bug,task", "--autonomous", "--max", "3", "--", "true"]).unwrap()
        else {
            panic!()
        };
        assert_eq!((d.filter.kinds, d.filter.autonomous, d.max), (vec!["bug".into(), "task".into()], true, Some(3)));
        assert!(parse(&["drain", "--once", "--max", "2", "--", "true"]).is_err());
        assert!(parse(&["drain", "--ttl", "1m", "--ttl-hours", "1", "--", "true"]).is_err());
    }

    #[test]
    fn setup_needs_an_agent_or_list() {
        assert!(parse(&["setup"]).is_err());
        assert!(parse(&["setup", "--list"]).is_ok());
        assert!(parse(&["setup", "claude", "--check", "--remove"]).is_err());
        let Cli { command: Command::Setup(s), .. } = parse(&["setup", "codex", "--global", "--remove"]).unwrap() else {
            panic!()
        };
        assert_eq!((s.agent.as_deref(), s.global, s.remove, s.command.as_deref()), (Some("codex"), true, true, None));
    }

    #[test]
    fn bad_refs_and_enums_are_usage_errors() {
        assert_eq!(parse(&["item", "show", "nope"]).unwrap_err().exit_code(), 2);
        assert_eq!(parse(&["item", "list", "--status", "open,bogus"]).unwrap_err().exit_code(), 2);
        assert!(parse(&["item", "list", "--status", "open,done", "-w", "x", "--format", "json"]).is_ok());
    }

    #[test]
    fn supervisor_limits_and_exit_code_maps() {
        let Cli { command: Command::Drain(d), .. } = parse(&[
            "drain",
            "--ttl",
            "30m",
            "--timeout",
            "25m",
            "--max-attempts",
            "3",
            "--done-on-success",
            "--",
            "./work.sh",
        ])
        .unwrap() else {
            panic!("not drain")
        };
        assert_eq!((d.worker.timeout, d.worker.max_attempts, d.worker.kill_after), (Some(1500), Some(3), 10));
        for bad in
            [&["--timeout", "0s"][..], &["--max-attempts", "0"], &["--exit-code-map", "7=8"], &["--exit-code-map", "x"]]
        {
            let args: Vec<&str> = ["drain"].into_iter().chain(bad.iter().copied()).chain(["--", "true"]).collect();
            assert_eq!(parse(&args).unwrap_err().exit_code(), 2, "{bad:?}");
        }
        let Cli { command: Command::Run(r), .. } =
            parse(&["run", "T-1", "--exit-code-map", "7=107,3=103", "--exit-code-map", "3=113", "--", "true"]).unwrap()
        else {
            panic!("not run")
        };
        let map = ExitCodeMap(r.worker.exit_code_map);
        assert_eq!((map.get(7), map.get(3), map.get(9)), (107, 113, 9), "the last mapping of a code wins");
    }
}
