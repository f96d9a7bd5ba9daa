//! `weir collection` and `weir connection`: collections and the
//! `kafka-topic-in` connection bound to each.

use anyhow::Context as _;
use serde_json::{Value, json};

use super::client::{Client, Remote, cell, print_rows, time};
use super::connection::ConnectionArgs;

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Create a collection, with its Kafka connection.
    Create {
        name: String,
        /// The group the collection belongs to.
        #[arg(long, default_value = "sources")]
        group: String,
        #[command(flatten)]
        connection: ConnectionArgs,
        /// The format of its publishers' tables when their declaration names
        /// none: `delta` (the default) or `iceberg` (Iceberg metadata beside the Delta log).
        #[arg(long)]
        table_format: Option<String>,
    },
    List,
    Show {
        name: String,
    },
    /// Delete a collection with no publishers left, and its tables.
    Delete {
        name: String,
    },
}

#[derive(Debug, clap::Subcommand)]
pub enum ConnectionCommand {
    /// Check that the collection's brokers answer (and that a topic exists).
    Check {
        collection: String,
        #[arg(long)]
        topic: Option<String>,
    },
    /// Set or replace a collection's connection; its running publishers restart on it.
    Set {
        collection: String,
        #[command(flatten)]
        connection: ConnectionArgs,
    },
}

fn print_collection(c: &Value) {
    let connection = &c["connection"];
    println!("collection   {} (group {})", cell(&c["name"]), cell(&c["group"]));
    if connection.is_null() {
        println!(
            "connection   none: add one with `weir connection set {} --bootstrap-servers HOST:PORT`",
            cell(&c["name"])
        );
    } else {
        println!("connection   {} {}", cell(&connection["kind"]), cell(&connection["bootstrap_servers"]));
        if !connection["credentials"].is_null() {
            let creds = &connection["credentials"];
            println!("  sasl       {} as {} (password stored)", cell(&creds["mechanism"]), cell(&creds["username"]));
        }
        if connection["client_settings"].get("ssl.ca.pem").is_some() {
            println!("  tls        CA certificate stored");
        }
    }
    println!("publishers   {}", cell(&c["publishers"]));
    println!(
        "tables       {} ({} unless a publisher declares table_format)",
        cell(&c["tables"]),
        cell(&c["table_format"])
    );
    println!("created      {}", time(&c["created_at_ms"]));
}

pub fn run(args: Remote<Command>) -> anyhow::Result<()> {
    let client = Client::new(&args.server)?;
    match args.command {
        Command::Create { name, group, connection, table_format } => {
            let body = json!({ "name": name, "group": group, "connection": connection.for_server()?, "table_format": table_format });
            let answer = client.post("/v1/collections", &body)?;
            client.print(&answer, print_collection);
        }
        Command::List => {
            let answer = client.get("/v1/collections")?;
            client.print(&answer, |a| {
                let rows = a.as_array().into_iter().flatten().map(|c| {
                    vec![
                        cell(&c["name"]),
                        cell(&c["group"]),
                        cell(&c["connection"]["bootstrap_servers"]),
                        cell(&c["publishers"]),
                        cell(&c["tables"]),
                    ]
                });
                print_rows(&["collection", "group", "bootstrap servers", "publishers", "tables"], rows);
            });
        }
        Command::Show { name } => {
            let answer = client.get(&format!("/v1/collections/{name}"))?;
            client.print(&answer, print_collection);
        }
        Command::Delete { name } => {
            let answer = client.delete(&format!("/v1/collections/{name}"))?;
            client.print(&answer, |_| println!("collection {name} deleted"));
        }
    }
    Ok(())
}

pub fn run_connection(args: Remote<ConnectionCommand>) -> anyhow::Result<()> {
    let client = Client::new(&args.server)?;
    match args.command {
        ConnectionCommand::Check { collection, topic } => {
            let answer =
                client.post(&format!("/v1/collections/{collection}/connection/check"), &json!({ "topic": topic }))?;
            client.print(&answer, |a| {
                println!("{} ({} brokers)", cell(&a["message"]), cell(&a["brokers"]));
                if let Some(partitions) = a["partitions"].as_array() {
                    let rows =
                        partitions.iter().map(|p| vec![cell(&p["partition"]), cell(&p["low"]), cell(&p["high"])]);
                    print_rows(&["partition", "low", "high"], rows);
                }
            });
        }
        ConnectionCommand::Set { collection, connection } => {
            let connection = connection.for_server()?.context(
                "no connection given: pass --bootstrap-servers HOST:PORT (or WEIR_BOOTSTRAP_SERVERS), or --connection-file",
            )?;
            let answer = client.put(&format!("/v1/collections/{collection}/connection"), &json!(connection))?;
            client.print(&answer, print_collection);
        }
    }
    Ok(())
}
