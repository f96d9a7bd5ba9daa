use std::process::ExitCode;

use clap::Parser;

mod cli;

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    match cli::run(args) {
        Ok(code) => code,
        Err(err) => {
            // The whole cause chain, never a backtrace.
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}
