//! Which server, token and workspace a command uses (README.md). Each setting
//! is taken from the first of: flag, environment, `.pad.toml` (in the current
//! directory or a parent), the profile in `$PAD_HOME/credentials.toml`, and
//! the default; and remembers where it came from for `pad auth status`.

use std::fmt;
use std::path::{Path, PathBuf};

use pad_client::{Client, Url};
use serde::Deserialize;

use crate::cli::GlobalArgs;
use crate::credentials::{self, Credentials, Profile};
use crate::error::CliError;

pub const DEFAULT_URL: &str = "http://127.0.0.1:7777";
pub const DEFAULT_WORKSPACE: &str = "default";
pub const DEFAULT_PROFILE: &str = "default";
pub const PROJECT_FILE: &str = ".pad.toml";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Flag(&'static str),
    Env(&'static str),
    ProjectFile(PathBuf),
    Profile(String),
    Default,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Flag(flag) => write!(f, "{flag}"),
            Source::Env(var) => write!(f, "${var}"),
            Source::ProjectFile(path) => write!(f, "{}", path.display()),
            Source::Profile(name) => write!(f, "profile `{name}`"),
            Source::Default => f.write_str("the built-in default"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sourced<T> {
    pub value: T,
    pub source: Source,
}

/// The first candidate that is set.
fn first<T>(candidates: impl IntoIterator<Item = (Option<T>, Source)>) -> Option<Sourced<T>> {
    candidates.into_iter().find_map(|(value, source)| value.map(|value| Sourced { value, source }))
}

/// The variables pad reads, captured once so resolution is a pure function.
#[derive(Debug, Clone, Default)]
pub struct Env {
    pub url: Option<String>,
    pub token: Option<String>,
    pub workspace: Option<String>,
    pub profile: Option<String>,
    pub pad_home: Option<PathBuf>,
    pub user_home: Option<PathBuf>,
}

impl Env {
    pub fn from_process() -> Self {
        // An empty variable (`PAD_TOKEN= pad …`) reads as unset.
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        Env {
            url: var("PAD_URL"),
            token: var("PAD_TOKEN"),
            workspace: var("PAD_WORKSPACE"),
            profile: var("PAD_PROFILE"),
            pad_home: var("PAD_HOME").map(PathBuf::from),
            user_home: std::env::home_dir(),
        }
    }

    /// `$PAD_HOME`, else `~/.pad`.
    pub fn pad_home(&self) -> Result<PathBuf, CliError> {
        self.pad_home
            .clone()
            .or_else(|| self.user_home.as_ref().map(|h| h.join(".pad")))
            .ok_or_else(|| CliError::config("cannot tell where pad's files go: set PAD_HOME"))
    }
}

/// `.pad.toml`: pins a directory tree to a workspace (and maybe a server).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProjectFile {
    pub workspace: Option<String>,
    pub url: Option<String>,
    /// The holder label agents in this tree claim as (`pad mcp`, `pad prime`).
    #[serde(default)]
    pub holder: Option<String>,
}

/// The nearest `.pad.toml` in `dir` or a parent, with its path.
pub fn find_project_file(dir: &Path) -> Result<Option<(PathBuf, ProjectFile)>, CliError> {
    let Some(path) = dir.ancestors().map(|d| d.join(PROJECT_FILE)).find(|p| p.is_file()) else { return Ok(None) };
    let text =
        std::fs::read_to_string(&path).map_err(|e| CliError::config(format!("cannot read {}: {e}", path.display())))?;
    let file = toml::from_str(&text).map_err(|e| CliError::config(format!("{}: {e}", path.display())))?;
    Ok(Some((path, file)))
}

/// Everything a client command needs to know about where it talks to.
#[derive(Debug, Clone)]
pub struct Settings {
    pub credentials_path: PathBuf,
    pub profile: Sourced<String>,
    /// The profile as stored, if it exists.
    pub stored: Option<Profile>,
    pub url: Sourced<Url>,
    pub workspace: Sourced<String>,
    pub token: Option<Sourced<String>>,
    /// `holder` from `.pad.toml`, for agent sessions (docs/agents.md).
    pub project_holder: Option<String>,
    /// Set when the profile has a token but the URL names another server:
    /// the profile's URL, which is the only server its token is sent to.
    pub withheld_for: Option<String>,
}

impl Settings {
    /// Reads the environment, `.pad.toml` and the credentials file.
    pub fn load(flags: &GlobalArgs) -> Result<Self, CliError> {
        let env = Env::from_process();
        let credentials_path = env.pad_home()?.join(credentials::FILE_NAME);
        let credentials = Credentials::load(&credentials_path)?;
        let cwd = std::env::current_dir().map_err(|e| CliError::config(format!("no current directory: {e}")))?;
        let project = find_project_file(&cwd)?;
        resolve(flags, &env, project.as_ref().map(|(p, f)| (p.as_path(), f)), &credentials, credentials_path)
    }

    /// A client for the resolved server and token; no token is a
    /// configuration error that says how to get one.
    pub fn client(&self) -> Result<Client, CliError> {
        let Some(token) = &self.token else {
            let profile = &self.profile.value;
            let path = self.credentials_path.display();
            if let Some(own) = &self.withheld_for {
                let url = self.url.value.as_str().trim_end_matches('/');
                return Err(CliError::config(format!(
                    "{url} (from {}) is not the server of profile `{profile}` ({own}), and a profile's token is \
                     only sent to its own server: set PAD_TOKEN to a token of {url}, or use a profile saved for it \
                     (`--profile NAME`; save one with `pad auth login --profile NAME --url {url}`)",
                    self.url.source
                )));
            }
            return Err(CliError::config(if self.profile.source == Source::Default {
                format!(
                    "no token: set PAD_TOKEN, run `pad auth login --url URL --token TOKEN`, \
                     or start `pad serve` on this machine (it saves profile `default` in {path})"
                )
            } else {
                format!(
                    "no profile `{profile}` in {path}: run `pad auth login --profile {profile} --url URL --token TOKEN`"
                )
            }));
        };
        crate::error::set_server(format!(
            "{} (from {})",
            self.url.value.as_str().trim_end_matches('/'),
            self.url.source
        ));
        Client::new(self.url.value.clone(), token.value.clone()).map_err(|e| CliError::config(e.to_string()))
    }

    pub fn workspace(&self) -> &str {
        &self.workspace.value
    }

    /// What a `pad` started by this one needs in its environment to reach
    /// the same server, workspace and caller, whatever its own flags, working
    /// directory or `.pad.toml`: `pad guard` inside `pad run`'s CMD
    /// (docs/leases.md, "pad guard"). `PAD_TOKEN` only when the token came
    /// from the environment: a profile's token the child reads from the
    /// credentials file through `PAD_PROFILE` itself, so no secret is copied
    /// where it need not be. The values hold a secret: never print them.
    pub fn child_env(&self) -> Vec<(&'static str, String)> {
        let mut env = vec![
            ("PAD_URL", self.url.value.to_string()),
            ("PAD_PROFILE", self.profile.value.clone()),
            ("PAD_WORKSPACE", self.workspace.value.clone()),
        ];
        if let Some(token) = self.token.as_ref().filter(|t| !matches!(t.source, Source::Profile(_))) {
            env.push(("PAD_TOKEN", token.value.clone()));
        }
        env
    }
}

/// The precedence rules, with every input given: flag > env > `.pad.toml` >
/// profile > default. The token has no flag (it would land in shell
/// history) and no project-file entry (that file is meant to be committed).
pub fn resolve(
    flags: &GlobalArgs, env: &Env, project: Option<(&Path, &ProjectFile)>, credentials: &Credentials,
    credentials_path: PathBuf,
) -> Result<Settings, CliError> {
    let profile = first([
        (flags.profile.clone(), Source::Flag("--profile")),
        (env.profile.clone(), Source::Env("PAD_PROFILE")),
        (Some(DEFAULT_PROFILE.to_string()), Source::Default),
    ])
    .expect("the default is always set");
    let stored = credentials.profiles.get(&profile.value).cloned();
    let from_profile = Source::Profile(profile.value.clone());
    let project_source = || project.map_or(Source::Default, |(path, _)| Source::ProjectFile(path.to_path_buf()));
    let from_project = |field: fn(&ProjectFile) -> &Option<String>| project.and_then(|(_, f)| field(f).clone());

    let url = first([
        (flags.url.clone(), Source::Flag("--url")),
        (env.url.clone(), Source::Env("PAD_URL")),
        (from_project(|f| &f.url), project_source()),
        (stored.as_ref().map(|p| p.url.clone()), from_profile.clone()),
        (Some(DEFAULT_URL.to_string()), Source::Default),
    ])
    .expect("the default is always set");
    let url = Sourced { value: parse_url(&url.value, &url.source)?, source: url.source };

    let workspace = first([
        (flags.workspace.clone(), Source::Flag("--workspace")),
        (env.workspace.clone(), Source::Env("PAD_WORKSPACE")),
        (from_project(|f| &f.workspace), project_source()),
        (stored.as_ref().and_then(|p| p.workspace.clone()), from_profile.clone()),
        (Some(DEFAULT_WORKSPACE.to_string()), Source::Default),
    ])
    .expect("the default is always set");

    // A PAD_TOKEN the server refuses must fail (exit 4), so the stored token
    // is only a candidate when PAD_TOKEN is not set at all. A profile's token
    // goes only to the profile's own server (README.md, "Configuration"): a
    // `--url` naming another server must not receive it.
    let own_url = stored.as_ref().map(|p| p.url.clone());
    let same_server = own_url.as_deref().and_then(|u| Url::parse(u).ok()).is_some_and(|u| same_server(&u, &url.value));
    let token = first([
        (env.token.clone(), Source::Env("PAD_TOKEN")),
        (stored.as_ref().filter(|_| same_server).map(|p| p.token.clone()), from_profile),
    ]);
    let withheld_for = if token.is_none() && !same_server { own_url } else { None };

    let project_holder = from_project(|f| &f.holder);
    Ok(Settings { credentials_path, profile, stored, url, workspace, token, project_holder, withheld_for })
}

/// Same scheme, host, port and path (ignoring a trailing slash): the one rule
/// for whether a stored profile's token may be sent to a URL (README,
/// Configuration), used by every command and by `pad wit`'s binding.
pub(crate) fn same_server(a: &Url, b: &Url) -> bool {
    let key = |u: &Url| {
        (u.scheme().to_string(), u.host_str().map(str::to_ascii_lowercase), u.port_or_known_default(), {
            u.path().trim_end_matches('/').to_string()
        })
    };
    key(a) == key(b)
}

fn parse_url(text: &str, source: &Source) -> Result<Url, CliError> {
    match Url::parse(text) {
        // The client appends `/api/v1/…` itself; a URL that already has it
        // would double it and every call would be a 404.
        Ok(url) if url.path().trim_end_matches('/').ends_with("/api/v1") || url.path().contains("/api/v1/") => {
            let root = text.split("/api/v1").next().unwrap_or(text);
            Err(CliError::config(format!(
                "{text:?} (from {source}) is an API URL; give the server root instead (e.g. {root}): pad adds /api/v1 itself"
            )))
        }
        Ok(url) if matches!(url.scheme(), "http" | "https") && url.has_host() => Ok(url),
        _ => Err(CliError::config(format!("{text:?} (from {source}) is not a server URL like {DEFAULT_URL}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn creds(profiles: &[(&str, &str, &str, Option<&str>)]) -> Credentials {
        let mut c = Credentials::default();
        for (name, url, token, ws) in profiles {
            c.profiles.insert(
                name.to_string(),
                Profile { url: url.to_string(), token: token.to_string(), workspace: ws.map(str::to_string) },
            );
        }
        c
    }

    fn resolve_with(flags: &GlobalArgs, env: &Env, project: Option<&ProjectFile>, c: &Credentials) -> Settings {
        let path = Path::new("/repo/.pad.toml");
        resolve(flags, env, project.map(|f| (path, f)), c, "/home/.pad/credentials.toml".into()).unwrap()
    }

    #[test]
    fn defaults_when_nothing_is_configured() {
        let s = resolve_with(&GlobalArgs::default(), &Env::default(), None, &Credentials::default());
        assert_eq!(s.url.value.as_str(), "http://127.0.0.1:7777/");
        assert_eq!((s.workspace(), &s.workspace.source), ("default", &Source::Default));
        assert_eq!(s.profile.value, "default");
        assert!(s.token.is_none());
        let Err(e @ CliError::Failed { .. }) = s.client() else { panic!() };
        let (3, message) = (e.exit_code(), e.to_string()) else { panic!("{e}") };
        assert!(message.contains("pad auth login") && message.contains("PAD_TOKEN"), "{message}");
    }

    #[test]
    fn profile_fills_in_what_nothing_else_sets() {
        let c = creds(&[("default", "http://srv:1", "tok", Some("team"))]);
        let s = resolve_with(&GlobalArgs::default(), &Env::default(), None, &c);
        assert_eq!(s.url.value.as_str(), "http://srv:1/");
        assert_eq!(s.workspace(), "team");
        let token = s.token.unwrap();
        assert_eq!((token.value.as_str(), token.source), ("tok", Source::Profile("default".into())));
    }

    #[test]
    fn flag_beats_env_beats_project_beats_profile() {
        let c = creds(&[("default", "http://profile:1", "tok", Some("from-profile"))]);
        let project = ProjectFile {
            workspace: Some("from-project".into()),
            url: Some("http://project:1".into()),
            holder: Some("agent-x".into()),
        };
        let env = Env { url: Some("http://env:1".into()), workspace: Some("from-env".into()), ..Env::default() };
        let flags = GlobalArgs {
            url: Some("http://flag:1".into()),
            workspace: Some("from-flag".into()),
            ..GlobalArgs::default()
        };

        let s = resolve_with(&flags, &env, Some(&project), &c);
        assert_eq!((s.url.value.host_str(), s.workspace()), (Some("flag"), "from-flag"));
        assert_eq!(s.workspace.source, Source::Flag("--workspace"));

        let s = resolve_with(&GlobalArgs::default(), &env, Some(&project), &c);
        assert_eq!((s.url.value.host_str(), s.workspace()), (Some("env"), "from-env"));
        assert_eq!(s.url.source, Source::Env("PAD_URL"));

        let s = resolve_with(&GlobalArgs::default(), &Env::default(), Some(&project), &c);
        assert_eq!((s.url.value.host_str(), s.workspace()), (Some("project"), "from-project"));
        assert_eq!(s.workspace.source, Source::ProjectFile("/repo/.pad.toml".into()));
        assert_eq!(s.project_holder.as_deref(), Some("agent-x"));

        // A project file that only names the workspace leaves the URL to the profile.
        let ws_only = ProjectFile { workspace: Some("from-project".into()), url: None, holder: None };
        let s = resolve_with(&GlobalArgs::default(), &Env::default(), Some(&ws_only), &c);
        assert_eq!((s.url.value.host_str(), s.workspace()), (Some("profile"), "from-project"));
    }

    #[test]
    fn a_profile_token_only_goes_to_its_own_server() {
        let c = creds(&[("default", "http://srv:1", "tok", None)]);
        let flags = GlobalArgs { url: Some("http://srv:1/".into()), ..GlobalArgs::default() };
        assert!(resolve_with(&flags, &Env::default(), None, &c).token.is_some(), "same server, trailing slash");
        let env = Env { url: Some("http://other:1".into()), ..Env::default() };
        let s = resolve_with(&GlobalArgs::default(), &env, None, &c);
        assert!(s.token.is_none());
        let Err(e @ CliError::Failed { .. }) = s.client() else { panic!() };
        let (3, message) = (e.exit_code(), e.to_string()) else { panic!("{e}") };
        assert!(message.contains("PAD_TOKEN") && message.contains("http://srv:1"), "{message}");
        // An explicit PAD_TOKEN is meant for the URL given.
        let env = Env { token: Some("t".into()), ..env };
        assert!(resolve_with(&GlobalArgs::default(), &env, None, &c).token.is_some());
    }

    #[test]
    fn an_api_url_is_refused_with_the_root() {
        let flags = GlobalArgs { url: Some("http://h:1/api/v1".into()), ..GlobalArgs::default() };
        let r = resolve(&flags, &Env::default(), None, &Credentials::default(), PathBuf::new());
        let Err(e @ CliError::Failed { .. }) = r else { panic!() };
        let (3, message) = (e.exit_code(), e.to_string()) else { panic!("{e}") };
        assert!(message.contains("server root") && message.contains("http://h:1"), "{message}");
    }

    /// A child given `child_env` resolves the same server, workspace and
    /// token, from anywhere; a profile's token is not copied.
    #[test]
    fn a_child_resolves_what_its_parent_did() {
        let c = creds(&[("default", "http://elsewhere:1", "td", None), ("alt", "http://srv:1", "ta", Some("team"))]);
        let spawn = |parent: &Settings| {
            let vars: std::collections::HashMap<_, _> = parent.child_env().into_iter().collect();
            let env = Env {
                url: vars.get("PAD_URL").cloned(),
                token: vars.get("PAD_TOKEN").cloned(),
                workspace: vars.get("PAD_WORKSPACE").cloned(),
                profile: vars.get("PAD_PROFILE").cloned(),
                ..Env::default()
            };
            // A `.pad.toml` where the child runs does not lead it elsewhere.
            let project =
                ProjectFile { workspace: Some("other".into()), url: Some("http://other:1".into()), holder: None };
            (vars.contains_key("PAD_TOKEN"), resolve_with(&GlobalArgs::default(), &env, Some(&project), &c))
        };
        let same = |a: &Settings, b: &Settings| {
            assert_eq!((&a.url.value, a.workspace()), (&b.url.value, b.workspace()));
            assert_eq!(a.token.as_ref().map(|t| &t.value), b.token.as_ref().map(|t| &t.value));
        };

        let flags = GlobalArgs { profile: Some("alt".into()), ..GlobalArgs::default() };
        let parent = resolve_with(&flags, &Env::default(), None, &c);
        let (copied, child) = spawn(&parent);
        same(&parent, &child);
        assert!(!copied, "a profile's token stays in the credentials file");

        let flags = GlobalArgs { url: Some("http://srv:2".into()), ..GlobalArgs::default() };
        let env = Env { token: Some("from-env".into()), ..Env::default() };
        let parent = resolve_with(&flags, &env, None, &c);
        let (copied, child) = spawn(&parent);
        same(&parent, &child);
        assert!(copied);
    }

    #[test]
    fn pad_token_wins_and_never_falls_back() {
        let c = creds(&[("default", "http://srv:1", "stored", None)]);
        let env = Env { token: Some("from-env".into()), ..Env::default() };
        let token = resolve_with(&GlobalArgs::default(), &env, None, &c).token.unwrap();
        assert_eq!((token.value.as_str(), token.source), ("from-env", Source::Env("PAD_TOKEN")));
    }

    #[test]
    fn profile_chosen_by_flag_then_env() {
        let c = creds(&[
            ("default", "http://a:1", "ta", None),
            ("ci", "http://b:1", "tb", None),
            ("x", "http://c:1", "tc", None),
        ]);
        let env = Env { profile: Some("ci".into()), ..Env::default() };
        let s = resolve_with(&GlobalArgs::default(), &env, None, &c);
        assert_eq!((s.profile.value.as_str(), s.url.value.host_str()), ("ci", Some("b")));
        let flags = GlobalArgs { profile: Some("x".into()), ..GlobalArgs::default() };
        let s = resolve_with(&flags, &env, None, &c);
        assert_eq!((s.profile.value.as_str(), s.url.value.host_str()), ("x", Some("c")));
    }

    #[test]
    fn a_named_profile_that_does_not_exist_says_how_to_create_it() {
        let flags = GlobalArgs { profile: Some("nope".into()), ..GlobalArgs::default() };
        let s = resolve_with(&flags, &Env::default(), None, &Credentials::default());
        let Err(e @ CliError::Failed { .. }) = s.client() else { panic!() };
        let (3, message) = (e.exit_code(), e.to_string()) else { panic!("{e}") };
        assert!(message.contains("no profile `nope`") && message.contains("--profile nope"), "{message}");
    }

    #[test]
    fn bad_urls_are_config_errors() {
        for bad in ["127.0.0.1:7777", "ftp://x", "not a url"] {
            let flags = GlobalArgs { url: Some(bad.into()), ..GlobalArgs::default() };
            let r = resolve(&flags, &Env::default(), None, &Credentials::default(), PathBuf::new());
            assert!(r.is_err_and(|e| e.exit_code() == 3), "{bad}");
        }
    }

    #[test]
    fn project_file_is_found_in_a_parent() {
        let dir = tempfile::tempdir().unwrap();
        let nested = dir.path().join("a/b");
        std::fs::create_dir_all(&nested).unwrap();
        assert_eq!(find_project_file(&nested).unwrap(), None);
        std::fs::write(dir.path().join(PROJECT_FILE), "workspace = \"team\"\n").unwrap();
        let (path, file) = find_project_file(&nested).unwrap().unwrap();
        assert_eq!(path, dir.path().join(PROJECT_FILE));
        assert_eq!(file.workspace.as_deref(), Some("team"));
    }

    #[test]
    fn bad_project_file_is_a_config_error() {
        let dir = tempfile::tempdir().unwrap();
        for text in ["workspace = ", "workpace = \"typo\"\n"] {
            std::fs::write(dir.path().join(PROJECT_FILE), text).unwrap();
            assert!(find_project_file(dir.path()).is_err_and(|e| e.exit_code() == 3), "{text}");
        }
    }

    #[test]
    fn pad_home_defaults_to_dot_pad() {
        let env = Env { user_home: Some("/home/u".into()), ..Env::default() };
        assert_eq!(env.pad_home().unwrap(), PathBuf::from("/home/u/.pad"));
        let env = Env { pad_home: Some("/tmp/p".into()), ..env };
        assert_eq!(env.pad_home().unwrap(), PathBuf::from("/tmp/p"));
        assert!(Env::default().pad_home().is_err());
    }
}
