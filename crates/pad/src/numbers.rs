//! Numbers on the command line (`--epoch 3`, `--lease-id 42`, `--count 4`):
//! one parser whose refusals are sentences about what was typed, not the
//! words of Rust's integer parser ("invalid digit found in string") or of
//! clap's range check ("0 is not in 1..=4294967295").
//!
//! clap puts the flag in front of a refusal (`invalid value 'abc' for
//! '--epoch <N>': …`), so these messages need not repeat it.

use std::fmt::Display;

/// A whole number that fits `T`: `--lease-id 42`, `--epoch 3`.
pub fn whole<T>(s: &str) -> Result<T, String>
where
    T: TryFrom<i128> + Display,
{
    let n = s.trim().parse::<i128>().map_err(|_| not_whole(s))?;
    T::try_from(n)
        .map_err(|_| if n < 0 { format!("`{s}` must not be negative") } else { format!("`{s}` is too large") })
}

/// A whole number of at least 1: a count, a size, minutes of a TTL.
pub fn positive<T>(s: &str) -> Result<T, String>
where
    T: TryFrom<i128> + Display,
{
    match s.trim().parse::<i128>() {
        Ok(n) if n < 1 => Err(format!("must be at least 1; got {n}")),
        _ => whole(s),
    }
}

/// `--ttl-minutes 0..=59`-like bounds, said as a sentence.
pub fn within<T>(s: &str, low: i128, high: i128) -> Result<T, String>
where
    T: TryFrom<i128> + Display,
{
    let n = s.trim().parse::<i128>().map_err(|_| not_whole(s))?;
    if n < low || n > high {
        return Err(format!("must be from {low} to {high}; got {n}"));
    }
    whole(s)
}

fn not_whole(s: &str) -> String {
    if s.trim().is_empty() {
        "a number is needed here, like 3".to_string()
    } else {
        format!("`{s}` is not a whole number")
    }
}

/// clap's own refusal of a number, reworded: for flags still on clap's
/// integer parsers (`value_parser!(u32).range(1..)` or a plain `i64`), whose
/// reasons are Rust's ("invalid digit found in string") or clap's
/// ("0 is not in 1..=4294967295"). `None` when `e` is no such refusal.
pub fn reword_clap_refusal(e: &clap::Error) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if e.kind() != ErrorKind::ValueValidation {
        return None;
    }
    let ContextValue::String(value) = e.get(ContextKind::InvalidValue)? else { return None };
    let reason = std::error::Error::source(e)?;
    let said = reason.to_string();
    let sentence = if let Some(refused) = reason.downcast_ref::<std::num::ParseIntError>() {
        match refused.kind() {
            std::num::IntErrorKind::PosOverflow => format!("`{value}` is too large"),
            std::num::IntErrorKind::NegOverflow => format!("`{value}` is too small"),
            _ if value.trim().starts_with('-') && value.trim()[1..].bytes().all(|b| b.is_ascii_digit()) => {
                format!("`{value}` must not be negative")
            }
            _ => not_whole(value),
        }
    } else {
        // clap: "{value} is not in {low}..={high}" (or "{low}..").
        let range = said.strip_prefix(&format!("{value} is not in "))?;
        let (low, high) = range.split_once("..")?;
        let high = high.trim_start_matches('=');
        match (low.parse::<i128>(), high.parse::<i128>()) {
            (Ok(low), Ok(high)) if high >= i128::from(u32::MAX) => format!("must be at least {low}; got {value}"),
            (Ok(low), Ok(high)) => format!("must be from {low} to {high}; got {value}"),
            (Ok(low), Err(_)) => format!("must be at least {low}; got {value}"),
            _ => return None,
        }
    };
    Some(e.render().to_string().replacen(&said, &sentence, 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_sentences_about_what_was_typed() {
        assert_eq!(whole::<i64>("42"), Ok(42));
        assert_eq!(whole::<i64>("abc").unwrap_err(), "`abc` is not a whole number");
        assert_eq!(whole::<i64>("1.5").unwrap_err(), "`1.5` is not a whole number");
        assert_eq!(whole::<u32>("-1").unwrap_err(), "`-1` must not be negative");
        assert_eq!(whole::<u32>("99999999999").unwrap_err(), "`99999999999` is too large");
        assert_eq!(positive::<u32>("0").unwrap_err(), "must be at least 1; got 0");
        assert_eq!(within::<u64>("60", 0, 59).unwrap_err(), "must be from 0 to 59; got 60");
        assert_eq!(within::<u64>("59", 0, 59), Ok(59));
    }

    #[test]
    fn clap_refusals_are_reworded() {
        use clap::{Arg, Command, value_parser};
        let cmd = || {
            Command::new("pad")
                .arg(Arg::new("epoch").long("epoch").value_parser(value_parser!(i64)))
                .arg(Arg::new("count").long("count").value_parser(value_parser!(u32).range(1..=32)))
                .arg(Arg::new("ttl").long("ttl-minutes").value_parser(value_parser!(u32).range(1..)))
        };
        let said = |args: &[&str]| {
            let e = cmd().try_get_matches_from(std::iter::once("pad").chain(args.iter().copied())).unwrap_err();
            reword_clap_refusal(&e).unwrap()
        };
        let e = said(&["--epoch", "abc"]);
        assert!(e.contains("`abc` is not a whole number") && e.contains("--epoch") && !e.contains("digit"), "{e}");
        assert!(said(&["--count", "33"]).contains("must be from 1 to 32; got 33"));
        let e = said(&["--ttl-minutes", "0"]);
        assert!(e.contains("--ttl-minutes") && e.contains("must be at least 1") && !e.contains("4294967295"), "{e}");
    }
}
