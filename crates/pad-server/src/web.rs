//! The web UI (ARCHITECTURE.md, Web UI): a small single-page app in plain HTML, CSS and
//! JavaScript modules under `web/`, compiled into the binary with
//! `include_str!` so `pad serve` needs no files (and no Node.js) at run time.
//!
//! Every answer carries a strict Content-Security-Policy: scripts and styles
//! only from this origin, no inline code, no framing. Files are not
//! fingerprinted, so they are served `no-cache` with an `ETag`: browsers
//! revalidate each load and get a `304` until the binary changes.

use std::sync::OnceLock;

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use pad_core::api::ErrorCode;
use sha2::{Digest, Sha256};

use crate::AppState;
use crate::error::ApiError;

pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'";

const HTML: &str = "text/html; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";

/// `index.html` is served at `/`; everything else at `/assets/{name}`.
static FILES: &[(&str, &str, &str)] = &[
    ("index.html", HTML, include_str!("../web/index.html")),
    ("app.css", CSS, include_str!("../web/app.css")),
    ("app.js", JS, include_str!("../web/app.js")),
    ("api.js", JS, include_str!("../web/api.js")),
    ("dom.js", JS, include_str!("../web/dom.js")),
    ("lease.js", JS, include_str!("../web/lease.js")),
    ("live.js", JS, include_str!("../web/live.js")),
    ("views.js", JS, include_str!("../web/views.js")),
    ("forms.js", JS, include_str!("../web/forms.js")),
    ("fleet.js", JS, include_str!("../web/fleet.js")),
    ("actions.js", JS, include_str!("../web/actions.js")),
    ("sort.js", JS, include_str!("../web/sort.js")),
    ("settings.js", JS, include_str!("../web/settings.js")),
];

/// `GET /` and `GET /assets/{file}`.
pub fn routes() -> Router<AppState> {
    Router::new().route("/", get(index)).route("/assets/{file}", get(asset))
}

async fn index(headers: HeaderMap) -> Response {
    serve("index.html", &headers)
}

async fn asset(Path(file): Path<String>, headers: HeaderMap) -> Response {
    if file == "index.html" {
        return not_found();
    }
    serve(&file, &headers)
}

fn not_found() -> Response {
    ApiError::new(ErrorCode::NotFound, "no such asset").into_response()
}

fn serve(name: &str, req: &HeaderMap) -> Response {
    let Some(index) = FILES.iter().position(|(n, _, _)| *n == name) else { return not_found() };
    let (_, content_type, body) = FILES[index];
    let etag = &etags()[index];
    let fresh = req.get(header::IF_NONE_MATCH).and_then(|v| v.to_str().ok()).is_some_and(|v| {
        v.split(',').any(|t| {
            let t = t.trim();
            t == etag || t.strip_prefix("W/") == Some(etag) || t == "*"
        })
    });
    let mut resp = if fresh { StatusCode::NOT_MODIFIED.into_response() } else { body.into_response() };
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    if let Ok(v) = HeaderValue::from_str(etag) {
        h.insert(header::ETAG, v);
    }
    resp
}

/// One strong ETag per file, from its content (computed once).
fn etags() -> &'static [String] {
    static ETAGS: OnceLock<Vec<String>> = OnceLock::new();
    ETAGS.get_or_init(|| {
        FILES
            .iter()
            .map(|(_, _, body)| format!("\"{}\"", &hex::encode(Sha256::digest(body.as_bytes()))[..16]))
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::{FILES, serve};
    use axum::http::{HeaderMap, StatusCode, header};

    #[test]
    fn assets_have_their_type_a_strict_policy_and_revalidate() {
        let resp = serve("app.js", &HeaderMap::new());
        assert_eq!(resp.status(), StatusCode::OK);
        let h = resp.headers();
        assert_eq!(h[header::CONTENT_TYPE], "text/javascript; charset=utf-8");
        assert_eq!(h[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
        assert_eq!(h[header::CACHE_CONTROL], "no-cache");
        assert!(h[header::CONTENT_SECURITY_POLICY].to_str().unwrap().contains("script-src 'self';"));
        let mut again = HeaderMap::new();
        again.insert(header::IF_NONE_MATCH, h[header::ETAG].clone());
        assert_eq!(serve("app.js", &again).status(), StatusCode::NOT_MODIFIED);
        assert_eq!(serve("nope.js", &HeaderMap::new()).status(), StatusCode::NOT_FOUND);
        assert_eq!(serve("app.css", &HeaderMap::new()).headers()[header::CONTENT_TYPE], "text/css; charset=utf-8");
    }

    /// Every module the page imports must be embedded, or the browser gets a 404.
    #[test]
    fn every_imported_module_is_embedded() {
        for (name, _, body) in FILES {
            for line in body.lines().filter(|l| l.trim_start().starts_with("import ")) {
                let target = line.rsplit_once("'./").and_then(|(_, rest)| rest.split_once('\'')).map(|(t, _)| t);
                if let Some(target) = target {
                    assert!(
                        FILES.iter().any(|(n, _, _)| *n == target),
                        "{name} imports {target}, which is not embedded"
                    );
                }
            }
        }
    }

    /// The CSP forbids inline code, so the page must not contain any.
    #[test]
    fn index_has_no_inline_script_or_style() {
        let index = FILES[0].2;
        assert!(!index.contains("<script>") && !index.contains("<style") && !index.contains(" style="), "{index}");
        assert!(index.contains("src=\"/assets/app.js\""));
    }
}
