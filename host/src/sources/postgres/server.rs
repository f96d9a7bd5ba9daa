//! The PostgreSQL server a source reads: how to reach it (a `postgres-cdc-in`
//! connection), whether it lets weir read its change log (each missing
//! setting or privilege named, with how to grant it), the tables as its
//! catalog describes them, the publication and the replication slot.

use std::sync::Arc;

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};
use tokio_postgres::Client;

use super::changes::SourceTable;
use super::columns::{Column, ColumnType, SESSION_OPTIONS, TypeInfo, Unmappable};

/// A `postgres-cdc-in` connection.
#[derive(Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct PostgresConnection {
    pub host: String,
    #[serde(default = "default_port")]
    pub port: u16,
    pub database: String,
    pub user: String,
    pub password: Option<String>,
}

fn default_port() -> u16 {
    5432
}

impl std::fmt::Debug for PostgresConnection {
    // Secrets are never printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresConnection")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("database", &self.database)
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

impl PostgresConnection {
    /// `host:port/database`, for messages.
    pub fn location(&self) -> String {
        format!("{}:{}/{}", self.host, self.port, self.database)
    }

    /// An ordinary session (catalog queries, the snapshot's COPY), its
    /// connection driven on the current runtime until the client is dropped.
    pub async fn connect(&self) -> anyhow::Result<Client> {
        let mut config = tokio_postgres::Config::new();
        config
            .host(&self.host)
            .port(self.port)
            .dbname(&self.database)
            .user(&self.user)
            .options(SESSION_OPTIONS)
            .application_name("weir")
            .connect_timeout(std::time::Duration::from_secs(10));
        if let Some(password) = &self.password {
            config.password(password);
        }
        let (client, connection) = config
            .connect(tokio_postgres::NoTls)
            .await
            .with_context(|| format!("connecting to PostgreSQL at {} as {}", self.location(), self.user))?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "a PostgreSQL session ended");
            }
        });
        Ok(client)
    }

    /// The replication session's settings for `slot` and `publication`.
    pub fn replication(&self, slot: &str, publication: &str) -> pgwire_replication::ReplicationConfig {
        pgwire_replication::ReplicationConfig::new(
            self.host.clone(),
            self.user.clone(),
            self.password.clone().unwrap_or_default(),
            self.database.clone(),
            slot,
            publication,
        )
        .with_port(self.port)
        .with_options(SESSION_OPTIONS)
    }
}

/// What the server lacks for weir to read its change log, each with how to fix it.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Readiness {
    pub problems: Vec<String>,
}

impl Readiness {
    /// Checks the server's settings and the role's privileges, and that a slot
    /// and a WAL sender are free for `slot` (unless it exists already).
    pub async fn check(client: &Client, user: &str, slot: &str) -> anyhow::Result<Self> {
        let mut problems = Vec::new();
        let wal_level: String = client.query_one("SHOW wal_level", &[]).await?.get(0);
        if wal_level != "logical" {
            problems.push(format!(
                "wal_level is `{wal_level}`, and reading the change log needs `logical`: run \
                 `ALTER SYSTEM SET wal_level = logical` as a superuser (or set it in postgresql.conf), then restart the server"
            ));
        }
        let row = client
            .query_one("SELECT rolreplication OR rolsuper FROM pg_roles WHERE rolname = current_user", &[])
            .await?;
        if !row.get::<_, bool>(0) {
            problems.push(format!(
                "the role `{user}` lacks the REPLICATION attribute: run `ALTER ROLE \"{user}\" WITH REPLICATION` as a superuser"
            ));
        }
        let exists =
            client.query_opt("SELECT 1 FROM pg_replication_slots WHERE slot_name = $1", &[&slot]).await?.is_some();
        if !exists {
            let row = client
                .query_one(
                    "SELECT current_setting('max_replication_slots')::int, (SELECT count(*)::int FROM pg_replication_slots),
                            current_setting('max_wal_senders')::int, (SELECT count(*)::int FROM pg_stat_replication)",
                    &[],
                )
                .await?;
            let (slots, used, senders, sending): (i32, i32, i32, i32) =
                (row.get(0), row.get(1), row.get(2), row.get(3));
            if used >= slots {
                problems.push(format!(
                    "no replication slot is free: max_replication_slots is {slots} and {used} are in use (see pg_replication_slots): \
                     drop one no one reads, or raise max_replication_slots and restart the server"
                ));
            }
            if sending >= senders {
                problems.push(format!(
                    "no WAL sender is free: max_wal_senders is {senders} and {sending} are in use: raise max_wal_senders and restart the server"
                ));
            }
        }
        Ok(Self { problems })
    }

    pub fn ready(&self) -> bool {
        self.problems.is_empty()
    }

    /// Fails with every problem, one a line, if there is any.
    pub fn require(self, location: &str) -> anyhow::Result<()> {
        if self.ready() {
            return Ok(());
        }
        bail!("PostgreSQL at {location} cannot be read from yet:\n  - {}", self.problems.join("\n  - "))
    }
}

/// Describes `schema.table` (or `table`, in `public`) as the catalog has it now.
pub async fn describe(client: &Client, name: &str) -> anyhow::Result<SourceTable> {
    let qualified = if name.contains('.') { name.to_string() } else { format!("public.{name}") };
    let row = client
        .query_opt(
            "SELECT c.oid, n.nspname::text, c.relname::text, c.relreplident::text, c.relkind::text
             FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE c.oid = to_regclass($1)",
            &[&qualified],
        )
        .await?;
    let Some(row) = row else { bail!("table {qualified} does not exist in the database (or the role cannot see it)") };
    let (oid, schema, table, identity, kind): (u32, String, String, String, String) =
        (row.get(0), row.get(1), row.get(2), row.get(3), row.get(4));
    if kind == "p" {
        // COPY refuses a partitioned table, and the stream names its partitions.
        bail!("{qualified} is a partitioned table, which weir does not read yet: name its partitions in `tables`");
    }
    if kind != "r" {
        bail!("{qualified} is not a table (relkind {kind}): only tables have a change log");
    }
    let identity = identity.chars().next().unwrap_or('d');
    let rows = client
        .query(
            "SELECT a.attname::text, a.atttypid, a.atttypmod, format_type(a.atttypid, a.atttypmod),
                    EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = a.attrelid AND a.attnum = ANY(i.indkey)
                            AND ((i.indisprimary AND $2 = 'd') OR (i.indisreplident AND $2 = 'i')))
             FROM pg_attribute a
             WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
            &[&oid, &identity.to_string()],
        )
        .await?;
    let mut columns = Vec::with_capacity(rows.len());
    for row in rows {
        let (name, type_oid, typmod, pg_type, key): (String, u32, i32, String, bool) =
            (row.get(0), row.get(1), row.get(2), row.get(3), row.get(4));
        columns.push(column(client, &qualified, name, type_oid, typmod, pg_type, key).await?);
    }
    let table = SourceTable { schema, name: table, oid, columns, replica_identity: identity };
    let keyed = table.columns.iter().any(|c| c.key);
    if identity == 'n' || (identity == 'd' && !keyed) {
        bail!(
            "{qualified} has no replica identity (no primary key, or REPLICA IDENTITY NOTHING): PostgreSQL refuses its \
             updates and deletes once it is published. Give it a primary key, or run `ALTER TABLE {qualified} REPLICA IDENTITY FULL`"
        );
    }
    Ok(table)
}

/// A column of `table`, its type mapped.
async fn column(
    client: &Client,
    table: &str,
    name: String,
    type_oid: u32,
    typmod: i32,
    pg_type: String,
    key: bool,
) -> anyhow::Result<Column> {
    let info = type_info(client, type_oid, typmod).await?;
    let ty = ColumnType::of(&info).map_err(|why| Unmappable {
        column: format!("{table}.{name}"),
        pg_type: pg_type.clone(),
        why,
    })?;
    Ok(Column { name, pg_type, type_oid, typmod, ty, key })
}

/// `table` with the columns a Relation message added at its end.
pub async fn with_added(
    client: &Client,
    table: &SourceTable,
    added: &[super::pgoutput::RelationColumn],
) -> anyhow::Result<SourceTable> {
    let mut grown = table.clone();
    let qualified = table.qualified();
    for c in added {
        let pg_type: String = client.query_one("SELECT format_type($1, $2)", &[&c.type_oid, &c.typmod]).await?.get(0);
        grown.columns.push(column(client, &qualified, c.name.clone(), c.type_oid, c.typmod, pg_type, c.key).await?);
    }
    Ok(grown)
}

/// What the catalog says of a type, with an array's element and a domain's base.
pub async fn type_info(client: &Client, oid: u32, typmod: i32) -> anyhow::Result<TypeInfo> {
    let mut chain = Vec::new();
    let mut next = oid;
    // An array of a domain over a base type is the deepest there is.
    for _ in 0..4 {
        let row = client
            .query_one(
                "SELECT typtype::text, typcategory::text, typelem, typbasetype FROM pg_type WHERE oid = $1",
                &[&next],
            )
            .await
            .with_context(|| format!("type {next} in pg_type"))?;
        let (kind, category, element, base): (String, String, u32, u32) =
            (row.get(0), row.get(1), row.get(2), row.get(3));
        let (kind, category) = (kind.chars().next().unwrap_or('b'), category.chars().next().unwrap_or('U'));
        chain.push(TypeInfo { oid: next, typmod, kind, category, inner: None });
        next = match (kind, category) {
            ('d', _) => base,
            (_, 'A') if element != 0 => element,
            _ => break,
        };
    }
    let mut info = chain.pop().context("a type")?;
    while let Some(mut outer) = chain.pop() {
        outer.inner = Some(Box::new(info));
        info = outer;
    }
    Ok(info)
}

/// Makes sure `publication` publishes `tables`: created for them when it does
/// not exist; an existing one must already hold them (weir does not change a
/// publication it did not create).
pub async fn ensure_publication(client: &Client, publication: &str, tables: &[Arc<SourceTable>]) -> anyhow::Result<()> {
    let exists = client.query_opt("SELECT 1 FROM pg_publication WHERE pubname = $1", &[&publication]).await?.is_some();
    let listed: Vec<String> = tables.iter().map(|t| quoted(&t.schema, &t.name)).collect();
    if !exists {
        client
            .batch_execute(&format!("CREATE PUBLICATION {} FOR TABLE {}", ident(publication), listed.join(", ")))
            .await
            .with_context(|| format!("creating the publication {publication}"))?;
        return Ok(());
    }
    let rows = client
        .query(
            "SELECT schemaname::text || '.' || tablename::text FROM pg_publication_tables WHERE pubname = $1",
            &[&publication],
        )
        .await?;
    let published: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
    let missing: Vec<String> = tables.iter().map(|t| t.qualified()).filter(|t| !published.contains(t)).collect();
    if !missing.is_empty() {
        bail!(
            "the publication {publication} does not publish {}: run `ALTER PUBLICATION {} ADD TABLE {}`, or name a new publication and weir creates it",
            missing.join(", "),
            ident(publication),
            missing.join(", ")
        );
    }
    Ok(())
}

/// The replication slot as the server has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotState {
    pub plugin: Option<String>,
    pub database: Option<String>,
    /// `reserved`, `extended`, `unreserved` or `lost`.
    pub wal_status: Option<String>,
    pub restart_lsn: Option<u64>,
    pub confirmed_flush_lsn: Option<u64>,
    pub active: bool,
}

/// The slot named `slot`, if it exists.
pub async fn slot(client: &Client, slot: &str) -> anyhow::Result<Option<SlotState>> {
    let row = client
        .query_opt(
            "SELECT plugin::text, database::text, wal_status, restart_lsn::text, confirmed_flush_lsn::text, active
             FROM pg_replication_slots WHERE slot_name = $1",
            &[&slot],
        )
        .await?;
    Ok(row.map(|r| SlotState {
        plugin: r.get(0),
        database: r.get(1),
        wal_status: r.get(2),
        restart_lsn: r.get::<_, Option<String>>(3).as_deref().and_then(super::parse_lsn),
        confirmed_flush_lsn: r.get::<_, Option<String>>(4).as_deref().and_then(super::parse_lsn),
        active: r.get(5),
    }))
}

impl SlotState {
    /// Refuses a slot weir cannot resume from, saying why.
    pub fn usable(&self, name: &str, database: &str) -> anyhow::Result<()> {
        if self.plugin.as_deref() != Some("pgoutput") {
            bail!("the replication slot {name} decodes with {:?}, not pgoutput: name another slot", self.plugin);
        }
        if self.database.as_deref() != Some(database) {
            bail!(
                "the replication slot {name} belongs to database {:?}, not {database}: name another slot",
                self.database
            );
        }
        if self.wal_status.as_deref() == Some("lost") {
            bail!(
                "the replication slot {name} has lost WAL it needs (wal_status = lost: the server removed it, \
                 see max_slot_wal_keep_size): changes are missing, so weir stops. Drop the slot and register \
                 the publisher again with a new snapshot"
            );
        }
        Ok(())
    }
}

/// `"schema"."table"`.
pub fn quoted(schema: &str, table: &str) -> String {
    format!("{}.{}", ident(schema), ident(table))
}

/// An identifier, quoted for SQL.
pub fn ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Drops a replication slot (it must not be in use).
pub async fn drop_slot(client: &Client, slot: &str) -> anyhow::Result<()> {
    client
        .execute("SELECT pg_drop_replication_slot($1)", &[&slot])
        .await
        .with_context(|| format!("dropping replication slot {slot}"))?;
    Ok(())
}
