//! What reading clicks takes, shared by the Rust examples over clicks
//! (clicks-by-section reads this file too): a column of the type expected,
//! and a URL's site section.

use weir_guest::{DataType, Error, RecordBatch, Result};

/// The first path segment of `url`, after the leading slashes, up to a `/`,
/// `?` or `#` (`/docs/quickstart` → `docs`); `home` for none (`/`).
pub fn section_of(url: &str) -> &str {
    let path = url.split(['?', '#']).next().unwrap_or("");
    match path.trim_start_matches('/').split('/').next() {
        Some("") | None => "home",
        Some(segment) => segment,
    }
}

/// The column `name` of `batch`, as the array type of `ty`: invalid input otherwise.
pub fn column<'a, T: 'static>(batch: &'a RecordBatch, name: &str, ty: &DataType) -> Result<&'a T> {
    batch
        .column_by_name(name)
        .and_then(|c| c.as_any().downcast_ref::<T>())
        .ok_or_else(|| Error::invalid_input(format!("clicks need a `{name}` column of type {ty}")))
}
