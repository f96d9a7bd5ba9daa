//! What a plugin returns is checked before anyone commits it: names, declared
//! outputs, Arrow IPC that decodes, and the row limit. (The byte limit is
//! enforced while wasmtime copies the output out, by hostcall fuel.)

use std::collections::HashSet;

use crate::frames::{self, Frame};

use super::bindings::RawOutputTable;
use super::error::OutputError;

/// One table a plugin returned, decoded.
#[derive(Debug, Clone)]
pub struct OutputTable {
    pub name: String,
    pub frame: Frame,
}

/// Table names become file and catalog names, so they are kept simple.
pub fn valid_table_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_lowercase() || c.is_ascii_digit())
        && name.len() <= 128
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '_' | '-' | '.'))
}

pub fn check(
    raw: Vec<RawOutputTable>,
    declared: Option<&[String]>,
    row_limit: u64,
) -> Result<Vec<OutputTable>, OutputError> {
    let mut seen = HashSet::new();
    let mut rows = 0u64;
    let mut tables = Vec::with_capacity(raw.len());
    for table in raw {
        let name = table.name;
        if !valid_table_name(&name) {
            return Err(OutputError::BadName { name });
        }
        if let Some(declared) = declared
            && !declared.contains(&name)
        {
            return Err(OutputError::Undeclared { name, declared: declared.to_vec() });
        }
        if !seen.insert(name.clone()) {
            return Err(OutputError::Duplicate { name });
        }
        let frame = frames::decode(table.data)
            .map_err(|e| OutputError::BadIpc { name: name.clone(), reason: e.to_string() })?;
        rows += frame.rows();
        if rows > row_limit {
            return Err(OutputError::TooManyRows { rows, limit: row_limit });
        }
        tables.push(OutputTable { name, frame });
    }
    Ok(tables)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for ok in ["clicks", "a", "clicks.v2", "0day", "a_b-c"] {
            assert!(valid_table_name(ok), "{ok}");
        }
        for bad in ["", "Clicks", "../x", "a/b", "_x", ".hidden", "a b", &"x".repeat(129)] {
            assert!(!valid_table_name(bad), "{bad}");
        }
    }

    #[test]
    fn refuses_undeclared_duplicate_and_garbage() {
        let t = |name: &str, data: &[u8]| RawOutputTable { name: name.into(), data: data.to_vec() };
        let declared = vec!["clicks".to_string()];
        let err = check(vec![t("other", b"")], Some(&declared), 10).unwrap_err();
        assert!(matches!(err, OutputError::Undeclared { .. }), "{err}");
        let err = check(vec![t("clicks", b"junk")], Some(&declared), 10).unwrap_err();
        assert!(err.to_string().contains("not a valid Arrow IPC stream"), "{err}");
        let err = check(vec![t("Bad", b"")], None, 10).unwrap_err();
        assert!(matches!(err, OutputError::BadName { .. }), "{err}");
    }
}
