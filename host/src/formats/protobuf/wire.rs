//! Reading the Protobuf wire format: tags, varints, fixed-width numbers,
//! length-delimited ranges, and skipping what a reader does not know.

/// How a field's value is laid out on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireType {
    Varint,
    Fixed64,
    Len,
    StartGroup,
    EndGroup,
    Fixed32,
}

impl WireType {
    fn of(bits: u64) -> Option<Self> {
        Some(match bits {
            0 => Self::Varint,
            1 => Self::Fixed64,
            2 => Self::Len,
            3 => Self::StartGroup,
            4 => Self::EndGroup,
            5 => Self::Fixed32,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Varint => "varint",
            Self::Fixed64 => "64-bit",
            Self::Len => "length-delimited",
            Self::StartGroup | Self::EndGroup => "group",
            Self::Fixed32 => "32-bit",
        }
    }
}

/// A cursor over one message's bytes.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

pub type Result<T> = std::result::Result<T, String>;

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    pub fn done(&self) -> bool {
        self.pos >= self.buf.len()
    }

    pub fn varint(&mut self) -> Result<u64> {
        let mut value = 0u64;
        for shift in (0..70).step_by(7) {
            let Some(&byte) = self.buf.get(self.pos) else { return Err("the message ends inside a varint".into()) };
            self.pos += 1;
            value |= u64::from(byte & 0x7f) << shift.min(63);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err("a varint runs past 10 bytes".into())
    }

    /// The next field's number and wire type.
    pub fn tag(&mut self) -> Result<(u32, WireType)> {
        let key = self.varint()?;
        let number = key >> 3;
        let wire = WireType::of(key & 7).ok_or_else(|| format!("wire type {} does not exist", key & 7))?;
        if number == 0 || number > u64::from(u32::MAX >> 3) {
            return Err(format!("field number {number} is out of range"));
        }
        Ok((number as u32, wire))
    }

    pub fn fixed32(&mut self) -> Result<u32> {
        let bytes = self.take(4)?;
        Ok(u32::from_le_bytes(bytes.try_into().expect("4 bytes")))
    }

    pub fn fixed64(&mut self) -> Result<u64> {
        let bytes = self.take(8)?;
        Ok(u64::from_le_bytes(bytes.try_into().expect("8 bytes")))
    }

    /// A length-delimited value: where its bytes are in the message.
    pub fn len_delimited(&mut self) -> Result<(usize, usize)> {
        let len = usize::try_from(self.varint()?).map_err(|_| "a length does not fit in memory".to_string())?;
        let start = self.pos;
        self.take(len)?;
        Ok((start, start + len))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|end| *end <= self.buf.len());
        let Some(end) = end else { return Err("the message ends inside a value".into()) };
        let bytes = &self.buf[self.pos..end];
        self.pos = end;
        Ok(bytes)
    }

    /// Skips a value of `wire` type (a group up to its matching end).
    pub fn skip(&mut self, number: u32, wire: WireType) -> Result<()> {
        match wire {
            WireType::Varint => self.varint().map(drop),
            WireType::Fixed64 => self.take(8).map(drop),
            WireType::Fixed32 => self.take(4).map(drop),
            WireType::Len => self.len_delimited().map(drop),
            WireType::StartGroup => loop {
                if self.done() {
                    return Err(format!("group {number} has no end"));
                }
                let (inner, inner_wire) = self.tag()?;
                if inner_wire == WireType::EndGroup {
                    if inner == number {
                        return Ok(());
                    }
                    return Err(format!("group {number} ends as group {inner}"));
                }
                self.skip(inner, inner_wire)?;
            },
            WireType::EndGroup => Err(format!("an end of group {number} that was not started")),
        }
    }
}

pub fn zigzag32(v: u64) -> i32 {
    let v = v as u32;
    ((v >> 1) as i32) ^ -((v & 1) as i32)
}

pub fn zigzag64(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_it_is_given_and_says_what_is_wrong() {
        // field 1 varint 150, field 2 "hi", field 3 fixed32 7, a group 4 holding field 1 varint 1.
        let bytes = [0x08, 0x96, 0x01, 0x12, 0x02, b'h', b'i', 0x1d, 7, 0, 0, 0, 0x23, 0x08, 0x01, 0x24];
        let mut r = Reader::new(&bytes);
        assert_eq!(r.tag().unwrap(), (1, WireType::Varint));
        assert_eq!(r.varint().unwrap(), 150);
        assert_eq!(r.tag().unwrap(), (2, WireType::Len));
        assert_eq!(r.len_delimited().unwrap(), (5, 7));
        assert_eq!(r.tag().unwrap(), (3, WireType::Fixed32));
        assert_eq!(r.fixed32().unwrap(), 7);
        let (n, w) = r.tag().unwrap();
        r.skip(n, w).unwrap();
        assert!(r.done());
        assert_eq!((zigzag32(3), zigzag64(4)), (-2, 2));

        assert!(Reader::new(&[0x08, 0x96]).tag().and_then(|_| Reader::new(&[0x96]).varint()).is_err());
        assert_eq!(Reader::new(&[0x12, 0x05, b'h']).tag().unwrap(), (2, WireType::Len));
        let mut cut = Reader::new(&[0x12, 0x05, b'h']);
        cut.tag().unwrap();
        assert_eq!(cut.len_delimited().unwrap_err(), "the message ends inside a value");
        assert_eq!(Reader::new(&[0x0f]).tag().unwrap_err(), "wire type 7 does not exist");
    }
}
