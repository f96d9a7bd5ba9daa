use std::process::ExitCode;

use clap::Parser;

mod cli;

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    // Logs go to stderr; RUST_LOG=weir=info shows the pipeline at work. A certificate the
    // CLI does not trust is its error to report, not the verifier's log line.
    let default = "warn,rustls_platform_verifier=off";
    // Colour only on a terminal: a log redirected to a file holds no escape codes.
    let terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| default.into()))
        .with_writer(std::io::stderr)
        .with_ansi(terminal)
        .init();
    match cli::run(args) {
        Ok(code) => code,
        Err(err) => {
            // The whole cause chain, never a backtrace.
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}
