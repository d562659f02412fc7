//! Who a `pad mcp` session is (docs/agents.md, "No accidental shared
//! leases"): its own holder and session id, named after the agent and machine.

/// Who a session is when a call names no holder or session (docs/agents.md,
/// "No accidental shared leases"): each `pad mcp` process has its own, so two
/// agent sessions of one user never refresh each other's claim (L3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionIdentity {
    pub holder: String,
    pub session_id: String,
}

impl SessionIdentity {
    /// A fresh session id, and the holder label given or `<runtime>@<host>-<short id>`.
    pub fn new(holder: Option<String>, runtime: &str, host: &str) -> Self {
        let session_id = new_session_id();
        let holder = holder.unwrap_or_else(|| default_holder(runtime, host, &session_id));
        SessionIdentity { holder, session_id }
    }
}

/// 16 hex digits: unique enough to tell sessions apart, short enough to read.
pub fn new_session_id() -> String {
    format!("{:016x}", rand::random::<u64>())
}

/// `claude@build-box-3f9a1c`: which agent, where, and which of its sessions.
pub fn default_holder(runtime: &str, host: &str, session_id: &str) -> String {
    let host: String = host.chars().filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.')).take(40).collect();
    let host = if host.is_empty() { "localhost".to_string() } else { host };
    format!("{runtime}@{host}-{}", &session_id[..session_id.len().min(6)])
}

/// The machine's name for default holders: /proc on Linux, else $HOSTNAME.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_session_has_its_own_id_and_a_readable_default_holder() {
        let a = SessionIdentity::new(None, "claude", "build box!");
        let b = SessionIdentity::new(None, "claude", "build box!");
        assert_ne!(a.session_id, b.session_id);
        assert_ne!(a.holder, b.holder);
        assert_eq!(a.holder, format!("claude@buildbox-{}", &a.session_id[..6]));
        // A shared PAD_HOLDER keeps the label; the session ids still tell the sessions apart.
        let (c, d) =
            (SessionIdentity::new(Some("ci".into()), "x", "h"), SessionIdentity::new(Some("ci".into()), "x", "h"));
        assert_eq!((c.holder.as_str(), d.holder.as_str()), ("ci", "ci"));
        assert_ne!(c.session_id, d.session_id);
        assert_eq!(default_holder("codex", "", "abcdef0123"), "codex@localhost-abcdef");
    }
}
