//! The `kuatia` binary: parses the command line and hands over to [`kuatia_api::cli`]; the
//! wiring of adapters lives in [`kuatia_api::compose`], the composition root.

use clap::Parser;
use std::process::ExitCode;

/// mimalloc instead of glibc's malloc: under load the service allocates from many threads at
/// once, and glibc's arenas (locks, consolidation) took a tenth of the CPU of the end-to-end
/// benchmark (docs/benchmarks.md). The benchmarks use the same allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> ExitCode {
    kuatia_api::cli::run(kuatia_api::cli::Cli::parse()).await
}
