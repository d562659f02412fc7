//! `--ttl 90s | 30m | 1h30m` (docs/leases.md L8). A bare number is refused: `--ttl 30`
//! could mean seconds or minutes, and guessing wrong silently is worse than
//! asking.

/// A duration of whole seconds where nothing (`0s`) is a fair answer.
pub fn seconds_or_zero(s: &str) -> Result<u64, String> {
    if s.trim().trim_end_matches(|c: char| c.is_ascii_alphabetic()) == "0" {
        return Ok(0);
    }
    parse(s)
}

/// Whole seconds of a human duration; clap's value parser for `--ttl`.
pub fn parse(s: &str) -> Result<u64, String> {
    let s = s.trim();
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        // No unit makes 0 no better: say what is wrong with it, not a fix that fails too.
        if s.bytes().all(|b| b == b'0') {
            return Err(format!("a lease lasts at least 1s; got {s}"));
        }
        return Err(format!("`{s}` has no unit: write {s}s, {s}m or {s}h"));
    }
    if s.starts_with('-') || (s.bytes().all(|b| b == b'0' || b.is_ascii_alphabetic()) && s.bytes().any(|b| b == b'0')) {
        return Err(format!("a lease lasts at least 1s; got {s}"));
    }
    // humantime's own reason ("expected number at 0") is about its parser,
    // not about what to type.
    let d = humantime::parse_duration(s).map_err(|_| format!("`{s}` is not a duration like 90s, 30m or 1h30m"))?;
    if d.subsec_nanos() != 0 {
        return Err(format!("`{s}` is not a whole number of seconds"));
    }
    Ok(d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn zero_is_refused_without_suggesting_zero() {
        let e = parse("0").unwrap_err();
        assert!(e.contains("at least 1s") && !e.contains("0s, 0m"), "{e}");
    }

    #[test]
    fn units_are_required_and_honoured() {
        assert_eq!(parse("90s"), Ok(90));
        assert_eq!(parse("30m"), Ok(1800));
        assert_eq!(parse("1h30m"), Ok(5400));
        assert_eq!(parse("1h 30m"), Ok(5400));
        assert_eq!(parse("2h"), Ok(7200));
        assert_eq!(parse("1000ms"), Ok(1));
        assert_eq!(parse("1.5h"), Ok(5400));
    }

    #[test]
    fn bare_numbers_fractions_and_junk_are_refused() {
        let e = parse("30").unwrap_err();
        assert!(e.contains("no unit") && e.contains("30m"), "{e}");
        assert!(parse("1500ms").unwrap_err().contains("whole"));
        assert!(parse("1.5s").unwrap_err().contains("whole"));
        assert!(parse("soon").is_err());
        assert!(parse("").is_err());
        assert!(parse("-5m").is_err());
    }

    #[test]
    fn bounds_are_the_servers_business() {
        // > 24 h parses; the server answers `invalid_ttl` (exit 2) with
        // the workspace's own limit, which the CLI cannot know. Zero and
        // negative are never a lease.
        assert!(parse("0s").unwrap_err().contains("at least 1s"));
        assert!(parse("-5m").unwrap_err().contains("at least 1s"));
        assert_eq!(parse("48h"), Ok(172_800));
    }
}

#[cfg(test)]
mod fuzz {
    use proptest::prelude::*;

    proptest! {
        /// Any text: a number of seconds or a message, never a panic; and a
        /// bare number is always refused.
        #[test]
        fn duration_parser_never_panics(s in "\\PC{0,32}") {
            match super::parse(&s) {
                Ok(_) => prop_assert!(!s.trim().bytes().all(|b| b.is_ascii_digit())),
                Err(e) => prop_assert!(!e.is_empty()),
            }
        }

        #[test]
        fn units_scale(n in 1u64..100_000) {
            prop_assert_eq!(super::parse(&format!("{n}s")), Ok(n));
            prop_assert_eq!(super::parse(&format!("{n}m")), Ok(n * 60));
        }
    }
}
