//! `weir tenant`: tenants and their tokens (with the admin token).

use std::time::Duration;

use serde_json::json;
use weir::plugin::{human_bytes, human_duration};

use super::client::{Client, Remote, cell, print_rows};
use super::units::{parse_duration, parse_size};

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Create a tenant; prints its first token (shown once).
    Create {
        name: String,
        /// Publishers it may register.
        #[arg(long, default_value_t = 20)]
        max_publishers: u32,
        /// Memory each of its plugins may use per batch.
        #[arg(long, default_value = "256MiB", value_parser = parse_size)]
        memory_limit: u64,
        /// CPU time each of its plugins may use per batch.
        #[arg(long, default_value = "10s", value_parser = parse_duration)]
        deadline: Duration,
        /// The largest module it may upload.
        #[arg(long, default_value = "32MiB", value_parser = parse_size)]
        max_module_size: u64,
    },
    /// List the tenants and their quotas.
    List,
    /// Issue another token for a tenant (shown once).
    Token { name: String },
}

pub fn run(args: Remote<Command>) -> anyhow::Result<()> {
    let client = Client::new(&args.server);
    match args.command {
        Command::Create { name, max_publishers, memory_limit, deadline, max_module_size } => {
            let quotas = json!({
                "max_publishers": max_publishers,
                "memory_limit_bytes": memory_limit,
                "deadline_ms": deadline.as_millis() as u64,
                "max_module_bytes": max_module_size,
            });
            let answer = client.post("/v1/tenants", &json!({ "name": name, "quotas": quotas }))?;
            client.print(&answer, |a| {
                println!("tenant {} created", cell(&a["tenant"]["name"]));
                println!("token (shown once, keep it safe): {}", cell(&a["token"]));
            });
        }
        Command::List => {
            let answer = client.get("/v1/tenants")?;
            client.print(&answer, |a| {
                let rows = a.as_array().into_iter().flatten().map(|t| {
                    let q = &t["quotas"];
                    let bytes = |v: &serde_json::Value| v.as_u64().map_or("-".into(), human_bytes);
                    let deadline =
                        q["deadline_ms"].as_u64().map_or("-".into(), |ms| human_duration(Duration::from_millis(ms)));
                    vec![
                        cell(&t["name"]),
                        cell(&q["max_publishers"]),
                        bytes(&q["memory_limit_bytes"]),
                        deadline,
                        bytes(&q["max_module_bytes"]),
                    ]
                });
                print_rows(&["tenant", "publishers", "plugin memory", "plugin deadline", "module size"], rows);
            });
        }
        Command::Token { name } => {
            let answer = client.post(&format!("/v1/tenants/{name}/tokens"), &json!({}))?;
            client.print(&answer, |a| println!("token for {name} (shown once, keep it safe): {}", cell(&a["token"])));
        }
    }
    Ok(())
}
