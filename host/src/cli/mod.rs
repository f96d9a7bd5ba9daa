//! The `weir` command line.

mod demo;
mod run_plugin;
mod stream;
mod units;

use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(
    name = "weir",
    version,
    about = "Kafka topics into versioned tables, each batch shaped by a sandboxed WebAssembly publisher"
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The whole pipeline on an embedded Kafka broker: produce sample clicks,
    /// publish them with the read-clicks plugin, show what was committed.
    Demo(demo::Args),
    /// Run a publisher plugin on local table files: no server, no broker.
    RunPlugin(run_plugin::Args),
    /// Run one stream publisher from its declaration until SIGINT/SIGTERM.
    Stream(stream::Args),
}

/// How results are printed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// Aligned tables for people.
    #[default]
    Table,
    /// JSON for scripts.
    Json,
}

pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Demo(args) => demo::run(args),
        Command::RunPlugin(args) => run_plugin::run(args),
        Command::Stream(args) => stream::run(args),
    }
}
