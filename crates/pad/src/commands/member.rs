//! `pad member list|add|remove`.

use pad_core::api::SetMember;

use super::Ctx;
use crate::cli::MemberCommand;
use crate::error::CliError;
use crate::output::{table, when};

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
