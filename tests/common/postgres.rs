//! A throwaway PostgreSQL server (Debian's `postgresql`, installed by
//! scripts/setup.sh) on a loopback port: a fresh cluster in a temporary
//! directory, run as the `postgres` user when the tests run as root (the
//! server refuses root). A small shell wrapper owns it and waits on a pipe
//! from this process, so the server stops and its directory goes when the
//! `Postgres` is dropped, and also when the test process dies (even by
//! kill -9), with nothing left running.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub struct Postgres {
    child: Child,
    stdin: Option<ChildStdin>,
    pub port: u16,
    bin: PathBuf,
}

/// Where Debian puts the server's programs (`/usr/lib/postgresql/<major>/bin`), newest major.
fn bin_dir() -> PathBuf {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .expect("PostgreSQL is not installed: run scripts/setup.sh (it installs Debian's postgresql)")
        .filter_map(|e| {
            let e = e.ok()?;
            let major = e.file_name().to_str()?.parse().ok()?;
            Some((major, e.path().join("bin")))
        })
        .filter(|(_, bin)| bin.join("postgres").exists())
        .collect();
    found.sort();
    found.pop().expect("no PostgreSQL server under /usr/lib/postgresql: run scripts/setup.sh").1
}

const WRAPPER: &str = r#"
set -e
bin="$1"; dir="$2"; port="$3"; fsync="$4"; shift 4
"$bin/initdb" -D "$dir/data" -U postgres --auth=trust --locale=C -E UTF8 >"$dir/initdb.log" 2>&1
"$bin/postgres" -D "$dir/data" -p "$port" -c listen_addresses=127.0.0.1 -c unix_socket_directories="$dir" \
    -c fsync="$fsync" -c max_connections=200 "$@" >"$dir/server.log" 2>&1 &
pid=$!
cat >/dev/null || true
kill -INT "$pid" 2>/dev/null || true
wait "$pid" || true
rm -rf "$dir"
"#;

impl Postgres {
    /// A new server on a free loopback port, ready for connections.
    pub fn start() -> Self {
        Self::start_on(super::free_port())
    }

    /// A new server on `port` (the same port again, after a stop, to test
    /// reconnecting). fsync is off: a throwaway server, and the tests do not
    /// crash the machine.
    pub fn start_on(port: u16) -> Self {
        Self::launch(port, false, &[])
    }

    /// A server that syncs its commits to disk, as a real one does: for benchmarks.
    pub fn start_durable() -> Self {
        Self::launch(super::free_port(), true, &[])
    }

    /// A server whose change log can be read: `wal_level = logical`, with
    /// room for 20 replication slots and WAL senders.
    pub fn start_logical() -> Self {
        let settings = ["wal_level=logical", "max_replication_slots=20", "max_wal_senders=20"];
        Self::launch(super::free_port(), false, &settings)
    }

    fn launch(port: u16, fsync: bool, settings: &[&str]) -> Self {
        let bin = bin_dir();
        let dir = tempfile::Builder::new().prefix("weir-pg-").tempdir().unwrap().keep();
        let root = unsafe { libc::geteuid() } == 0;
        let mut command = if root {
            let uid = Command::new("id").args(["-u", "postgres"]).output().expect("id");
            let uid: u32 = String::from_utf8_lossy(&uid.stdout).trim().parse().expect("a `postgres` user");
            std::os::unix::fs::chown(&dir, Some(uid), None).unwrap();
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--", "sh"]);
            c
        } else {
            Command::new("sh")
        };
        let mut child = command
            .arg("-c")
            .arg(WRAPPER)
            .arg("sh")
            .arg(&bin)
            .arg(&dir)
            .arg(port.to_string())
            .arg(if fsync { "on" } else { "off" })
            .args(settings.iter().flat_map(|s| ["-c", s]))
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("starting PostgreSQL");
        let stdin = child.stdin.take();
        let server = Self { child, stdin, port, bin };
        let started = Instant::now();
        while !server.try_sql("postgres", "SELECT 1") {
            let log = std::fs::read_to_string(dir.join("server.log")).unwrap_or_default();
            let initdb = std::fs::read_to_string(dir.join("initdb.log")).unwrap_or_default();
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "PostgreSQL did not start on port {port}:\n{initdb}\n{log}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        server
    }

    /// The server every test of this process shares (each in a database of its own).
    pub fn shared() -> &'static Postgres {
        static SERVER: OnceLock<Postgres> = OnceLock::new();
        SERVER.get_or_init(Postgres::start)
    }

    fn try_sql(&self, database: &str, sql: &str) -> bool {
        self.psql(database, sql).is_ok()
    }

    fn psql(&self, database: &str, sql: &str) -> Result<String, String> {
        let out = Command::new(self.bin.join("psql"))
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-U", "postgres", "-d", database])
            .args(["-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1", "-c", sql])
            .output()
            .map_err(|e| e.to_string())?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }

    /// Runs SQL in `database` as the superuser; returns what it printed (unaligned, tuples only).
    pub fn sql(&self, database: &str, sql: &str) -> String {
        self.psql(database, sql).unwrap_or_else(|e| panic!("psql `{sql}`: {e}"))
    }

    /// A new, empty database; returns its URL.
    pub fn database(&self, name: &str) -> String {
        self.sql("postgres", &format!("DROP DATABASE IF EXISTS \"{name}\""));
        self.sql("postgres", &format!("CREATE DATABASE \"{name}\""));
        self.url(name)
    }

    /// One of the server's programs (`pg_recvlogical`, `psql` …).
    pub fn program(&self, name: &str) -> PathBuf {
        self.bin.join(name)
    }

    /// A `postgres-cdc-in` connection to `database`, as the superuser.
    pub fn connection(&self, database: &str) -> weir::sources::postgres::PostgresConnection {
        weir::sources::postgres::PostgresConnection {
            host: "127.0.0.1".into(),
            port: self.port,
            database: database.into(),
            user: "postgres".into(),
            password: None,
        }
    }

    pub fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }

    /// Stops the server now (fast shutdown) and removes its directory.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        if let Some(mut stdin) = self.stdin.take() {
            let _ = stdin.flush();
        }
        let _ = self.child.wait();
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        self.shutdown();
    }
}
