//! Durations in specs (`30m`, `1.5h`, `300ms`), read as the apiserver reads them: Go's
//! `time.ParseDuration`, which the CRDs' CEL `duration()` uses. A value admission accepted is
//! then one the reconcile reads, to the same nanoseconds: a parser of its own (humantime, before)
//! refused fractions Go takes (`1.0001h`, `1.5ns`), which left objects admitted and then stalled
//! as an invalid spec. `aigw validate`'s `duration()` is this one too.

use std::time::Duration;

/// Nanoseconds per unit, as Go names them (`µs` in both of Unicode's spellings).
const UNITS: [(&str, u64); 9] = [
    ("ns", 1),
    ("us", 1_000),
    ("\u{b5}s", 1_000),
    ("\u{3bc}s", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
    ("d", 86_400_000_000_000),
];

/// Why a text is not a duration (its `Display`: `"1x" is not a duration: the unit is unknown`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    text: String,
    why: &'static str,
}

/// What [`Invalid`] says of a duration past the longest Go represents.
const TOO_LONG: &str = "it is too long";

impl Invalid {
    /// True for a duration past the longest Go represents (about 292 years), which a field
    /// bounded more tightly reports as past its own bound.
    pub fn too_long(&self) -> bool {
        self.why == TOO_LONG
    }
}

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?} is not a duration: {}", self.text, self.why)
    }
}

impl std::error::Error for Invalid {}

/// The longest duration Go represents: `i64::MAX` nanoseconds (about 292 years).
const LONGEST: u64 = i64::MAX as u64;

/// `text` as Go's `time.ParseDuration` reads it (`0`, or numbers with an optional fraction, each
/// followed by a unit: `ns`, `us`, `ms`, `s`, `m`, `h`), with no sign: a spec's durations are
/// never negative. Past about 292 years is an error, as in Go.
pub fn parse(text: &str) -> Result<Duration, Invalid> {
    read(text, false)
}

/// [`parse`], also taking whole days (`30d`), which `spec.rotation.interval` allows besides
/// Go's units. Admission bounds no day count (its rules leave a value with days to this
/// reading), so one past about 292 years reads as the longest duration (never, in effect)
/// rather than as an error that would stall an object admission accepted.
pub fn parse_with_days(text: &str) -> Result<Duration, Invalid> {
    read(text, true)
}

fn read(text: &str, days: bool) -> Result<Duration, Invalid> {
    let invalid = |why: &'static str| {
        let text = text.to_string();
        Err(Invalid { text, why })
    };
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    if text.is_empty() {
        return invalid("it is empty");
    }
    let mut rest = text;
    let mut total: u64 = 0;
    while !rest.is_empty() {
        let (whole, after) = split_digits(rest);
        let (fraction, after) = match after.strip_prefix('.') {
            Some(after) => {
                let (fraction, after) = split_digits(after);
                (Some(fraction), after)
            }
            None => (None, after),
        };
        if whole.is_empty() && fraction.is_none_or(str::is_empty) {
            return invalid("a number is missing");
        }
        let unit_length = after
            .find(|c: char| c == '.' || c.is_ascii_digit())
            .unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_length);
        let Some(&(_, nanos)) = UNITS
            .iter()
            .find(|(name, _)| *name == unit && (days || *name != "d"))
        else {
            return invalid(match unit {
                "" => "a unit is missing",
                _ => "the unit is unknown",
            });
        };
        if unit == "d" && fraction.is_some() {
            return invalid("days are whole");
        }
        // As Go: the whole part within 2^63 ns, then the fraction added in floating point,
        // truncated (digits past what 63 bits hold change nothing), each step checked.
        let whole = whole_value(whole)
            .filter(|v| *v <= (LONGEST + 1) / nanos)
            .map(|v| v * nanos);
        let fraction = fraction.map(leading_fraction).map_or(0, |(digits, scale)| {
            (digits as f64 * (nanos as f64 / scale)) as u64
        });
        let value = whole.and_then(|v| v.checked_add(fraction));
        total = match value.and_then(|v| total.checked_add(v)) {
            Some(total) if total <= LONGEST => total,
            _ if days => LONGEST,
            _ => return invalid(TOO_LONG),
        };
        rest = after;
    }
    Ok(Duration::from_nanos(total))
}

/// The leading ASCII digits of `text`, and the rest.
fn split_digits(text: &str) -> (&str, &str) {
    let end = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    text.split_at(end)
}

/// The value of the whole part (empty reads as 0); `None` past 64 bits.
fn whole_value(digits: &str) -> Option<u64> {
    digits.bytes().try_fold(0u64, |value, digit| {
        value.checked_mul(10)?.checked_add(u64::from(digit - b'0'))
    })
}

/// The digits of a fraction as Go's `leadingFraction` keeps them: as many as fit in 63 bits,
/// with the power of ten they stand over.
fn leading_fraction(digits: &str) -> (u64, f64) {
    let mut value: u64 = 0;
    let mut scale = 1.0;
    for digit in digits.bytes() {
        let Some(next) = value
            .checked_mul(10)
            .and_then(|v| v.checked_add(u64::from(digit - b'0')))
            .filter(|v| *v <= LONGEST)
        else {
            break;
        };
        value = next;
        scale *= 10.0;
    }
    (value, scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nanos(text: &str) -> u128 {
        parse(text).unwrap().as_nanos()
    }

    /// What Go's `time.ParseDuration` gives for each (from its documentation and tests).
    #[test]
    fn reads_what_go_reads() {
        assert_eq!(nanos("0"), 0);
        assert_eq!(nanos("0s"), 0);
        assert_eq!(nanos("300ms"), 300_000_000);
        assert_eq!(nanos("1.5h"), 5_400_000_000_000);
        assert_eq!(nanos("2h45m"), 9_900_000_000_000);
        assert_eq!(nanos("1h30m"), 5_400_000_000_000);
        assert_eq!(nanos("1.0001h"), 3_600_360_000_000);
        assert_eq!(nanos("1.5ns"), 1);
        assert_eq!(nanos("0.1234567891s"), 123_456_789);
        assert_eq!(nanos("1us"), 1_000);
        assert_eq!(nanos("1\u{b5}s"), 1_000);
        assert_eq!(nanos("1\u{3bc}s"), 1_000);
        assert_eq!(nanos(".5s"), 500_000_000);
        assert_eq!(nanos("5.s"), 5_000_000_000);
        assert_eq!(nanos("9223372036854775807ns"), LONGEST as u128);
        assert_eq!(nanos("8760h"), 8760 * 3_600_000_000_000);
    }

    #[test]
    fn refuses_what_go_refuses() {
        for text in [
            "",
            "s",
            ".s",
            "1",
            "10",
            "1x",
            "1d",
            "1h 30m",
            "-1s",
            "9223372036854775808ns",
            "1000000000h",
            // Past 2^64 in the whole part, or by the fraction (wrapped to 383 ns, 0.61 s).
            "18446744073709551.999us",
            "5124095.5762h",
            "2562047h47m16.854775808s",
        ] {
            assert!(parse(text).is_err(), "{text:?} parsed");
        }
    }

    #[test]
    fn days_are_read_only_where_asked_and_whole() {
        assert_eq!(
            parse_with_days("30d").unwrap(),
            Duration::from_secs(30 * 86_400)
        );
        assert_eq!(
            parse_with_days("1d12h").unwrap(),
            Duration::from_secs(36 * 3_600)
        );
        assert!(parse_with_days("1.5d").is_err());
        assert!(parse("30d").is_err());
        // Never, in effect: admission takes any day count.
        assert_eq!(
            parse_with_days("999999d").unwrap().as_nanos(),
            LONGEST as u128
        );
    }
}
