//! `pad auth login|logout|whoami|status`: profiles in the credentials file,
//! and which settings are in effect.

use std::io::{BufRead, IsTerminal, Write};

use clap::Subcommand;
use pad_client::Client;
use pad_core::api::Me;
use serde_json::json;

use super::Ctx;
use crate::config::Source;
use crate::credentials::{Credentials, Profile};
use crate::error::CliError;

#[derive(Debug, Subcommand)]
pub enum AuthCommand {
    /// Check a token against the server and save it as a profile
    Login {
        /// The token [default: read from stdin]
        #[arg(long)]
        token: Option<String>,
    },
    /// Remove a saved profile
    Logout,
    /// Who the token belongs to, and its roles
    Whoami,
    /// Which URL, profile, workspace and token are in effect, and from where
    Status,
}

pub async fn run(ctx: &Ctx, cmd: AuthCommand) -> Result<(), CliError> {
    match cmd {
        AuthCommand::Login { token } => login(ctx, token).await,
        AuthCommand::Logout => logout(ctx),
        AuthCommand::Whoami => {
            let me = ctx.client()?.me().await?;
            ctx.emit(&me, render_me)
        }
        AuthCommand::Status => status(ctx).await,
    }
}

/// Saves the profile only after the server accepted the token.
async fn login(ctx: &Ctx, token: Option<String>) -> Result<(), CliError> {
    let s = &ctx.settings;
    let token = match token {
        Some(t) => t,
        None => read_token()?,
    };
    let client = Client::new(s.url.value.clone(), token.clone()).map_err(|e| CliError::config(e.to_string()))?;
    let me = client.me().await.map_err(|e| match e {
        // The generic advice for a refused token is to log in, which is what
        // the user is doing: say what is wrong with this token instead.
        pad_client::ClientError::Api { code: pad_core::api::ErrorCode::Unauthorized, .. } => CliError::reworded(
            &e,
            format!(
                "{} refused this token: it is unknown, revoked or expired there; check you copied the whole \
                 token and that it was minted on this server",
                s.url.value.as_str().trim_end_matches('/')
            ),
        ),
        e => e.into(),
    })?;
    // A workspace named on this command is remembered; otherwise keep the
    // profile's own.
    let workspace = match s.workspace.source {
        Source::Flag(_) => Some(s.workspace.value.clone()),
        _ => s.stored.as_ref().and_then(|p| p.workspace.clone()),
    };
    let url = s.url.value.as_str().trim_end_matches('/').to_string();
    let mut credentials = Credentials::load(&s.credentials_path)?;
    credentials.profiles.insert(s.profile.value.clone(), Profile { url: url.clone(), token, workspace });
    credentials.save(&s.credentials_path)?;
    let report = json!({ "profile": s.profile.value, "url": url, "email": me.email });
    ctx.emit(&report, |_| {
        format!(
            "Logged in to {url} as {}; saved profile `{}` in {}\n",
            me.email,
            s.profile.value,
            s.credentials_path.display()
        )
    })
}

/// From stdin, so the token stays out of shell history and `ps`; on a
/// terminal without echo, so it stays off the screen too.
fn read_token() -> Result<String, CliError> {
    let stdin = std::io::stdin();
    let mut line = String::new();
    if stdin.is_terminal() {
        // Echo off before the prompt: a paste right after it stays hidden.
        let _echo_off = EchoOff::new();
        eprint!("Token: ");
        std::io::stderr().flush()?;
        stdin.lock().read_line(&mut line)?;
        // The user's Enter was not echoed either.
        eprintln!();
    } else {
        stdin.lock().read_line(&mut line)?;
    }
    let token = line.trim().to_string();
    if token.is_empty() {
        return Err(CliError::usage("no token: pass --token TOKEN or write it to stdin"));
    }
    Ok(token)
}

/// Turns the terminal's echo off on stdin until dropped (also on error).
struct EchoOff(Option<libc::termios>);

impl EchoOff {
    fn new() -> Self {
        // SAFETY: tcgetattr/tcsetattr on fd 0 with a termios we own.
        unsafe {
            let mut t: libc::termios = std::mem::zeroed();
            if libc::tcgetattr(libc::STDIN_FILENO, &mut t) != 0 {
                return EchoOff(None);
            }
            let saved = t;
            t.c_lflag &= !libc::ECHO;
            if libc::tcsetattr(libc::STDIN_FILENO, libc::TCSANOW, &t) != 0 {
                return EchoOff(None);
            }
            EchoOff(Some(saved))
        }
    }
}

impl Drop for EchoOff {
    fn drop(&mut self) {
        if let Some(saved) = &self.0 {
            // SAFETY: restores the settings read in `new`.
            unsafe {
                libc::tcsetattr(libc::STDIN_FILENO, libc::TCSANOW, saved);
            }
        }
    }
}

fn logout(ctx: &Ctx) -> Result<(), CliError> {
    let s = &ctx.settings;
    let name = &s.profile.value;
    let mut credentials = Credentials::load(&s.credentials_path)?;
    let removed = credentials.profiles.remove(name).is_some();
    if removed {
        credentials.save(&s.credentials_path)?;
    }
    ctx.emit(&json!({ "profile": name, "removed": removed }), |_| {
        if removed { format!("Removed profile `{name}`\n") } else { format!("No profile `{name}` to remove\n") }
    })
}

fn render_me(me: &Me) -> String {
    let mut out = format!("{}\n", me.email);
    for w in &me.workspaces {
        out.push_str(&format!("  {}: {}\n", w.slug, w.role));
    }
    out
}

/// Shows each setting and where it came from, then checks the token; exits
/// non-zero when no token is set or the server refuses it.
async fn status(ctx: &Ctx) -> Result<(), CliError> {
    let s = &ctx.settings;
    let checked = match s.client() {
        Ok(client) => client.me().await.map_err(CliError::from),
        Err(e) => Err(e),
    };
    let token_source = s.token.as_ref().map(|t| t.source.to_string());
    let signed_in = checked.as_ref().ok().map(|me| me.email.clone());
    let report = json!({
        "url": s.url.value.as_str(),
        "url_source": s.url.source.to_string(),
        "profile": s.profile.value,
        "profile_source": s.profile.source.to_string(),
        "profile_stored": s.stored.is_some(),
        "credentials_file": s.credentials_path.display().to_string(),
        "workspace": s.workspace.value,
        "workspace_source": s.workspace.source.to_string(),
        "token_source": token_source,
        "signed_in_as": signed_in,
    });
    ctx.emit(&report, |_| {
        let stored = if s.stored.is_some() { "saved" } else { "not saved" };
        format!(
            "URL:        {} (from {})\nProfile:    {} (from {}; {stored} in {})\nWorkspace:  {} (from {})\nToken:      {}\nSigned in:  {}\n",
            s.url.value,
            s.url.source,
            s.profile.value,
            s.profile.source,
            s.credentials_path.display(),
            s.workspace.value,
            s.workspace.source,
            token_source.as_deref().map_or("none".to_string(), |src| format!("from {src}")),
            signed_in.as_deref().unwrap_or("no"),
        )
    })?;
    checked.map(drop)
}
