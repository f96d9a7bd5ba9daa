//! The initial snapshot: the replication slot is created with a snapshot of
//! its own exported, each table is copied (`COPY … TO STDOUT`) inside that
//! snapshot, and the stream then starts at the slot's consistent point. A
//! row committed before that point is in the snapshot; one committed after
//! it is in the stream: none is in both, none in neither.

use std::borrow::Cow;

use anyhow::{Context, bail};
use futures::StreamExt;
use pgwire_replication::ReplicationClient;
use tokio_postgres::Client;

use super::Chunks;
use super::changes::{BadValue, ChangeLog, Position};
use super::server::{ident, quoted};

/// A slot just created, and the snapshot it exported (valid while the
/// replication session that created it runs no other command).
#[derive(Debug, Clone)]
pub struct NewSlot {
    pub consistent_point: u64,
    pub snapshot: String,
}

/// Creates `slot` (pgoutput) on a replication session that has not started,
/// exporting its snapshot.
pub async fn create_slot(replication: &mut ReplicationClient, slot: &str) -> anyhow::Result<NewSlot> {
    let rows = replication
        .simple_query(&format!("CREATE_REPLICATION_SLOT {} LOGICAL pgoutput EXPORT_SNAPSHOT", ident(slot)))
        .await
        .with_context(|| format!("creating the replication slot {slot}"))?;
    let text = |i: usize| -> anyhow::Result<String> {
        let value =
            rows.first().and_then(|r| r.get(i)).and_then(|v| v.as_ref()).context("CREATE_REPLICATION_SLOT's answer")?;
        Ok(String::from_utf8_lossy(value).into_owned())
    };
    let consistent_point = super::parse_lsn(&text(1)?).context("the slot's consistent point")?;
    Ok(NewSlot { consistent_point, snapshot: text(2)? })
}

/// A transaction in a slot's exported snapshot, on an ordinary session.
pub struct Snapshot<'a> {
    client: &'a Client,
    /// The consistent point: every row read is at this position.
    lsn: u64,
}

impl<'a> Snapshot<'a> {
    pub async fn open(client: &'a Client, slot: &NewSlot) -> anyhow::Result<Self> {
        client
            .batch_execute(&format!(
                "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SET TRANSACTION SNAPSHOT '{}'",
                slot.snapshot.replace('\'', "''")
            ))
            .await
            .context("opening the slot's snapshot")?;
        Ok(Self { client, lsn: slot.consistent_point })
    }

    /// Copies the table `log` is for into it, row after row; whenever it holds
    /// `chunk` rows, they are finished and sent to `rows` as slot `slot`'s
    /// (waiting while the reader is behind), and so are the last ones. Rows
    /// with a value the table cannot hold go to `bad`. Returns the rows read.
    pub async fn copy(
        &self,
        log: &mut ChangeLog,
        chunk: usize,
        bad: &mut Vec<BadValue>,
        (slot, rows_to): (usize, &Chunks),
    ) -> anyhow::Result<u64> {
        let table = log.table().clone();
        let columns: Vec<String> = table.columns.iter().map(|c| ident(&c.name)).collect();
        let sql = format!("COPY {} ({}) TO STDOUT", quoted(&table.schema, &table.name), columns.join(", "));
        let stream =
            self.client.copy_out(sql.as_str()).await.with_context(|| format!("copying {}", table.qualified()))?;
        futures::pin_mut!(stream);
        let (mut carry, mut rows) = (Vec::<u8>::new(), 0u64);
        let mut row_of = |line: &[u8], log: &mut ChangeLog, rows: &mut u64| -> anyhow::Result<()> {
            let fields = line.split(|&b| b == b'\t').map(unescape).collect::<anyhow::Result<Vec<_>>>()?;
            let values: Vec<Option<&str>> = fields.iter().map(|f| f.as_deref()).collect();
            let at = Position { lsn: self.lsn, tx: None, ordinal: *rows as i64, commit_ts: None };
            if let Err(e) = log.read(&values, at) {
                bad.push(e);
            }
            *rows += 1;
            Ok(())
        };
        let send = |log: &mut ChangeLog| rows_to.send((slot, log.finish()));
        let gone = || anyhow::anyhow!("the snapshot's reader stopped");
        while let Some(data) = stream.next().await {
            let data = data.with_context(|| format!("copying {}", table.qualified()))?;
            let mut rest: &[u8] = &data;
            while let Some(end) = rest.iter().position(|&b| b == b'\n') {
                if carry.is_empty() {
                    row_of(&rest[..end], log, &mut rows)?;
                } else {
                    carry.extend_from_slice(&rest[..end]);
                    row_of(&std::mem::take(&mut carry), log, &mut rows)?;
                }
                rest = &rest[end + 1..];
            }
            carry.extend_from_slice(rest);
            if log.rows() >= chunk {
                send(log).await.map_err(|_| gone())?;
            }
        }
        if !carry.is_empty() {
            bail!("COPY of {} ended in the middle of a row", table.qualified());
        }
        if log.rows() > 0 {
            send(log).await.map_err(|_| gone())?;
        }
        Ok(rows)
    }

    /// Ends the snapshot's transaction.
    pub async fn close(self) -> anyhow::Result<()> {
        self.client.batch_execute("COMMIT").await.context("closing the snapshot")
    }
}

/// One field of COPY's text format: `\N` is null; backslash escapes undone.
fn unescape(field: &[u8]) -> anyhow::Result<Option<Cow<'_, str>>> {
    if field == b"\\N" {
        return Ok(None);
    }
    if !field.contains(&b'\\') {
        return Ok(Some(Cow::Borrowed(std::str::from_utf8(field).context("a COPY value that is not UTF-8")?)));
    }
    let mut out = Vec::with_capacity(field.len());
    let mut i = 0;
    while i < field.len() {
        let b = field[i];
        i += 1;
        if b != b'\\' {
            out.push(b);
            continue;
        }
        let Some(&e) = field.get(i) else { break };
        i += 1;
        out.push(match e {
            b'b' => 8,
            b'f' => 12,
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            b'v' => 11,
            b'0'..=b'7' => {
                let mut v = u32::from(e - b'0');
                for _ in 0..2 {
                    match field.get(i) {
                        Some(&d @ b'0'..=b'7') => {
                            v = v * 8 + u32::from(d - b'0');
                            i += 1;
                        }
                        _ => break,
                    }
                }
                v as u8
            }
            b'x' => {
                let mut v = 0u32;
                for _ in 0..2 {
                    match field.get(i).and_then(|d| (*d as char).to_digit(16)) {
                        Some(d) => {
                            v = v * 16 + d;
                            i += 1;
                        }
                        None => break,
                    }
                }
                v as u8
            }
            other => other,
        });
    }
    Ok(Some(Cow::Owned(String::from_utf8(out).context("a COPY value that is not UTF-8")?)))
}

#[cfg(test)]
mod tests {
    #[test]
    fn copy_fields_unescape() {
        let f = |s: &str| super::unescape(s.as_bytes()).unwrap().map(|c| c.into_owned());
        assert_eq!(f("\\N"), None);
        assert_eq!(f("plain"), Some("plain".into()));
        assert_eq!(f("a\\tb\\nc\\\\d"), Some("a\tb\nc\\d".into()));
        assert_eq!(f("\\\\x00ff"), Some("\\x00ff".into()), "bytea's hex form");
        assert_eq!(f("\\101\\x42"), Some("AB".into()));
    }
}
