//! `pad bench`: hands the flags to the harness in `pad-bench` and prints its
//! report. The harness starts its own server on a fresh store; nothing here
//! touches `$PAD_HOME` or a configured server.

use crate::error::CliError;
use crate::output::{self, Format};

pub async fn run(opts: pad_bench::Options, format: Format) -> Result<(), CliError> {
    let report = pad_bench::run(&opts).await.map_err(|e| CliError::internal(format!("bench failed: {e}")))?;
    match format {
        Format::Json => output::print_json(&report),
        Format::Table => output::print(&report.table()),
    }
}
