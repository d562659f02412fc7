//! `pad admin token`: offline recovery, on the server's machine, against the
//! store itself (README, "Lost every token?"). It needs no running server and
//! no profile, only access to the database.

use std::io::IsTerminal;
use std::path::Path;

use clap::Subcommand;
use pad_core::TokenInfo;
use pad_server::StoreError;

use crate::config::{DEFAULT_PROFILE, DEFAULT_URL, Env};
use crate::credentials::{self, Credentials};
use crate::error::CliError;
use crate::output::{self, Format};

#[derive(Debug, Subcommand)]
pub enum AdminCommand {
    /// Print a fresh token for an existing user, written straight to the
    /// store (recovery when no working token is left)
    Token {
        /// The user's email
        #[arg(long, value_name = "EMAIL")]
        email: String,
        /// `sqlite://PATH` or `postgres://…` [default: sqlite://$PAD_HOME/pad.db]
        #[arg(long, env = "PAD_DATABASE_URL", hide_env_values = true, value_name = "URL")]
        database_url: Option<String>,
    },
}

pub async fn run(cmd: AdminCommand, format: Format) -> Result<(), CliError> {
    let AdminCommand::Token { email, database_url } = cmd;
    let database_url = match database_url {
        Some(url) => url,
        None => format!("sqlite://{}", Env::from_process().pad_home()?.join("pad.db").display()),
    };
    // Opening a missing SQLite file would create an empty database: refuse.
    if !database_url.starts_with("postgres://") && !database_url.starts_with("postgresql://") {
        let path = database_url
            .strip_prefix("sqlite://")
            .or_else(|| database_url.strip_prefix("sqlite:"))
            .unwrap_or(&database_url);
        if !Path::new(path).exists() {
            return Err(CliError::config(format!("no database at {path} (pass --database-url)")));
        }
    }
    let store = pad_backends::open_store(&database_url)
        .await
        .map_err(|e| CliError::internal(format!("cannot open the database: {e}")))?;
    let (token, info) = pad_server::recovery_token(store.as_ref(), &email).await.map_err(|e| match e {
        StoreError::NotFound { .. } => CliError::new(
            crate::error::Exit::NotFound,
            format!("no user {email} in this database; `pad admin token` only recovers existing users"),
        ),
        StoreError::Validation(v) => CliError::usage(v.to_string()),
        e => CliError::internal(format!("could not create the token: {e}")),
    })?;
    eprintln!(
        "Token {} ({}) for {}, reaching all of its workspaces: it is shown only this once, so keep it now",
        info.id, info.name, info.email
    );
    match format {
        Format::Json => output::print_json(&Created { token: &token, info: &info })?,
        // Only the secret on stdout, so `TOKEN=$(pad admin token --email E)` works.
        Format::Table => output::print(&format!("{token}\n"))?,
    }
    // The next step (README, "Lost every token?"), on stderr. The secret is
    // repeated only when stdout is a terminal, where it is on screen anyway.
    let shown = if std::io::stdout().is_terminal() { token.as_str() } else { "\"$TOKEN\"" };
    eprintln!("Next: pad auth login --url {} --token {shown}", server_url());
    Ok(())
}

/// The server URL the `default` profile names, else the default one.
fn server_url() -> String {
    let saved = Env::from_process().pad_home().ok().and_then(|home| {
        let creds = Credentials::load(&home.join(credentials::FILE_NAME)).ok()?;
        creds.profiles.get(DEFAULT_PROFILE).map(|p| p.url.clone())
    });
    saved.unwrap_or_else(|| DEFAULT_URL.to_string())
}

#[derive(serde::Serialize)]
struct Created<'a> {
    token: &'a str,
    #[serde(flatten)]
    info: &'a TokenInfo,
}
