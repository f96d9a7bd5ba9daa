//! `weir plugin` and `weir publisher`: upload modules, register stream
//! publishers and watch them run.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde_json::{Value, json};

use super::client::{Client, Remote, ServerArgs, address, cell, print_rows, query_value, time};

#[derive(Debug, clap::Subcommand)]
pub enum PluginCommand {
    /// Write a ready publisher project: the code, the WIT, a sample input, a README.
    New {
        name: String,
        #[arg(long, value_enum)]
        language: super::scaffold::Language,
        /// Where [default: ./NAME].
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Build the project in DIR into a component with its toolchain; prints
    /// the component's path, size and world.
    Build {
        #[arg(default_value = ".")]
        dir: PathBuf,
    },
    /// Upload a plugin (a WebAssembly component); prints its sha256, which
    /// `weir publisher register --plugin` takes, as it takes the name.
    Push {
        file: PathBuf,
        /// A name for it, which `publisher register --plugin NAME` takes:
        /// pushing another build under the same name moves the name to it
        /// (publishers registered before keep the build they were given).
        #[arg(long)]
        name: Option<String>,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// The plugins uploaded to the server: names, language, contract, size,
    /// when each was pushed.
    List {
        #[command(flatten)]
        server: ServerArgs,
    },
}

/// `weir plugin`: the local commands take no server flags, the others do.
#[derive(Debug, clap::Args)]
pub struct PluginArgs {
    #[command(subcommand)]
    pub command: PluginCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Register a stream publisher from its declaration (TOML) and plugin.
    Register {
        collection: String,
        declaration: PathBuf,
        /// The plugin: a component file (uploaded first, unless the server has
        /// it), the `sha256:<hex>` `weir plugin push` printed, or the name it
        /// was pushed under (`--name`).
        #[arg(long)]
        plugin: String,
        /// Replace the publisher of the same name.
        #[arg(long)]
        update: bool,
    },
    /// List the publishers (of one collection, or all).
    List { collection: Option<String> },
    /// What a publisher reads, where it writes, how it runs: `events/read_clicks`.
    Status { publisher: String },
    /// Stop consuming (the open batch is committed first); `resume` continues where it stopped.
    Pause { publisher: String },
    /// Start a paused or failed publisher again, from its committed offsets.
    Resume { publisher: String },
    /// Delete a publisher; its table stays.
    Delete { publisher: String },
    /// Run a publisher again over what it ingested after a table version: one
    /// new version removes those rows (every engine sees it), the offsets move
    /// back to where that version left them, and the worker reads on from there.
    Reprocess {
        publisher: String,
        /// The last version whose rows stay.
        #[arg(long)]
        from_version: i64,
        /// A plugin to read them with instead: a component file, a `sha256:` digest or a pushed name.
        #[arg(long)]
        plugin: Option<String>,
    },
}

fn push(client: &Client, file: &Path, name: Option<&str>) -> anyhow::Result<Value> {
    let bytes = std::fs::read(file).with_context(|| format!("reading plugin {}", file.display()))?;
    let path = match name {
        Some(name) => format!("/v1/plugins?name={}", query_value(name)),
        None => "/v1/plugins".to_string(),
    };
    client.post_bytes(&path, &bytes, "application/wasm").with_context(|| format!("uploading {}", file.display()))
}

/// What `--plugin` names: a file to upload, else a digest or a name the
/// server resolves. Something that looks like a path but is not there is a
/// missing file, not a name.
fn plugin_ref(client: &Client, plugin: &str) -> anyhow::Result<Value> {
    let path = Path::new(plugin);
    if path.exists() {
        return Ok(push(client, path, None)?["sha256"].clone());
    }
    if plugin.contains(['/', '\\']) || plugin.ends_with(".wasm") {
        anyhow::bail!(
            "plugin file {plugin} does not exist: build it with `weir plugin build`, or give the sha256: digest or name `weir plugin push` took"
        );
    }
    Ok(json!(plugin))
}

/// The declaration with its schema inline: a schema path is read relative to the declaration.
fn inline_schema(path: &Path) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut doc: toml::Table = match toml::from_str(&text) {
        Ok(doc) => doc,
        Err(_) => return Ok(text), // the server says what is wrong with it
    };
    let schema = doc.get_mut("source").and_then(|s| s.get_mut("kafka")).and_then(|k| k.get_mut("schema"));
    if let Some(toml::Value::String(spec)) = schema
        && !weir::publisher::source::is_inline_schema(spec)
    {
        let file = path.parent().unwrap_or(Path::new(".")).join(&*spec);
        *spec = std::fs::read_to_string(&file).with_context(|| format!("reading the schema {}", file.display()))?;
        return Ok(toml::to_string(&doc)?);
    }
    Ok(text)
}

pub fn run_plugin(args: PluginArgs) -> anyhow::Result<()> {
    match args.command {
        // These two are local: they take no server flags.
        PluginCommand::New { name, language, dir } => {
            let root = super::scaffold::new(&name, language, dir.as_deref())?;
            println!("wrote {}: `weir plugin build {}` builds it", root.display(), root.display());
        }
        PluginCommand::Build { dir } => {
            let built = super::scaffold::build(&dir)?;
            println!("built {} ({}, {})", built.path.display(), weir::plugin::human_bytes(built.size), built.world);
        }
        PluginCommand::Push { file, name, server } => {
            let client = Client::new(&server)?;
            let answer = push(&client, &file, name.as_deref())?;
            client.print(&answer, |a| {
                let how = if a["new"] == json!(true) { "uploaded" } else { "already uploaded" };
                let named = a["name"].as_str().map(|n| format!(" as `{n}`")).unwrap_or_default();
                let what = format!("{}, weir:publisher@{}", cell(&a["language"]), cell(&a["contract"]));
                println!("{} {how}{named} ({what}, {} bytes)", cell(&a["sha256"]), cell(&a["size"]));
            });
        }
        PluginCommand::List { server } => {
            let client = Client::new(&server)?;
            let plugins = client.get("/v1/plugins")?;
            client.print(&plugins, |plugins| {
                let items = plugins.as_array().map(Vec::as_slice).unwrap_or_default();
                if items.is_empty() {
                    println!("(none): upload one with `weir plugin push FILE.wasm --name NAME`");
                    return;
                }
                let rows = items.iter().map(|p| {
                    let size = p["size"].as_u64().map(weir::plugin::human_bytes).unwrap_or_else(|| "-".into());
                    let contract = p["contract"].as_str().map(|c| format!("weir:publisher@{c}"));
                    let names = cell(&p["names"]);
                    vec![
                        if names.is_empty() { "-".into() } else { names },
                        cell(&p["language"]),
                        contract.unwrap_or_else(|| "-".into()),
                        size,
                        time(&p["created_at_ms"]),
                        cell(&p["sha256"]),
                    ]
                });
                print_rows(&["name", "language", "world", "size", "pushed", "sha256"], rows);
            });
        }
    }
    Ok(())
}

pub fn run(args: Remote<Command>) -> anyhow::Result<()> {
    let client = Client::new(&args.server)?;
    match args.command {
        Command::Register { collection, declaration, plugin, update } => {
            let text = inline_schema(&declaration)?;
            let body = json!({ "declaration": text, "plugin": plugin_ref(&client, &plugin)?, "update": update });
            let answer = client.post(&format!("/v1/collections/{collection}/publishers"), &body)?;
            client.print(&answer, |a| println!("{}", cell(&a["message"])));
        }
        Command::List { collection } => {
            let path = match &collection {
                Some(c) => format!("/v1/collections/{c}/publishers"),
                None => "/v1/publishers".into(),
            };
            let columns = [
                ("collection", "collection"),
                ("publisher", "name"),
                ("topic", "topic"),
                ("table", "output_table"),
                ("state", "state"),
            ];
            client.print_list(&client.get(&path)?, &columns);
        }
        Command::Status { publisher } => {
            let (c, p) = address(&publisher, "publisher")?;
            let answer = client.get(&format!("/v1/collections/{c}/publishers/{p}"))?;
            client.print(&answer, print_status);
        }
        Command::Pause { publisher } => {
            let (c, p) = address(&publisher, "publisher")?;
            let answer = client.post(&format!("/v1/collections/{c}/publishers/{p}/pause"), &json!({}))?;
            client.print(&answer, |_| println!("{publisher} paused"));
        }
        Command::Resume { publisher } => {
            let (c, p) = address(&publisher, "publisher")?;
            let answer = client.post(&format!("/v1/collections/{c}/publishers/{p}/resume"), &json!({}))?;
            client.print(&answer, |a| println!("{publisher} {}", cell(&a["state"])));
        }
        Command::Reprocess { publisher, from_version, plugin } => {
            let (c, p) = address(&publisher, "publisher")?;
            let plugin = plugin.map(|plugin| plugin_ref(&client, &plugin)).transpose()?;
            let body = json!({ "from_version": from_version, "plugin": plugin });
            let answer = client.post(&format!("/v1/collections/{c}/publishers/{p}/reprocess"), &body)?;
            client.print(&answer, |a| println!("{}", cell(&a["message"])));
        }
        Command::Delete { publisher } => {
            let (c, p) = address(&publisher, "publisher")?;
            let answer = client.delete(&format!("/v1/collections/{c}/publishers/{p}"))?;
            client.print(&answer, |_| println!("{publisher} deleted; its table stays"));
        }
    }
    Ok(())
}

fn print_status(s: &Value) {
    let worker = &s["worker"];
    let state = match worker["state"].as_str() {
        Some("consuming") => match worker["partitions"].as_array().filter(|p| !p.is_empty()) {
            Some(partitions) => {
                let partitions: Vec<String> = partitions.iter().map(cell).collect();
                format!("consuming (partitions {})", partitions.join(", "))
            }
            None => "consuming (joining the consumer group: no partitions assigned yet)".into(),
        },
        Some("failed") => format!("failed: {}", cell(&worker["error"])),
        other => other.unwrap_or("-").to_string(),
    };
    let size = s["size_rollover_bytes"].as_u64().map_or("no size limit".into(), |b| format!("{} MiB", b >> 20));
    println!("publisher      {}/{}", cell(&s["collection"]), cell(&s["name"]));
    match s["message"].as_str() {
        Some(message) => {
            println!("topic          {} ({}, message {message})", cell(&s["topic"]), cell(&s["data_format"]))
        }
        None => println!("topic          {} ({})", cell(&s["topic"]), cell(&s["data_format"])),
    }
    let registry = &s["schema_registry"];
    if !registry.is_null() {
        let ids: Vec<String> = registry["schema_ids"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|i| match i["usable"].as_bool() {
                Some(false) => format!("{} (unreadable: its messages are dead letters)", cell(&i["id"])),
                _ => cell(&i["id"]),
            })
            .collect();
        println!("registry       {} subject {}", cell(&registry["url"]), cell(&registry["subject"]));
        println!("schema ids     {}", if ids.is_empty() { "none seen yet".to_string() } else { ids.join(", ") });
        if !registry["waiting"].is_null() {
            println!(
                "               waiting for the registry since {}: {} (messages are held, not dead-lettered)",
                time(&registry["waiting_since_ms"]),
                cell(&registry["waiting"])
            );
        }
    }
    let headers = if s["include_headers"] == Value::Bool(false) { "" } else { ", headers in _headers" };
    println!("keys           {}{headers}", cell(&s["key_format"]));
    if !s["start_from"].is_null() {
        println!("starts from    {} (until its first commit)", cell(&s["start_from"]));
    }
    if !s["dead_letter_topic"].is_null() {
        println!("dead letters   {}", cell(&s["dead_letter_topic"]));
    }
    println!("output table   {}", cell(&s["output_table"]));
    let log = &s["table_log"];
    if !log.is_null() {
        let cause = match log["error"].as_str() {
            Some(error) => format!(": {error} (failing since {})", time(&log["failing_since_ms"])),
            None => String::new(),
        };
        println!(
            "               not readable since version {}: {} committed versions are not in its Delta log yet{cause}",
            cell(&log["since_version"]),
            cell(&log["unlogged"]),
        );
    }
    println!("plugin         {}", cell(&s["plugin"]));
    println!(
        "flush ceiling  {} s (flush_interval_mins = {})",
        cell(&s["flush_ceiling_seconds"]),
        cell(&s["flush_interval_mins"])
    );
    println!("time window    {} s", cell(&s["time_window_seconds"]));
    let count = s["messages_rollover"].as_u64().map_or("no message count".into(), |n| format!("{n} messages"));
    println!("size / count   {size} / {count} (whichever comes first, or the time window)");
    println!("worker         {state}");
    let retry = &s["retrying"];
    if !retry.is_null() {
        let next = match retry["next_attempt_at_ms"].as_i64() {
            Some(_) => format!("the next runs at {}", time(&retry["next_attempt_at_ms"])),
            None => "that was the last: the publisher fails, its offsets where they were".into(),
        };
        println!(
            "retrying       a batch: attempt {} of {} failed: {}; {next} (failing since {})",
            cell(&retry["attempt"]),
            cell(&retry["of"]),
            cell(&retry["error"]),
            time(&retry["failing_since_ms"]),
        );
    }
    let refused = &s["broker_refused"];
    if !refused.is_null() {
        println!(
            "brokers        refuse this worker since {}: {} (nothing is read until they take it)",
            time(&refused["since_ms"]),
            cell(&refused["error"])
        );
    }
    let unreachable = &s["broker_unreachable"];
    if !unreachable.is_null() {
        println!(
            "brokers        unreachable since {}: {} (nothing is read until they answer; nothing is lost)",
            time(&unreachable["since_ms"]),
            cell(&unreachable["error"])
        );
    }
    match s["lag"].as_i64() {
        Some(lag) => println!("lag            {lag} messages"),
        None => println!("lag            unknown: {}", cell(&s["lag_error"])),
    }
    let last = &s["last_batch"];
    if last.is_null() {
        println!("last batch     none yet");
    } else {
        let version = last["table_version"].as_i64().map_or("no new version".into(), |v| format!("version {v}"));
        println!(
            "last batch     #{} {} ({}) at {}: {} rows in, {} out, {} dead letters, {version}",
            cell(&last["id"]),
            cell(&last["status"]),
            cell(&last["rollover_reason"]),
            time(&last["started_at_ms"]),
            cell(&last["rows_in"]),
            cell(&last["rows_out"]),
            cell(&last["dead_letters"]),
        );
        if !last["error"].is_null() {
            println!("               {}", cell(&last["error"]));
        }
    }
}
