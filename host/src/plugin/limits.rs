//! What one plugin call may use. The control plane sets these per tenant; the
//! defaults suit a single user running `weir run-plugin`.

use std::time::Duration;

/// The largest linear memory any call may be given: the wasm32 address space.
pub const MAX_MEMORY_BYTES: u64 = 4 << 30;

/// Bounds on one `publish` call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Linear memory the plugin may grow to, in bytes (at most [`MAX_MEMORY_BYTES`]).
    pub memory_bytes: u64,
    /// Time the plugin may run before it is stopped. Each call runs on a thread
    /// of its own, so this is the plugin's CPU time, measured in epoch ticks.
    pub deadline: Duration,
    /// Bytes of Arrow IPC the plugin may return, summed over all output tables.
    pub output_bytes: usize,
    /// Rows the plugin may return, summed over all output tables.
    pub output_rows: u64,
    /// Bytes of log (the `log` import, stdout and stderr together) kept per call;
    /// more is dropped and counted.
    pub log_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            memory_bytes: 256 << 20,
            deadline: Duration::from_secs(2),
            output_bytes: 256 << 20,
            output_rows: 50_000_000,
            log_bytes: 64 << 10,
        }
    }
}

/// Writes a byte count the way people read it: `256 MiB`, `1.5 GiB`, `512 B`.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if value.fract() == 0.0 { format!("{value:.0} {}", UNITS[unit]) } else { format!("{value:.1} {}", UNITS[unit]) }
}

/// Writes a duration the way people read it: `2 s`, `1.5 s`, `250 ms`.
pub fn human_duration(d: Duration) -> String {
    if d.as_millis() < 1000 {
        format!("{} ms", d.as_millis())
    } else if d.subsec_millis() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_units() {
        assert_eq!(human_bytes(256 << 20), "256 MiB");
        assert_eq!(human_bytes(3 << 29), "1.5 GiB");
        assert_eq!(human_bytes(100), "100 B");
        assert_eq!(human_duration(Duration::from_secs(2)), "2 s");
        assert_eq!(human_duration(Duration::from_millis(250)), "250 ms");
        assert_eq!(human_duration(Duration::from_millis(1500)), "1.5 s");
    }
}
