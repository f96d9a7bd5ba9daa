//! `weir admin`: the server's own keys (with the admin token).

use super::client::{Client, Remote, cell};

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// The id of the key connection secrets are sealed under (never the key).
    SecretKey,
    /// Replace the secret key: every stored connection is resealed under a new
    /// key, which replaces the server's key file. Back the new file up.
    RotateSecretKey,
}

pub fn run(args: Remote<Command>) -> anyhow::Result<()> {
    let client = Client::new(&args.server)?;
    match args.command {
        Command::SecretKey => {
            let answer = client.get("/v1/admin/secret-key")?;
            client.print(&answer, |a| println!("secret key {}", cell(&a["key_id"])));
        }
        Command::RotateSecretKey => {
            let answer = client.post("/v1/admin/secret-key/rotate", &serde_json::json!({}))?;
            client.print(&answer, |a| {
                println!(
                    "secret key rotated: {} replaces {}; {} connections resealed",
                    cell(&a["key_id"]),
                    cell(&a["retired_key_id"]),
                    cell(&a["connections_resealed"])
                );
            });
        }
    }
    Ok(())
}
