//! `pad db migrate` and `pad db backup` (docs/operations.md): the work is in
//! pad-dbmove; this prints progress, the verification and the outcome.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use clap::{Args, Subcommand};
use pad_dbmove::{DbUrl, MoveError, Progress, Report};
use serde_json::json;

use crate::config::Env;
use crate::error::{CliError, Exit};
use crate::output::{self, Format};

#[derive(Debug, Subcommand)]
pub enum DbCommand {
    /// Copy every table of a store into a new, empty database, then verify it
    Migrate(MigrateArgs),
    /// Copy a SQLite store to a new file while it may be serving
    Backup(BackupArgs),
}

#[derive(Debug, Args)]
pub struct MigrateArgs {
    /// The store to copy [default: the one `pad serve` would open]
    #[arg(long, value_name = "URL")]
    pub from: Option<String>,
    /// `sqlite://PATH` or `postgres://…` holding no pad data
    #[arg(long, value_name = "URL")]
    pub to: String,
}

#[derive(Debug, Args)]
pub struct BackupArgs {
    /// The new file to write
    #[arg(value_name = "PATH")]
    pub path: PathBuf,
    /// The SQLite store to copy [default: the one `pad serve` would open]
    #[arg(long, value_name = "URL")]
    pub from: Option<String>,
}

pub async fn run(cmd: DbCommand, format: Format) -> Result<(), CliError> {
    match cmd {
        DbCommand::Migrate(args) => migrate(args, format).await,
        DbCommand::Backup(args) => backup(args, format).await,
    }
}

/// The store `pad serve` opens with no `--database-url`: `$PAD_DATABASE_URL`,
/// else `$PAD_HOME/pad.db`.
fn default_store() -> Result<String, CliError> {
    if let Some(url) = std::env::var("PAD_DATABASE_URL").ok().filter(|u| !u.is_empty()) {
        return Ok(url);
    }
    Ok(format!("sqlite://{}", Env::from_process().pad_home()?.join("pad.db").display()))
}

fn parse(url: Option<String>) -> Result<DbUrl, CliError> {
    let url = match url {
        Some(u) => u,
        None => default_store()?,
    };
    DbUrl::parse(&url).map_err(cli_error)
}

/// Refusals about the target or the schema are configuration errors (exit
/// 3): the command did nothing and another target or pad version is needed.
fn cli_error(e: MoveError) -> CliError {
    match e {
        MoveError::Usage(m) => CliError::new(Exit::Usage, m),
        MoveError::TargetNotEmpty(m) | MoveError::Schema(m) => CliError::new(Exit::Config, m),
        MoveError::Failed(m) => CliError::internal(m),
    }
}

async fn migrate(args: MigrateArgs, format: Format) -> Result<(), CliError> {
    let from = parse(args.from)?;
    let to = parse(Some(args.to))?;
    let terminal = std::io::stderr().is_terminal();
    let mut progress = move |p: Progress<'_>| {
        if !terminal {
            return;
        }
        let mut err = std::io::stderr().lock();
        let _ = match p {
            Progress::Copying { table, done, total } => write!(err, "\r\x1b[Kcopying {table}: {done}/{total}"),
            Progress::Verifying { table } => write!(err, "\r\x1b[Kverifying {table}"),
        };
        let _ = err.flush();
    };
    let result = pad_dbmove::migrate(&from, &to, &mut progress).await;
    if terminal {
        eprint!("\r\x1b[K");
    }
    let report = result.map_err(cli_error)?;
    match format {
        Format::Json => output::print_json(&report_json(&from, &to, &report)),
        Format::Table => output::print(&render(&from, &to, &report)),
    }
}

fn report_json(from: &DbUrl, to: &DbUrl, r: &Report) -> serde_json::Value {
    json!({
        "from": from.display(),
        "to": to.display(),
        "tables": r.tables.iter().map(|t| json!({"table": t.table, "rows": t.rows, "checksum": t.checksum, "verified": true})).collect::<Vec<_>>(),
        "counters": r.counters.iter().map(|(t, c, v)| json!({"table": t, "column": c, "continues_after": v})).collect::<Vec<_>>(),
        "copy_seconds": r.copy_time.as_secs_f64(),
        "verify_seconds": r.verify_time.as_secs_f64(),
    })
}

fn render(from: &DbUrl, to: &DbUrl, r: &Report) -> String {
    let rows: Vec<Vec<String>> =
        r.tables.iter().map(|t| vec![t.table.clone(), t.rows.to_string(), t.checksum.clone(), "ok".into()]).collect();
    let mut out = output::table(&["TABLE", "ROWS", "CHECKSUM", "VERIFIED"], &rows);
    for (table, column, high) in &r.counters {
        match column.as_str() {
            "" => out.push_str(&format!("{table} continue after {high}\n")),
            _ => out.push_str(&format!("{table}.{column} continues after {high}\n")),
        }
    }
    out.push_str(&format!(
        "copied {} to {} in {:.1}s, verified in {:.1}s\n",
        from.display(),
        to.display(),
        r.copy_time.as_secs_f64(),
        r.verify_time.as_secs_f64()
    ));
    out
}

async fn backup(args: BackupArgs, format: Format) -> Result<(), CliError> {
    let from = parse(args.from)?;
    let DbUrl::Sqlite(path) = &from else {
        return Err(CliError::new(
            Exit::Usage,
            "pad db backup copies SQLite stores; back PostgreSQL up with its own tools: \
             pg_dump --format=custom (restore with pg_restore), or base backups with WAL archiving \
             (see docs/operations.md)",
        ));
    };
    // A backup into a folder that does not exist yet creates it
    // (docs/operations.md, "Backups"), rather than SQLite's bare
    // "unable to open database".
    if let Some(parent) = args.path.parent().filter(|p| !p.as_os_str().is_empty() && !p.is_dir()) {
        std::fs::create_dir_all(parent).map_err(|e| {
            CliError::new(Exit::Usage, format!("cannot create the folder {} for the backup: {e}", parent.display()))
        })?;
    }
    let bytes = pad_dbmove::backup_sqlite(path, &args.path).await.map_err(cli_error)?;
    let dest = args.path.display().to_string();
    match format {
        Format::Json => output::print_json(&json!({"from": from.display(), "backup": dest, "bytes": bytes})),
        Format::Table => output::print(&format!(
            "backed up {} to {dest} ({bytes} bytes); serve it with `pad serve --database-url sqlite://{dest}`\n",
            from.display()
        )),
    }
}
