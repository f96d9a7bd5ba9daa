//! The messages of PostgreSQL's `pgoutput` plugin (protocol version 1), as a
//! replication stream carries them between a transaction's Begin and Commit
//! (which the replication client reads itself): a table's description
//! (Relation), its rows' changes, and truncations. Values stay in the
//! server's text form, borrowed from the message.

use anyhow::{Context, bail};

/// A message of the stream.
#[derive(Debug, PartialEq)]
pub enum Message<'a> {
    /// What a table looks like now; comes before the first change of it in a
    /// session, and again after its columns changed.
    Relation(Relation),
    Insert {
        relation: u32,
        new: Tuple<'a>,
    },
    /// `old` is the replica identity's old values, when the update changed
    /// them or the identity is FULL.
    Update {
        relation: u32,
        old: Option<Tuple<'a>>,
        new: Tuple<'a>,
    },
    /// `old` is the key (or, with REPLICA IDENTITY FULL, the whole row).
    Delete {
        relation: u32,
        old: Tuple<'a>,
    },
    Truncate {
        relations: Vec<u32>,
    },
    /// Anything else (Type, Origin, a logical message): nothing a table holds.
    Other,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relation {
    pub id: u32,
    pub schema: String,
    pub name: String,
    /// `d` default (the primary key), `n` nothing, `f` full, `i` an index.
    pub replica_identity: char,
    pub columns: Vec<RelationColumn>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelationColumn {
    pub key: bool,
    pub name: String,
    pub type_oid: u32,
    pub typmod: i32,
}

/// One value of a row, as the message carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Datum<'a> {
    Null,
    /// A TOASTed value the change did not touch: the message does not carry it.
    Unchanged,
    Text(&'a str),
}

pub type Tuple<'a> = Vec<Datum<'a>>;

/// Reads one message.
pub fn parse(data: &[u8]) -> anyhow::Result<Message<'_>> {
    let mut r = Reader(data);
    let message = match r.u8()? {
        b'R' => {
            let id = r.u32()?;
            let schema = r.cstr()?.to_string();
            let name = r.cstr()?.to_string();
            let replica_identity = r.u8()? as char;
            let count = r.u16()?;
            let columns = (0..count)
                .map(|_| {
                    Ok(RelationColumn {
                        key: r.u8()? & 1 == 1,
                        name: r.cstr()?.to_string(),
                        type_oid: r.u32()?,
                        typmod: r.u32()? as i32,
                    })
                })
                .collect::<anyhow::Result<_>>()?;
            Message::Relation(Relation { id, schema, name, replica_identity, columns })
        }
        b'I' => {
            let relation = r.u32()?;
            r.expect(b'N')?;
            Message::Insert { relation, new: r.tuple()? }
        }
        b'U' => {
            let relation = r.u32()?;
            let old = match r.u8()? {
                b'K' | b'O' => {
                    let old = r.tuple()?;
                    r.expect(b'N')?;
                    Some(old)
                }
                b'N' => None,
                other => bail!("pgoutput Update: unexpected tuple kind {:?}", other as char),
            };
            Message::Update { relation, old, new: r.tuple()? }
        }
        b'D' => {
            let relation = r.u32()?;
            match r.u8()? {
                b'K' | b'O' => {}
                other => bail!("pgoutput Delete: unexpected tuple kind {:?}", other as char),
            }
            Message::Delete { relation, old: r.tuple()? }
        }
        b'T' => {
            let count = r.u32()?;
            let _options = r.u8()?;
            Message::Truncate { relations: (0..count).map(|_| r.u32()).collect::<anyhow::Result<_>>()? }
        }
        _ => Message::Other,
    };
    Ok(message)
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> anyhow::Result<&'a [u8]> {
        if self.0.len() < n {
            bail!("pgoutput message cut short");
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Ok(head)
    }

    fn u8(&mut self) -> anyhow::Result<u8> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> anyhow::Result<u16> {
        Ok(u16::from_be_bytes(self.take(2)?.try_into()?))
    }

    fn u32(&mut self) -> anyhow::Result<u32> {
        Ok(u32::from_be_bytes(self.take(4)?.try_into()?))
    }

    fn expect(&mut self, tag: u8) -> anyhow::Result<()> {
        match self.u8()? {
            t if t == tag => Ok(()),
            t => bail!("pgoutput: expected {:?}, found {:?}", tag as char, t as char),
        }
    }

    fn cstr(&mut self) -> anyhow::Result<&'a str> {
        let end = self.0.iter().position(|&b| b == 0).context("pgoutput: a string without its end")?;
        let s = std::str::from_utf8(&self.0[..end]).context("pgoutput: a name that is not UTF-8")?;
        self.0 = &self.0[end + 1..];
        Ok(s)
    }

    fn tuple(&mut self) -> anyhow::Result<Tuple<'a>> {
        let count = self.u16()?;
        (0..count)
            .map(|_| {
                Ok(match self.u8()? {
                    b'n' => Datum::Null,
                    b'u' => Datum::Unchanged,
                    b't' => {
                        let len = self.u32()? as usize;
                        Datum::Text(
                            std::str::from_utf8(self.take(len)?).context("pgoutput: a value that is not UTF-8")?,
                        )
                    }
                    other => bail!("pgoutput: a value of kind {:?} (binary values are not asked for)", other as char),
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tuple(values: &[Option<&str>]) -> Vec<u8> {
        let mut out = (values.len() as u16).to_be_bytes().to_vec();
        for v in values {
            match v {
                None => out.push(b'n'),
                Some("\u{0}u") => out.push(b'u'),
                Some(v) => {
                    out.push(b't');
                    out.extend((v.len() as u32).to_be_bytes());
                    out.extend(v.as_bytes());
                }
            }
        }
        out
    }

    #[test]
    fn reads_relations_and_changes() {
        let mut relation = vec![b'R'];
        relation.extend(16384u32.to_be_bytes());
        relation.extend(b"public\0orders\0d");
        relation.extend(2u16.to_be_bytes());
        relation.extend(b"\x01id\0");
        relation.extend(23u32.to_be_bytes());
        relation.extend((-1i32).to_be_bytes());
        relation.extend(b"\x00note\0");
        relation.extend(25u32.to_be_bytes());
        relation.extend((-1i32).to_be_bytes());
        let Message::Relation(r) = parse(&relation).unwrap() else { panic!() };
        assert_eq!((r.id, r.schema.as_str(), r.name.as_str(), r.replica_identity), (16384, "public", "orders", 'd'));
        assert!(r.columns[0].key && !r.columns[1].key);
        assert_eq!(r.columns[1].type_oid, 25);

        let mut update = vec![b'U'];
        update.extend(16384u32.to_be_bytes());
        update.push(b'K');
        update.extend(tuple(&[Some("1"), None]));
        update.push(b'N');
        update.extend(tuple(&[Some("2"), Some("\u{0}u")]));
        assert_eq!(
            parse(&update).unwrap(),
            Message::Update {
                relation: 16384,
                old: Some(vec![Datum::Text("1"), Datum::Null]),
                new: vec![Datum::Text("2"), Datum::Unchanged],
            }
        );
        let mut truncate = vec![b'T'];
        truncate.extend(2u32.to_be_bytes());
        truncate.push(0);
        truncate.extend(1u32.to_be_bytes());
        truncate.extend(2u32.to_be_bytes());
        assert_eq!(parse(&truncate).unwrap(), Message::Truncate { relations: vec![1, 2] });
        assert!(parse(&update[..10]).unwrap_err().to_string().contains("cut short"));
    }
}
