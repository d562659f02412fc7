//! `pad wit adapter DIR`: the adapter directory the work-item-tracker seam
//! dispatches to, one script per verb, each handing its arguments to
//! `pad wit <verb>` (docs/work-item-tracker.md, "Installing").

use std::path::Path;

use serde_json::{Value, json};

use super::id::PROVIDER;
use crate::error::CliError;

/// The adapter verbs, in the contract's order.
pub const VERBS: [&str; 12] = [
    "create-item",
    "get-item",
    "list-items",
    "list-sub-items",
    "link-blocks",
    "add-sub-item",
    "claim",
    "renew-lease",
    "release",
    "reclaim",
    "label-provenance",
    "capabilities",
];

/// How many items `list-items` returns at most (the contract wants an
/// explicit bound, never a client default).
pub const LIST_ITEMS_MAX: usize = 1000;

/// The manifest. `null` limits mean "supported, no ceiling": pad caps
/// neither children per parent, nor nesting, nor blockers per item.
pub fn manifest() -> Value {
    let verbs: serde_json::Map<String, Value> = VERBS.iter().map(|v| (v.to_string(), Value::Bool(true))).collect();
    json!({
        "schema_version": super::SCHEMA_VERSION,
        "provider": PROVIDER,
        "verbs": verbs,
        "features": { "cross_repo_edges": true, "sub_items": true, "leases": true },
        "limits": {
            "sub_items_per_parent": null,
            "sub_item_depth": null,
            "dependencies_per_type": null,
            "list_items_max": LIST_ITEMS_MAX,
        },
    })
}

/// Single-quoted for sh: safe for any path.
fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

pub fn script(verb: &str, pad_bin: Option<&Path>) -> String {
    let default = pad_bin.map_or_else(|| "pad".to_string(), |p| p.display().to_string());
    format!(
        "#!/usr/bin/env bash\n\
         # Written by `pad wit adapter`: the work-item-tracker verb `{verb}`, served by pad.\n\
         # $PAD_BIN overrides which pad runs. See pad's docs/work-item-tracker.md.\n\
         pad_default={}\n\
         exec \"${{PAD_BIN:-$pad_default}}\" wit {verb} \"$@\"\n",
        sh_quote(&default)
    )
}

/// Writes `dir/pad/`; replaces files pad wrote before, touches nothing else.
pub fn write(dir: &Path, pad_bin: Option<&Path>) -> Result<std::path::PathBuf, CliError> {
    let out = dir.join(PROVIDER);
    let fail = |what: &Path, e: std::io::Error| CliError::config(format!("cannot write {}: {e}", what.display()));
    std::fs::create_dir_all(&out).map_err(|e| fail(&out, e))?;
    let manifest_path = out.join("capabilities.json");
    let mut text = serde_json::to_string_pretty(&manifest()).map_err(|e| CliError::internal(e.to_string()))?;
    text.push('\n');
    std::fs::write(&manifest_path, text).map_err(|e| fail(&manifest_path, e))?;
    for verb in VERBS {
        let path = out.join(format!("{verb}.sh"));
        std::fs::write(&path, script(verb, pad_bin)).map_err(|e| fail(&path, e))?;
        set_executable(&path).map_err(|e| fail(&path, e))?;
    }
    Ok(out)
}

#[cfg(unix)]
fn set_executable(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
}

#[cfg(not(unix))]
fn set_executable(_: &Path) -> std::io::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_declares_every_verb() {
        let m = manifest();
        assert_eq!(m["schema_version"], "1.0");
        for verb in VERBS {
            assert_eq!(m["verbs"][verb], true, "{verb}");
        }
        assert!(m["limits"]["sub_item_depth"].is_null());
    }

    #[test]
    fn scripts_quote_the_binary_path() {
        let s = script("claim", Some(Path::new("/opt/it's/pad")));
        assert!(s.contains(r"pad_default='/opt/it'\''s/pad'"), "{s}");
        assert!(s.ends_with("exec \"${PAD_BIN:-$pad_default}\" wit claim \"$@\"\n"), "{s}");
    }
}
