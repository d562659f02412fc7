//! Yes-or-no settings given in the environment (`PAD_WEBHOOK_ALLOW_PRIVATE`,
//! docs/webhooks.md): one reading of them, so every such setting takes the
//! same spellings and refuses the same way.

/// `1`, `true`, `yes`, `on` are yes; `0`, `false`, `no`, `off`, empty or
/// unset are no (any case, surrounding spaces ignored). Anything else is an
/// error naming the setting: a typo in a safety switch must not quietly
/// pick one side.
pub fn parse(name: &str, value: Option<&str>) -> Result<bool, String> {
    let Some(value) = value else { return Ok(false) };
    match value.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "" | "0" | "false" | "no" | "off" => Ok(false),
        _ => Err(format!(
            "{name}={value:?} is not yes or no: give 1, true, yes or on to turn it on, \
             0, false, no or off (or leave it unset) to leave it off"
        )),
    }
}

/// [`parse`] of the process's environment variable `name`.
pub fn from_env(name: &str) -> Result<bool, String> {
    match std::env::var(name) {
        Ok(v) => parse(name, Some(&v)),
        Err(std::env::VarError::NotPresent) => Ok(false),
        Err(std::env::VarError::NotUnicode(v)) => parse(name, Some(&v.to_string_lossy())),
    }
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn yes_no_and_the_rest() {
        for yes in ["1", "true", "TRUE", "Yes", "on", " on\n"] {
            assert_eq!(parse("X", Some(yes)), Ok(true), "{yes:?}");
        }
        for no in [None, Some(""), Some("0"), Some("False"), Some("no"), Some("OFF")] {
            assert_eq!(parse("X", no), Ok(false), "{no:?}");
        }
        for bad in ["2", "y", "enabled", "on!"] {
            let e = parse("PAD_X", Some(bad)).unwrap_err();
            assert!(e.starts_with(&format!("PAD_X={bad:?} is not yes or no")), "{e}");
        }
    }
}
