//! Changing a workspace's lease settings (docs/api.md, "Workspace settings";
//! docs/leases.md L8, L13, L14): the TTL default and maximum and the two
//! quarantine thresholds. One check, used by the store before it writes and
//! by the CLI before it asks, each naming the fields in its own words.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::lease::{MAX_HOLD_MAX_SECONDS, TTL_MAX_SECONDS};
use crate::{ValidationError, WorkspaceSettings};

/// The most expiries or failures a quarantine threshold may wait for; 0 turns
/// that quarantine off.
pub const QUARANTINE_MAX: u32 = 1000;

/// `PATCH /workspaces/{ws}`: the settings to change; absent ones stay.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SettingsPatch {
    /// L8: the TTL of a claim that names none; 1 s up to `max_ttl_seconds`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 86400)]
    pub default_ttl_seconds: Option<u32>,
    /// L8: the longest TTL a claim or renew may ask for; 1 s up to 24 h.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 86400)]
    pub max_ttl_seconds: Option<u32>,
    /// L13: expiries that quarantine an item; 0 turns it off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0, maximum = 1000)]
    pub quarantine_after_expiries: Option<u32>,
    /// L14: failures that quarantine an item; 0 turns it off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0, maximum = 1000)]
    pub quarantine_after_failures: Option<u32>,
    /// L19: the longest a lease may be held, renewals included, from the
    /// default TTL up to 30 days; 0 turns the cap off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0, maximum = 2592000)]
    pub max_hold_seconds: Option<u32>,
}

/// The settings a patch can name, so each caller can say them its own way
/// (`default_ttl_seconds` on the wire, `--default-ttl` in the CLI).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    DefaultTtl,
    MaxTtl,
    QuarantineAfterExpiries,
    QuarantineAfterFailures,
    MaxHold,
}

impl Setting {
    pub const ALL: [Setting; 5] = [
        Setting::DefaultTtl,
        Setting::MaxTtl,
        Setting::QuarantineAfterExpiries,
        Setting::QuarantineAfterFailures,
        Setting::MaxHold,
    ];

    /// The wire name, also the `field` of a `validation_failed` answer.
    pub fn field(self) -> &'static str {
        match self {
            Setting::DefaultTtl => "default_ttl_seconds",
            Setting::MaxTtl => "max_ttl_seconds",
            Setting::QuarantineAfterExpiries => "quarantine_after_expiries",
            Setting::QuarantineAfterFailures => "quarantine_after_failures",
            Setting::MaxHold => "max_hold_seconds",
        }
    }
}

impl Setting {
    /// The values this setting takes, in words, as its refusals say them.
    pub fn range(self) -> &'static str {
        match self {
            Setting::DefaultTtl => "from 1s to the maximum TTL (at most 24h)",
            Setting::MaxTtl => "from 1s to 24h",
            Setting::QuarantineAfterExpiries | Setting::QuarantineAfterFailures => "from 0 (never) to 1000",
            Setting::MaxHold => "0 (no cap) or from the default TTL to 30 days",
        }
    }
}

impl SettingsPatch {
    /// Checks that each setting `body` names is a whole number a setting can
    /// hold, before the body is read as a patch: a value of the wrong kind
    /// (negative, a fraction, a string, past 32 bits) is then refused as one
    /// out of range is, naming the setting and its range (docs/api.md,
    /// "Workspace settings"), not as a body the server could not read.
    /// `null` is left to the patch (the setting stays as it is).
    pub fn check_kinds(body: &serde_json::Value) -> Result<(), ValidationError> {
        let Some(body) = body.as_object() else { return Ok(()) };
        for setting in Setting::ALL {
            let Some(given) = body.get(setting.field()).filter(|v| !v.is_null()) else { continue };
            if given.as_u64().is_none_or(|n| u32::try_from(n).is_err()) {
                let unit = if matches!(setting, Setting::DefaultTtl | Setting::MaxTtl | Setting::MaxHold) {
                    " of seconds"
                } else {
                    ""
                };
                let msg = format!("must be a whole number{unit}, {}; got {given}", setting.range());
                return Err(ValidationError::new(setting.field(), msg));
            }
        }
        Ok(())
    }

    pub fn is_empty(&self) -> bool {
        *self == SettingsPatch::default()
    }

    /// The settings after this patch, or why not. The error's `field` is the
    /// wire name of the refused setting and its message says the rest; `name`
    /// says any other setting the message mentions the way the caller's user
    /// types it. The default must fit under the maximum as they will be after the
    /// change, so lowering both at once works in one request.
    pub fn apply(
        &self, current: &WorkspaceSettings, name: impl Fn(Setting) -> String,
    ) -> Result<WorkspaceSettings, ValidationError> {
        let refuse = |s: Setting, message: String| Err(ValidationError::new(s.field(), message));
        if self.is_empty() {
            let names: Vec<String> = Setting::ALL.into_iter().map(&name).collect();
            let msg = format!("nothing to change: give one or more of {}", names.join(", "));
            return Err(ValidationError::new("settings", msg));
        }
        let mut next = current.clone();
        if let Some(max) = self.max_ttl_seconds {
            if !(1..=TTL_MAX_SECONDS).contains(&max) {
                let msg = format!("must be between 1s and 24h; got {}", words(max));
                return refuse(Setting::MaxTtl, msg);
            }
            next.max_ttl_seconds = max;
        }
        if let Some(default) = self.default_ttl_seconds {
            if !(1..=next.max_ttl_seconds).contains(&default) {
                let msg = format!(
                    "must be between 1s and the maximum ({}); got {}",
                    words(next.max_ttl_seconds),
                    words(default)
                );
                return refuse(Setting::DefaultTtl, msg);
            }
            next.default_ttl_seconds = default;
        } else if next.default_ttl_seconds > next.max_ttl_seconds {
            let msg = format!(
                "must be at least the default TTL ({}); got {}; lower {} as well",
                words(next.default_ttl_seconds),
                words(next.max_ttl_seconds),
                name(Setting::DefaultTtl)
            );
            return refuse(Setting::MaxTtl, msg);
        }
        for (setting, value, slot) in [
            (Setting::QuarantineAfterExpiries, self.quarantine_after_expiries, &mut next.quarantine_after_expiries),
            (Setting::QuarantineAfterFailures, self.quarantine_after_failures, &mut next.quarantine_after_failures),
        ] {
            if let Some(n) = value {
                if n > QUARANTINE_MAX {
                    let msg = format!("must be from 0 (never) to {QUARANTINE_MAX}; got {n}");
                    return refuse(setting, msg);
                }
                *slot = n;
            }
        }
        match self.max_hold_seconds {
            Some(0) => next.max_hold_seconds = None,
            Some(n) if n < next.default_ttl_seconds || n > MAX_HOLD_MAX_SECONDS => {
                let msg = format!(
                    "must be 0 (no cap) or from the default TTL ({}) to 30 days; got {}",
                    words(next.default_ttl_seconds),
                    words(n)
                );
                return refuse(Setting::MaxHold, msg);
            }
            Some(n) => next.max_hold_seconds = Some(n),
            None => {}
        }
        if let Some(cap) = next.max_hold_seconds.filter(|&cap| cap < next.default_ttl_seconds) {
            let msg = format!(
                "must be at most the max hold ({}); got {}; lower {} as well",
                words(cap),
                words(next.default_ttl_seconds),
                name(Setting::MaxHold)
            );
            return refuse(Setting::DefaultTtl, msg);
        }
        Ok(next)
    }
}

/// `45s`, `30m`, `1h30m`, `2h`: a duration as the CLI's `--ttl` takes it.
pub fn words(seconds: u32) -> String {
    let (h, m, s) = (seconds / 3600, seconds % 3600 / 60, seconds % 60);
    let mut out = String::new();
    for (n, unit) in [(h, "h"), (m, "m"), (s, "s")] {
        if n > 0 {
            out.push_str(&format!("{n}{unit}"));
        }
    }
    if out.is_empty() { "0s".into() } else { out }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wire(s: Setting) -> String {
        s.field().to_string()
    }

    #[test]
    fn default_fits_under_the_maximum_after_the_change() {
        let cur = WorkspaceSettings { max_ttl_seconds: 3600, ..WorkspaceSettings::default() };
        let e = SettingsPatch { default_ttl_seconds: Some(7200), ..Default::default() }.apply(&cur, wire).unwrap_err();
        assert_eq!(e.field, "default_ttl_seconds");
        assert_eq!(e.to_string(), "default_ttl_seconds: must be between 1s and the maximum (1h); got 2h");
        let both = SettingsPatch { default_ttl_seconds: Some(60), max_ttl_seconds: Some(120), ..Default::default() };
        let next = both.apply(&cur, wire).unwrap();
        assert_eq!((next.default_ttl_seconds, next.max_ttl_seconds), (60, 120));
        // Lowering only the maximum under the current default names both.
        let e = SettingsPatch { max_ttl_seconds: Some(60), ..Default::default() }.apply(&cur, wire).unwrap_err();
        assert_eq!(e.field, "max_ttl_seconds");
        assert!(e.message.contains("(15m); got 1m") && e.message.contains("default_ttl_seconds"), "{}", e.message);
    }

    #[test]
    fn bounds_and_empty_patches_are_refused() {
        let cur = WorkspaceSettings::default();
        let p = |m: SettingsPatch| m.apply(&cur, |s| format!("--{s:?}")).unwrap_err();
        assert!(p(SettingsPatch { max_ttl_seconds: Some(86_401), ..Default::default() }).message.contains("24h"));
        assert!(p(SettingsPatch { max_ttl_seconds: Some(0), ..Default::default() }).message.contains("got 0s"));
        assert!(p(SettingsPatch { default_ttl_seconds: Some(0), ..Default::default() }).message.contains("1s"));
        let e = p(SettingsPatch { quarantine_after_failures: Some(1001), ..Default::default() });
        assert_eq!(e.field, "quarantine_after_failures");
        assert!(p(SettingsPatch::default()).message.starts_with("nothing to change"));
        let off = SettingsPatch { quarantine_after_expiries: Some(0), ..Default::default() }.apply(&cur, wire).unwrap();
        assert_eq!(off.quarantine_after_expiries, 0);
    }

    #[test]
    fn values_of_the_wrong_kind_name_the_setting_and_its_range() {
        use serde_json::json;
        for setting in Setting::ALL {
            for bad in [json!(-5), json!(1.5), json!("60"), json!(u64::from(u32::MAX) + 1), json!(false)] {
                let e = SettingsPatch::check_kinds(&json!({ setting.field(): bad })).unwrap_err();
                assert_eq!(e.field, setting.field());
                assert!(e.message.contains(setting.range()) && e.message.ends_with(&format!("got {bad}")), "{e}");
            }
            for fine in [json!(0), json!(u32::MAX), json!(null)] {
                assert!(SettingsPatch::check_kinds(&json!({ setting.field(): fine })).is_ok(), "{fine}");
            }
        }
        let e = SettingsPatch::check_kinds(&json!({"max_hold_seconds": -5})).unwrap_err();
        assert_eq!(
            e.to_string(),
            "max_hold_seconds: must be a whole number of seconds, 0 (no cap) or from the default TTL to 30 days; got -5"
        );
    }

    #[test]
    fn durations_read_like_the_cli_takes_them() {
        assert_eq!(words(0), "0s");
        assert_eq!(words(90), "1m30s");
        assert_eq!(words(3600), "1h");
        assert_eq!(words(5400), "1h30m");
    }
}
