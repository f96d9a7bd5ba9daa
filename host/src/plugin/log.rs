//! The plugin's log: lines from the `log` import and from stdout/stderr, in the
//! order they arrived, capped in size so a chatty or hostile plugin cannot make
//! the host buffer without bound. Writes past the cap still succeed for the
//! guest (a `println!` must never fail it); they are only counted.

use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

use bytes::Bytes;
use serde::Serialize;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

use super::bindings::{v0_1, v0_2};

/// How loud a line is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
}

/// The `level` enum of each package version the host serves.
macro_rules! from_wit_level {
    ($($level:ty),*) => {$(
        impl From<$level> for LogLevel {
            fn from(level: $level) -> Self {
                type L = $level;
                match level {
                    L::Trace => Self::Trace,
                    L::Debug => Self::Debug,
                    L::Info => Self::Info,
                    L::Warn => Self::Warn,
                    L::Error => Self::Error,
                }
            }
        }
    )*};
}

from_wit_level!(v0_1::weir::publisher::host::Level, v0_2::weir::publisher::host::Level);

/// Where a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LogSource {
    /// The `log` import of the world.
    Log,
    Stdout,
    Stderr,
}

/// One line of a plugin's log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LogLine {
    pub level: LogLevel,
    pub source: LogSource,
    pub message: String,
}

/// Everything a plugin logged during one call.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PluginLog {
    pub lines: Vec<LogLine>,
    /// Bytes the plugin logged past the cap, not kept.
    pub dropped_bytes: u64,
}

impl PluginLog {
    /// The text the plugin wrote to stderr, lines joined.
    pub fn stderr(&self) -> String {
        let lines: Vec<&str> =
            self.lines.iter().filter(|l| l.source == LogSource::Stderr).map(|l| l.message.as_str()).collect();
        lines.join("\n")
    }
}

#[derive(Debug, Default)]
struct State {
    log: PluginLog,
    kept_bytes: usize,
    cap: usize,
    /// Bytes of a stdout/stderr line not yet ended by a newline.
    partial: [Vec<u8>; 2],
}

impl State {
    fn push(&mut self, level: LogLevel, source: LogSource, message: &[u8]) {
        if self.kept_bytes + message.len() > self.cap {
            self.log.dropped_bytes += message.len() as u64;
            return;
        }
        self.kept_bytes += message.len();
        let message = String::from_utf8_lossy(message).into_owned();
        self.log.lines.push(LogLine { level, source, message });
    }

    fn write_stream(&mut self, stream: usize, mut bytes: &[u8]) {
        let (source, level) = STREAMS[stream];
        while let Some(newline) = bytes.iter().position(|b| *b == b'\n') {
            let mut line = std::mem::take(&mut self.partial[stream]);
            line.extend_from_slice(&bytes[..newline]);
            self.push(level, source, &line);
            bytes = &bytes[newline + 1..];
        }
        let partial = &mut self.partial[stream];
        // A line with no newline is still bounded by the cap.
        let room = self.cap.saturating_sub(self.kept_bytes + partial.len());
        let take = bytes.len().min(room);
        partial.extend_from_slice(&bytes[..take]);
        self.log.dropped_bytes += (bytes.len() - take) as u64;
    }
}

const STREAMS: [(LogSource, LogLevel); 2] = [(LogSource::Stdout, LogLevel::Info), (LogSource::Stderr, LogLevel::Warn)];

/// The shared, capped log of one call. Cheap to clone: clones share the log.
#[derive(Debug, Clone)]
pub struct LogSink(Arc<Mutex<State>>);

impl LogSink {
    pub fn new(cap: usize) -> Self {
        Self(Arc::new(Mutex::new(State { cap, ..State::default() })))
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A poisoned lock only means a panic elsewhere mid-write; the log is still usable.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn log(&self, level: LogLevel, message: &str) {
        self.state().push(level, LogSource::Log, message.as_bytes());
    }

    /// A WASI output stream that writes into this log as stdout.
    pub fn stdout(&self) -> CapturedStream {
        CapturedStream { sink: self.clone(), stream: 0 }
    }

    /// A WASI output stream that writes into this log as stderr.
    pub fn stderr(&self) -> CapturedStream {
        CapturedStream { sink: self.clone(), stream: 1 }
    }

    /// Ends any unfinished stdout/stderr lines and returns the log.
    pub fn finish(&self) -> PluginLog {
        let mut state = self.state();
        for stream in 0..2 {
            let partial = std::mem::take(&mut state.partial[stream]);
            if !partial.is_empty() {
                let (source, level) = STREAMS[stream];
                state.push(level, source, &partial);
            }
        }
        std::mem::take(&mut state.log)
    }
}

/// stdout or stderr of a plugin, captured into its [`LogSink`].
#[derive(Debug, Clone)]
pub struct CapturedStream {
    sink: LogSink,
    stream: usize,
}

/// How much a guest may write in one go; the cap is applied to what is kept.
const WRITE_PERMIT: usize = 64 << 10;

#[wasmtime_wasi::async_trait]
impl OutputStream for CapturedStream {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.sink.state().write_stream(self.stream, &bytes);
        Ok(())
    }
    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }
    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(WRITE_PERMIT)
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for CapturedStream {
    async fn ready(&mut self) {}
}

impl tokio::io::AsyncWrite for CapturedStream {
    fn poll_write(self: Pin<&mut Self>, _cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        self.sink.state().write_stream(self.stream, buf);
        Poll::Ready(Ok(buf.len()))
    }
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

impl IsTerminal for CapturedStream {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for CapturedStream {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_keep_arrival_order_and_split_on_newlines() {
        let sink = LogSink::new(1024);
        sink.stdout().sink.state().write_stream(0, b"hello ");
        sink.log(LogLevel::Info, "from log");
        sink.state().write_stream(0, b"world\nsecond");
        sink.state().write_stream(1, b"oops\n");
        let log = sink.finish();
        let text: Vec<(LogSource, &str)> = log.lines.iter().map(|l| (l.source, l.message.as_str())).collect();
        assert_eq!(
            text,
            [
                (LogSource::Log, "from log"),
                (LogSource::Stdout, "hello world"),
                (LogSource::Stderr, "oops"),
                (LogSource::Stdout, "second")
            ]
        );
        assert_eq!(log.dropped_bytes, 0);
    }

    #[test]
    fn bytes_past_the_cap_are_counted_not_kept() {
        let sink = LogSink::new(10);
        sink.log(LogLevel::Info, "12345");
        sink.log(LogLevel::Info, "too long for the rest");
        sink.state().write_stream(0, &[b'x'; 100]);
        let log = sink.finish();
        assert_eq!(log.lines.len(), 2);
        assert_eq!(log.lines[1].message, "xxxxx");
        assert_eq!(log.dropped_bytes, 21 + 95);
    }
}
