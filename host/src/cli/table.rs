//! `weir table` and `weir execution`: what the publishers committed.

use std::path::PathBuf;

use serde_json::{Value, json};

use super::client::{Client, Remote, address, cell, print_rows, time};

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// The tables of a collection.
    List { collection: String },
    /// Where a table is (its Delta Lake location, for DuckDB, Polars, pandas, Spark) and its current version.
    Show { table: String },
    /// A table's columns: `events/clicks`.
    Schema {
        table: String,
        #[arg(long)]
        version: Option<i64>,
    },
    /// A table's committed versions.
    Versions { table: String },
    /// The first rows of a table (as of a version; default the latest).
    Sample {
        table: String,
        #[arg(long)]
        version: Option<i64>,
        #[arg(long, default_value_t = 10)]
        limit: usize,
    },
    /// Download a table (as of a version) as one parquet file.
    Export {
        table: String,
        #[arg(long)]
        version: Option<i64>,
        /// Where to write it [default: <table>.parquet].
        #[arg(long, short = 'o')]
        out: Option<PathBuf>,
    },
    /// Keep the last N versions readable and delete what only older ones read;
    /// old small files are compacted (no row is ever dropped).
    Vacuum {
        table: String,
        #[arg(long, default_value_t = 100)]
        keep_versions: i64,
    },
}

#[derive(Debug, clap::Subcommand)]
pub enum ExecutionCommand {
    /// A publisher's latest executions: `events/read_clicks`.
    List {
        publisher: String,
        #[arg(long, default_value_t = 20)]
        limit: u32,
    },
    /// One execution, with the plugin's log.
    Show { id: i64 },
}

fn version_query(version: Option<i64>) -> String {
    version.map_or(String::new(), |v| format!("version={v}&"))
}

pub fn run(args: Remote<Command>) -> anyhow::Result<()> {
    let client = Client::new(&args.server)?;
    match args.command {
        Command::List { collection } => {
            let answer = client.get(&format!("/v1/collections/{collection}/tables"))?;
            let columns = [("table", "name"), ("versions", "versions"), ("latest", "latest_version"), ("rows", "rows")];
            client.print_list(&answer, &columns);
        }
        Command::Show { table } => {
            let (c, t) = address(&table, "table")?;
            let answer = client.get(&format!("/v1/collections/{c}/tables/{t}"))?;
            client.print(&answer, |a| {
                let location = cell(&a["location"]);
                println!("table     {}", cell(&a["table"]));
                let iceberg = &a["iceberg"];
                match iceberg.is_null() {
                    true => println!("format    Delta Lake"),
                    false => println!("format    Delta Lake and Apache Iceberg"),
                }
                println!("location  {location}");
                if !iceberg.is_null() {
                    println!("iceberg   {} ({})", cell(&iceberg["identifier"]), cell(&iceberg["metadata_location"]));
                }
                println!(
                    "version   {} (Delta version {}: {} rows in {} files)",
                    cell(&a["version"]),
                    cell(&a["delta_version"]),
                    cell(&a["rows"]),
                    cell(&a["files"])
                );
                let by =
                    a["partition_by"].as_array().map(|p| p.iter().map(cell).collect::<Vec<_>>()).unwrap_or_default();
                if !by.is_empty() {
                    let columns: Vec<String> =
                        a["partition_columns"].as_array().map(|p| p.iter().map(cell).collect()).unwrap_or_default();
                    println!(
                        "partition {} (columns {}; {} partitions in this version)",
                        by.join(", "),
                        columns.join(", "),
                        cell(&a["partitions"])
                    );
                }
                let log = &a["log"];
                if !log.is_null() {
                    println!(
                        "          not readable since version {}: {} committed versions are not in its Delta log yet{}",
                        cell(&log["since_version"]),
                        cell(&log["unlogged"]),
                        log["error"].as_str().map(|e| format!(": {e}")).unwrap_or_default()
                    );
                }
                println!();
                println!("read it as of any Delta version N (`weir table versions` maps weir's versions to them):");
                println!("  duckdb   SELECT * FROM delta_scan('{location}', version => N)");
                println!("  polars   pl.scan_delta('{location}', version=N)");
                println!("  pandas   deltalake.DeltaTable('{location}', version=N).to_pandas()");
                if !iceberg.is_null() {
                    println!("or as the Iceberg table {} at snapshot N (weir's version N):", cell(&iceberg["identifier"]));
                    println!("  pyiceberg  SqlCatalog(\"weir\", uri=<weir's catalog database>), or RestCatalog(\"weir\", uri=<weir's URL>/iceberg, token=…)");
                    println!("             .load_table(\"{}\").scan(snapshot_id=N).to_arrow()", cell(&iceberg["identifier"]));
                }
            });
        }
        Command::Schema { table, version } => {
            let (c, t) = address(&table, "table")?;
            let answer = client.get(&format!("/v1/collections/{c}/tables/{t}/schema?{}", version_query(version)))?;
            client.print(&answer, |a| {
                let rows = a["columns"].as_array().into_iter().flatten().map(|col| {
                    vec![
                        cell(&col["name"]),
                        cell(&col["type"]),
                        if col["nullable"] == true { "yes".into() } else { "no".into() },
                    ]
                });
                print_rows(&["column", "type", "nullable"], rows);
            });
        }
        Command::Versions { table } => {
            let (c, t) = address(&table, "table")?;
            let answer = client.get(&format!("/v1/collections/{c}/tables/{t}/versions"))?;
            client.print(&answer, |a| {
                let rows = a.as_array().into_iter().flatten().map(|v| {
                    let delta = if v["delta_version"].is_null() { "not yet".into() } else { cell(&v["delta_version"]) };
                    vec![cell(&v["version"]), delta, cell(&v["rows"]), cell(&v["execution"]), time(&v["created_at_ms"])]
                });
                print_rows(&["version", "delta version", "rows", "execution", "committed"], rows);
            });
        }
        Command::Sample { table, version, limit } => {
            let (c, t) = address(&table, "table")?;
            let path = format!("/v1/collections/{c}/tables/{t}/sample?{}limit={limit}", version_query(version));
            let answer = client.get(&path)?;
            client.print(&answer, print_sample);
        }
        Command::Vacuum { table, keep_versions } => {
            let (c, t) = address(&table, "table")?;
            let answer = client
                .post(&format!("/v1/collections/{c}/tables/{t}/vacuum"), &json!({ "keep_versions": keep_versions }))?;
            client.print(&answer, |a| {
                println!(
                    "{table}: versions {} to {} stay readable; deleted {} files ({} bytes) that only older versions read",
                    cell(&a["kept_from"]),
                    cell(&a["latest"]),
                    cell(&a["deleted_files"]),
                    cell(&a["deleted_bytes"])
                );
                if let Some(v) = a["compacted_into"].as_i64() {
                    println!(
                        "compacted {} small files into version {v}: a later vacuum deletes them once version {v} is older than the kept ones",
                        cell(&a["compacted_files"])
                    );
                }
            });
        }
        Command::Export { table, version, out } => {
            let (c, t) = address(&table, "table")?;
            let out = out.unwrap_or_else(|| PathBuf::from(format!("{t}.parquet")));
            let bytes =
                client.download(&format!("/v1/collections/{c}/tables/{t}/export?{}", version_query(version)), &out)?;
            println!("{table} written to {} ({bytes} bytes)", out.display());
        }
    }
    Ok(())
}

fn print_sample(a: &Value) {
    let rows = a["rows"].as_array().map(Vec::as_slice).unwrap_or_default();
    println!(
        "{} version {} ({} rows; showing {})",
        cell(&a["table"]),
        cell(&a["version"]),
        cell(&a["rows_in_version"]),
        rows.len()
    );
    let Some(first) = rows.first().and_then(Value::as_object) else { return };
    let columns: Vec<&str> = first.keys().map(String::as_str).collect();
    print_rows(&columns, rows.iter().map(|r| columns.iter().map(|c| cell(&r[*c])).collect()));
}

pub fn run_execution(args: Remote<ExecutionCommand>) -> anyhow::Result<()> {
    let client = Client::new(&args.server)?;
    match args.command {
        ExecutionCommand::List { publisher, limit } => {
            let (c, p) = address(&publisher, "publisher")?;
            let answer = client.get(&format!("/v1/collections/{c}/publishers/{p}/executions?limit={limit}"))?;
            client.print(&answer, |a| {
                let rows = a.as_array().into_iter().flatten().map(|e| {
                    vec![
                        cell(&e["id"]),
                        cell(&e["status"]),
                        cell(&e["rollover_reason"]),
                        cell(&e["rows_in"]),
                        cell(&e["rows_out"]),
                        cell(&e["dead_letters"]),
                        cell(&e["table_version"]),
                        time(&e["started_at_ms"]),
                    ]
                });
                print_rows(
                    &["execution", "status", "reason", "rows in", "rows out", "dead letters", "version", "started"],
                    rows,
                );
            });
        }
        ExecutionCommand::Show { id } => {
            let answer = client.get(&format!("/v1/executions/{id}"))?;
            client.print(&answer, print_execution);
        }
    }
    Ok(())
}

fn print_execution(e: &Value) {
    println!("execution     {} of {}", cell(&e["id"]), cell(&e["publisher"]));
    println!("status        {} (closed by {})", cell(&e["status"]), cell(&e["rollover_reason"]));
    println!("started       {}", time(&e["started_at_ms"]));
    println!(
        "rows          {} in, {} out, {} dead letters",
        cell(&e["rows_in"]),
        cell(&e["rows_out"]),
        cell(&e["dead_letters"])
    );
    if e["dead_letters"].as_u64().is_some_and(|n| n > 0) && e["status"] == "committed" {
        println!(
            "              (kept in the catalog unless the source has a dead-letter topic: `weir dead-letters list {} --execution {}`)",
            cell(&e["publisher"]),
            cell(&e["id"])
        );
    }
    println!("version       {}", cell(&e["table_version"]));
    let offsets: Vec<String> = e["offsets"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| format!("p{} {} to {}", cell(&r["partition"]), cell(&r["first"]), cell(&r["last"])))
        .collect();
    println!("offsets       {}", offsets.join(", "));
    let t = &e["timings_ms"];
    let ms = |v: &Value| v.as_f64().map_or("-".into(), |ms| format!("{ms:.1}"));
    println!(
        "timings (ms)  decode {}, stage {}, publish {} (plugin CPU {}, writing the table {}), commit {}",
        ms(&t["decode"]),
        ms(&t["stage"]),
        ms(&t["publish"]),
        ms(&t["plugin_cpu"]),
        ms(&t["write"]),
        ms(&t["commit"])
    );
    if !e["error"].is_null() {
        println!("error         {}", cell(&e["error"]));
    }
    let lines = e["plugin_log"]["lines"].as_array().map(Vec::as_slice).unwrap_or_default();
    if lines.is_empty() {
        println!("plugin log    (empty)");
    } else {
        println!("plugin log:");
        for line in lines {
            println!(
                "  {:<5} {:<6} {}",
                cell(&line["level"]).to_lowercase(),
                cell(&line["source"]).to_lowercase(),
                cell(&line["message"])
            );
        }
    }
}
