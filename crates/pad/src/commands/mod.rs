//! One module per command group. Each turns parsed arguments into client
//! calls and hands the answer to a renderer; none speaks HTTP itself.

pub mod admin;
pub mod auth;
mod bench;
pub mod db;
mod group;
pub mod guard;
mod heartbeat;
pub mod item;
pub mod lease;
pub mod mcp;
pub mod member;
mod outage;
pub mod prime;
pub mod run;
pub mod serve;
pub mod setup;
pub mod token;
pub mod transfer;
pub mod watch;
pub mod webhook;
pub mod wit;
pub mod workspace;

use serde::Serialize;

use crate::cli::{Cli, Command};
use crate::config::Settings;
use crate::error::CliError;
use crate::output::{self, Format};

pub async fn run(cli: Cli) -> Result<(), CliError> {
    let Cli { global, command } = cli;
    // `serve`, `setup` and `completions` work before any client configuration exists
    // (or while it is broken), so only the other commands load it.
    let ctx = || -> Result<Ctx, CliError> { Ok(Ctx { format: global.format, settings: Settings::load(&global)? }) };
    match command {
        Command::Serve(args) => serve::run(args).await,
        Command::Bench(args) => bench::run(args, global.format).await,
        Command::Completions { shell } => completions(shell),
        Command::Db(cmd) => db::run(cmd, global.format).await,
        Command::Setup(args) => setup::run(args, global.format),
        Command::Item(cmd) => item::run(&ctx()?, cmd).await,
        Command::Workspace(cmd) => workspace::run(&ctx()?, cmd).await,
        Command::Member(cmd) => member::run(&ctx()?, cmd).await,
        Command::Token(cmd) => token::run(&ctx()?, cmd).await,
        Command::Webhook(cmd) => webhook::run(&ctx()?, cmd).await,
        Command::Auth(cmd) => auth::run(&ctx()?, cmd).await,
        Command::Run(args) => run::run(&ctx()?, args).await,
        Command::Drain(args) => run::drain(&ctx()?, args).await,
        Command::Guard(args) => guard::run(&ctx()?, args).await,
        Command::Watch(args) => watch::run(&ctx()?, args).await,
        Command::Export(args) => transfer::export(&ctx()?, args).await,
        Command::Import(args) => transfer::import(&ctx()?, args).await,
        // Offline: talks to the store, not to a server, so needs no profile.
        Command::Admin(cmd) => admin::run(cmd, global.format).await,
        // Its own settings come from the consumer's binding.
        Command::Wit(cmd) => wit::run(&global, cmd).await,
        Command::Mcp(args) => mcp::run(&ctx()?, args).await,
        Command::Prime(args) => prime::run(&ctx()?, args).await,
    }
}

/// What every client command has: how to print and where to connect.
pub struct Ctx {
    pub format: Format,
    pub settings: Settings,
}

impl Ctx {
    pub fn client(&self) -> Result<pad_client::Client, CliError> {
        self.settings.client()
    }

    pub fn ws(&self) -> &str {
        self.settings.workspace()
    }

    /// Prints `value` as JSON, or as `table` renders it.
    pub fn emit<T: Serialize + ?Sized>(&self, value: &T, table: impl FnOnce(&T) -> String) -> Result<(), CliError> {
        match self.format {
            Format::Json => output::print_json(value),
            Format::Table => output::print(&table(value)),
        }
    }
}

fn completions(shell: clap_complete::Shell) -> Result<(), CliError> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut <Cli as clap::CommandFactory>::command(), "pad", &mut script);
    output::print(&String::from_utf8_lossy(&script))
}

/// Words errors about one item with its ref (who holds its lease, until when).
pub fn about(item_ref: &pad_core::ItemRef) -> impl FnOnce(pad_client::ClientError) -> CliError + '_ {
    move |e| CliError::for_item(item_ref, e)
}
