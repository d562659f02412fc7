//! `pad token list|create|revoke`.

use pad_core::api::{CreateToken, TokenScopeKind};

use super::Ctx;
use crate::cli::TokenCommand;
use crate::error::CliError;
use crate::output::{table, when};

pub async fn run(ctx: &Ctx, cmd: TokenCommand) -> Result<(), CliError> {
    let client = ctx.client()?;
    match cmd {
        TokenCommand::List => {
            let list = client.tokens(ctx.ws()).await?;
            ctx.emit(&list, |l| {
                let rows: Vec<Vec<String>> = l
                    .tokens
                    .iter()
                    .map(|t| {
                        let now = chrono::Utc::now();
                        let used = t.last_used_at.map(|t| when(t, now)).unwrap_or_else(|| "never".into());
                        let scope = match (&t.workspace, t.role) {
                            (Some(ws), Some(role)) => format!("{ws} ({role})"),
                            _ => "all".to_string(),
                        };
                        let minter = t.minted_by.clone().unwrap_or_else(|| "-".into());
                        vec![
                            t.id.to_string(),
                            t.name.clone(),
                            t.email.clone(),
                            scope,
                            minter,
                            when(t.created_at, now),
                            used,
                        ]
                    })
                    .collect();
                table(&["ID", "NAME", "EMAIL", "SCOPE", "MINTED BY", "CREATED", "LAST USED"], &rows)
            })
        }
        TokenCommand::Create { name, email, scoped, role } => {
            let scope = scoped.then_some(TokenScopeKind::Workspace);
            let created = client.create_token(ctx.ws(), &CreateToken { name, email, scope, role }).await?;
            let reach = match (&created.info.workspace, created.info.role) {
                (Some(ws), Some(role)) => format!("{role} in {ws} only"),
                _ => "all of its user's workspaces".to_string(),
            };
            eprintln!(
                "Token {} ({}) for {}, reaching {reach}: it is shown only this once, so keep it now",
                created.info.id, created.info.name, created.info.email
            );
            // Only the secret on stdout, so `TOKEN=$(pad token create ci)` works.
            ctx.emit(&created, |c| format!("{}\n", c.token))
        }
        TokenCommand::Revoke { id } => {
            client.revoke_token(ctx.ws(), id).await?;
            ctx.emit(&serde_json::json!({ "id": id, "revoked": true }), |_| format!("Revoked token {id}\n"))
        }
    }
}
