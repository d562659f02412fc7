//! `pad mcp`: pad's tools for an AI agent, over stdio, as the CLI's profile.
//! stdout carries the protocol, so nothing else may print there.

use super::Ctx;
use crate::error::CliError;

pub async fn run(ctx: &Ctx) -> Result<(), CliError> {
    let client = ctx.client()?;
    pad_mcp::serve_stdio(client, ctx.ws().to_string())
        .await
        .map_err(|e| CliError::internal(format!("MCP over stdio stopped: {e}")))
}
