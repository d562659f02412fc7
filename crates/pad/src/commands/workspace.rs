//! `pad workspace list|show|set|create`.

use clap::{Args, Subcommand};
use pad_client::ClientError;
use pad_core::api::{CreateWorkspace, ErrorCode, WorkspaceView};
use pad_core::settings::{Setting, SettingsPatch};

use super::Ctx;
use crate::error::CliError;
use crate::output::{in_words, table, timestamp};
use crate::ttl::{self, seconds_or_zero};

#[derive(Debug, Subcommand)]
pub enum WorkspaceCommand {
    /// Workspaces you are a member of
    List,
    /// One workspace: settings, kinds, your role [default: the current one]
    Show {
        /// The workspace's slug
        slug: Option<String>,
    },
    /// Change lease settings (owners): TTL default and maximum, quarantine thresholds
    Set(WorkspaceSetArgs),
    /// Create a workspace you own
    Create {
        /// Short name used in URLs and `-w`: lowercase letters, digits, `-`
        slug: String,
        /// Display name [default: the slug]
        #[arg(long)]
        name: Option<String>,
    },
}

/// `pad workspace set` (docs/api.md, "Workspace settings").
#[derive(Debug, Args)]
pub struct WorkspaceSetArgs {
    /// TTL of a claim that names none: 90s, 30m, 1h30m (at most the maximum)
    #[arg(long, value_name = "DURATION", value_parser = ttl::parse, allow_hyphen_values = true)]
    pub default_ttl: Option<u64>,
    /// Longest TTL a claim may ask for, up to 24h
    #[arg(long, value_name = "DURATION", value_parser = ttl::parse, allow_hyphen_values = true)]
    pub max_ttl: Option<u64>,
    /// Lease expiries that quarantine an item (needs-human); 0 turns it off
    #[arg(long, value_name = "N")]
    pub quarantine_after_expiries: Option<u32>,
    /// Failures that quarantine an item (needs-human); 0 turns it off
    #[arg(long, value_name = "N")]
    pub quarantine_after_failures: Option<u32>,
    /// Longest a lease may be held, renewals included, from the default TTL up to 30 days;
    /// 0 turns the cap off
    #[arg(long, value_name = "DURATION", value_parser = seconds_or_zero)]
    pub max_hold: Option<u64>,
}

pub async fn run(ctx: &Ctx, cmd: WorkspaceCommand) -> Result<(), CliError> {
    let client = ctx.client()?;
    match cmd {
        WorkspaceCommand::List => {
            let list = client.workspaces().await?;
            ctx.emit(&list, |l| {
                let rows: Vec<Vec<String>> =
                    l.workspaces.iter().map(|w| vec![w.slug.clone(), w.role.to_string(), w.name.clone()]).collect();
                table(&["SLUG", "ROLE", "NAME"], &rows)
            })
        }
        WorkspaceCommand::Show { slug } => {
            let view = client.workspace(slug.as_deref().unwrap_or(ctx.ws())).await?;
            ctx.emit(&view, render)
        }
        WorkspaceCommand::Set(args) => {
            let secs = |d: Option<u64>| d.map(|d| u32::try_from(d).unwrap_or(u32::MAX));
            let patch = SettingsPatch {
                default_ttl_seconds: secs(args.default_ttl),
                max_ttl_seconds: secs(args.max_ttl),
                quarantine_after_expiries: args.quarantine_after_expiries,
                quarantine_after_failures: args.quarantine_after_failures,
                max_hold_seconds: secs(args.max_hold),
            };
            if patch.is_empty() {
                let flags: Vec<&str> = Setting::ALL.into_iter().map(flag).collect();
                return Err(CliError::usage(format!("nothing to change: give one or more of {}", flags.join(", "))));
            }
            let view = client.update_settings(ctx.ws(), &patch).await.map_err(in_flags)?;
            ctx.emit(&view, |w| format!("Updated workspace {}\n{}", w.slug, render(w)))
        }
        WorkspaceCommand::Create { slug, name } => {
            let view = client.create_workspace(&CreateWorkspace { slug, name }).await?;
            ctx.emit(&view, |w| format!("Created workspace {}\n", w.slug))
        }
    }
}

/// The flag a setting is given with; `WorkspaceSetArgs` has one per setting.
fn flag(s: Setting) -> &'static str {
    match s {
        Setting::DefaultTtl => "--default-ttl",
        Setting::MaxTtl => "--max-ttl",
        Setting::QuarantineAfterExpiries => "--quarantine-after-expiries",
        Setting::QuarantineAfterFailures => "--quarantine-after-failures",
        Setting::MaxHold => "--max-hold",
    }
}

/// A refused setting, said with the flags the user typed rather than the
/// wire names the server uses.
fn in_flags(e: ClientError) -> CliError {
    let ClientError::Api { code: ErrorCode::ValidationFailed, message, .. } = &e else { return e.into() };
    // The server says `default_ttl_seconds: must be …`.
    let said = Setting::ALL.into_iter().fold(message.clone(), |m, s| {
        m.replace(&format!("{}: ", s.field()), &format!("{} ", flag(s))).replace(s.field(), flag(s))
    });
    CliError::reworded(&e, said)
}

/// `after 3`, or `never` for 0 (quarantine off).
fn threshold(n: u32, what: &str) -> String {
    if n == 0 { format!("never by {what}") } else { format!("after {n} {what}") }
}

fn render(w: &WorkspaceView) -> String {
    let s = &w.settings;
    let kinds: Vec<String> = w.kinds.iter().map(|k| format!("{} ({})", k.name, k.prefix)).collect();
    format!(
        "{} ({})\nRole:        {}\nCreated:     {}\nKinds:       {}\nLease TTL:   {} default, {} max\nMax hold:    {}\nQuarantine:  {}, {}\n",
        w.slug,
        w.name,
        w.role,
        timestamp(w.created_at),
        kinds.join(", "),
        in_words(s.default_ttl_seconds.into()),
        in_words(s.max_ttl_seconds.into()),
        s.max_hold_seconds.map_or_else(|| "none".to_string(), |m| in_words(m.into())),
        threshold(s.quarantine_after_expiries, "expiries"),
        threshold(s.quarantine_after_failures, "failures"),
    )
}
