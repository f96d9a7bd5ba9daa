use std::process::ExitCode;

use clap::Parser;

mod cli;

/// The server flags a command takes wherever it is given them.
const SERVER_FLAGS: [&str; 4] = ["--server", "--token", "--ca-file", "--output"];

/// The server flags given before the subcommand (`weir --output json table
/// list events`), moved to the end, where the subcommand takes them.
fn server_flags_last(mut args: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    let mut moved = Vec::new();
    while let Some(flag) = args.get(1).and_then(|a| a.to_str()).map(str::to_string) {
        let name = flag.split_once('=').map_or(flag.as_str(), |(name, _)| name);
        if !SERVER_FLAGS.contains(&name) {
            break;
        }
        moved.push(args.remove(1));
        if !flag.contains('=') && args.len() > 1 {
            moved.push(args.remove(1));
        }
    }
    args.extend(moved);
    args
}

fn main() -> ExitCode {
    let args = cli::Cli::parse_from(server_flags_last(std::env::args_os().collect()));
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

#[cfg(test)]
mod tests {
    use super::server_flags_last;

    fn moved(args: &[&str]) -> Vec<String> {
        let args = args.iter().map(Into::into).collect();
        server_flags_last(args).into_iter().map(|a| a.into_string().unwrap()).collect()
    }

    #[test]
    fn server_flags_before_the_subcommand_go_after_it_and_others_stay() {
        assert_eq!(
            moved(&["weir", "--output", "json", "--token=t", "execution", "show", "1"]),
            ["weir", "execution", "show", "1", "--output", "json", "--token=t"]
        );
        assert_eq!(
            moved(&["weir", "execution", "show", "1", "--output", "json"]),
            ["weir", "execution", "show", "1", "--output", "json"]
        );
        assert_eq!(moved(&["weir", "--version"]), ["weir", "--version"]);
    }
}
