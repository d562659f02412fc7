//! Rendering: JSON or small aligned tables on stdout, durations and times in
//! words. Renderers return `String`s so they can be tested without a terminal.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicU64, Ordering};

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;

use crate::error::CliError;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    #[default]
    Table,
    Json,
}

/// Writes to stdout. A reader that went away (`| head`) ends the command
/// quietly instead of panicking like `print!` would.
pub fn print(text: &str) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}

/// Lines that could not be written to stderr since the last one that could.
static DROPPED: AtomicU64 = AtomicU64::new(0);

/// Writes `text` to stderr and never fails or panics, unlike `eprintln!`
/// (docs/operations.md, "When the log cannot be written"): when stderr
/// cannot be written (a full disk under the file it is redirected to, a
/// closed pipe) the text is dropped and counted, and the next write that
/// gets through first says how many were lost.
pub fn to_stderr(text: &[u8]) {
    let mut err = std::io::stderr().lock();
    let dropped = DROPPED.swap(0, Ordering::Relaxed);
    if dropped > 0 {
        let note = format!("pad: {dropped} earlier log line(s) could not be written to stderr and were dropped\n");
        if err.write_all(note.as_bytes()).is_err() {
            DROPPED.fetch_add(dropped + 1, Ordering::Relaxed);
            return;
        }
    }
    if err.write_all(text).is_err() {
        DROPPED.fetch_add(1, Ordering::Relaxed);
    }
}

/// One line on stderr, through `to_stderr`: an `eprintln!` that cannot panic.
pub fn say(line: &str) {
    to_stderr(format!("{line}\n").as_bytes());
}

/// stderr as an `io::Write` that always succeeds (`to_stderr`): the
/// server's log writer, so a failed log write never reaches a request.
pub struct Stderr;

impl Write for Stderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        to_stderr(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

pub fn print_json<T: Serialize + ?Sized>(value: &T) -> Result<(), CliError> {
    let mut text = serde_json::to_string_pretty(value).map_err(|e| CliError::internal(e.to_string()))?;
    text.push('\n');
    print(&text)
}

/// Colour honours `NO_COLOR` (wins), then `CLICOLOR_FORCE` (colour even
/// into a pipe), and is otherwise on only when stdout is a terminal.
pub fn colour_enabled() -> bool {
    let set = |name: &str| std::env::var_os(name).is_some_and(|v| !v.is_empty() && v != "0");
    !set("NO_COLOR") && (set("CLICOLOR_FORCE") || std::io::stdout().is_terminal())
}

/// Tables for scripts (README.md, "Tables for people and scripts"): into a pipe, rows are plain
/// TAB-separated fields with no header, marker or colour, and times are
/// RFC 3339. Decided once by `main`; renderers called elsewhere (unit
/// tests) get the terminal form.
static PLAIN: std::sync::OnceLock<bool> = std::sync::OnceLock::new();

/// stdout is not a terminal and `CLICOLOR_FORCE` does not ask for the
/// terminal's form anyway.
pub fn init_plain() {
    let force = std::env::var_os("CLICOLOR_FORCE").is_some_and(|v| !v.is_empty() && v != "0");
    let _ = PLAIN.set(!std::io::stdout().is_terminal() && !force);
}

pub fn plain() -> bool {
    PLAIN.get().copied().unwrap_or(false)
}

/// The two ways the CLI shows a time to people (README.md, "Times"), and
/// the only ones: JSON output keeps the API's RFC 3339 times untouched.
///
/// A time in a table: `5m ago`, `in 3m` (`3d ago`, then the date, for old
/// ones) for people; RFC 3339 for scripts.
pub fn when(t: DateTime<Utc>, now: DateTime<Utc>) -> String {
    if plain() {
        return timestamp(t);
    }
    if seconds_until(t, now) <= -7 * 86_400 {
        return t.format("%Y-%m-%d").to_string();
    }
    relative(t, now)
}

/// A time in a sentence or a detail line, where exactness matters: the UTC
/// time, then how far it is from now, `2026-12-02T07:00:00Z (in 3m)`,
/// `… (5m ago)`, `… (just now)`.
pub fn at(t: DateTime<Utc>, now: DateTime<Utc>) -> String {
    format!("{} ({})", timestamp(t), relative(t, now))
}

/// `in 3m`, `just now`, `5m ago`, `3d ago`.
fn relative(t: DateTime<Utc>, now: DateTime<Utc>) -> String {
    let ahead = seconds_until(t, now);
    match ahead {
        1.. => format!("in {}", in_words(ahead)),
        _ if -ahead < 60 => "just now".to_string(),
        _ if -ahead >= 86_400 => format!("{}d ago", -ahead / 86_400),
        _ => format!("{} ago", in_words(-ahead)),
    }
}

pub fn cyan(text: &str, colour: bool) -> String {
    if colour { format!("\x1b[36m{text}\x1b[0m") } else { text.to_string() }
}

/// Columns padded to their widest cell; the last column is not padded, so
/// lines carry no trailing spaces. Cells may hold colour escapes.
pub fn table<S: AsRef<str>>(header: &[&str], rows: &[Vec<S>]) -> String {
    if plain() {
        return tab_separated(rows);
    }
    let mut widths: Vec<usize> = header.iter().map(|h| visible_width(h)).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(visible_width(cell.as_ref()));
        }
    }
    let mut out = String::new();
    let mut line = |cells: &mut dyn Iterator<Item = &str>| {
        let cells: Vec<&str> = cells.collect();
        for (i, cell) in cells.iter().enumerate() {
            out.push_str(cell);
            if i + 1 < cells.len() {
                out.push_str(&" ".repeat(widths[i] - visible_width(cell) + 2));
            }
        }
        out.push('\n');
    };
    line(&mut header.iter().copied());
    for row in rows {
        line(&mut row.iter().map(AsRef::as_ref));
    }
    out
}

/// One line per row, fields joined by TAB, colour and gutter padding
/// dropped, a TAB or newline inside a field made a space so fields stay put.
fn tab_separated<S: AsRef<str>>(rows: &[Vec<S>]) -> String {
    let mut out = String::new();
    for row in rows {
        let cells: Vec<String> =
            row.iter().map(|c| strip_escapes(c.as_ref()).trim().replace(['\t', '\n', '\r'], " ")).collect();
        out.push_str(&cells.join("\t"));
        out.push('\n');
    }
    out
}

fn strip_escapes(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            chars.by_ref().find(|&c| c == 'm');
        } else {
            out.push(c);
        }
    }
    out
}

/// The terminal's width in columns when stdout is one (`COLUMNS` wins, as
/// for other tools), else `None`: piped output is never cut.
pub fn terminal_width() -> Option<usize> {
    if !std::io::stdout().is_terminal() {
        return None;
    }
    if let Some(n) = std::env::var("COLUMNS").ok().and_then(|c| c.parse::<usize>().ok()).filter(|n| *n > 0) {
        return Some(n);
    }
    // SAFETY: TIOCGWINSZ fills a winsize we own.
    let mut size: libc::winsize = unsafe { std::mem::zeroed() };
    let ok = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut size) } == 0;
    (ok && size.ws_col > 0).then_some(usize::from(size.ws_col))
}

/// Each line cut to `width` visible characters, ending in `…` where cut,
/// so a long title never wraps a table row. Colour escapes are kept.
pub fn fit(text: &str, width: Option<usize>) -> String {
    let Some(width) = width.filter(|w| *w > 1) else { return text.to_string() };
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let (body, newline) = line.strip_suffix('\n').map_or((line, ""), |b| (b, "\n"));
        if visible_width(body) <= width {
            out.push_str(line);
            continue;
        }
        let mut shown = 0;
        let mut chars = body.chars();
        while let Some(c) = chars.next() {
            if c == '\x1b' {
                out.push(c);
                for e in chars.by_ref() {
                    out.push(e);
                    if e == 'm' {
                        break;
                    }
                }
            } else if shown + 1 < width {
                out.push(c);
                shown += 1;
            } else {
                break;
            }
        }
        out.push('…');
        if body.contains('\x1b') {
            out.push_str("\x1b[0m");
        }
        out.push_str(newline);
    }
    out
}

/// Characters a terminal shows: ANSI `ESC [ … m` sequences take no room.
fn visible_width(s: &str) -> usize {
    let mut width = 0;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            chars.by_ref().find(|&c| c == 'm');
        } else {
            width += 1;
        }
    }
    width
}

/// A short duration for people: `45s`, `14m`, `1h30m`. Rounded down, since
/// "expires in 14m" with 14m59s left is the useful reading.
pub fn in_words(seconds: i64) -> String {
    let s = seconds.max(0);
    match (s / 3600, (s % 3600) / 60) {
        (0, 0) => format!("{s}s"),
        (0, m) => format!("{m}m"),
        (h, 0) => format!("{h}h"),
        (h, m) => format!("{h}h{m}m"),
    }
}

/// Whole seconds from `now` until `t`, rounded up like the server's
/// `expires_in_seconds`, so a fresh 15-minute lease reads "15m", not "14m".
pub fn seconds_until(t: DateTime<Utc>, now: DateTime<Utc>) -> i64 {
    let millis = (t - now).num_milliseconds();
    millis.div_euclid(1000) + i64::from(millis.rem_euclid(1000) > 0)
}

pub fn timestamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_for_people_are_exact_with_the_distance_from_now() {
        let now: DateTime<Utc> = "2026-12-02T07:00:00Z".parse().unwrap();
        let t = |s: &str| s.parse::<DateTime<Utc>>().unwrap();
        assert_eq!(at(t("2026-12-02T07:03:00Z"), now), "2026-12-02T07:03:00Z (in 3m)");
        assert_eq!(at(t("2026-12-02T06:55:00Z"), now), "2026-12-02T06:55:00Z (5m ago)");
        assert_eq!(at(t("2026-12-02T06:59:30Z"), now), "2026-12-02T06:59:30Z (just now)");
        assert_eq!(at(t("2026-11-20T07:00:00Z"), now), "2026-11-20T07:00:00Z (12d ago)");
        // A table cell is shorter: relative, then the date once it is old.
        assert_eq!(when(t("2026-12-02T06:55:00Z"), now), "5m ago");
        assert_eq!(when(t("2026-11-29T07:00:00Z"), now), "3d ago");
        assert_eq!(when(t("2026-11-20T07:00:00Z"), now), "2026-11-20");
        assert_eq!(when(t("2026-12-02T09:00:00Z"), now), "in 2h");
    }

    #[test]
    fn durations_in_words() {
        assert_eq!(in_words(-3), "0s");
        assert_eq!(in_words(45), "45s");
        assert_eq!(in_words(14 * 60 + 59), "14m");
        assert_eq!(in_words(3600), "1h");
        assert_eq!(in_words(5400), "1h30m");
    }

    #[test]
    fn seconds_until_rounds_up() {
        let t = DateTime::from_timestamp(1_000_000, 0).unwrap();
        assert_eq!(seconds_until(t, t - chrono::Duration::milliseconds(899_900)), 900);
        assert_eq!(seconds_until(t, t - chrono::Duration::seconds(900)), 900);
        assert_eq!(seconds_until(t, t + chrono::Duration::milliseconds(1500)), -1);
    }

    #[test]
    fn tables_align_and_ignore_colour() {
        let rows = vec![
            vec![cyan("»", true) + " TASK-1", "open".into(), "A".into()],
            vec!["  BUG-12".into(), "done".into(), "B".into()],
        ];
        let text = table(&["  REF", "STATUS", "TITLE"], &rows);
        let plain: Vec<String> = text.lines().map(|l| l.replace("\x1b[36m", "").replace("\x1b[0m", "")).collect();
        assert_eq!(plain, ["  REF     STATUS  TITLE", "» TASK-1  open    A", "  BUG-12  done    B"]);
    }

    #[test]
    fn times_read_relative_on_a_terminal() {
        let now = DateTime::from_timestamp(1_000_000_000, 0).unwrap();
        let at = |secs: i64| when(now + chrono::Duration::seconds(secs), now);
        assert_eq!(at(180), "in 3m");
        assert_eq!(at(-20), "just now");
        assert_eq!(at(-300), "5m ago");
        assert_eq!(at(-3 * 86_400), "3d ago");
        assert_eq!(at(-30 * 86_400), "2001-08-10");
        assert_eq!(strip_escapes(&cyan("»", true)), "»");
    }

    #[test]
    fn colour_is_plain_when_off() {
        assert_eq!(cyan("»", false), "»");
    }
}

#[cfg(test)]
mod fit_tests {
    use super::fit;

    #[test]
    fn long_lines_are_cut_with_an_ellipsis_and_keep_colour() {
        assert_eq!(fit("abcdef\nab\n", Some(4)), "abc…\nab\n");
        assert_eq!(fit("abcdef\n", None), "abcdef\n");
        assert_eq!(fit("\x1b[31mab\x1b[0mcdef\n", Some(4)), "\x1b[31mab\x1b[0mc…\x1b[0m\n");
    }
}
