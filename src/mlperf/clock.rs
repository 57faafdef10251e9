//! The log's clock: the RFC 3339 instants a result records (`environment.started_at`, millisecond precision, UTC)
//! as milliseconds since the Unix epoch, and back.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Milliseconds since the epoch of an instant written `YYYY-MM-DDTHH:MM:SS[.fff]Z` (as results write them);
/// `None` for any other text.
pub fn epoch_ms(text: &str) -> Option<i64> {
    let t = text.strip_suffix('Z')?;
    let (date, time) = t.split_once('T')?;
    let mut d = date.splitn(3, '-').map(|p| p.parse::<i64>().ok());
    let (y, mo, da) = (d.next()??, d.next()??, d.next()??);
    let (hms, frac) = match time.split_once('.') {
        Some((hms, f)) => (hms, f),
        None => (time, ""),
    };
    let mut h = hms.splitn(3, ':').map(|p| p.parse::<i64>().ok());
    let (hh, mm, ss) = (h.next()??, h.next()??, h.next()??);
    if !(0..=9999).contains(&y)
        || !(1..=12).contains(&mo)
        || !(1..=31).contains(&da)
        || !(0..=23).contains(&hh)
        || !(0..=59).contains(&mm)
        || !(0..=60).contains(&ss)
    {
        return None;
    }
    if !frac.chars().all(|c| c.is_ascii_digit()) || frac.len() > 9 {
        return None;
    }
    let ms = if frac.is_empty() { 0 } else { format!("{frac:0<3}")[..3].parse::<i64>().ok()? };
    Some((days_from_civil(y, mo, da) * 86_400 + hh * 3600 + mm * 60 + ss) * 1000 + ms)
}

/// The instant `ms` milliseconds after the epoch (before it: the epoch).
pub fn system_time(ms: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

/// Days from 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = (if y >= 0 { y } else { y - 399 }) / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::rfc3339;

    #[test]
    fn instants_round_trip_through_the_result_format() {
        assert_eq!(epoch_ms("1970-01-01T00:00:00.000Z"), Some(0));
        assert_eq!(epoch_ms("2000-03-01T00:00:01.5Z"), Some(951_868_801_500));
        for ms in [0i64, 951_868_801_500, 1_764_650_000_123] {
            assert_eq!(epoch_ms(&rfc3339(system_time(ms))), Some(ms));
        }
        for bad in ["", "2024-13-01T00:00:00Z", "2024-01-01 00:00:00Z", "2024-01-01T00:00:00", "x-y-zTa:b:cZ"] {
            assert_eq!(epoch_ms(bad), None, "{bad}");
        }
    }
}
