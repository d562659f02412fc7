//! `pad prime`: the brief an agent reads at session start (docs/agents.md).
//! The same text the `pad_prime` MCP tool and prompt give.

use clap::Args;

use super::Ctx;
use crate::error::CliError;

#[derive(Debug, Args)]
pub struct PrimeArgs {
    /// Whose leases to list [default: .pad.toml `holder`, else your email]
    #[arg(long, env = "PAD_HOLDER", hide_env_values = true, value_name = "HOLDER")]
    pub holder: Option<String>,
}

pub async fn run(ctx: &Ctx, args: PrimeArgs) -> Result<(), CliError> {
    let client = ctx.client()?;
    let holder = args.holder.or_else(|| ctx.settings.project_holder.clone());
    let who = pad_mcp::prime::PrimeFor { workspace: ctx.ws(), holder: holder.as_deref(), session_id: None };
    let brief = pad_mcp::prime::gather(&client, who).await?;
    ctx.emit(&brief, |b| b.to_markdown())
}
