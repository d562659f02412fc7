//! The consumer's binding (`.work-item-tracker.json`) and the connection it
//! names (docs/work-item-tracker.md, "Binding").

use std::path::{Path, PathBuf};

use pad_client::{Client, Url};
use serde_json::Value;

use crate::cli::GlobalArgs;
use crate::config::Settings;
use crate::error::{CliError, Exit};

pub const BINDING_FILE: &str = ".work-item-tracker.json";
pub const OVERLAY_FILE: &str = ".work-item-tracker.local.json";
pub const BINDING_ENV: &str = "WORK_ITEM_TRACKER_BINDING";

/// What pad reads from a binding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding {
    pub path: PathBuf,
    pub url: Option<String>,
    pub workspace: Option<String>,
    pub token_env: Option<String>,
    pub ttl_hours: u64,
    pub ttl_minutes: u64,
}

/// The binding's path: `$WORK_ITEM_TRACKER_BINDING`, else the file at the
/// repo root (`$CLAUDE_PROJECT_DIR`, else the nearest directory holding
/// `.git`). Never a climb to the filesystem root: a stray binding in a home
/// directory must not capture every repo below it.
pub fn find(cwd: &Path) -> Result<PathBuf, CliError> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(path) = var(BINDING_ENV) {
        return if path.is_file() {
            Ok(path)
        } else {
            Err(CliError::config(format!("${BINDING_ENV} names {}, which is not a file", path.display())))
        };
    }
    let root = var("CLAUDE_PROJECT_DIR").or_else(|| cwd.ancestors().find(|d| d.join(".git").exists()).map(Into::into));
    let Some(root) = root else {
        return Err(CliError::config(format!(
            "no {BINDING_FILE}: not in a git repository and neither ${BINDING_ENV} nor $CLAUDE_PROJECT_DIR is set \
             (docs/work-item-tracker.md)"
        )));
    };
    let path = root.join(BINDING_FILE);
    if path.is_file() {
        Ok(path)
    } else {
        Err(CliError::config(format!("no binding at {} (docs/work-item-tracker.md)", path.display())))
    }
}

/// Reads and checks the binding and its personal overlay, which may only
/// change the lease TTL keys.
pub fn load(path: &Path) -> Result<Binding, CliError> {
    let read = |p: &Path| -> Result<Value, CliError> {
        let text =
            std::fs::read_to_string(p).map_err(|e| CliError::config(format!("cannot read {}: {e}", p.display())))?;
        serde_json::from_str(&text).map_err(|e| CliError::config(format!("{} is not JSON: {e}", p.display())))
    };
    let team = read(path)?;
    let overlay_path = path.parent().map(|d| d.join(OVERLAY_FILE)).filter(|p| p.is_file());
    let overlay = overlay_path.as_deref().map(read).transpose()?;
    parse(path, &team, overlay.as_ref()).map_err(|e| CliError::config(format!("{}: {e}", path.display())))
}

pub fn parse(path: &Path, team: &Value, overlay: Option<&Value>) -> Result<Binding, String> {
    let version = team.get("schema_version").and_then(Value::as_str).unwrap_or_default();
    if !version.starts_with("1.") {
        return Err(format!("schema_version must be 1.x, got {:?}", team.get("schema_version")));
    }
    match team.get("provider").and_then(Value::as_str) {
        Some("pad") => {}
        other => return Err(format!("provider is {other:?}; `pad wit` serves bindings whose provider is \"pad\"")),
    }
    // The overlay may set only the TTL keys (the seam refuses anything else).
    let key = |name: &str| {
        overlay.and_then(|o| o.pointer(&format!("/config/{name}"))).or_else(|| team.pointer(&format!("/config/{name}")))
    };
    let ttl_hours = match key("lease_ttl_hours") {
        Some(v) => v.as_u64().ok_or("config.lease_ttl_hours must be a whole number of hours")?,
        None => return Err("config.lease_ttl_hours is required".into()),
    };
    let ttl_minutes = match key("lease_ttl_minutes") {
        None | Some(Value::Null) => 0,
        Some(v) => v.as_u64().filter(|m| *m <= 59).ok_or("config.lease_ttl_minutes must be 0 to 59")?,
    };
    let pad = match team.pointer("/config/pad") {
        None | Some(Value::Null) => serde_json::Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(_) => return Err("config.pad must be an object".into()),
    };
    let text = |name: &str| -> Result<Option<String>, String> {
        match pad.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if !s.is_empty() => Ok(Some(s.clone())),
            Some(_) => Err(format!("config.pad.{name} must be a non-empty string")),
        }
    };
    let token_env = text("token_env")?;
    if let Some(name) = &token_env {
        let ok = name.bytes().next().is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !ok {
            return Err(format!("config.pad.token_env {name:?} is not an environment variable name"));
        }
    }
    Ok(Binding {
        path: path.to_path_buf(),
        url: text("url")?,
        workspace: text("workspace")?,
        token_env,
        ttl_hours,
        ttl_minutes,
    })
}

/// Where the verbs talk to, and as whom.
pub struct Connection {
    pub client: Client,
    pub workspace: String,
    pub binding: Binding,
}

/// Server and workspace from the binding, else pad's usual settings (flags,
/// environment, `.pad.toml`, profile). The token: the variable named by
/// `config.pad.token_env`, else `$PAD_TOKEN`, else the profile's, and the
/// profile's only when it is for the same server, so a binding cannot
/// send a stored token elsewhere.
pub fn connect(global: &GlobalArgs) -> Result<Connection, CliError> {
    let cwd = std::env::current_dir().map_err(|e| CliError::config(format!("no current directory: {e}")))?;
    let binding = load(&find(&cwd)?)?;
    let settings = Settings::load(global)?;
    let url = match &binding.url {
        Some(text) => match Url::parse(text) {
            Ok(u) if matches!(u.scheme(), "http" | "https") && u.has_host() => u,
            _ => return Err(CliError::config(format!("config.pad.url {text:?} is not an http(s) URL"))),
        },
        None => settings.url.value.clone(),
    };
    let workspace = binding.workspace.clone().unwrap_or_else(|| settings.workspace().to_string());
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let token = if let Some(name) = &binding.token_env {
        env(name)
            .ok_or_else(|| CliError::new(Exit::Auth, format!("config.pad.token_env names ${name}, which is not set")))?
    } else if let Some(token) = env("PAD_TOKEN") {
        token
    } else {
        let stored =
            settings.stored.as_ref().filter(|p| Url::parse(&p.url).is_ok_and(|u| crate::config::same_server(&u, &url)));
        match stored {
            Some(profile) => profile.token.clone(),
            None => {
                return Err(CliError::new(
                    Exit::Auth,
                    format!(
                        "no token for {url}: set PAD_TOKEN (or the variable config.pad.token_env names), \
                         or `pad auth login --url {url} --token TOKEN`"
                    ),
                ));
            }
        }
    };
    let client = Client::new(url, token).map_err(|e| CliError::config(e.to_string()))?;
    Ok(Connection { client, workspace, binding })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parsed(team: Value, overlay: Option<Value>) -> Result<Binding, String> {
        parse(Path::new("/r/.work-item-tracker.json"), &team, overlay.as_ref())
    }

    #[test]
    fn reads_pad_config_and_ttl() {
        let b = parsed(
            json!({"schema_version": "1.0", "provider": "pad", "config": {"lease_ttl_hours": 1,
                   "lease_ttl_minutes": 30, "pad": {"url": "http://h:1", "workspace": "team", "token_env": "T_1"}}}),
            None,
        )
        .unwrap();
        assert_eq!(
            (b.url.as_deref(), b.workspace.as_deref(), b.token_env.as_deref()),
            (Some("http://h:1"), Some("team"), Some("T_1"))
        );
        assert_eq!((b.ttl_hours, b.ttl_minutes), (1, 30));
    }

    #[test]
    fn overlay_changes_only_the_ttl() {
        let team = json!({"schema_version": "1.0", "provider": "pad", "config": {"lease_ttl_hours": 24}});
        let b = parsed(team.clone(), Some(json!({"config": {"lease_ttl_hours": 0, "lease_ttl_minutes": 30}}))).unwrap();
        assert_eq!((b.ttl_hours, b.ttl_minutes), (0, 30));
        let b = parsed(team, Some(json!({"config": {"pad": {"url": "http://evil"}}}))).unwrap();
        assert_eq!(b.url, None);
    }

    #[test]
    fn refuses_bad_bindings() {
        let cases = [
            json!({"provider": "pad", "config": {"lease_ttl_hours": 1}}),
            json!({"schema_version": "1.0", "provider": "github", "config": {"lease_ttl_hours": 1}}),
            json!({"schema_version": "1.0", "provider": "pad", "config": {}}),
            json!({"schema_version": "1.0", "provider": "pad", "config": {"lease_ttl_hours": -1}}),
            json!({"schema_version": "1.0", "provider": "pad", "config": {"lease_ttl_hours": 1, "lease_ttl_minutes": 60}}),
            json!({"schema_version": "1.0", "provider": "pad", "config": {"lease_ttl_hours": 1, "pad": {"token_env": "A-B"}}}),
            json!({"schema_version": "1.0", "provider": "pad", "config": {"lease_ttl_hours": 1, "pad": {"url": 3}}}),
        ];
        for team in cases {
            assert!(parsed(team.clone(), None).is_err(), "{team}");
        }
    }

    #[test]
    fn profile_tokens_stay_on_their_server() {
        let u = |s: &str| Url::parse(s).unwrap();
        let same = crate::config::same_server;
        assert!(same(&u("http://127.0.0.1:7777"), &u("http://127.0.0.1:7777/")));
        assert!(!same(&u("http://127.0.0.1:7777"), &u("http://127.0.0.1:7778")));
        assert!(!same(&u("http://a"), &u("https://a")));
    }
}
