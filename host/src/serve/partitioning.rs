//! A publisher's `partition_by`, checked at registration: against its table's
//! partitioning, which does not change once the table has data, and against
//! the columns its plugin writes; and its `table_format`: an Iceberg table
//! stays one.

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;

use super::App;
use super::error::{ApiError, ApiResult};
use super::workers;
use crate::catalog::Collection;
use crate::plugin::frames::{Frame, Unframed};
use crate::plugin::{Declared, OutputSink};
use crate::publisher::declaration::{Resolved, table_name_for_topic};
use crate::tables::TableFormat;
use crate::tables::types::TableTypes;

/// A 422 that says what to do when the declared partitioning cannot be the table's.
pub(super) async fn check(app: &Arc<App>, collection: &Collection, resolved: &Resolved, plugin: &str) -> ApiResult<()> {
    let spec = &resolved.partitioning.spec;
    let table = table_name_for_topic(&resolved.source.topic);
    // A table is recorded with its first version: it has data.
    if let Some(record) = app.catalog.table_record(&collection.scope(), &table)? {
        if record.partition_by != spec.texts() {
            let has = match record.partition_by.is_empty() {
                true => "is not partitioned".to_string(),
                false => format!("is partitioned by {:?}", record.partition_by),
            };
            let keep = match record.partition_by.is_empty() {
                true => "remove partition_by".to_string(),
                false => format!("declare partition_by = {:?}", record.partition_by),
            };
            return Err(ApiError::invalid(format!(
                "table `{}/{table}` {has} and has data, and a table's partitioning does not change: {keep}, or write a new table partitioned the new way (from another topic, or in another collection)",
                collection.name
            )));
        }
        // Without it, Iceberg readers would stay at the last snapshot while the table goes on.
        let namespace = crate::catalog::iceberg_namespace(&collection.scope());
        let format = collection.table_format_of(resolved.table_format);
        if format != TableFormat::Iceberg && app.catalog.iceberg_location(&namespace, &table)?.is_some() {
            return Err(ApiError::invalid(format!(
                "table `{}/{table}` is an Iceberg table, and without table_format = \"iceberg\" its Iceberg readers would stop at its last snapshot: declare table_format = \"iceberg\", or write a Delta-only table (from another topic, or in another collection)",
                collection.name
            )));
        }
        return Ok(());
    }
    if spec.is_empty() {
        return Ok(());
    }
    if let Some(columns) = written_columns(app, collection, resolved, plugin).await {
        spec.check(&columns).map_err(|e| {
            ApiError::invalid(format!("{e}: partition_by names the columns of the table the plugin writes"))
        })?;
    }
    Ok(())
}

/// The columns the plugin writes for a batch of no rows (as a Delta table
/// holds them): its call with one empty frame of the source's columns.
/// `None` when it writes nothing then, or fails: its first batch checks them.
async fn written_columns(
    app: &Arc<App>,
    collection: &Collection,
    resolved: &Resolved,
    plugin: &str,
) -> Option<SchemaRef> {
    let (task_app, collection, resolved, plugin) =
        (app.clone(), collection.clone(), resolved.clone(), plugin.to_string());
    let publisher = tokio::task::spawn_blocking(move || workers::publisher(&task_app, &collection, resolved, &plugin));
    let publisher = publisher.await.ok()?.ok()?;
    let schema = crate::sources::decoder(&publisher, None).ok()?.output_schema().clone();
    let declared = Declared::new(vec![publisher.source_name().to_string()], vec![publisher.output_table()]);
    let slots = vec![vec![Unframed { batches: vec![RecordBatch::new_empty(schema.clone())], schema }]];
    let run =
        app.runtime.publish_blocking(publisher.plugin, slots, publisher.limits, Some(declared), Columns(None)).await;
    let columns = run.outcome.ok()?.0?;
    Some(TableTypes::new(&columns).ok()?.written().clone())
}

/// The schema of the first table a plugin writes.
struct Columns(Option<SchemaRef>);

impl OutputSink for Columns {
    fn write(&mut self, _table: &str, frame: Frame) -> anyhow::Result<()> {
        self.0.get_or_insert(frame.schema);
        Ok(())
    }
}
