//! Adds and removes one server in a JSON `mcpServers` object by splicing
//! text, so every byte outside pad's entry stays as the user wrote it, and
//! removal is the exact inverse of insertion with nothing remembered between
//! the two (docs/agents.md, "What setup writes"):
//!
//! - into an object with members, pad goes first, after a copy of the
//!   whitespace that precedes the current first member, followed by `,`;
//!   taking out a first member deletes from `{` through its comma;
//! - into an empty object `{W}`, pad goes straight after `{`, and taking out
//!   a sole member deletes just `"pad": …`, leaving `{W}`;
//! - an `mcpServers` object pad created itself has whitespace before its
//!   key, which is how removal knows to take the whole object out.
//!
//! The text must already have parsed with serde_json: this scanner records
//! positions and trusts the syntax.

use serde_json::Value;

/// A member of an object: byte offsets into the text.
#[derive(Debug, Clone)]
struct Member {
    key: String,
    key_start: usize,
    value_start: usize,
    value_end: usize,
}

#[derive(Debug, Clone)]
struct Object {
    open: usize,
    members: Vec<Member>,
}

struct Scanner<'a> {
    text: &'a [u8],
    pos: usize,
}

impl<'a> Scanner<'a> {
    fn skip_ws(&mut self) {
        while self.pos < self.text.len() && matches!(self.text[self.pos], b' ' | b'\t' | b'\n' | b'\r') {
            self.pos += 1;
        }
    }

    fn string(&mut self) -> String {
        let start = self.pos;
        self.pos += 1;
        while self.text[self.pos] != b'"' {
            self.pos += if self.text[self.pos] == b'\\' { 2 } else { 1 };
        }
        self.pos += 1;
        let raw = std::str::from_utf8(&self.text[start..self.pos]).unwrap_or("\"\"");
        serde_json::from_str(raw).unwrap_or_default()
    }

    /// Skips a value, returning the object's layout when it is one.
    fn value(&mut self) -> Option<Object> {
        match self.text[self.pos] {
            b'{' => Some(self.object()),
            b'[' => {
                self.pos += 1;
                self.skip_ws();
                if self.text[self.pos] == b']' {
                    self.pos += 1;
                    return None;
                }
                loop {
                    self.skip_ws();
                    self.value();
                    self.skip_ws();
                    let c = self.text[self.pos];
                    self.pos += 1;
                    if c == b']' {
                        return None;
                    }
                }
            }
            b'"' => {
                self.string();
                None
            }
            _ => {
                while self.pos < self.text.len()
                    && !matches!(self.text[self.pos], b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r')
                {
                    self.pos += 1;
                }
                None
            }
        }
    }

    fn object(&mut self) -> Object {
        let open = self.pos;
        self.pos += 1;
        let mut members = Vec::new();
        loop {
            self.skip_ws();
            if self.text[self.pos] == b'}' {
                self.pos += 1;
                return Object { open, members };
            }
            if self.text[self.pos] == b',' {
                self.pos += 1;
                continue;
            }
            let key_start = self.pos;
            let key = self.string();
            self.skip_ws();
            self.pos += 1; // ':'
            self.skip_ws();
            let value_start = self.pos;
            self.value();
            members.push(Member { key, key_start, value_start, value_end: self.pos });
        }
    }

    /// The top-level object, and the layout of its member `key` if that is an object too.
    fn top(text: &'a str, key: &str) -> (Object, Option<Object>) {
        let mut s = Scanner { text: text.as_bytes(), pos: 0 };
        s.skip_ws();
        let top = s.object();
        let inner = top.members.iter().find(|m| m.key == key).and_then(|m| {
            let mut s = Scanner { text: text.as_bytes(), pos: m.value_start };
            s.value()
        });
        (top, inner)
    }
}

/// Where a JSON config stands with respect to pad's entry.
#[derive(Debug, Clone, PartialEq)]
pub enum Found {
    Absent,
    Current,
    Differs(Value),
}

/// The text of a new file holding only pad's entry.
pub fn created(servers_key: &str, name: &str, entry: &str) -> String {
    format!("{{\n  {}: {{\n    {}: {entry}\n  }}\n}}\n", quote(servers_key), quote(name))
}

fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

/// Checks that `text` is a JSON object whose `servers_key` (if present) is an object.
pub fn validate(text: &str, servers_key: &str) -> Result<Value, String> {
    let doc: Value = serde_json::from_str(text).map_err(|e| format!("not valid JSON ({e})"))?;
    let Some(obj) = doc.as_object() else { return Err("the top level is not a JSON object".into()) };
    if obj.get(servers_key).is_some_and(|v| !v.is_object()) {
        return Err(format!("`{servers_key}` is not an object"));
    }
    Ok(doc)
}

pub fn find(doc: &Value, servers_key: &str, name: &str, expected: &Value) -> Found {
    match doc.get(servers_key).and_then(|s| s.get(name)) {
        None => Found::Absent,
        Some(v) if v == expected => Found::Current,
        Some(v) => Found::Differs(v.clone()),
    }
}

/// `text` with pad's entry present and equal to `entry` (compact JSON).
pub fn install(text: &str, servers_key: &str, name: &str, entry: &str) -> String {
    let (top, servers) = Scanner::top(text, servers_key);
    let Some(servers) = servers else {
        // No servers object yet: add one holding pad, shaped so removal can tell it was ours.
        let ws = leading_ws(text, &top);
        let object = match ws.rfind('\n') {
            Some(i) => {
                let indent = &ws[i + 1..];
                let nl = if ws.contains("\r\n") { "\r\n" } else { "\n" };
                format!("{{{nl}{indent}{indent}{}: {entry}{nl}{indent}}}", quote(name))
            }
            None => format!("{{ {}: {entry} }}", quote(name)),
        };
        return insert_member(text, &top, &format!("{}: {object}", quote(servers_key)));
    };
    if let Some(m) = servers.members.iter().find(|m| m.key == name) {
        return format!("{}{entry}{}", &text[..m.value_start], &text[m.value_end..]);
    }
    insert_member(text, &servers, &format!("{}: {entry}", quote(name)))
}

/// `text` without pad's entry; `None` when nothing else was left in a file
/// that holds exactly what setup creates.
pub fn remove(text: &str, servers_key: &str, name: &str, entry_of_created: &str) -> Option<String> {
    if text == created(servers_key, name, entry_of_created) {
        return None;
    }
    let (top, servers) = Scanner::top(text, servers_key);
    let Some(servers) = servers else { return Some(text.to_string()) };
    let Some(index) = servers.members.iter().position(|m| m.key == name) else { return Some(text.to_string()) };
    let ours = servers.members.len() == 1 && servers.members[0].key_start > servers.open + 1;
    if ours {
        let at = top.members.iter().position(|m| m.key == servers_key).expect("found above");
        return Some(remove_member(text, &top, at));
    }
    Some(remove_member(text, &servers, index))
}

/// The whitespace before an object's first member, or "" when it has none.
fn leading_ws<'t>(text: &'t str, obj: &Object) -> &'t str {
    obj.members.first().map_or("", |m| &text[obj.open + 1..m.key_start])
}

fn insert_member(text: &str, obj: &Object, member: &str) -> String {
    let at = obj.open + 1;
    if obj.members.is_empty() {
        format!("{}{member}{}", &text[..at], &text[at..])
    } else {
        format!("{}{}{member},{}", &text[..at], leading_ws(text, obj), &text[at..])
    }
}

fn remove_member(text: &str, obj: &Object, index: usize) -> String {
    let m = &obj.members[index];
    let (from, to) = if obj.members.len() == 1 {
        (m.key_start, m.value_end)
    } else if index == 0 {
        let comma = m.value_end + text[m.value_end..].find(',').expect("a member follows");
        (obj.open + 1, comma + 1)
    } else {
        let prev = &obj.members[index - 1];
        (prev.value_end, m.value_end)
    };
    format!("{}{}", &text[..from], &text[to..])
}

#[cfg(test)]
mod tests {
    use super::*;

    const E: &str = r#"{"command": "pad", "args": ["mcp"]}"#;

    fn round_trip(before: &str) -> String {
        validate(before, "mcpServers").unwrap();
        let after = install(before, "mcpServers", "pad", E);
        let doc = validate(&after, "mcpServers").unwrap_or_else(|e| panic!("{e}:\n{after}"));
        let expected: Value = serde_json::from_str(E).unwrap();
        assert_eq!(find(&doc, "mcpServers", "pad", &expected), Found::Current, "{after}");
        assert_eq!(install(&after, "mcpServers", "pad", E), after, "second install changes nothing");
        let restored = remove(&after, "mcpServers", "pad", E).unwrap();
        assert_eq!(restored, before, "after install:\n{after}");
        after
    }

    #[test]
    fn install_then_remove_gives_back_every_byte() {
        round_trip("{}");
        round_trip("{}\n");
        round_trip("{ }\n");
        round_trip("{\n}\n");
        round_trip("{\"a\":1}");
        round_trip("{\n    \"theme\": \"dark\",\n    \"nested\": {\"x\": [1, {\"y\": \"}\"}]}\n}\n");
        round_trip("{\"mcpServers\": {}}");
        round_trip("{\"mcpServers\": {\n\n}}");
        round_trip(
            "{\n  \"mcpServers\": {\n    \"other\": {\"command\": \"x\", \"args\": [\"a,b\", \"\\\"q\\\"\"]}\n  }\n}",
        );
        round_trip("\r\n{\r\n\t\"k\" : true ,\r\n\t\"mcpServers\" : { \"o\" : null }\r\n}\r\n");
    }

    #[test]
    fn new_members_follow_the_file_layout() {
        let after = round_trip("{\n    \"theme\": \"dark\"\n}\n");
        assert_eq!(
            after,
            "{\n    \"mcpServers\": {\n        \"pad\": {\"command\": \"pad\", \"args\": [\"mcp\"]}\n    },\n    \"theme\": \"dark\"\n}\n"
        );
        let after = round_trip("{\n  \"mcpServers\": {\n    \"other\": {}\n  }\n}\n");
        assert!(after.contains("{\n    \"pad\": {\"command\""), "{after}");
    }

    #[test]
    fn a_stale_entry_is_replaced_in_place() {
        let before = "{\"mcpServers\": {\"x\": 1, \"pad\": {\"command\": \"old\"}, \"y\": 2}}";
        let after = install(before, "mcpServers", "pad", E);
        assert_eq!(after, format!("{{\"mcpServers\": {{\"x\": 1, \"pad\": {E}, \"y\": 2}}}}"));
        assert_eq!(remove(&after, "mcpServers", "pad", E).unwrap(), "{\"mcpServers\": {\"x\": 1, \"y\": 2}}");
    }

    #[test]
    fn a_created_file_is_removed_whole() {
        let text = created("mcpServers", "pad", E);
        validate(&text, "mcpServers").unwrap();
        assert_eq!(remove(&text, "mcpServers", "pad", E), None);
    }

    #[test]
    fn bad_documents_are_refused() {
        assert!(validate("{", "mcpServers").is_err());
        assert!(validate("[]", "mcpServers").is_err());
        assert!(validate("", "mcpServers").is_err());
        assert!(validate("{\"mcpServers\": []}", "mcpServers").unwrap_err().contains("not an object"));
        assert!(validate("// c\n{}", "mcpServers").is_err());
    }

    mod prop {
        use proptest::prelude::*;
        use serde::Serialize;
        use serde_json::Value;

        use super::round_trip;

        fn value() -> impl Strategy<Value = Value> {
            let leaf = prop_oneof![
                Just(Value::Null),
                any::<bool>().prop_map(Value::from),
                any::<i32>().prop_map(Value::from),
                "[a-z{}\\[\\]\",: \\\\]{0,6}".prop_map(Value::from),
            ];
            leaf.prop_recursive(3, 24, 4, |inner| {
                prop_oneof![
                    prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
                    prop::collection::btree_map("[a-zA-Z{}\" ]{0,4}", inner, 0..3)
                        .prop_map(|m| Value::Object(m.into_iter().collect())),
                ]
            })
        }

        /// A settings file: the user's keys, maybe an `mcpServers` object of other servers.
        fn document() -> impl Strategy<Value = Value> {
            (
                prop::collection::btree_map("[a-z]{1,6}", value(), 0..4),
                prop::option::of(prop::collection::btree_map("[a-z]{1,5}", value(), 0..3)),
            )
                .prop_map(|(keys, servers)| {
                    let mut doc: serde_json::Map<String, Value> = keys.into_iter().collect();
                    if let Some(servers) = servers {
                        doc.insert("mcpServers".into(), Value::Object(servers.into_iter().collect()));
                    }
                    Value::Object(doc)
                })
        }

        fn render(doc: &Value, style: u8) -> String {
            match style % 5 {
                0 => serde_json::to_string(doc).unwrap(),
                1 => serde_json::to_string_pretty(doc).unwrap() + "\n",
                2 => serde_json::to_string_pretty(doc).unwrap().replace('\n', "\r\n"),
                _ => {
                    let indent: &[u8] = if style % 5 == 3 { b"\t" } else { b"    " };
                    let mut out = Vec::new();
                    let mut ser = serde_json::Serializer::with_formatter(
                        &mut out,
                        serde_json::ser::PrettyFormatter::with_indent(indent),
                    );
                    doc.serialize(&mut ser).unwrap();
                    String::from_utf8(out).unwrap() + "\n"
                }
            }
        }

        proptest! {
            /// Any file, in any of the usual layouts: install, install again,
            /// remove, and every byte is back.
            #[test]
            fn install_then_remove_is_the_identity(doc in document(), style in any::<u8>()) {
                let text = render(&doc, style);
                round_trip(&text);
            }
        }
    }
}
