//! A publisher whose source is a database's change log, as declared:
//!
//! ```toml
//! name = "orders_log"
//! flush_interval_mins = 1
//! # output_tables = ["orders", "lines"]   # one a source table, in order; by default their names
//! [source.postgres_cdc]
//! tables = ["public.orders", "public.lines"]
//! publication = "weir_orders_log"         # the default; created if absent, else reused as it is
//! replication_slot = "weir_orders_log"    # the default; created if absent, else reused
//! snapshot = "initial"                    # or "none", or "when_needed"
//! start_from = "tail"                     # or an LSN, "16/B374D848" (with snapshot = "none")
//! time_rollover_seconds = 30              # when a batch closes: time, bytes or changes, first wins
//! size_rollover_mb = 64
//! changes_rollover = 100000
//! ```
//!
//! Each source table is one input slot of the plugin, in order, and one
//! output table (an append-only change log, `sources::postgres::changes`).

use std::time::Duration;

use serde::Deserialize;

use super::declaration::{Declaration, DeclarationError, valid_name};
use super::source::{self, DEFAULT_TIME_ROLLOVER_SECONDS, Rollover};
use crate::sources::postgres::parse_lsn;

/// `[source.postgres_cdc]`, word by word.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PostgresCdcSection {
    pub tables: Vec<String>,
    pub publication: Option<String>,
    pub replication_slot: Option<String>,
    pub snapshot: Option<Snapshot>,
    pub start_from: Option<String>,
    pub time_rollover_seconds: Option<toml::Value>,
    pub size_rollover_mb: Option<toml::Value>,
    pub changes_rollover: Option<toml::Value>,
}

/// Whether the tables are copied as they are before their changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Snapshot {
    /// When the publisher first starts: its slot is created then, and the
    /// copy hands over to the stream exactly at the slot's consistent point.
    Initial,
    /// Never: the change log starts where the slot is (or `start_from`).
    None,
    /// When the slot must be created; an existing slot is read from where it is.
    WhenNeeded,
}

/// Where a publisher without a position starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartFrom {
    /// Where the slot is (created now, or already there).
    Tail,
    /// The transactions that commit at or after this LSN.
    Lsn(u64),
}

/// A `postgres_cdc` source, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct PostgresCdcSource {
    /// `schema.table` (or `table`, in `public`), in slot order.
    pub tables: Vec<String>,
    pub publication: String,
    pub slot: String,
    pub snapshot: Snapshot,
    pub start_from: StartFrom,
    pub time_rollover_seconds: u64,
    pub size_rollover_mb: Option<f64>,
    pub changes_rollover: Option<u64>,
}

impl PostgresCdcSource {
    /// The thresholds, the flush interval a ceiling on the time window.
    pub fn rollover(&self, flush_interval_mins: u64) -> Rollover {
        Rollover {
            time: Duration::from_secs(self.time_rollover_seconds.min(flush_interval_mins.saturating_mul(60))),
            size_bytes: self.size_rollover_mb.map(|mb| (mb * 1024.0 * 1024.0).ceil() as u64),
            messages: self.changes_rollover,
        }
    }
}

/// A change-log publisher's declaration, checked.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub name: String,
    pub flush_interval_mins: u64,
    pub source: PostgresCdcSource,
    /// One a source table, in order.
    pub output_tables: Vec<String>,
}

/// Resolves a declaration whose source is `postgres_cdc`.
pub(super) fn resolve(declaration: Declaration, cdc: PostgresCdcSection) -> Result<Resolved, DeclarationError> {
    let invalid = |text: String| DeclarationError::Toml(text);
    if cdc.tables.is_empty() {
        return Err(invalid("[source.postgres_cdc] needs `tables`: the tables to read, as \"schema.table\"".into()));
    }
    for (key, set) in [
        ("partition_by", !declaration.partition_by.is_empty()),
        ("max_partitions_per_batch", declaration.max_partitions_per_batch.is_some()),
        ("table_format", declaration.table_format.is_some()),
    ] {
        if set {
            return Err(invalid(format!("`{key}` is not yet taken by a postgres_cdc publisher: remove it")));
        }
    }
    let flush = serde_json::to_value(&declaration.flush_interval_mins).unwrap_or_default();
    let flush_interval_mins = source::flush_interval(&flush)?;
    let defaulted = format!("weir_{}", declaration.name.to_ascii_lowercase());
    let slot = cdc.replication_slot.unwrap_or_else(|| defaulted.clone());
    if slot.is_empty()
        || slot.len() > 63
        || !slot.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
    {
        return Err(invalid(format!(
            "replication_slot {slot:?} is not a slot name PostgreSQL takes: lower-case letters, digits and `_`, at most 63"
        )));
    }
    let snapshot = cdc.snapshot.unwrap_or(Snapshot::Initial);
    let start_from = match cdc.start_from.as_deref() {
        None | Some("tail") => StartFrom::Tail,
        Some(text) => match parse_lsn(text) {
            Some(lsn) if snapshot == Snapshot::None => StartFrom::Lsn(lsn),
            Some(_) => {
                return Err(invalid(format!(
                    "start_from = {text:?} reads the change log from a position, which a snapshot cannot hand over to: set snapshot = \"none\""
                )));
            }
            None => {
                return Err(invalid(format!(
                    "start_from must be \"tail\" or an LSN as PostgreSQL writes it (\"16/B374D848\"), not {text:?}"
                )));
            }
        },
    };
    let output_tables = match declaration.output_tables {
        Some(tables) if tables.len() == cdc.tables.len() => tables,
        Some(tables) => {
            return Err(invalid(format!(
                "output_tables must name one table a source table ({} of them, in order), not {tables:?}",
                cdc.tables.len()
            )));
        }
        None => cdc.tables.iter().map(|t| t.rsplit('.').next().unwrap_or(t).to_ascii_lowercase()).collect(),
    };
    for (i, table) in output_tables.iter().enumerate() {
        if !valid_name(table) {
            return Err(invalid(format!(
                "output table {table:?} is not a table name: use letters, digits and `_`; set output_tables"
            )));
        }
        if output_tables[..i].contains(table) {
            return Err(invalid(format!(
                "two source tables would write table {table:?}: name one output table each in output_tables"
            )));
        }
    }
    let whole = |key: &str, value: Option<toml::Value>| -> Result<Option<u64>, DeclarationError> {
        match value {
            None => Ok(None),
            Some(v) => match v.as_integer() {
                Some(n) if n > 0 => Ok(Some(n as u64)),
                _ => Err(invalid(format!("`{key}` must be a whole number greater than zero, not {v}"))),
            },
        }
    };
    let size_rollover_mb = match cdc.size_rollover_mb {
        None => None,
        Some(v) => match v.as_float().or(v.as_integer().map(|n| n as f64)) {
            Some(mb) if mb > 0.0 && mb.is_finite() => Some(mb),
            _ => return Err(invalid(format!("`size_rollover_mb` must be a number greater than zero, not {v}"))),
        },
    };
    Ok(Resolved {
        name: declaration.name,
        flush_interval_mins,
        output_tables,
        source: PostgresCdcSource {
            tables: cdc.tables,
            publication: cdc.publication.unwrap_or(defaulted),
            slot,
            snapshot,
            start_from,
            time_rollover_seconds: whole("time_rollover_seconds", cdc.time_rollover_seconds)?
                .unwrap_or(DEFAULT_TIME_ROLLOVER_SECONDS),
            size_rollover_mb,
            changes_rollover: whole("changes_rollover", cdc.changes_rollover)?,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::publisher::declaration::Resolution;

    fn resolve(text: &str) -> Result<Resolved, DeclarationError> {
        match Declaration::parse(text)?.resolve_any(None)? {
            Resolution::ChangeLog(r) => Ok(r),
            Resolution::Stream(_) => panic!("a Kafka publisher"),
        }
    }

    #[test]
    fn a_change_log_declaration_resolves_with_its_defaults() {
        let r = resolve(
            "name = \"Orders\"\nflush_interval_mins = 1\n[source.postgres_cdc]\ntables = [\"public.orders\", \"sales.lines\"]\nchanges_rollover = 500",
        )
        .unwrap();
        assert_eq!(r.output_tables, ["orders", "lines"]);
        assert_eq!((r.source.slot.as_str(), r.source.publication.as_str()), ("weir_orders", "weir_orders"));
        assert_eq!((r.source.snapshot, r.source.start_from), (Snapshot::Initial, StartFrom::Tail));
        let rollover = r.source.rollover(r.flush_interval_mins);
        assert_eq!((rollover.time.as_secs(), rollover.messages), (60, Some(500)));
    }

    #[test]
    fn each_change_log_mistake_says_what_to_do() {
        let top = "name = \"o\"\nflush_interval_mins = 1\n";
        for (text, expected) in [
            ("tables = []", "needs `tables`"),
            ("tables = [\"a.t\", \"b.t\"]", "two source tables would write table \"t\""),
            ("tables = [\"t\"]\nreplication_slot = \"Bad-Slot\"", "is not a slot name PostgreSQL takes"),
            ("tables = [\"t\"]\nstart_from = \"0/16B3748\"", "set snapshot = \"none\""),
            ("tables = [\"t\"]\nstart_from = \"yesterday\"", "start_from must be \"tail\" or an LSN"),
            ("tables = [\"t\"]\nsnapshot = \"sometimes\"", "unknown variant `sometimes`"),
            ("tables = [\"t\"]\nchanges_rollover = 0", "`changes_rollover` must be a whole number greater than zero"),
            ("tables = [\"t\"]\nslot = \"x\"", "unknown field `slot`"),
        ] {
            let err = resolve(&format!("{top}[source.postgres_cdc]\n{text}")).unwrap_err().to_string();
            assert!(err.contains(expected), "{text}\n→ {err}\nexpected: {expected}");
        }
        let err = resolve(&format!("{top}output_tables = [\"a\"]\n[source.postgres_cdc]\ntables = [\"t\", \"u\"]"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("output_tables must name one table a source table (2 of them"), "{err}");
        let err =
            resolve(&format!("{top}partition_by = [\"id\"]\n[source.postgres_cdc]\ntables = [\"t\"]")).unwrap_err();
        assert!(err.to_string().contains("`partition_by` is not yet taken by a postgres_cdc publisher"), "{err}");
    }
}
