//! The instruction section setup puts in an agent's markdown file
//! (CLAUDE.md, AGENTS.md, GEMINI.md) between two marker lines, and the
//! Cursor rule file that carries the same text. Appending adds one newline
//! before the section when the file has text; removal takes that newline
//! back, so the file is byte-identical to what it was.

pub const BEGIN: &str = "<!-- BEGIN pad (written by `pad setup`; `pad setup <agent> --remove` takes it out) -->";
pub const END: &str = "<!-- END pad -->";

/// What an agent must know to work under pad's leases. Tool names first,
/// the CLI spelling in brackets, for agents that only have a shell.
const BODY: &str = "\
## Work tracking with pad

This project's work items live in pad, whose items are taken with expiring **leases**. Use the
`pad` MCP server's tools (the CLI spelling is in brackets).

- **Start** every session with `pad_prime` [`pad prime`]: who you are, the leases you hold, the
  ready work.
- **Take work** with `pad_claim_next` and `autonomous: true` [`pad item claim-next --autonomous`]:
  it claims the best ready item atomically and skips items labelled `needs-human`. Use
  `pad_item_claim` for a named item. Leave `holder` out: your MCP session has its own, so no
  other agent session can share your lease.
- **Never work on an item without a live lease.** Keep the `epoch` the claim returns.
- **Heartbeat:** call `pad_item_renew` with that epoch before a third of the TTL is left (the
  default TTL is 15 minutes: renew at least every 5). Its `note` tells the next worker where
  you got to.
- **Finish** with `pad_item_complete` and the epoch: status done and the lease ended, in one
  fenced step [`pad item complete REF --epoch N`].
- **Fail** with `pad_item_fail`, the epoch and a `note` saying what went wrong and what is left
  [`pad item fail REF --epoch N --note TEXT`]: the lease ends, the failure is counted, the item
  is retried later and quarantined (`needs-human`) after repeated failures.
- **`lease_held`:** another worker holds the item (the error names it and says until when). Do
  not wait or retry: take other work with `pad_claim_next`.
- **`lease_lost`:** your lease expired or was broken. Stop working on that item at once and
  write nothing more to it.
- Items labelled `needs-human` are for people. Never claim them; comment if you can help.

CLI exit codes: 0 ok; 2 bad input; 3 configuration; 4 authentication or permission; 5 not
found, or nothing ready for `claim-next`; 7 `lease_held`, `lease_lost` or `update_conflict`
(taken: skip it); 8 server unavailable (retry later).
";

/// The section, markers included, ending in a newline.
pub fn block() -> String {
    format!("{BEGIN}\n{BODY}{END}\n")
}

/// `.cursor/rules/pad.mdc`: the section behind the front matter Cursor
/// reads to apply a rule to every request.
pub fn cursor_rule() -> String {
    format!(
        "---\ndescription: How to take, heartbeat and finish work tracked in pad (leases)\nalwaysApply: true\n---\n{}",
        block()
    )
}

/// The byte range of the section (through the newline after the end
/// marker), if there is one.
fn span(text: &str) -> Result<Option<(usize, usize)>, String> {
    let Some(start) = text.find(BEGIN) else { return Ok(None) };
    let Some(end) = text[start..].find(END).map(|i| start + i + END.len()) else {
        return Err("it has pad's begin marker but no end marker".into());
    };
    let end = if text[end..].starts_with('\n') { end + 1 } else { end };
    Ok(Some((start, end)))
}

/// The section as it stands in `text`.
pub fn find(text: &str) -> Result<Option<&str>, String> {
    Ok(span(text)?.map(|(s, e)| &text[s..e]))
}

/// `text` with the current section: replaced where it is, else appended.
pub fn install(text: Option<&str>) -> String {
    let block = block();
    match text {
        None | Some("") => block,
        Some(t) => match span(t) {
            Ok(Some((s, e))) => format!("{}{block}{}", &t[..s], &t[e..]),
            _ => format!("{t}\n{block}"),
        },
    }
}

/// `text` without the section; `None` when the file held only the section.
pub fn remove(text: &str) -> Option<String> {
    let Ok(Some((s, e))) = span(text) else { return Some(text.to_string()) };
    let before = &text[..s];
    let before = before.strip_suffix('\n').filter(|_| !before.is_empty()).unwrap_or(before);
    let rest = format!("{before}{}", &text[e..]);
    if rest.is_empty() && s == 0 { None } else { Some(rest) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn install_then_remove_gives_back_every_byte() {
        for before in ["# Notes\n\nBe kind.\n", "no newline at the end", "\n", "x\n\n\n", "a\r\nb\r\n"] {
            let after = install(Some(before));
            assert!(after.starts_with(before));
            assert_eq!(install(Some(&after)), after, "second run changes nothing");
            assert_eq!(find(&after).unwrap(), Some(block().as_str()));
            assert_eq!(remove(&after).as_deref(), Some(before), "{after:?}");
        }
        assert_eq!(remove(&install(None)), None, "a file setup created is deleted");
        assert_eq!(remove(&install(Some(""))), None);
    }

    #[test]
    fn an_old_section_is_replaced_where_it_stands() {
        let text = format!("top\n\n{BEGIN}\nold advice\n{END}\nbottom\n");
        let after = install(Some(&text));
        assert_eq!(after, format!("top\n\n{}bottom\n", block()));
    }

    #[test]
    fn a_lost_end_marker_is_refused() {
        assert!(find(&format!("{BEGIN}\nhalf")).is_err());
    }

    #[test]
    fn the_section_covers_what_an_agent_needs() {
        let b = block();
        for needle in [
            "pad_claim_next",
            "autonomous",
            "pad_item_renew",
            "pad_item_complete",
            "pad_item_fail",
            "lease_held",
            "lease_lost",
            "exit codes",
        ] {
            assert!(b.contains(needle), "{needle}");
        }
    }
}
