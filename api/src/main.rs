//! The `kuatia` binary: parses the command line and hands over to [`kuatia_api::cli`]; the
//! wiring of adapters lives in [`kuatia_api::compose`], the composition root.

use clap::Parser;
use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    kuatia_api::cli::run(kuatia_api::cli::Cli::parse()).await
}
