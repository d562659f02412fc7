//! `$PAD_HOME/credentials.toml`: named profiles, one per server and identity
//! (README.md). The file holds secrets, so it is only ever written with mode
//! 0600, by replacing it whole.

use std::collections::BTreeMap;
use std::fmt;
use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::CliError;

pub const FILE_NAME: &str = "credentials.toml";

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Credentials {
    #[serde(default)]
    pub profiles: BTreeMap<String, Profile>,
}

#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Profile {
    pub url: String,
    pub token: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
}

/// Never prints the token.
impl fmt::Debug for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Profile").field("url", &self.url).field("workspace", &self.workspace).finish_non_exhaustive()
    }
}

impl Credentials {
    /// A missing file is an empty one; a malformed one is a configuration
    /// error (exit 3), never silently ignored.
    pub fn load(path: &Path) -> Result<Self, CliError> {
        match std::fs::read_to_string(path) {
            Ok(text) => toml::from_str(&text).map_err(|e| CliError::config(format!("{}: {e}", path.display()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(e) => Err(CliError::config(format!("cannot read {}: {e}", path.display()))),
        }
    }

    /// Writes a sibling temporary file with mode 0600 and renames it over
    /// the old one, so a crash never leaves a half-written or readable file.
    pub fn save(&self, path: &Path) -> Result<(), CliError> {
        let fail = |e: std::io::Error| CliError::config(format!("cannot write {}: {e}", path.display()));
        let dir = path.parent().ok_or_else(|| CliError::config(format!("{} has no directory", path.display())))?;
        create_private_dir(dir).map_err(fail)?;
        let text = toml::to_string(self).map_err(|e| CliError::internal(e.to_string()))?;
        let tmp = dir.join(format!(".{FILE_NAME}.{}.tmp", std::process::id()));
        let written = private_file(&tmp).and_then(|mut f| {
            f.write_all(text.as_bytes())?;
            f.sync_all()
        });
        written.and_then(|()| std::fs::rename(&tmp, path)).map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            fail(e)
        })
    }
}

/// `$PAD_HOME` holds the database and the credentials: only its owner may
/// look inside.
pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

fn private_file(path: &Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(url: &str) -> Profile {
        Profile { url: url.into(), token: "secret".into(), workspace: Some("w".into()) }
    }

    #[test]
    fn round_trip_with_private_mode() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("home").join(FILE_NAME);
        assert_eq!(Credentials::load(&path).unwrap(), Credentials::default());
        let mut creds = Credentials::default();
        creds.profiles.insert("default".into(), profile("http://127.0.0.1:7777"));
        creds.save(&path).unwrap();
        creds.profiles.insert("ci".into(), profile("http://ci:7777"));
        creds.save(&path).unwrap();
        assert_eq!(Credentials::load(&path).unwrap(), creds);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        }
        assert_eq!(std::fs::read_dir(path.parent().unwrap()).unwrap().count(), 1, "no temporary file left");
    }

    #[test]
    fn malformed_file_is_a_config_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        std::fs::write(&path, "[profiles.default]\nurl = 5\n").unwrap();
        assert!(Credentials::load(&path).is_err_and(|e| e.exit_code() == 3));
    }

    #[test]
    fn debug_hides_the_token() {
        assert!(!format!("{:?}", profile("http://x")).contains("secret"));
    }
}
