//! What became of each closed batch: its execution, committed or not, with
//! its offsets, rows, timings and the plugin's log (`weir execution list`).

use super::db::{Sql, Value, args};
use super::{Catalog, CatalogError, Execution, PartitionRange, Timings};

impl Catalog {
    /// Completes an execution's timings once its commit has been timed too.
    pub fn set_timings(&self, execution: i64, timings: &Timings) -> Result<(), CatalogError> {
        // Bookkeeping: a power loss may take it, and the execution stays.
        self.db.run_unsynced(|sql| {
            sql.execute(
                "UPDATE executions SET timings = ?1 WHERE id = ?2",
                args![serde_json::to_string(timings).expect("json"), execution],
            )
        })?;
        Ok(())
    }

    /// Records an execution that committed nothing (a failed or dropped batch).
    pub fn record(&self, execution: &Execution) -> Result<i64, CatalogError> {
        self.db.run(|sql| insert_execution(sql, execution))
    }

    /// A publisher's executions, oldest first.
    pub fn executions(&self, publisher: &str) -> Result<Vec<Execution>, CatalogError> {
        self.query_executions("publisher = ?1 ORDER BY id", args![publisher])
    }

    /// A publisher's latest `limit` executions, newest first.
    pub fn recent_executions(&self, publisher: &str, limit: u32) -> Result<Vec<Execution>, CatalogError> {
        self.query_executions("publisher = ?1 ORDER BY id DESC LIMIT ?2", args![publisher, limit])
    }

    /// What a publisher's committed batches that started since `since_ms` took
    /// in and wrote, oldest first: `(started at, messages, rows committed)`,
    /// messages counting its dead letters. What the console charts.
    pub fn committed_since(&self, publisher: &str, since_ms: i64) -> Result<Vec<(i64, u64, u64)>, CatalogError> {
        let rows = self.db.run(|sql| {
            sql.query(
                "SELECT started_at_ms, rows_in + dead_letters, rows_out FROM executions
                 WHERE publisher = ?1 AND started_at_ms >= ?2 AND status = 'committed' ORDER BY id",
                args![publisher, since_ms],
            )
        })?;
        rows.iter().map(|r| Ok((r.get(0)?, r.get::<i64>(1)? as u64, r.get::<i64>(2)? as u64))).collect()
    }

    pub fn execution(&self, id: i64) -> Result<Option<Execution>, CatalogError> {
        Ok(self.query_executions("id = ?1", args![id])?.pop())
    }

    fn query_executions(&self, filter: &str, args: &[Value]) -> Result<Vec<Execution>, CatalogError> {
        let rows = self.db.run(|sql| {
            sql.query(
                &format!(
                    "SELECT id, publisher, status, rollover_reason, rows_in, rows_out, dead_letters, offsets, table_version,
                            started_at_ms, timings, plugin_log, error FROM executions WHERE {filter}"
                ),
                args,
            )
        })?;
        rows.iter()
            .map(|r| {
                Ok(Execution {
                    id: r.get(0)?,
                    publisher: r.get(1)?,
                    status: r.get(2)?,
                    rollover_reason: r.get(3)?,
                    rows_in: r.get(4)?,
                    rows_out: r.get(5)?,
                    dead_letters: r.get(6)?,
                    offsets: parse_ranges(&r.get::<String>(7)?),
                    table_version: r.get(8)?,
                    started_at_ms: r.get(9)?,
                    timings_ms: serde_json::from_str(&r.get::<String>(10)?).unwrap_or_default(),
                    plugin_log: serde_json::from_str(&r.get::<String>(11)?).unwrap_or_default(),
                    error: r.get(12)?,
                })
            })
            .collect()
    }
}

fn parse_ranges(text: &str) -> Vec<PartitionRange> {
    let values: Vec<serde_json::Value> = serde_json::from_str(text).unwrap_or_default();
    values
        .iter()
        .filter_map(|v| {
            Some(PartitionRange {
                partition: v.get("partition")?.as_i64()? as i32,
                first: v.get("first")?.as_i64()?,
                last: v.get("last")?.as_i64()?,
                expected: None,
            })
        })
        .collect()
}

pub(super) fn insert_execution(sql: &mut dyn Sql, e: &Execution) -> Result<i64, CatalogError> {
    sql.query_one(
        "INSERT INTO executions (publisher, status, rollover_reason, rows_in, rows_out, dead_letters, offsets, table_version,
                                 started_at_ms, timings, plugin_log, error)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12) RETURNING id",
        args![
            &e.publisher, &e.status, &e.rollover_reason, e.rows_in as i64, e.rows_out as i64, e.dead_letters as i64,
            serde_json::to_string(&e.offsets).expect("json"), e.table_version, e.started_at_ms,
            serde_json::to_string(&e.timings_ms).expect("json"), e.plugin_log.to_string(), e.error.as_deref()
        ],
    )?
    .get(0)
}
