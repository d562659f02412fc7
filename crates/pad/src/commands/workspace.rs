//! `pad workspace list|show|create`.

use pad_core::api::{CreateWorkspace, WorkspaceView};

use super::Ctx;
use crate::cli::WorkspaceCommand;
use crate::error::CliError;
use crate::output::{in_words, table, timestamp};

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
        WorkspaceCommand::Create { slug, name } => {
            let view = client.create_workspace(&CreateWorkspace { slug, name }).await?;
            ctx.emit(&view, |w| format!("Created workspace {}\n", w.slug))
        }
    }
}

fn render(w: &WorkspaceView) -> String {
    let s = &w.settings;
    let kinds: Vec<String> = w.kinds.iter().map(|k| format!("{} ({})", k.name, k.prefix)).collect();
    format!(
        "{} ({})\nRole:        {}\nCreated:     {}\nKinds:       {}\nLease TTL:   {} default, {} max\nQuarantine:  after {} expiries\n",
        w.slug,
        w.name,
        w.role,
        timestamp(w.created_at),
        kinds.join(", "),
        in_words(s.default_ttl_seconds.into()),
        in_words(s.max_ttl_seconds.into()),
        s.quarantine_after_expiries,
    )
}
