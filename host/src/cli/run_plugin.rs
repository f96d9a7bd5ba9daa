//! `weir run-plugin`: one publisher call on local files, for plugin authors.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use arrow::datatypes::SchemaRef;
use comfy_table::{Table, presets::NOTHING};
use serde::Serialize;

use weir::formats::{Decoder, Part, RawMessage, encode_json_values, json_schema};
use weir::input;
use weir::plugin::frames::{self, Frame};
use weir::plugin::{Declared, Limits, LogLine, Origin, OutputTable, PluginLog, Runtime, RuntimeConfig, Timing};
use weir::publisher::declaration::table_name_for_topic;
use weir::publisher::declaration::{Declaration, Resolved};

use super::Output;
use super::units::{parse_duration, parse_size};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The publisher plugin: a WebAssembly component built for wasm32-wasip2.
    plugin: PathBuf,
    /// A table file, one frame of slot 0 (repeat for several frames): .parquet,
    /// .arrow (Arrow IPC file or stream), .avro (Avro object container) or .jsonl/.ndjson.
    #[arg(long = "input", short = 'i', required = true, value_name = "FILE")]
    inputs: Vec<PathBuf>,
    /// A JSON Schema document for the NDJSON inputs; inferred from the data when absent.
    #[arg(long, value_name = "FILE")]
    schema: Option<PathBuf>,
    /// The publisher's declaration (publisher.toml), to run as `weir serve`
    /// would: each .jsonl input is read one message a line and decoded with
    /// the declared format and schema (provenance columns included; a line
    /// that does not decode is a dead letter, shown), and the plugin may write
    /// only the declared output table.
    #[arg(long, value_name = "FILE", conflicts_with = "schema")]
    declaration: Option<PathBuf>,
    /// The rows the output table must hold, in order (.jsonl, one object a
    /// line, compared on the columns each names): a difference is an error
    /// and a non-zero exit, for tests in CI.
    #[arg(long, value_name = "FILE")]
    expect: Option<PathBuf>,
    /// Where each output table is written, as DIR/<table>.parquet.
    #[arg(long, value_name = "DIR")]
    output_dir: PathBuf,
    /// Linear memory the plugin may use.
    #[arg(long, default_value = "256MiB", value_parser = parse_size, env = "WEIR_PLUGIN_MEMORY_LIMIT")]
    memory_limit: u64,
    /// CPU time the plugin may use before it is stopped.
    #[arg(long, default_value = "2s", value_parser = parse_duration, env = "WEIR_PLUGIN_DEADLINE")]
    deadline: Duration,
    /// Arrow IPC bytes the plugin may return.
    #[arg(long, default_value = "256MiB", value_parser = parse_size, env = "WEIR_PLUGIN_OUTPUT_LIMIT")]
    output_limit: u64,
    /// Where compiled plugins are cached [default: ~/.cache/weir/artifacts].
    #[arg(long, value_name = "DIR", env = "WEIR_CACHE_DIR")]
    cache_dir: Option<PathBuf>,
    /// Compile the plugin afresh and leave the cache alone.
    #[arg(long)]
    no_cache: bool,
    /// How to print the result.
    #[arg(long, value_enum, default_value_t)]
    output: Output,
}

#[derive(Debug, Serialize)]
struct Report {
    plugin: PluginReport,
    inputs: Vec<TableReport>,
    outputs: Vec<TableReport>,
    /// Input lines that do not decode as declared, and why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    dead_letters: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    log: PluginLog,
    timing: TimingReport,
}

#[derive(Debug, Serialize)]
struct PluginReport {
    path: PathBuf,
    digest: String,
    /// The `weir:publisher` version it implements.
    contract: &'static str,
    origin: Origin,
    load_ms: f64,
}

#[derive(Debug, Serialize)]
struct TableReport {
    name: String,
    rows: u64,
    columns: usize,
    file: PathBuf,
}

#[derive(Debug, Serialize)]
struct TimingReport {
    instantiate_us: f64,
    call_ms: f64,
    output_ms: f64,
    cpu_ms: f64,
}

impl From<Timing> for TimingReport {
    fn from(t: Timing) -> Self {
        Self {
            instantiate_us: t.instantiate.as_secs_f64() * 1e6,
            call_ms: t.call.as_secs_f64() * 1e3,
            output_ms: t.output.as_secs_f64() * 1e3,
            cpu_ms: t.cpu.as_secs_f64() * 1e3,
        }
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let schema = match &args.schema {
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("reading schema {}", path.display()))?;
            Some(SchemaRef::new(
                json_schema::from_json_schema(&text).with_context(|| format!("schema {}", path.display()))?,
            ))
        }
        None => None,
    };
    let declared = args.declaration.as_deref().map(declaration).transpose()?;
    // Read every input before loading the plugin, so a bad file fails fast.
    let mut inputs = Vec::new();
    let mut frames = Vec::new();
    let mut dead_letters = Vec::new();
    for (i, path) in args.inputs.iter().enumerate() {
        let frame = match &declared {
            Some(declared) if input::Format::of(path)? == input::Format::NdJson => {
                let (frame, dead) = decode_as_declared(declared, path, i as i32)?;
                dead_letters.extend(dead);
                frame
            }
            _ => input::read(path, schema.as_ref())?,
        };
        inputs.push(table_report(format!("frame {i}"), &frame, path.clone()));
        frames.push(
            frames::encode(&frame.schema, &frame.batches).with_context(|| format!("encoding {}", path.display()))?,
        );
    }

    let cache_dir = if args.no_cache { None } else { args.cache_dir.clone().or_else(default_cache_dir) };
    let runtime = Runtime::new(RuntimeConfig { cache_dir, max_concurrent_calls: 1, ..RuntimeConfig::default() })?;
    let bytes = std::fs::read(&args.plugin).with_context(|| format!("reading plugin {}", args.plugin.display()))?;
    let loading = Instant::now();
    let plugin = runtime.load(&bytes).with_context(|| format!("loading plugin {}", args.plugin.display()))?;
    let load_ms = loading.elapsed().as_secs_f64() * 1e3;

    let limits = Limits {
        memory_bytes: args.memory_limit,
        deadline: args.deadline,
        output_bytes: usize::try_from(args.output_limit).unwrap_or(usize::MAX),
        ..Limits::default()
    };
    let names = declared
        .as_ref()
        .map(|d| Declared::new(vec![d.source.topic.clone()], vec![table_name_for_topic(&d.source.topic)]));
    let run = runtime.publish(&plugin, vec![frames], &limits, names.as_ref());

    let mut report = Report {
        plugin: PluginReport {
            path: args.plugin.clone(),
            digest: plugin.digest().to_string(),
            contract: plugin.contract(),
            origin: plugin.origin(),
            load_ms,
        },
        inputs,
        outputs: vec![],
        dead_letters,
        error: None,
        log: run.log,
        timing: run.timing.into(),
    };
    match run.outcome {
        Ok(tables) => {
            report.outputs = write_outputs(&args.output_dir, &tables)?;
            if let Some(path) = &args.expect {
                report.error = expect(path, &tables)?.err();
            }
        }
        Err(err) => report.error = Some(format!("{:#}", anyhow::Error::from(err))),
    }
    print(&report, args.output)?;
    Ok(if report.error.is_some() { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

/// The declaration at `path`, its schema read beside it, checked as the server checks it.
fn declaration(path: &Path) -> anyhow::Result<Resolved> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let resolved = Declaration::parse(&text).and_then(|d| d.resolve(Some(path.parent().unwrap_or(Path::new(".")))));
    resolved.with_context(|| format!("the declaration {} is not valid", path.display()))
}

/// An NDJSON input read as the topic's messages, one a line (partition
/// `partition`, offset the line's index), each in the declared format, then
/// decoded as the worker decodes them. Lines that do not decode are dead
/// letters: `file:line: why`.
fn decode_as_declared(declared: &Resolved, path: &Path, partition: i32) -> anyhow::Result<(Frame, Vec<String>)> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let format = &declared.source.format;
    let (mut messages, mut dead) = (Vec::new(), Vec::new());
    for (offset, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        // In JSON the line is the message; Avro and Protobuf messages are encoded from it.
        match encode_json_values(format, &[line.to_string()], None).map(|mut b| b.pop()) {
            Ok(Some(bytes)) => {
                messages.push(RawMessage::new(partition, offset as i64, None, None, Some(&bytes), vec![]))
            }
            Ok(None) => dead.push(format!("{}:{}: nothing to encode", path.display(), offset + 1)),
            Err(e) => dead.push(format!("{}:{}: {e}", path.display(), offset + 1)),
        }
    }
    let source = &declared.source;
    let decoded = Decoder::new(Part::new(format.clone(), None), source.key.key(None), source.headers).decode(messages);
    dead.extend(decoded.dead.iter().map(|d| format!("{}:{}: {}", path.display(), d.message.offset + 1, d.error)));
    Ok((Frame { schema: decoded.batch.schema(), batches: vec![decoded.batch] }, dead))
}

/// Holds the output table to the rows of `path`: `Err` says the first difference.
fn expect(path: &Path, tables: &[OutputTable]) -> anyhow::Result<Result<(), String>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let expected: Vec<serde_json::Map<String, serde_json::Value>> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).with_context(|| format!("{}:{}: not a JSON object", path.display(), i + 1))
        })
        .collect::<anyhow::Result<_>>()?;
    let [table] = tables else {
        return Ok(Err(format!("--expect holds one output table to its rows, and the plugin wrote {}", tables.len())));
    };
    let mut writer = arrow::json::ArrayWriter::new(Vec::new());
    for batch in &table.frame.batches {
        writer.write(batch)?;
    }
    writer.finish()?;
    let json = writer.into_inner();
    let got: Vec<serde_json::Value> = if json.is_empty() { vec![] } else { serde_json::from_slice(&json)? };
    if got.len() != expected.len() {
        return Ok(Err(format!(
            "table `{}` has {} rows, and {} expects {}",
            table.name,
            got.len(),
            path.display(),
            expected.len()
        )));
    }
    let same =
        |a: &serde_json::Value, b: &serde_json::Value| a == b || (a.as_f64().is_some() && a.as_f64() == b.as_f64());
    for (i, (want, row)) in expected.iter().zip(&got).enumerate() {
        for (column, value) in want {
            let found = row.get(column).unwrap_or(&serde_json::Value::Null);
            if !same(found, value) {
                return Ok(Err(format!(
                    "table `{}` differs from {} at row {}: column `{column}` is {found}, expected {value}",
                    table.name,
                    path.display(),
                    i + 1
                )));
            }
        }
    }
    Ok(Ok(()))
}

fn default_cache_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("weir").join("artifacts"))
}

fn table_report(name: String, frame: &Frame, file: PathBuf) -> TableReport {
    TableReport { name, rows: frame.rows(), columns: frame.schema.fields().len(), file }
}

fn write_outputs(dir: &Path, tables: &[OutputTable]) -> anyhow::Result<Vec<TableReport>> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating output directory {}", dir.display()))?;
    tables
        .iter()
        .map(|table| {
            // Table names are checked by the runtime, so they are safe file names.
            let path = dir.join(format!("{}.parquet", table.name));
            weir::tables::file::write_parquet(
                &path,
                &table.frame.schema,
                &table.frame.batches,
                weir::tables::file::Kind::Table,
            )
            .with_context(|| format!("writing {}", path.display()))?;
            Ok(table_report(table.name.clone(), &table.frame, path))
        })
        .collect()
}

fn print(report: &Report, output: Output) -> anyhow::Result<()> {
    match output {
        Output::Json => {
            println!("{}", serde_json::to_string_pretty(report)?);
        }
        Output::Table => {
            let how = match report.plugin.origin {
                Origin::Compiled => "compiled",
                Origin::Cached => "loaded from cache",
            };
            println!(
                "plugin  {} (weir:publisher@{}, {how} in {:.1} ms)",
                report.plugin.digest, report.plugin.contract, report.plugin.load_ms
            );
            println!(
                "        instantiate {:.0} µs, publish {:.2} ms, {:.2} ms of CPU in all",
                report.timing.instantiate_us, report.timing.call_ms, report.timing.cpu_ms
            );
            println!();
            print_tables("input (slot 0)", &report.inputs, "FRAME", "FILE");
            if report.error.is_none() {
                println!();
                print_tables("output", &report.outputs, "TABLE", "WRITTEN TO");
            }
            if !report.dead_letters.is_empty() {
                println!("\ndead letters (input lines that do not decode as declared):");
                for dead in &report.dead_letters {
                    println!("  {dead}");
                }
            }
            print_log(&report.log);
            if let Some(error) = &report.error {
                eprintln!("\nerror: {error}");
            }
        }
    }
    Ok(())
}

fn print_tables(title: &str, tables: &[TableReport], name_header: &str, file_header: &str) {
    if tables.is_empty() {
        println!("{title}: no tables");
        return;
    }
    println!("{title}:");
    let mut table = Table::new();
    table.load_style(NOTHING).set_header([format!("  {name_header}").as_str(), "ROWS", "COLUMNS", file_header]);
    for t in tables {
        table.add_row([
            format!("  {}", t.name),
            t.rows.to_string(),
            t.columns.to_string(),
            t.file.display().to_string(),
        ]);
    }
    println!("{table}");
}

fn print_log(log: &PluginLog) {
    if log.lines.is_empty() && log.dropped_bytes == 0 {
        return;
    }
    println!("\nplugin log:");
    for LogLine { level, source, message } in &log.lines {
        println!("  {:<5} {:<6} {message}", format!("{level:?}").to_lowercase(), format!("{source:?}").to_lowercase());
    }
    if log.dropped_bytes > 0 {
        println!("  ({} more bytes dropped: over the log cap)", log.dropped_bytes);
    }
}
