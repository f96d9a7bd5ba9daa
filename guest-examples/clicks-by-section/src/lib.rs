//! Clicks per country and site section, as an analyst's summary table:
//!
//! * `section` is the first path segment of `url` (`/docs/quickstart` →
//!   `docs`, `/` → `home`), as clicks-enrich derives it;
//! * one row per (`country`, `section`), sorted by them (a missing country
//!   or section first): `clicks`, `total_ms` (of the clicks with a duration) and
//!   `average_ms` (null where none has one).
//!
//! The output is table `sections`. Written with arrow-rs and a hash map, as
//! a Rust author would: the baseline for the same group-by in Python and
//! TypeScript over weir's kernels.

/// The column and section helpers of clicks-enrich, the same file.
#[path = "../../clicks-enrich/src/clicks.rs"]
mod clicks;

use std::collections::HashMap;
use std::sync::Arc;

use clicks::{column, section_of};
use weir_guest::arrow_array::{Array, ArrayRef, Float64Array, Int64Array, StringArray};
use weir_guest::{DataType, Field, RecordBatch, Result, Schema, Table};

#[derive(Default)]
struct Totals {
    clicks: i64,
    timed: i64,
    total_ms: i64,
}

fn publish(slots: Vec<Vec<RecordBatch>>) -> Result<Vec<Table>> {
    let frames = slots.into_iter().next().unwrap_or_default();
    if frames.is_empty() {
        return Ok(vec![]);
    }
    let mut groups: HashMap<(Option<&str>, Option<&str>), Totals> = HashMap::new();
    for frame in &frames {
        let country = column::<StringArray>(frame, "country", &DataType::Utf8)?;
        let url = column::<StringArray>(frame, "url", &DataType::Utf8)?;
        let duration = column::<Int64Array>(frame, "duration_ms", &DataType::Int64)?;
        for row in 0..frame.num_rows() {
            let section = url.is_valid(row).then(|| section_of(url.value(row)));
            let country = country.is_valid(row).then(|| country.value(row));
            let totals = groups.entry((country, section)).or_default();
            totals.clicks += 1;
            if duration.is_valid(row) {
                totals.timed += 1;
                totals.total_ms += duration.value(row);
            }
        }
    }
    let mut groups: Vec<_> = groups.into_iter().collect();
    groups.sort_unstable_by(|a, b| a.0.cmp(&b.0));

    let countries: StringArray = groups.iter().map(|((country, _), _)| *country).collect();
    let sections: StringArray = groups.iter().map(|((_, section), _)| *section).collect();
    let clicks: Int64Array = groups.iter().map(|(_, t)| Some(t.clicks)).collect();
    let total: Int64Array = groups.iter().map(|(_, t)| Some(t.total_ms)).collect();
    let average: Float64Array =
        groups.iter().map(|(_, t)| (t.timed > 0).then(|| t.total_ms as f64 / t.timed as f64)).collect();
    let schema = Schema::new(vec![
        Field::new("country", DataType::Utf8, true),
        Field::new("section", DataType::Utf8, true),
        Field::new("clicks", DataType::Int64, true),
        Field::new("total_ms", DataType::Int64, true),
        Field::new("average_ms", DataType::Float64, true),
    ]);
    let columns: Vec<ArrayRef> =
        vec![Arc::new(countries), Arc::new(sections), Arc::new(clicks), Arc::new(total), Arc::new(average)];
    Ok(vec![Table::new("sections", RecordBatch::try_new(Arc::new(schema), columns)?)])
}

weir_guest::export_publisher!(publish);
