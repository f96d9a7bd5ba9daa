//! `weir tenant`: tenants and their tokens (with the admin token).

use std::time::Duration;

use serde_json::json;
use weir::plugin::{human_bytes, human_duration};

use super::client::{Client, Remote, cell, print_rows, time};
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
    /// Change a tenant's quotas (those given; the others stay). Its running
    /// publishers restart under them, each committing its open batch first.
    Quotas {
        name: String,
        #[arg(long)]
        max_publishers: Option<u32>,
        /// Memory each of its plugins may use per batch.
        #[arg(long, value_parser = parse_size)]
        memory_limit: Option<u64>,
        /// CPU time each of its plugins may use per batch.
        #[arg(long, value_parser = parse_duration)]
        deadline: Option<Duration>,
        /// The largest module it may upload.
        #[arg(long, value_parser = parse_size)]
        max_module_size: Option<u64>,
    },
    /// Issue another token for a tenant (shown once).
    Token {
        name: String,
        /// Valid for this long (e.g. 30d, 12h); without it, until revoked.
        #[arg(long, value_parser = parse_duration)]
        expires_in: Option<Duration>,
    },
    /// A tenant's tokens: id, created, last used, expiry (never the tokens).
    Tokens { name: String },
    /// Revoke one of a tenant's tokens, by its id: refused from its next request.
    RevokeToken { name: String, id: String },
}

pub fn run(args: Remote<Command>) -> anyhow::Result<()> {
    let client = Client::new(&args.server)?;
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
            client.print(&answer, |a| print_quotas(a.as_array().map(Vec::as_slice).unwrap_or_default()));
        }
        Command::Quotas { name, max_publishers, memory_limit, deadline, max_module_size } => {
            let mut changes = serde_json::Map::new();
            let mut set = |key: &str, value: Option<u64>| {
                if let Some(value) = value {
                    changes.insert(key.to_string(), json!(value));
                }
            };
            set("max_publishers", max_publishers.map(u64::from));
            set("memory_limit_bytes", memory_limit);
            set("deadline_ms", deadline.map(|d| d.as_millis() as u64));
            set("max_module_bytes", max_module_size);
            if changes.is_empty() {
                anyhow::bail!(
                    "give the quotas to change: --max-publishers, --memory-limit, --deadline or --max-module-size"
                );
            }
            let answer = client.put(&format!("/v1/tenants/{name}/quotas"), &serde_json::Value::Object(changes))?;
            client.print(&answer, |a| print_quotas(std::slice::from_ref(a)));
        }
        Command::Token { name, expires_in } => {
            let body = match expires_in {
                Some(d) => json!({ "expires_in_secs": d.as_secs() }),
                None => json!({}),
            };
            let answer = client.post(&format!("/v1/tenants/{name}/tokens"), &body)?;
            client.print(&answer, |a| {
                println!("token for {name} (shown once, keep it safe): {}", cell(&a["token"]));
                println!("id {}, expires {}", cell(&a["token_id"]), time_or(&a["expires_at_ms"], "never"));
            });
        }
        Command::Tokens { name } => {
            let answer = client.get(&format!("/v1/tenants/{name}/tokens"))?;
            client.print(&answer, |a| {
                let rows = a.as_array().into_iter().flatten().map(|t| {
                    let state = if !t["revoked_at_ms"].is_null() {
                        format!("revoked {}", time(&t["revoked_at_ms"]))
                    } else {
                        "valid".into()
                    };
                    vec![
                        cell(&t["id"]),
                        time(&t["created_at_ms"]),
                        time_or(&t["last_used_ms"], "never"),
                        time_or(&t["expires_at_ms"], "never"),
                        state,
                    ]
                });
                print_rows(&["token id", "created", "last used", "expires", "state"], rows);
            });
        }
        Command::RevokeToken { name, id } => {
            let answer = client.delete(&format!("/v1/tenants/{name}/tokens/{id}"))?;
            client.print(&answer, |_| println!("token {id} of {name} revoked: it is refused from its next request"));
        }
    }
    Ok(())
}

fn print_quotas(tenants: &[serde_json::Value]) {
    let rows = tenants.iter().map(|t| {
        let q = &t["quotas"];
        let bytes = |v: &serde_json::Value| v.as_u64().map_or("-".into(), human_bytes);
        let deadline = q["deadline_ms"].as_u64().map_or("-".into(), |ms| human_duration(Duration::from_millis(ms)));
        vec![
            cell(&t["name"]),
            cell(&q["max_publishers"]),
            bytes(&q["memory_limit_bytes"]),
            deadline,
            bytes(&q["max_module_bytes"]),
        ]
    });
    print_rows(&["tenant", "publishers", "plugin memory", "plugin deadline", "module size"], rows);
}

fn time_or(ms: &serde_json::Value, none: &str) -> String {
    if ms.is_null() { none.to_string() } else { time(ms) }
}
