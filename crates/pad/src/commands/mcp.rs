//! `pad mcp`: pad's tools for an AI agent, over stdio, as the CLI's profile.
//! stdout carries the protocol, so nothing else may print there.
//!
//! Each process is one agent session with an identity of its own
//! (docs/agents.md): the holder is `--holder`/`PAD_HOLDER`, else `.pad.toml`
//! `holder`, else `<agent>@<host>-<short id>`; the session id is always
//! fresh. So two agent sessions of one user never refresh each other's
//! claim, while one session's repeated claims stay a heartbeat (L3).

use clap::Args;

use super::Ctx;
use crate::error::CliError;

/// `pad mcp`: one agent session. Its claims default to a holder and session
/// id of its own (docs/agents.md), so two sessions never share a lease.
#[derive(Debug, Args)]
pub struct McpArgs {
    /// The agent runtime, for the default holder `<agent>@<host>-<id>` [default: detected]
    #[arg(long, value_name = "NAME")]
    pub agent: Option<String>,
    /// This session's holder label [default: .pad.toml `holder`, else `<agent>@<host>-<id>`]
    #[arg(long, env = "PAD_HOLDER", hide_env_values = true, value_name = "HOLDER")]
    pub holder: Option<String>,
}

pub async fn run(ctx: &Ctx, args: McpArgs) -> Result<(), CliError> {
    let client = ctx.client()?;
    let holder = args.holder.or_else(|| ctx.settings.project_holder.clone());
    let runtime = args.agent.unwrap_or_else(detect_runtime);
    let identity = pad_mcp::SessionIdentity::new(holder, &runtime, &pad_mcp::hostname());
    pad_mcp::serve_stdio(client, ctx.ws().to_string(), identity)
        .await
        .map_err(|e| CliError::internal(format!("MCP over stdio stopped: {e}")))
}

/// The agent that started us, from the variables each sets for its tools;
/// `agent` when none is recognised.
fn detect_runtime() -> String {
    let set = |name: &str| std::env::var_os(name).is_some_and(|v| !v.is_empty());
    let runtime = if set("CLAUDECODE") {
        "claude"
    } else if set("GEMINI_CLI") {
        "gemini"
    } else if set("CODEX_SANDBOX") || set("CODEX_HOME") {
        "codex"
    } else if set("CURSOR_TRACE_ID") || set("CURSOR_AGENT") {
        "cursor"
    } else {
        "agent"
    };
    runtime.to_string()
}
