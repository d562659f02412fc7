//! Validation of text that crosses a boundary (docs/api.md, Limits). Every refusal names
//! the field so a person can act on it.

use serde::Serialize;

/// A field failed validation. `field` is the name the caller used (`title`,
/// `labels[2]`, `holder`), so the message can point at it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[error("{field}: {message}")]
pub struct ValidationError {
    pub field: String,
    pub message: String,
}

impl ValidationError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self { field: field.into(), message: message.into() }
    }
}

/// Whether tab and newline are allowed: yes in bodies and comments, no in
/// one-line fields such as titles and holders.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lines {
    Single,
    Multi,
}

/// Checks length (in characters) and refuses NUL and control characters.
pub fn text(field: &str, value: &str, min: usize, max: usize, lines: Lines) -> Result<(), ValidationError> {
    if let Some(c) =
        value.chars().find(|&c| c.is_control() && !(lines == Lines::Multi && (c == '\n' || c == '\t' || c == '\r')))
    {
        let what = if c == '\0' { "NUL".to_string() } else { format!("U+{:04X}", c as u32) };
        return Err(ValidationError::new(field, format!("must not contain control characters (found {what})")));
    }
    let n = value.chars().count();
    if n < min {
        return Err(if min == 1 {
            ValidationError::new(field, "must not be empty")
        } else {
            ValidationError::new(field, format!("must be at least {min} characters"))
        });
    }
    if n > max {
        return Err(ValidationError::new(field, format!("must be at most {max} characters (got {n})")));
    }
    Ok(())
}

/// Like [`text`] but bounds the size in bytes, for large markdown bodies.
pub fn body(field: &str, value: &str, max_bytes: usize) -> Result<(), ValidationError> {
    if value.len() > max_bytes {
        return Err(ValidationError::new(
            field,
            format!("must be at most {} KiB (got {} bytes)", max_bytes / 1024, value.len()),
        ));
    }
    text(field, value, 0, usize::MAX, Lines::Multi)
}

/// An email address as pad uses it: an identity label, checked for shape only.
pub fn email(field: &str, value: &str) -> Result<(), ValidationError> {
    text(field, value, 3, 254, Lines::Single)?;
    let ok = value
        .split_once('@')
        .is_some_and(|(local, domain)| !local.is_empty() && !domain.is_empty() && !domain.contains('@'))
        && !value.contains(char::is_whitespace);
    if ok { Ok(()) } else { Err(ValidationError::new(field, format!("{value:?} is not an email address"))) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_nul_and_controls_naming_the_field() {
        let e = text("title", "a\0b", 1, 10, Lines::Single).unwrap_err();
        assert_eq!(e.field, "title");
        assert!(e.message.contains("NUL"));
        assert!(text("title", "a\u{1b}b", 1, 10, Lines::Single).is_err());
        assert!(text("title", "a\nb", 1, 10, Lines::Single).is_err());
        assert!(text("body", "a\n\tb", 1, 10, Lines::Multi).is_ok());
        assert!(text("body", "a\u{7}b", 1, 10, Lines::Multi).is_err());
    }

    #[test]
    fn bounds_are_in_characters() {
        assert!(text("t", "ééé", 1, 3, Lines::Single).is_ok());
        assert!(text("t", "éééé", 1, 3, Lines::Single).is_err());
        assert!(text("t", "", 1, 3, Lines::Single).is_err());
    }

    #[test]
    fn emails() {
        assert!(email("email", "a@b").is_ok());
        assert!(email("email", "ab").is_err());
        assert!(email("email", "a@b@c").is_err());
        assert!(email("email", "a b@c").is_err());
    }
}
