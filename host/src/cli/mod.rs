//! The `weir` command line.

mod admin;
mod client;
mod collection;
mod connection;
mod dead_letters;
mod demo;
mod publisher;
mod run_plugin;
mod scaffold;
mod serve;
mod stream;
mod table;
mod tenant;
mod units;

use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

use client::Remote;

#[derive(Debug, Parser)]
#[command(
    name = "weir",
    version = weir::VERSION,
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
    /// Run the server: the HTTP API and the stream workers of every registered publisher.
    Serve(serve::Args),
    /// Tenants and their tokens (with the admin token).
    Tenant(Remote<tenant::Command>),
    /// The server's secret key: show its id, rotate it (with the admin token).
    Admin(Remote<admin::Command>),
    /// Collections and their Kafka connection.
    Collection(Remote<collection::Command>),
    /// Check or set a collection's Kafka connection.
    Connection(Remote<collection::ConnectionCommand>),
    /// Plugins: start one (`new`), build it (`build`), upload and list them.
    Plugin(publisher::PluginArgs),
    /// Register stream publishers; see their status; pause, resume, delete them.
    Publisher(Remote<publisher::Command>),
    /// Committed tables: list, schema, versions, sample, export.
    Table(Remote<table::Command>),
    /// Executions (one per batch): list, show with the plugin's log.
    Execution(Remote<table::ExecutionCommand>),
    /// Messages a publisher could not decode, kept in the catalog: list, show, export, re-run.
    DeadLetters(Remote<dead_letters::Command>),
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
        Command::Serve(args) => serve::run(args),
        Command::Tenant(args) => tenant::run(args).map(|()| ExitCode::SUCCESS),
        Command::Admin(args) => admin::run(args).map(|()| ExitCode::SUCCESS),
        Command::Collection(args) => collection::run(args).map(|()| ExitCode::SUCCESS),
        Command::Connection(args) => collection::run_connection(args).map(|()| ExitCode::SUCCESS),
        Command::Plugin(args) => publisher::run_plugin(args).map(|()| ExitCode::SUCCESS),
        Command::Publisher(args) => publisher::run(args).map(|()| ExitCode::SUCCESS),
        Command::Table(args) => table::run(args).map(|()| ExitCode::SUCCESS),
        Command::Execution(args) => table::run_execution(args).map(|()| ExitCode::SUCCESS),
        Command::DeadLetters(args) => dead_letters::run(args).map(|()| ExitCode::SUCCESS),
    }
}
