//! `pad member list|add|remove`.

use clap::Subcommand;
use pad_core::Role;
use pad_core::api::SetMember;

use super::Ctx;
use crate::error::CliError;
use crate::output::{table, when};

#[derive(Debug, Subcommand)]
pub enum MemberCommand {
    /// The workspace's members
    List,
    /// Add a member, or change a member's role
    Add {
        /// The member's email
        email: String,
        /// owner, editor, viewer
        #[arg(long, default_value = "editor")]
        role: Role,
    },
    /// Remove a member (their tokens scoped to the workspace are revoked)
    Remove {
        /// The member's email
        email: String,
    },
}

pub async fn run(ctx: &Ctx, cmd: MemberCommand) -> Result<(), CliError> {
    let client = ctx.client()?;
    match cmd {
        MemberCommand::List => {
            let list = client.members(ctx.ws()).await?;
            ctx.emit(&list, |l| {
                let rows: Vec<Vec<String>> = l
                    .members
                    .iter()
                    .map(|m| vec![m.email.clone(), m.role.to_string(), when(m.added_at, chrono::Utc::now())])
                    .collect();
                table(&["EMAIL", "ROLE", "ADDED"], &rows)
            })
        }
        MemberCommand::Add { email, role } => {
            let member = client.set_member(ctx.ws(), &SetMember { email, role }).await?;
            ctx.emit(&member, |m| format!("{} is now {} of {}\n", m.email, m.role, ctx.ws()))
        }
        MemberCommand::Remove { email } => {
            client.remove_member(ctx.ws(), &email).await?;
            let out = serde_json::json!({ "email": email, "removed": true });
            ctx.emit(&out, |_| format!("{email} is no longer a member of {}\n", ctx.ws()))
        }
    }
}
