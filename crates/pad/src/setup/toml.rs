//! pad's `[mcp_servers.pad]` table in a Codex `config.toml`, edited with
//! toml_edit so comments, order and formatting outside it are kept. An
//! `mcp_servers` table that setup had to add is implicit (no header of its
//! own), which is how removal knows to take it out again.

use toml_edit::{Array, DocumentMut, Item, Table, value};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    Absent,
    Current,
    Differs(String),
}

pub fn parse(text: &str) -> Result<DocumentMut, String> {
    let doc: DocumentMut =
        text.parse().map_err(|e: toml_edit::TomlError| format!("not valid TOML ({})", e.message()))?;
    match doc.get("mcp_servers") {
        None => {}
        Some(Item::Table(t)) if t.get("pad").is_some_and(|p| !p.is_table()) => {
            return Err("`mcp_servers.pad` is not a table".into());
        }
        Some(Item::Table(_)) => {}
        Some(_) => return Err("`mcp_servers` is not a table (pad setup edits only [mcp_servers.…] tables)".into()),
    }
    Ok(doc)
}

fn pad_table<'d>(doc: &'d DocumentMut, name: &str) -> Option<&'d Table> {
    doc.get("mcp_servers")?.as_table()?.get(name)?.as_table()
}

fn args_of(t: &Table) -> Option<Vec<String>> {
    let a = t.get("args")?.as_array()?;
    a.iter().map(|v| v.as_str().map(str::to_string)).collect()
}

pub fn find(doc: &DocumentMut, name: &str, command: &str, args: &[String]) -> Found {
    let Some(t) = pad_table(doc, name) else { return Found::Absent };
    let current = t.get("command").and_then(|c| c.as_str()) == Some(command) && args_of(t).as_deref() == Some(args);
    if current { Found::Current } else { Found::Differs(t.to_string().trim().to_string()) }
}

/// pad's table alone, as setup appends it.
fn table(name: &str, command: &str, args: &[String]) -> String {
    edit(DocumentMut::new(), name, command, args)
}

/// Sets pad's table in the document with toml_edit.
fn edit(mut doc: DocumentMut, name: &str, command: &str, args: &[String]) -> String {
    let servers = doc.entry("mcp_servers").or_insert_with(|| {
        let mut t = Table::new();
        t.set_implicit(true);
        Item::Table(t)
    });
    let servers = servers.as_table_mut().expect("checked by parse");
    let pad = servers.entry(name).or_insert_with(|| Item::Table(Table::new()));
    let pad = pad.as_table_mut().expect("checked by parse");
    pad.insert("command", value(command));
    pad.insert("args", value(args.iter().map(String::as_str).collect::<Array>()));
    doc.to_string()
}

/// `text` with pad's table present and current. A missing table is
/// appended after one newline (so removal can give back a file that had no
/// final newline); a stale one is edited where it stands.
pub fn install(text: &str, doc: DocumentMut, name: &str, command: &str, args: &[String]) -> String {
    match find(&doc, name, command, args) {
        Found::Current => text.to_string(),
        Found::Absent if text.is_empty() => table(name, command, args),
        Found::Absent => format!("{text}\n{}", table(name, command, args)),
        Found::Differs(_) => edit(doc, name, command, args),
    }
}

/// `text` without pad's table; `None` when nothing else is left.
pub fn remove(text: &str, mut doc: DocumentMut, name: &str, command: &str, args: &[String]) -> Option<String> {
    if let Some(rest) = text.strip_suffix(&table(name, command, args)) {
        return match rest {
            "" => None,
            rest => Some(rest.strip_suffix('\n').unwrap_or(rest).to_string()),
        };
    }
    if let Some(Item::Table(servers)) = doc.get_mut("mcp_servers") {
        if servers.remove(name).is_none() {
            return Some(text.to_string());
        }
        if servers.is_empty() && servers.is_implicit() {
            doc.remove("mcp_servers");
        }
    }
    let left = doc.to_string();
    if left.trim().is_empty() { None } else { Some(left) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args() -> Vec<String> {
        vec!["mcp".into(), "--agent".into(), "codex".into()]
    }

    fn round_trip(before: &str) -> String {
        let after = install(before, parse(before).unwrap(), "pad", "pad", &args());
        let doc = parse(&after).unwrap_or_else(|e| panic!("{e}:\n{after}"));
        assert_eq!(find(&doc, "pad", "pad", &args()), Found::Current, "{after}");
        assert_eq!(install(&after, doc, "pad", "pad", &args()), after, "second install changes nothing");
        let restored = remove(&after, parse(&after).unwrap(), "pad", "pad", &args());
        assert_eq!(restored.as_deref().unwrap_or(""), before, "after install:\n{after}");
        after
    }

    #[test]
    fn install_then_remove_gives_back_every_byte() {
        round_trip("model = \"o3\"");
        round_trip("# my settings\nmodel = \"o3\"   # trailing comment\n\n[profiles.fast]\nmodel = \"mini\"\n");
        round_trip("[mcp_servers.other]\ncommand = \"npx\"\nargs = [\"-y\", \"x\"] # keep\n\n# end\n");
        round_trip("[mcp_servers]\n");
        round_trip("[mcp_servers]\n\n[mcp_servers.other]\ncommand = \"x\"\n");
    }

    #[test]
    fn the_table_reads_like_codex_documents_it() {
        let after = round_trip("# mine\n");
        assert!(
            after.contains("[mcp_servers.pad]\ncommand = \"pad\"\nargs = [\"mcp\", \"--agent\", \"codex\"]\n"),
            "{after}"
        );
        assert!(!after.contains("[mcp_servers]\n"), "{after}");
    }

    #[test]
    fn a_stale_table_is_updated() {
        let before = "[mcp_servers.pad]\ncommand = \"/old/pad\"\nargs = [\"mcp\"]\nenv = { X = \"1\" }\n";
        let doc = parse(before).unwrap();
        assert!(matches!(find(&doc, "pad", "pad", &args()), Found::Differs(_)));
        let after = install(before, doc, "pad", "pad", &args());
        assert_eq!(find(&parse(&after).unwrap(), "pad", "pad", &args()), Found::Current);
        assert!(after.contains("env = { X = \"1\" }"), "{after}");
        let removed = remove(&after, parse(&after).unwrap(), "pad", "pad", &args());
        assert_eq!(removed, None, "{after}");

        let other = "[mcp_servers.x]\ncommand = \"x\"\n\n[mcp_servers.pad]\ncommand = \"old\"\n\n[z]\na = 1\n";
        let after = install(other, parse(other).unwrap(), "pad", "pad", &args());
        let removed = remove(&after, parse(&after).unwrap(), "pad", "pad", &args()).unwrap();
        assert_eq!(removed, "[mcp_servers.x]\ncommand = \"x\"\n\n[z]\na = 1\n");
    }

    #[test]
    fn a_file_holding_only_pad_is_deleted_on_removal() {
        let after = install("", parse("").unwrap(), "pad", "pad", &args());
        assert_eq!(remove(&after, parse(&after).unwrap(), "pad", "pad", &args()), None);
    }

    #[test]
    fn bad_documents_are_refused() {
        assert!(parse("model = ").unwrap_err().contains("not valid TOML"));
        assert!(parse("mcp_servers = 3").unwrap_err().contains("not a table"));
        assert!(parse("[mcp_servers]\npad = 1").unwrap_err().contains("not a table"));
    }
}
