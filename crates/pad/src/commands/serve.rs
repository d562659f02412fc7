//! `pad serve` (docs/operations.md): open the store, bind, bootstrap an empty database,
//! serve until Ctrl-C or SIGTERM.

use std::io::IsTerminal;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;

use clap::Args;
use pad_client::Url;
use pad_server::Bootstrap;
use tracing_subscriber::EnvFilter;

use crate::config::{DEFAULT_PROFILE, Env};
use crate::credentials::{self, Credentials, Profile};
use crate::error::CliError;
use crate::output;

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on; port 0 picks a free one
    #[arg(long, env = "PAD_LISTEN", hide_env_values = true, default_value = "127.0.0.1:7777", value_name = "ADDR")]
    pub listen: String,
    /// `sqlite://PATH`, or `postgres://USER@HOST/DB` for several instances on one database
    /// [default: sqlite://$PAD_HOME/pad.db]
    // Never echo the variable: a Postgres URL carries a password.
    #[arg(long, env = "PAD_DATABASE_URL", hide_env_values = true, value_name = "URL")]
    pub database_url: Option<String>,
}

/// `eprintln!` that never panics: a start message that cannot be written
/// is dropped (docs/operations.md, "When the log cannot be written").
macro_rules! say {
    ($($arg:tt)*) => {
        output::say(&format!($($arg)*))
    };
}

pub async fn run(args: ServeArgs) -> Result<(), CliError> {
    init_tracing();
    let home = Env::from_process().pad_home()?;
    let database_url = match args.database_url {
        Some(url) => url,
        None => {
            credentials::create_private_dir(&home)
                .map_err(|e| CliError::config(format!("cannot create {}: {e}", home.display())))?;
            format!("sqlite://{}", home.join("pad.db").display())
        }
    };
    let sqlite = pad_backends::sqlite_path(&database_url).map_err(CliError::config)?;
    let lock_path = sqlite.as_deref().map(lock_path_of);
    let new_lock = lock_path.as_deref().is_some_and(|p| !p.exists());
    // A start that fails before it serves leaves no lock file it made.
    let undo_lock = || {
        if let Some(p) = lock_path.as_deref().filter(|_| new_lock) {
            let _ = std::fs::remove_file(p);
        }
    };
    // Held until the process ends: the kernel drops it even on kill -9.
    let _lock = match &sqlite {
        Some(path) => Some(lock_sqlite(path)?),
        None => None,
    };
    // Bound before the store is opened, so a port in use leaves no migrated
    // database behind, and before anything is announced, so
    // `--listen 127.0.0.1:0` reports (and saves) the port it really got.
    let listener = tokio::net::TcpListener::bind(&args.listen).await.map_err(|e| {
        undo_lock();
        CliError::internal(format!("cannot listen on {}: {e}", args.listen))
    })?;
    let store = pad_backends::open_store(&database_url).await.map_err(|e| {
        undo_lock();
        CliError::internal(format!("cannot open the database {}: {e}", redacted(&database_url)))
    })?;
    let addr = listener.local_addr()?;
    let boot =
        pad_server::bootstrap(&*store).await.map_err(|e| CliError::internal(format!("bootstrap failed: {e}")))?;
    if let Some(boot) = boot {
        announce(&boot, &home, addr);
    }
    say!("pad: listening on http://{addr}");
    say!("pad: open http://{}/ in a browser for the web UI", reachable(addr));
    pad_server::serve(store, listener, pad_server::shutdown_signal())
        .await
        .map_err(|e| CliError::internal(format!("server failed: {e}")))
}

/// One `pad serve` per SQLite file (README.md, "PostgreSQL and many
/// instances"): an exclusive lock on `PATH.lock` beside the database,
/// refused at once if another process holds it.
/// `PATH.lock`, beside the SQLite file.
fn lock_path_of(path: &Path) -> std::path::PathBuf {
    let mut lock_path = path.as_os_str().to_owned();
    lock_path.push(".lock");
    std::path::PathBuf::from(lock_path)
}

fn lock_sqlite(path: &Path) -> Result<std::fs::File, CliError> {
    use std::os::fd::AsRawFd;
    if path.as_os_str() == ":memory:" || path.as_os_str().is_empty() {
        return Err(CliError::config("give the SQLite database a file path"));
    }
    let lock_path = lock_path_of(path);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| CliError::config(format!("cannot open {}: {e}", lock_path.display())))?;
    // SAFETY: flock on a descriptor this function owns.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return Err(CliError::config(format!(
            "another `pad serve` is already using {} (it holds {}); one server per SQLite file — \
             several instances need PostgreSQL (`--database-url postgres://…`)",
            path.display(),
            lock_path.display()
        )));
    }
    Ok(file)
}

/// Logs go to stderr; `RUST_LOG` tunes them. Requests are logged by the
/// server's trace layer without headers or bodies, so tokens never appear.
/// A log line that cannot be written is dropped and counted, never an error
/// or a panic in the request that logged it (docs/operations.md, "When the
/// log cannot be written"): `output::Stderr` swallows the failure, and the
/// subscriber's own report of it (an `eprintln!`, which panics when stderr
/// fails) is turned off.
fn init_tracing() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let ansi = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(|| output::Stderr)
        .log_internal_errors(false)
        .with_ansi(ansi)
        .init();
}

/// The first start's token is printed once, and saved as profile `default`
/// unless that exists, so `pad item create` works next with no other step.
fn announce(boot: &Bootstrap, home: &Path, addr: SocketAddr) {
    say!("pad: new database: created workspace `{}` owned by {}", boot.workspace, boot.email);
    say!("pad: the owner's token, shown only this once: {}", boot.token);
    let path = home.join(credentials::FILE_NAME);
    let profile = Profile {
        url: format!("http://{}", reachable(addr)),
        token: boot.token.clone(),
        workspace: Some(boot.workspace.clone()),
    };
    let saved = Credentials::load(&path).and_then(|mut creds| {
        if creds.profiles.contains_key(DEFAULT_PROFILE) {
            return Ok(false);
        }
        creds.profiles.insert(DEFAULT_PROFILE.to_string(), profile);
        creds.save(&path).map(|()| true)
    });
    match saved {
        Ok(true) => say!("pad: saved it as profile `{DEFAULT_PROFILE}` in {}", path.display()),
        Ok(false) => say!(
            "pad: profile `{DEFAULT_PROFILE}` already exists in {}; left unchanged (use `pad auth login --profile NAME`)",
            path.display()
        ),
        Err(e) => say!("pad: could not save the token as a profile: {}", message(&e)),
    }
}

/// Clients cannot connect to 0.0.0.0 or [::]; the loopback reaches them.
fn reachable(addr: SocketAddr) -> SocketAddr {
    match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => SocketAddr::new(Ipv4Addr::LOCALHOST.into(), addr.port()),
        IpAddr::V6(ip) if ip.is_unspecified() => SocketAddr::new(Ipv6Addr::LOCALHOST.into(), addr.port()),
        _ => addr,
    }
}

/// A database URL without its password, fit for an error message.
fn redacted(url: &str) -> String {
    match Url::parse(url) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("***"));
            u.to_string()
        }
        _ => url.to_string(),
    }
}

fn message(e: &CliError) -> String {
    e.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unspecified_addresses_become_loopback() {
        assert_eq!(reachable("0.0.0.0:7777".parse().unwrap()).to_string(), "127.0.0.1:7777");
        assert_eq!(reachable("[::]:1".parse().unwrap()).to_string(), "[::1]:1");
        assert_eq!(reachable("10.1.2.3:5".parse().unwrap()).to_string(), "10.1.2.3:5");
    }

    #[test]
    fn passwords_stay_out_of_messages() {
        assert_eq!(redacted("postgres://u:secret@db/pad"), "postgres://u:***@db/pad");
        assert_eq!(redacted("sqlite:///tmp/pad.db"), "sqlite:///tmp/pad.db");
    }
}
