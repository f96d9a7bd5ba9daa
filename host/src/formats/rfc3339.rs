//! RFC 3339 date-times in the shape nearly every producer writes them,
//! `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`, read straight to microseconds.
//!
//! JSON date-time properties are read as arrow-cast reads them; this is the
//! common case of that, without its general parser and chrono's calendar
//! types. Anything else (no offset, a space before it, `±HHMM`, short fields)
//! is left to arrow-cast, which takes more shapes and says what is wrong.
//! Where both read a string they agree to the microsecond; a test holds them
//! to it.

/// Microseconds since the epoch, or `None` when `s` is not in the shape above
/// or is no valid date-time (arrow-cast then decides).
pub fn micros(s: &[u8]) -> Option<i64> {
    if s.len() < 20 {
        return None;
    }
    let (local, at) = local_micros(s)?;
    let offset_seconds = match &s[at..] {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), _, _, b':', _, _] => {
            let (hours, minutes) = (two(s, at + 1)?, two(s, at + 4)?);
            if hours > 23 || minutes > 59 {
                return None;
            }
            let seconds = i64::from(hours * 3600 + minutes * 60);
            if *sign == b'-' { -seconds } else { seconds }
        }
        _ => return None,
    };
    Some(local - offset_seconds * 1_000_000)
}

/// Days since 1970-01-01 of a `YYYY-MM-DD` date at the start of `s`.
pub fn days(s: &[u8]) -> Option<i64> {
    if s.len() < 10 || s[4] != b'-' || s[7] != b'-' {
        return None;
    }
    let (year, month, day) = (two(s, 0)? * 100 + two(s, 2)?, two(s, 5)?, two(s, 8)?);
    if !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
        return None;
    }
    Some(days_from_civil(i64::from(year), month, day))
}

/// `YYYY-MM-DD(T| )HH:MM:SS[.fraction]` at the start of `s`, as microseconds
/// since the epoch were it UTC, and where what follows it (the offset) starts.
pub fn local_micros(s: &[u8]) -> Option<(i64, usize)> {
    if s.len() < 19 || !matches!(s[10], b'T' | b't' | b' ') || s[13] != b':' || s[16] != b':' {
        return None;
    }
    let days = days(s)?;
    let (hour, minute, second) = (two(s, 11)?, two(s, 14)?, two(s, 17)?);
    if hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    // A fraction: its first six digits are microseconds; finer ones are cut off.
    let mut at = 19;
    let mut fraction = 0;
    if s.get(at) == Some(&b'.') {
        at += 1;
        let start = at;
        while at < s.len() && s[at].is_ascii_digit() {
            if at - start < 6 {
                fraction = fraction * 10 + i64::from(s[at] - b'0');
            }
            at += 1;
        }
        let read = at - start;
        if read == 0 {
            return None;
        }
        fraction *= 10i64.pow(6u32.saturating_sub(read as u32));
    }
    let seconds = days * 86_400 + i64::from(hour * 3600 + minute * 60 + second);
    Some((seconds * 1_000_000 + fraction, at))
}

/// The number the two ASCII digits at `at` spell, if both are digits.
fn two(s: &[u8], at: usize) -> Option<u32> {
    let (tens, ones) = (s[at].wrapping_sub(b'0'), s[at + 1].wrapping_sub(b'0'));
    (tens < 10 && ones < 10).then(|| u32::from(tens) * 10 + u32::from(ones))
}

fn days_in_month(year: u32, month: u32) -> u32 {
    match month {
        2 if year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400)) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to a date of the proleptic Gregorian calendar
/// (Howard Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let day_of_year = i64::from((153 * ((month + 9) % 12) + 2) / 5 + day - 1);
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use arrow::array::timezone::Tz;
    use arrow::compute::kernels::cast_utils::string_to_datetime;

    use super::*;

    /// What arrow-cast makes of `s`, read as a JSON date-time property is.
    fn arrow(s: &str) -> Option<i64> {
        let utc: Tz = "+00:00".parse().unwrap();
        string_to_datetime(&utc, s).ok().map(|t| t.timestamp_micros())
    }

    #[test]
    fn agrees_with_arrow_cast_and_reads_the_usual_shape_itself() {
        let days = ["01", "28", "29", "30", "31", "00", "32", "1x"];
        let months = ["01", "02", "04", "12", "00", "13"];
        let years = ["0000", "0400", "1600", "1900", "1969", "1970", "2000", "2024", "2026", "2100", "9999"];
        // The usual shape's parts first (`usual` of each), then others.
        let (times, usual_times) =
            (["00:00:00", "10:07:59", "23:59:59", "24:00:00", "12:60:00", "12:00:60", "1:00:00"], 3);
        let (fractions, usual_fractions) =
            (["", ".1", ".123", ".123456", ".1234567", ".123456789", ".1234567891234", ".", ".x"], 7);
        let (offsets, usual_offsets) =
            (["Z", "z", "+00:00", "-00:00", "+05:30", "-08:00", "+23:59", "+24:00", "+05", "+0530", " Z", ""], 7);
        let mut read = 0;
        for year in years {
            for month in months {
                for day in days {
                    for (t, time) in times.iter().enumerate() {
                        for (f, fraction) in fractions.iter().enumerate() {
                            for (o, offset) in offsets.iter().enumerate() {
                                for separator in ["T", "t", " "] {
                                    let s = format!("{year}-{month}-{day}{separator}{time}{fraction}{offset}");
                                    let (fast, arrow) = (micros(s.as_bytes()), arrow(&s));
                                    let usual = t < usual_times && f < usual_fractions && o < usual_offsets;
                                    match fast {
                                        Some(_) => assert_eq!(fast, arrow, "{s}"),
                                        None => assert!(!usual || arrow.is_none(), "{s} is left to arrow-cast"),
                                    }
                                    read += usize::from(fast.is_some());
                                }
                            }
                        }
                    }
                }
            }
        }
        assert!(read > 10_000, "read {read}");
        assert_eq!(micros(b"2026-11-29T10:07:59.123Z"), Some(1_795_946_879_123_000));
        assert_eq!(micros(b"1969-12-31T23:59:59.999999Z"), Some(-1));
        assert_eq!(micros(b"1970-01-01T05:30:00+05:30"), Some(0));
    }

    #[test]
    fn leaves_other_shapes_to_arrow_cast() {
        for s in [
            "2026-11-29",
            "2026-11-29T10:07:59",
            "2026-11-29T10:07:59.5",
            "2026-11-29T10:07:59 +05:00",
            "2026-11-29T10:07:59+0500",
            "2026-11-29T10:07Z",
            "2026-02-29T10:07:59Z",
            "",
            "not a date-time at all",
        ] {
            assert_eq!(micros(s.as_bytes()), None, "{s}");
        }
    }
}
