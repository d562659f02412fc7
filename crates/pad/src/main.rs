//! `pad`: the server and its command line (README.md). This crate is wiring:
//! HTTP lives in pad-client, the API in pad-server.

mod cli;
mod commands;
mod config;
mod credentials;
mod error;
mod exit;
mod numbers;
mod output;
mod setup;
mod ttl;
mod when;

use std::process::ExitCode;

use clap::Parser;

use crate::error::CliError;

#[tokio::main]
async fn main() -> ExitCode {
    // clap prints usage errors itself and exits 2.
    let mut cli = cli::Cli::try_parse().unwrap_or_else(|e| {
        let args: Vec<String> = std::env::args().collect();
        if let Some(said) = cli::drain_wait_given_a_value(&e, &args) {
            output::say(&said);
            std::process::exit(e.exit_code());
        }
        if let Some(tip) = cli::missing_separator_tip(&e, &args) {
            output::say(&format!("{}\n{tip}", e.render()));
            std::process::exit(e.exit_code());
        }
        if let Some(said) = numbers::reword_clap_refusal(&e) {
            output::say(said.trim_end());
            std::process::exit(e.exit_code());
        }
        e.exit()
    });
    if cli.global.json {
        cli.global.format = output::Format::Json;
    }
    let format = cli.global.format;
    output::init_plain();
    match commands::run(cli).await {
        Ok(()) | Err(CliError::ClosedPipe) => ExitCode::SUCCESS,
        Err(CliError::Exit(code)) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        Err(e @ CliError::Failed { .. }) => {
            // Neither line may panic: a stdout or stderr that cannot be
            // written (a full disk) must not turn this exit code into 101.
            output::say(&format!("error: {e}"));
            // `--format json` means JSON on stdout, refusals included.
            if format == output::Format::Json {
                let _ = output::print(&format!("{}\n", e.json_envelope()));
            }
            ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(1))
        }
    }
}
