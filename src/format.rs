//! Every number a person reads, written one way: three significant digits ([`sig`]), step times in
//! milliseconds ([`ms`], the one millisecond format), durations of any size ([`duration`]), fractions as
//! percentages ([`percent`], [`percent_change`]) and byte sizes in binary units ([`human_bytes`]).

/// A number with three significant digits (no exponent for everyday magnitudes); `-` when not finite.
pub fn sig(v: f64) -> String {
    if !v.is_finite() {
        return "-".into();
    }
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else if a >= 0.001 {
        format!("{v:.3}")
    } else {
        format!("{v:.2e}")
    }
}

/// Seconds as milliseconds with three significant digits (`42.1 ms`): how every step time is shown.
pub fn ms(seconds: f64) -> String {
    format!("{} ms", sig(seconds * 1e3))
}

/// Seconds in the unit that suits their size, with three significant digits: seconds from 1 s (`1.20 s`),
/// milliseconds (as [`ms`]) from 1 ms, microseconds below (`2.50 us`).
pub fn duration(seconds: f64) -> String {
    let a = seconds.abs();
    if a >= 1.0 {
        format!("{} s", sig(seconds))
    } else if a >= 1e-3 || a == 0.0 {
        ms(seconds)
    } else {
        format!("{} us", sig(seconds * 1e6))
    }
}

/// A fraction as a percentage with one decimal (`50.0%`).
pub fn percent(fraction: f64) -> String {
    format!("{:.1}%", fraction * 100.0)
}

/// The change a ratio stands for, signed, as a percentage with one decimal: `+12.3%` for 1.123.
pub fn percent_change(ratio: f64) -> String {
    format!("{:+.1}%", (ratio - 1.0) * 100.0)
}

/// A byte count in binary units for people: whole bytes below 1 KiB (`512 B`), else one decimal in the
/// largest unit that keeps the value at least 1 (`1.5 KiB`, `3.0 GiB`; TiB is the largest unit).
pub fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 { format!("{b} B") } else { format!("{v:.1} {}", UNITS[unit]) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_with_three_significant_digits() {
        assert_eq!(sig(1234.5), "1234");
        assert_eq!(sig(12.345), "12.3");
        assert_eq!(sig(0.01234), "0.012");
        assert_eq!(sig(f64::NAN), "-");
    }

    #[test]
    fn times_and_fractions() {
        assert_eq!(ms(0.0421), "42.1 ms");
        assert_eq!(duration(1.198), "1.20 s");
        assert_eq!(duration(0.022479), "22.5 ms");
        assert_eq!(duration(2.5e-6), "2.50 us");
        assert_eq!(duration(0.0), "0 ms");
        assert_eq!(percent(0.5), "50.0%");
        assert_eq!(percent_change(1.123), "+12.3%");
        assert_eq!(percent_change(0.9), "-10.0%");
    }

    #[test]
    fn bytes_in_binary_units() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(1023), "1023 B");
        assert_eq!(human_bytes(1024), "1.0 KiB");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(3 * 1024 * 1024), "3.0 MiB");
        assert_eq!(human_bytes(3 << 29), "1.5 GiB");
        assert_eq!(human_bytes(3 << 30), "3.0 GiB");
        assert_eq!(human_bytes(5 << 40), "5.0 TiB");
        assert_eq!(human_bytes(u64::MAX), "16777216.0 TiB");
    }
}
