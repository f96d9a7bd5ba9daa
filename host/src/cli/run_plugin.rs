//! `weir run-plugin`: one publisher call on local files, for plugin authors.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use arrow::datatypes::SchemaRef;
use comfy_table::{Table, presets::NOTHING};
use serde::Serialize;

use weir::formats::json_schema;
use weir::frames::{self, Frame};
use weir::input;
use weir::plugin::{Limits, LogLine, Origin, OutputTable, PluginLog, Runtime, RuntimeConfig, Timing};

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
    // Read every input before loading the plugin, so a bad file fails fast.
    let mut inputs = Vec::new();
    let mut frames = Vec::new();
    for (i, path) in args.inputs.iter().enumerate() {
        let frame = input::read(path, schema.as_ref())?;
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
    let run = runtime.publish(&plugin, vec![frames], &limits, None);

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
        error: None,
        log: run.log,
        timing: run.timing.into(),
    };
    match run.outcome {
        Ok(tables) => report.outputs = write_outputs(&args.output_dir, &tables)?,
        Err(err) => report.error = Some(format!("{:#}", anyhow::Error::from(err))),
    }
    print(&report, args.output)?;
    Ok(if report.error.is_some() { ExitCode::FAILURE } else { ExitCode::SUCCESS })
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
            weir::stage::write_parquet(&path, &table.frame.schema, &table.frame.batches, weir::stage::Kind::Table)
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
