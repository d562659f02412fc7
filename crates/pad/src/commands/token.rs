//! `pad token list|create|revoke`.

use clap::Subcommand;
use pad_core::Role;
use pad_core::api::{CreateToken, TokenScopeKind};

use super::Ctx;
use crate::error::CliError;
use crate::output::{table, when};

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Tokens in the workspace (never their secrets)
    List,
    /// Create a token and print it (shown only once)
    ///
    /// Your own token reaches all of your workspaces unless --scoped or
    /// --role is given; a token for another member (--email, owners only) is
    /// always scoped to the workspace, at no more than their role and yours.
    Create {
        /// A label to tell the token apart (`ci-runner`, `laptop`)
        name: String,
        /// Whose token [default: yours; owners may name a member]
        #[arg(long, value_name = "EMAIL")]
        email: Option<String>,
        /// Scope the token to this workspace only
        #[arg(long)]
        scoped: bool,
        /// Role cap of a scoped token (owner, editor, viewer); implies --scoped
        #[arg(long)]
        role: Option<Role>,
    },
    /// Revoke a token by id
    Revoke {
        /// The token's id (`pad token list`)
        #[arg(value_parser = token_id)]
        id: i64,
    },
}

/// `pad token revoke ID`: a sentence, not the parser's words.
fn token_id(s: &str) -> Result<i64, String> {
    s.parse().map_err(|_| format!("token id must be a number, like 12 (`pad token list` shows them), not {s:?}"))
}

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
