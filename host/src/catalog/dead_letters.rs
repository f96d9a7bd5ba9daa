//! Dead letters kept in the catalog (a source without a dead-letter topic):
//! found by publisher, execution, time and reason, original bytes and all.

use super::db::Value;
use super::{Catalog, CatalogError, StoredDeadLetter};

/// Which of a publisher's dead letters to find; every field narrows.
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeadLetterFilter {
    /// The execution (batch) that met them.
    pub execution: Option<i64>,
    /// Met at or after (ms since the epoch).
    pub since_ms: Option<i64>,
    /// Met before (ms since the epoch).
    pub until_ms: Option<i64>,
    /// Text their error holds (any case).
    pub reason: Option<String>,
    pub partition: Option<i32>,
    pub offset: Option<i64>,
    /// At most this many, oldest first.
    pub limit: Option<u32>,
}

impl Catalog {
    /// A publisher's dead letters, in topic, partition and offset order.
    pub fn dead_letters(&self, publisher: &str) -> Result<Vec<StoredDeadLetter>, CatalogError> {
        self.find_dead_letters(publisher, &DeadLetterFilter::default())
    }

    /// A publisher's dead letters that `filter` takes, in topic, partition and offset order.
    pub fn find_dead_letters(
        &self,
        publisher: &str,
        filter: &DeadLetterFilter,
    ) -> Result<Vec<StoredDeadLetter>, CatalogError> {
        let mut conditions = vec!["d.publisher = ?1".to_string()];
        let mut values = vec![Value::from(publisher)];
        let mut narrow = |condition: &str, value: Value| {
            values.push(value);
            conditions.push(condition.replace('?', &format!("?{}", values.len())));
        };
        if let Some(execution) = filter.execution {
            narrow("d.execution_id = ?", execution.into());
        }
        if let Some(since) = filter.since_ms {
            narrow("e.started_at_ms >= ?", since.into());
        }
        if let Some(until) = filter.until_ms {
            narrow("e.started_at_ms < ?", until.into());
        }
        if let Some(reason) = &filter.reason {
            narrow("LOWER(d.error) LIKE '%' || LOWER(?) || '%'", reason.as_str().into());
        }
        if let Some(partition) = filter.partition {
            narrow("d.partition = ?", partition.into());
        }
        if let Some(offset) = filter.offset {
            narrow("d.\"offset\" = ?", offset.into());
        }
        let limit = filter.limit.map_or(String::new(), |n| format!(" LIMIT {n}"));
        let query = format!(
            "SELECT d.topic, d.partition, d.\"offset\", d.timestamp_ms, d.key, d.value, d.headers, d.error, d.execution_id,
                    COALESCE(e.started_at_ms, 0)
             FROM dead_letters d LEFT JOIN executions e ON e.id = d.execution_id
             WHERE {} ORDER BY d.topic, d.partition, d.\"offset\"{limit}",
            conditions.join(" AND ")
        );
        let rows = self.db.run(|sql| sql.query(&query, &values))?;
        rows.iter()
            .map(|r| {
                Ok(StoredDeadLetter {
                    topic: r.get(0)?,
                    partition: r.get(1)?,
                    offset: r.get(2)?,
                    timestamp: r.get(3)?,
                    key: r.get(4)?,
                    value: r.get(5)?,
                    headers: serde_json::from_str(&r.get::<String>(6)?).unwrap_or_default(),
                    error: r.get(7)?,
                    execution: r.get(8)?,
                    at_ms: r.get(9)?,
                })
            })
            .collect()
    }
}
