//! The `kafka-topic-in` connection as command-line flags, shared by
//! `weir stream`, `weir collection create` and `weir connection set`.

use std::path::PathBuf;

use anyhow::Context as _;

use weir::formats::registry::RegistryKind;
use weir::publisher::source::{KafkaConnection, SaslCredentials, SaslMechanism, SchemaRegistry, Tls};
use weir::sources::postgres::PostgresConnection;

#[derive(Debug, Clone, clap::Args)]
pub struct ConnectionArgs {
    /// The Kafka brokers, `host:port[,host:port]`.
    #[arg(long, env = "WEIR_BOOTSTRAP_SERVERS")]
    bootstrap_servers: Option<String>,
    /// SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.
    #[arg(long, env = "WEIR_SASL_MECHANISM", requires = "sasl_username")]
    sasl_mechanism: Option<String>,
    #[arg(long, env = "WEIR_SASL_USERNAME", requires = "sasl_password")]
    sasl_username: Option<String>,
    #[arg(long, env = "WEIR_SASL_PASSWORD", hide_env_values = true)]
    sasl_password: Option<String>,
    /// TLS to the brokers: the CA that signed their certificates (PEM).
    #[arg(long, env = "WEIR_TLS_CA_FILE")]
    tls_ca_file: Option<String>,
    /// A client certificate (PEM), for mutual TLS.
    #[arg(long, env = "WEIR_TLS_CERT_FILE", requires = "tls_key_file")]
    tls_cert_file: Option<String>,
    /// The client certificate's key (PEM).
    #[arg(long, env = "WEIR_TLS_KEY_FILE", hide_env_values = true)]
    tls_key_file: Option<String>,
    /// The consumer group, which the collection's publishers share [default: weir.<collection>].
    #[arg(long, env = "WEIR_GROUP_ID")]
    group_id: Option<String>,
    /// A librdkafka client setting, passed through (repeatable).
    #[arg(long = "client-setting", value_name = "KEY=VALUE")]
    client_settings: Vec<String>,
    /// A Confluent-compatible schema registry: the topics' values are registry-framed.
    #[arg(long, env = "WEIR_SCHEMA_REGISTRY_URL")]
    schema_registry_url: Option<String>,
    /// The registry's basic-auth user.
    #[arg(long, env = "WEIR_SCHEMA_REGISTRY_USERNAME", requires = "schema_registry_url")]
    schema_registry_username: Option<String>,
    /// The registry's basic-auth password (stored as a secret, never shown).
    #[arg(long, env = "WEIR_SCHEMA_REGISTRY_PASSWORD", hide_env_values = true, requires = "schema_registry_username")]
    schema_registry_password: Option<String>,
    /// The CA that signed the registry's certificate (PEM; the CLI sends its contents).
    #[arg(long, env = "WEIR_SCHEMA_REGISTRY_CA_FILE", requires = "schema_registry_url")]
    schema_registry_ca_file: Option<PathBuf>,
    /// An AWS Glue Schema Registry, by name: the topics' values are Glue-framed (credentials from
    /// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN).
    #[arg(long, env = "WEIR_GLUE_REGISTRY", conflicts_with = "schema_registry_url", requires = "glue_region")]
    glue_registry: Option<String>,
    /// The Glue registry's AWS region.
    #[arg(long, env = "AWS_REGION", requires = "glue_registry")]
    glue_region: Option<String>,
    /// Another Glue endpoint than the region's (a VPC endpoint).
    #[arg(long, env = "WEIR_GLUE_ENDPOINT", requires = "glue_registry")]
    glue_endpoint: Option<String>,
    /// The whole connection from a TOML file (`bootstrap_servers`, `[credentials]`, `[tls]`, `group_id`,
    /// `[client_settings]`, `[schema_registry]`).
    #[arg(long, conflicts_with_all = ["bootstrap_servers", "sasl_mechanism", "tls_ca_file", "group_id", "client_settings", "schema_registry_url", "glue_registry"])]
    connection_file: Option<PathBuf>,
}

impl ConnectionArgs {
    /// The connection the flags describe; `None` when none was given.
    pub fn connection(&self) -> anyhow::Result<Option<KafkaConnection>> {
        if let Some(path) = &self.connection_file {
            let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
            let connection = toml::from_str(&text).with_context(|| format!("connection file {}", path.display()))?;
            return Ok(Some(connection));
        }
        let Some(bootstrap_servers) = self.bootstrap_servers.clone() else { return Ok(None) };
        let credentials = match (self.sasl_mechanism.as_deref(), &self.sasl_username, &self.sasl_password) {
            (Some(m), Some(username), Some(password)) => {
                let mechanism = match m {
                    "PLAIN" => SaslMechanism::Plain,
                    "SCRAM-SHA-256" => SaslMechanism::ScramSha256,
                    "SCRAM-SHA-512" => SaslMechanism::ScramSha512,
                    other => anyhow::bail!("--sasl-mechanism {other:?}: use PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"),
                };
                Some(SaslCredentials { mechanism, username: username.clone(), password: password.clone() })
            }
            _ => None,
        };
        let client_settings = self
            .client_settings
            .iter()
            .map(|kv| {
                kv.split_once('=')
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .with_context(|| format!("--client-setting {kv:?}: write KEY=VALUE"))
            })
            .collect::<anyhow::Result<_>>()?;
        let tls = (self.tls_ca_file.is_some() || self.tls_cert_file.is_some()).then(|| Tls {
            ca_file: self.tls_ca_file.clone(),
            cert_file: self.tls_cert_file.clone(),
            key_file: self.tls_key_file.clone(),
        });
        let schema_registry = match &self.schema_registry_url {
            Some(url) => Some(SchemaRegistry {
                url: url.clone(),
                username: self.schema_registry_username.clone(),
                password: self.schema_registry_password.clone(),
                ca_pem: match &self.schema_registry_ca_file {
                    Some(file) => {
                        Some(std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?)
                    }
                    None => None,
                },
                ..SchemaRegistry::default()
            }),
            None => self.glue_registry.as_ref().map(|name| SchemaRegistry {
                kind: RegistryKind::Glue,
                registry_name: Some(name.clone()),
                region: self.glue_region.clone(),
                endpoint: self.glue_endpoint.clone(),
                ..SchemaRegistry::default()
            }),
        };
        Ok(Some(KafkaConnection {
            bootstrap_servers,
            credentials,
            tls,
            group_id: self.group_id.clone(),
            client_settings,
            schema_registry,
        }))
    }

    /// The connection as a server takes it: TLS files are read here and sent as
    /// PEM contents (a server never reads files a tenant names).
    /// A Glue registry's AWS credentials, when the connection has none, are
    /// this process's `AWS_*` variables, sent along (sealed on the server).
    pub fn for_server(&self) -> anyhow::Result<Option<KafkaConnection>> {
        let Some(mut connection) = self.connection()? else { return Ok(None) };
        if let Some(registry) = &mut connection.schema_registry
            && registry.kind == RegistryKind::Glue
            && registry.access_key_id.is_none()
        {
            let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
            registry.access_key_id = env("AWS_ACCESS_KEY_ID");
            registry.secret_access_key = env("AWS_SECRET_ACCESS_KEY");
            registry.session_token = env("AWS_SESSION_TOKEN");
        }
        if let Some(tls) = connection.tls.take() {
            for (key, file) in
                [("ssl.ca.pem", tls.ca_file), ("ssl.certificate.pem", tls.cert_file), ("ssl.key.pem", tls.key_file)]
            {
                if let Some(file) = file {
                    let pem = std::fs::read_to_string(&file).with_context(|| format!("reading {file}"))?;
                    connection.client_settings.insert(key.into(), pem);
                }
            }
            let protocol = if connection.credentials.is_some() { "sasl_ssl" } else { "ssl" };
            connection.client_settings.entry("security.protocol".into()).or_insert_with(|| protocol.into());
        }
        Ok(Some(connection))
    }

    /// The connection, required.
    pub fn required(&self) -> anyhow::Result<KafkaConnection> {
        self.connection()?.context(
            "no connection given: pass --bootstrap-servers HOST:PORT (or WEIR_BOOTSTRAP_SERVERS), or --connection-file",
        )
    }

    /// A `postgres-cdc-in` connection, from `--connection-file` (`kind =
    /// "postgres-cdc-in"`, `host`, `port`, `database`, `user`, `password`).
    pub fn postgres(&self) -> anyhow::Result<PostgresConnection> {
        let path = self.connection_file.as_ref().context(
            "a postgres_cdc publisher reads its connection from --connection-file: a TOML file with \
             kind = \"postgres-cdc-in\", host, port, database, user and password",
        )?;
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let mut table: toml::Table =
            toml::from_str(&text).with_context(|| format!("connection file {}", path.display()))?;
        match table.remove("kind") {
            Some(toml::Value::String(kind)) if kind == "postgres-cdc-in" => {}
            other => anyhow::bail!(
                "connection file {}: kind must be \"postgres-cdc-in\" for a postgres_cdc publisher, not {other:?}",
                path.display()
            ),
        }
        table.try_into().with_context(|| format!("connection file {}", path.display()))
    }
}
