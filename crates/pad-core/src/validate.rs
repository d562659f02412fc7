//! Validation of text that crosses a boundary (docs/api.md, Limits). Every refusal names
//! the field so a person can act on it.

use serde::Serialize;

use crate::model::{COMMENT_MAX_BYTES, LABEL_MAX, NAME_MAX};

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
    if lines == Lines::Single
        && let Some(c) = invisible_char(value)
    {
        return Err(ValidationError::new(
            field,
            format!("contains {}, an invisible or bidirectional control character", describe(c)),
        ));
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

/// Characters that draw nothing, or reorder what is drawn around them:
/// every format character (Unicode category Cf: zero-width spaces and
/// joiners, bidirectional marks, embeddings, overrides and isolates, the
/// byte-order mark, tag characters), the line and paragraph separators, and
/// the fillers that render as blanks. In a one-line field (a holder, label,
/// title, name) they can make two different values look the same, or make
/// a log line read backwards, so they are refused there (docs/api.md,
/// "Text"). Bodies and comments keep them: real right-to-left text uses them.
pub fn is_invisible(c: char) -> bool {
    matches!(
        c as u32,
        0x00AD
            | 0x034F
            | 0x0600..=0x0605
            | 0x061C
            | 0x06DD
            | 0x070F
            | 0x0890..=0x0891
            | 0x08E2
            | 0x115F..=0x1160
            | 0x180E
            | 0x200B..=0x200F
            | 0x2028..=0x202E
            | 0x2060..=0x206F
            | 0x3164
            | 0xFEFF
            | 0xFFA0
            | 0xFFF9..=0xFFFB
            | 0x110BD
            | 0x110CD
            | 0x13430..=0x1343F
            | 0x1BCA0..=0x1BCA3
            | 0x1D173..=0x1D17A
            | 0xE0001
            | 0xE0020..=0xE007F
    )
}

/// The first invisible character of `value` (see [`is_invisible`]), except a
/// zero-width joiner between two pictographs, which only glues an emoji
/// sequence (a family, a profession) into one picture and disguises nothing.
pub fn invisible_char(value: &str) -> Option<char> {
    let chars: Vec<char> = value.chars().collect();
    chars.iter().enumerate().find_map(|(i, &c)| {
        let emoji_joiner = c == '\u{200D}'
            && i > 0
            && chars.get(i - 1).is_some_and(|&p| is_pictograph(p) || p == '\u{FE0F}')
            && chars.get(i + 1).is_some_and(|&n| is_pictograph(n));
        (is_invisible(c) && !emoji_joiner).then_some(c)
    })
}

/// Emoji blocks, broadly: enough to recognise the two sides of a joiner.
fn is_pictograph(c: char) -> bool {
    matches!(c as u32, 0x2600..=0x27BF | 0x2B00..=0x2BFF | 0x1F000..=0x1FAFF)
}

/// `U+202E RIGHT-TO-LEFT OVERRIDE`: the code point, and its name when it is
/// one of the usual suspects.
fn describe(c: char) -> String {
    let name = match c as u32 {
        0x00AD => "SOFT HYPHEN",
        0x034F => "COMBINING GRAPHEME JOINER",
        0x061C => "ARABIC LETTER MARK",
        0x115F => "HANGUL CHOSEONG FILLER",
        0x1160 => "HANGUL JUNGSEONG FILLER",
        0x180E => "MONGOLIAN VOWEL SEPARATOR",
        0x200B => "ZERO WIDTH SPACE",
        0x200C => "ZERO WIDTH NON-JOINER",
        0x200D => "ZERO WIDTH JOINER",
        0x200E => "LEFT-TO-RIGHT MARK",
        0x200F => "RIGHT-TO-LEFT MARK",
        0x2028 => "LINE SEPARATOR",
        0x2029 => "PARAGRAPH SEPARATOR",
        0x202A => "LEFT-TO-RIGHT EMBEDDING",
        0x202B => "RIGHT-TO-LEFT EMBEDDING",
        0x202C => "POP DIRECTIONAL FORMATTING",
        0x202D => "LEFT-TO-RIGHT OVERRIDE",
        0x202E => "RIGHT-TO-LEFT OVERRIDE",
        0x2060 => "WORD JOINER",
        0x2061 => "FUNCTION APPLICATION",
        0x2062 => "INVISIBLE TIMES",
        0x2063 => "INVISIBLE SEPARATOR",
        0x2064 => "INVISIBLE PLUS",
        0x2066 => "LEFT-TO-RIGHT ISOLATE",
        0x2067 => "RIGHT-TO-LEFT ISOLATE",
        0x2068 => "FIRST STRONG ISOLATE",
        0x2069 => "POP DIRECTIONAL ISOLATE",
        0x3164 => "HANGUL FILLER",
        0xFEFF => "ZERO WIDTH NO-BREAK SPACE (byte-order mark)",
        0xFFA0 => "HALFWIDTH HANGUL FILLER",
        0xE0001 => "LANGUAGE TAG",
        0xE0020..=0xE007F => "TAG CHARACTER",
        _ => "a format character",
    };
    format!("U+{:04X} {name}", c as u32)
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

// --- names and labels (docs/api.md, Limits) ---

/// A workspace slug: `^[a-z0-9][a-z0-9-]{0,62}$`.
pub fn validate_slug(field: &str, s: &str) -> Result<(), ValidationError> {
    let mut chars = s.chars();
    let ok = chars.next().is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && s.len() <= 63;
    if ok {
        Ok(())
    } else {
        Err(ValidationError::new(
            field,
            format!("{s:?} is not a slug (lower-case letters, digits and '-', 1-63 characters, not starting with '-')"),
        ))
    }
}

/// A kind's ref prefix: `^[A-Z][A-Z0-9]{0,9}$`.
pub fn validate_prefix(field: &str, s: &str) -> Result<(), ValidationError> {
    let mut chars = s.chars();
    let ok = chars.next().is_some_and(|c| c.is_ascii_uppercase())
        && chars.all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
        && s.len() <= 10;
    if ok {
        Ok(())
    } else {
        Err(ValidationError::new(
            field,
            format!("{s:?} is not a prefix (an upper-case letter, then up to 9 upper-case letters or digits)"),
        ))
    }
}

/// A kind's name: lower-case, like a slug but at most 32 characters.
pub fn validate_kind_name(field: &str, s: &str) -> Result<(), ValidationError> {
    validate_slug(field, s)?;
    if s.len() > 32 { Err(ValidationError::new(field, "must be at most 32 characters")) } else { Ok(()) }
}

/// A comma is refused: everywhere a list of labels is written as text (CLI
/// flags, the list filter, the web form) a comma separates two labels, so a
/// label holding one could be written but never found (README.md, "Lists of
/// values").
pub fn validate_label(field: &str, s: &str) -> Result<(), ValidationError> {
    text(field, s, 1, LABEL_MAX, Lines::Single)?;
    if s.contains(',') {
        return Err(ValidationError::new(
            field,
            format!("{s:?} contains a comma, which separates labels; use two labels or another character"),
        ));
    }
    Ok(())
}

/// Holders and session ids: free labels of 1-200 characters on one line.
pub fn validate_name(field: &str, s: &str) -> Result<(), ValidationError> {
    text(field, s, 1, NAME_MAX, Lines::Single)
}

/// A comment: markdown of at most 64 KiB, not blank.
pub fn validate_comment(text: &str) -> Result<(), ValidationError> {
    body("body", text, COMMENT_MAX_BYTES)?;
    if text.trim().is_empty() { Err(ValidationError::new("body", "must not be empty")) } else { Ok(()) }
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
    fn refuses_invisible_and_bidi_characters_in_one_line_fields_naming_them() {
        let e = text("title", "fix \u{202E}gnp.exe", 1, 100, Lines::Single).unwrap_err();
        assert_eq!(e.field, "title");
        assert_eq!(
            e.to_string(),
            "title: contains U+202E RIGHT-TO-LEFT OVERRIDE, an invisible or bidirectional control character"
        );
        for c in [
            '\u{200B}',
            '\u{200C}',
            '\u{200D}',
            '\u{200E}',
            '\u{200F}',
            '\u{2028}',
            '\u{2029}',
            '\u{202A}',
            '\u{202D}',
            '\u{2060}',
            '\u{2064}',
            '\u{2066}',
            '\u{2069}',
            '\u{FEFF}',
            '\u{AD}',
            '\u{3164}',
            '\u{E0041}',
        ] {
            let v = format!("worker{c}1");
            let e = text("holder", &v, 1, 200, Lines::Single).unwrap_err();
            assert!(e.message.contains(&format!("U+{:04X}", c as u32)), "{c:?}: {e}");
            // Bodies keep them: right-to-left text needs its marks.
            assert!(text("body", &v, 0, 200, Lines::Multi).is_ok(), "{c:?}");
        }
        assert!(email("email", "ow\u{200B}ner@localhost").is_err());
        // Visible text of any script passes, and an emoji sequence keeps its joiner.
        for ok in ["שלום עולם", "مرحبا", "日本語", "Zoë", "👩\u{200D}💻 ship it", "❤\u{FE0F}\u{200D}🔥"]
        {
            assert!(text("title", ok, 1, 100, Lines::Single).is_ok(), "{ok}");
        }
        assert!(text("title", "a\u{200D}b", 1, 100, Lines::Single).is_err(), "a joiner between letters");
        assert!(text("title", "\u{200D}👩", 1, 100, Lines::Single).is_err(), "a joiner at the start");
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
