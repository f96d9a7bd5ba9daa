//! `weir dead-letters`: the messages a publisher could not decode and kept in
//! the catalog (its source has no dead-letter topic), with why, and their
//! bytes; and their re-run once the cause is fixed.

use std::io::Write as _;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, bail};
use serde_json::Value;

use super::client::{Client, Remote, address, cell, print_rows, query_value, time};

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// The dead letters a publisher kept, oldest first: `events/read_clicks`.
    List {
        publisher: String,
        #[command(flatten)]
        filter: Filter,
    },
    /// One dead letter in full: its key, value and headers, and why it could not be decoded.
    Show { publisher: String, partition: i32, offset: i64 },
    /// The dead letters as JSON lines, their bytes in base64 (`value_base64`), for scripts.
    Export {
        publisher: String,
        #[command(flatten)]
        filter: Filter,
        /// Where [default: standard output].
        #[arg(short, long)]
        out: Option<PathBuf>,
    },
    /// Once their cause is fixed (the declaration's schema, the plugin):
    /// decode the chosen dead letters again with the publisher's current
    /// declaration and run those that decode through its current plugin, as
    /// one new table version. Each reaches the table once: it is no longer
    /// kept after. Those that still do not decode stay, and are listed.
    Rerun {
        publisher: String,
        #[command(flatten)]
        filter: Filter,
    },
}

/// Which dead letters: every option narrows.
#[derive(Debug, clap::Args)]
pub struct Filter {
    /// Those of this execution (`weir execution list` shows each batch's count).
    #[arg(long)]
    execution: Option<i64>,
    /// Those met since: an RFC 3339 time (`2026-12-04T10:00:00Z`) or a while ago (`30m`, `2h`).
    #[arg(long)]
    since: Option<String>,
    /// Those met before: the same forms.
    #[arg(long)]
    until: Option<String>,
    /// Those whose error holds this text (any case).
    #[arg(long)]
    reason: Option<String>,
    /// Those of this partition.
    #[arg(long)]
    partition: Option<i32>,
    /// The one at this offset (with --partition).
    #[arg(long, requires = "partition")]
    offset: Option<i64>,
    /// At most this many [list: 50; export, rerun: all].
    #[arg(long)]
    limit: Option<u32>,
}

/// An RFC 3339 time or a duration ago, in ms since the epoch.
fn when(text: &str) -> anyhow::Result<i64> {
    let at = match humantime::parse_rfc3339_weak(text) {
        Ok(at) => at,
        Err(_) => match humantime::parse_duration(text) {
            Ok(ago) => SystemTime::now() - ago,
            Err(_) => bail!("`{text}` is neither an RFC 3339 time (2026-12-04T10:00:00Z) nor a while ago (30m, 2h)"),
        },
    };
    Ok(at.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO).as_millis() as i64)
}

impl Filter {
    fn query(&self, default_limit: Option<u32>) -> anyhow::Result<String> {
        let mut query = Vec::new();
        if let Some(execution) = self.execution {
            query.push(format!("execution={execution}"));
        }
        if let Some(since) = &self.since {
            query.push(format!("since_ms={}", when(since)?));
        }
        if let Some(until) = &self.until {
            query.push(format!("until_ms={}", when(until)?));
        }
        if let Some(reason) = &self.reason {
            query.push(format!("reason={}", query_value(reason)));
        }
        if let Some(partition) = self.partition {
            query.push(format!("partition={partition}"));
        }
        if let Some(offset) = self.offset {
            query.push(format!("offset={offset}"));
        }
        if let Some(limit) = self.limit.or(default_limit) {
            query.push(format!("limit={limit}"));
        }
        Ok(query.join("&"))
    }
}

fn shorten(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_string();
    }
    format!("{}…", text.chars().take(width).collect::<String>())
}

/// A key's or value's cell: its text, shortened, or that it is binary.
fn preview(d: &Value, field: &str) -> String {
    match d[format!("{field}_text")].as_str() {
        Some(text) => shorten(text, 40),
        None if d[format!("{field}_base64")].is_null() => "-".into(),
        None => "(binary)".into(),
    }
}

pub fn run(args: Remote<Command>) -> anyhow::Result<()> {
    let client = Client::new(&args.server)?;
    match args.command {
        Command::List { publisher, filter } => {
            let (c, p) = address(&publisher, "publisher")?;
            let answer =
                client.get(&format!("/v1/collections/{c}/publishers/{p}/dead-letters?{}", filter.query(Some(50))?))?;
            client.print(&answer, |a| {
                let rows = a.as_array().into_iter().flatten().map(|d| {
                    vec![
                        cell(&d["partition"]),
                        cell(&d["offset"]),
                        cell(&d["execution"]),
                        time(&d["at_ms"]),
                        preview(d, "value"),
                        shorten(&cell(&d["error"]), 80),
                    ]
                });
                print_rows(&["partition", "offset", "execution", "met", "value", "error"], rows);
            });
        }
        Command::Show { publisher, partition, offset } => {
            let (c, p) = address(&publisher, "publisher")?;
            let answer =
                client.get(&format!("/v1/collections/{c}/publishers/{p}/dead-letters/{partition}/{offset}"))?;
            client.print(&answer, |d| {
                println!(
                    "message       {} partition {} offset {}",
                    cell(&d["topic"]),
                    cell(&d["partition"]),
                    cell(&d["offset"])
                );
                println!("met           {} by execution {}", time(&d["at_ms"]), cell(&d["execution"]));
                println!("error         {}", cell(&d["error"]));
                for field in ["key", "value"] {
                    let shown = match d[format!("{field}_text")].as_str() {
                        Some(text) => text.to_string(),
                        None => format!("(binary, base64) {}", cell(&d[format!("{field}_base64")])),
                    };
                    println!("{field:<13} {shown}");
                }
                for h in d["headers"].as_array().into_iter().flatten() {
                    println!("header        {} = {}", cell(&h["key"]), cell(&h["value_text"]));
                }
            });
        }
        Command::Export { publisher, filter, out } => {
            let (c, p) = address(&publisher, "publisher")?;
            let answer =
                client.get(&format!("/v1/collections/{c}/publishers/{p}/dead-letters?{}", filter.query(None)?))?;
            let mut lines = Vec::new();
            for d in answer.as_array().into_iter().flatten() {
                serde_json::to_writer(&mut lines, d)?;
                lines.push(b'\n');
            }
            match out {
                Some(path) => {
                    std::fs::write(&path, &lines).with_context(|| format!("writing {}", path.display()))?;
                    let n = answer.as_array().map_or(0, Vec::len);
                    eprintln!("{n} dead letters of {publisher} written to {}", path.display());
                }
                None => std::io::stdout().write_all(&lines)?,
            }
        }
        Command::Rerun { publisher, filter } => {
            let (c, p) = address(&publisher, "publisher")?;
            let path = format!("/v1/collections/{c}/publishers/{p}/dead-letters/rerun?{}", filter.query(None)?);
            let answer = client.post(&path, &serde_json::json!({}))?;
            client.print(&answer, |a| {
                let version = match a["version"].as_i64() {
                    Some(v) => format!("table version {v}"),
                    None => "no table version (the plugin wrote nothing)".into(),
                };
                match a["rerun"].as_u64() {
                    Some(0) => {
                        println!("none of the {} chosen dead letters decodes yet; nothing was committed", a["chosen"])
                    }
                    _ => println!(
                        "re-ran {} of {} dead letters: {} rows in {version} (execution {})",
                        a["rerun"],
                        a["chosen"],
                        a["rows_out"],
                        cell(&a["execution"])
                    ),
                }
                let still = a["still_dead"].as_array().map(Vec::as_slice).unwrap_or_default();
                if !still.is_empty() {
                    println!("{} still do not decode, and stay kept:", still.len());
                    let rows = still
                        .iter()
                        .map(|d| vec![cell(&d["partition"]), cell(&d["offset"]), shorten(&cell(&d["error"]), 100)]);
                    print_rows(&["partition", "offset", "error"], rows);
                }
            });
        }
    }
    Ok(())
}
