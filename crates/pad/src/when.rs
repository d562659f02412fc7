//! `--not-before 2h | 2026-12-03 | 2026-12-03T09:00:00Z` (README.md, "A tour in
//! two terminals"; docs/leases.md L16): a duration counts from now on this
//! machine's clock, a bare date is that day at 00:00 UTC, and anything else
//! must be a full RFC 3339 time. A bare number is refused, as for `--ttl`.

use chrono::{DateTime, NaiveDate, Utc};

const FORMS: &str = "a duration from now (2h, 30m), a date (2026-12-03, meaning 00:00 UTC) \
                     or an RFC 3339 time (2026-12-03T09:00:00Z)";

/// clap's value parser for `--not-before`.
pub fn parse(s: &str) -> Result<DateTime<Utc>, String> {
    parse_at(s, Utc::now())
}

fn parse_at(s: &str, now: DateTime<Utc>) -> Result<DateTime<Utc>, String> {
    let s = s.trim();
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Ok(t.with_timezone(&Utc));
    }
    if let Ok(day) = NaiveDate::parse_from_str(s, "%Y-%m-%d") {
        return Ok(day.and_hms_opt(0, 0, 0).expect("midnight exists").and_utc());
    }
    let starts_with_digit = s.bytes().next().is_some_and(|b| b.is_ascii_digit());
    let bare_number = s.bytes().all(|b| b.is_ascii_digit());
    if starts_with_digit
        && !bare_number
        && !s.contains('-')
        && let Ok(d) = humantime::parse_duration(s)
    {
        return chrono::Duration::from_std(d)
            .ok()
            .and_then(|d| now.checked_add_signed(d))
            .ok_or_else(|| format!("`{s}` is too far ahead"));
    }
    Err(format!("`{s}` is not a time: give {FORMS}"))
}

#[cfg(test)]
mod tests {
    use super::parse_at;
    use chrono::{DateTime, Utc};

    fn now() -> DateTime<Utc> {
        "2026-12-01T08:00:00Z".parse().unwrap()
    }

    #[test]
    fn durations_count_from_now() {
        assert_eq!(parse_at("2h", now()).unwrap().to_rfc3339(), "2026-12-01T10:00:00+00:00");
        assert_eq!(parse_at("30m", now()).unwrap().to_rfc3339(), "2026-12-01T08:30:00+00:00");
        assert_eq!(parse_at("1h30m", now()).unwrap().to_rfc3339(), "2026-12-01T09:30:00+00:00");
    }

    #[test]
    fn dates_are_midnight_utc_and_times_keep_their_offset() {
        assert_eq!(parse_at("2026-12-03", now()).unwrap().to_rfc3339(), "2026-12-03T00:00:00+00:00");
        assert_eq!(parse_at("2026-12-03T09:00:00+02:00", now()).unwrap().to_rfc3339(), "2026-12-03T07:00:00+00:00");
    }

    #[test]
    fn bare_numbers_and_junk_say_what_to_type() {
        for bad in ["30", "soon", "", "2026-13-01", "-2h", "2026-12-03 09:00"] {
            let e = parse_at(bad, now()).unwrap_err();
            assert!(e.contains("2h") && e.contains("2026-12-03") && e.contains("UTC"), "{bad}: {e}");
        }
    }
}
