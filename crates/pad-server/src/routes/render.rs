//! An item's markdown body as sanitized HTML, for the web UI (ARCHITECTURE.md, Web UI).
//!
//! Rendering happens here rather than in the page so that exactly one,
//! well-tested sanitizer (ammonia) decides what markup reaches a browser:
//! the page inserts this HTML and nothing else it did not build itself.

use axum::extract::State;
use pad_core::Action;
use pad_core::api::ErrorEnvelope;
use serde::{Deserialize, Serialize};

use crate::AppState;
use crate::error::ApiResult;
use crate::extract::{Ctx, Json};

#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct BodyHtml {
    /// The body rendered from CommonMark (plus tables, strikethrough and task
    /// lists), sanitized: no scripts, event handlers, styles or unsafe URLs.
    pub html: String,
}

/// An item's body rendered to sanitized HTML.
#[utoipa::path(get, path = "/api/v1/workspaces/{ws}/items/{ref}/body.html", tag = "items",
    params(("ws" = String, Path), ("ref" = String, Path)),
    responses((status = 200, body = BodyHtml), (status = "default", body = ErrorEnvelope)))]
pub async fn body_html(State(s): State<AppState>, ctx: Ctx) -> ApiResult<axum::Json<BodyHtml>> {
    ctx.require(Action::Read)?;
    let item = s.store.get_item(&ctx.ws, &ctx.item_ref()?).await?;
    Ok(axum::Json(BodyHtml { html: render_markdown(&item.body) }))
}

/// Markdown to preview, as an item body would be rendered.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RenderRequest {
    /// At most an item body's size (docs/api.md, Limits).
    #[schema(max_length = 262144)]
    pub markdown: String,
}

/// Renders unsaved markdown exactly as `body.html` would, for the editor's
/// preview: the same sanitizer, so a preview can never show more than the
/// saved item will. Bounded like an item body; any member may read.
#[utoipa::path(post, path = "/api/v1/workspaces/{ws}/render", tag = "items",
    params(("ws" = String, Path)), request_body = RenderRequest,
    responses((status = 200, body = BodyHtml), (status = "default", body = ErrorEnvelope)))]
pub async fn render(ctx: Ctx, Json(req): Json<RenderRequest>) -> ApiResult<axum::Json<BodyHtml>> {
    ctx.require(Action::Read)?;
    pad_core::validate::body("markdown", &req.markdown, pad_core::BODY_MAX_BYTES)
        .map_err(pad_store::StoreError::from)?;
    Ok(axum::Json(BodyHtml { html: render_markdown(&req.markdown) }))
}

/// Markdown → HTML → ammonia's allow-list. Raw HTML in the markdown is kept
/// only as far as the sanitizer allows; links get `rel="noopener noreferrer"`.
pub fn render_markdown(markdown: &str) -> String {
    use pulldown_cmark::{Options, Parser, html};
    let options = Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    let mut unsafe_html = String::with_capacity(markdown.len() * 3 / 2);
    html::push_html(&mut unsafe_html, Parser::new_ext(markdown, options));
    ammonia::Builder::default()
        // Task-list checkboxes: shown, never editable.
        .add_tags(["input"])
        .add_tag_attributes("input", ["type", "checked", "disabled"])
        .url_schemes(["http", "https", "mailto"].into())
        .clean(&unsafe_html)
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::render_markdown;

    #[test]
    fn renders_markdown() {
        let html = render_markdown("# Title\n\nSome **bold** and `code`.\n\n- [x] done\n");
        assert!(html.contains("<h1>Title</h1>"), "{html}");
        assert!(html.contains("<strong>bold</strong>"), "{html}");
        assert!(html.contains("<code>code</code>"), "{html}");
        assert!(html.contains("checkbox"), "{html}");
    }

    #[test]
    fn strips_scripts_handlers_and_javascript_urls() {
        let html = render_markdown(
            "<script>window.__pwned = 1</script>\n\n<img src=x onerror=\"window.__pwned=1\">\n\n[x](javascript:alert(1)) <a href=\"https://example.com\" style=\"color:red\">ok</a>",
        );
        for bad in ["<script", "onerror", "javascript:", "style="] {
            assert!(!html.contains(bad), "{bad} survived: {html}");
        }
        assert!(html.contains("rel=\"noopener noreferrer\""), "{html}");
    }
}
