//! An item's markdown body as sanitized HTML, for the web UI (ARCHITECTURE.md, Web UI).
//!
//! Rendering happens here rather than in the page so that exactly one,
//! well-tested sanitizer (ammonia) decides what markup reaches a browser:
//! the page inserts this HTML and nothing else it did not build itself.

use axum::extract::State;
use pad_core::Action;
use pad_core::api::{ErrorCode, ErrorEnvelope};
use serde::{Deserialize, Serialize};

use std::sync::Arc;

use crate::AppState;
use crate::error::{ApiError, ApiResult};
use crate::extract::{Ctx, ItemPath, Json};

#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct BodyHtml {
    /// The body rendered from CommonMark (plus tables, strikethrough and task
    /// lists), sanitized: no scripts, event handlers, styles or unsafe URLs.
    pub html: String,
}

/// An item's body rendered to sanitized HTML, with block quotes and lists
/// nested at most 32 levels deep (deeper levels are flattened, never refused).
#[utoipa::path(get, path = "/api/v1/workspaces/{ws}/items/{ref}/body.html", tag = "items",
    params(("ws" = String, Path), ("ref" = String, Path)),
    responses((status = 200, body = BodyHtml), (status = "default", body = ErrorEnvelope)))]
pub async fn body_html(State(s): State<AppState>, ctx: Ctx, ItemPath(r): ItemPath) -> ApiResult<axum::Json<BodyHtml>> {
    ctx.require(Action::Read)?;
    let item = s.store.get_item(&ctx.ws, &r).await?;
    let account = ctx.caller.charged_account().user_id;
    Ok(axum::Json(BodyHtml { html: s.render.render(account, item.body).await?.to_string() }))
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
/// Block quotes and lists nest at most 32 levels deep: deeper levels are
/// flattened into the 32nd and their extra markers shown as text, and at
/// most 2048 raw HTML tags are kept (the rest shows as text), so rendering
/// takes time linear in the body's size. The only `<input>` kept is a
/// disabled task-list checkbox.
#[utoipa::path(post, path = "/api/v1/workspaces/{ws}/render", tag = "items",
    params(("ws" = String, Path)), request_body = RenderRequest,
    responses((status = 200, body = BodyHtml), (status = "default", body = ErrorEnvelope)))]
pub async fn render(
    State(s): State<AppState>, ctx: Ctx, Json(req): Json<RenderRequest>,
) -> ApiResult<axum::Json<BodyHtml>> {
    ctx.require(Action::Read)?;
    pad_core::validate::body("markdown", &req.markdown, pad_core::BODY_MAX_BYTES)
        .map_err(pad_store::StoreError::from)?;
    let account = ctx.caller.charged_account().user_id;
    Ok(axum::Json(BodyHtml { html: s.render.render(account, req.markdown).await?.to_string() }))
}

/// Renders off the async workers, a few at a time, and remembers recent
/// answers (docs/api.md, "Markdown"): a render runs on the blocking pool, so
/// `/healthz` and other requests keep being answered while bodies render;
/// at most one render per core runs at once, the rest wait their turn
/// inside their request deadline; one account has at most one render
/// running or waiting for a core at a time, so an account that sends many
/// bodies at once waits behind itself, not everyone else; and a body
/// rendered lately is answered from memory, keyed by the SHA-256 of its
/// markdown.
pub struct Renderer {
    running: tokio::sync::Semaphore,
    /// Each account's turn (one render at a time); an entry lives while
    /// someone holds or waits for it.
    accounts: std::sync::Mutex<std::collections::HashMap<i64, Arc<tokio::sync::Semaphore>>>,
    recent: std::sync::Mutex<std::collections::HashMap<[u8; 32], Arc<str>>>,
}

/// How many rendered bodies are remembered; the memory is emptied when full.
const RECENT_RENDERS: usize = 64;

impl Default for Renderer {
    fn default() -> Self {
        Renderer::new(std::thread::available_parallelism().map_or(1, |n| n.get()))
    }
}

impl Renderer {
    /// A renderer running at most `cores` renders at once.
    pub fn new(cores: usize) -> Self {
        Renderer {
            running: tokio::sync::Semaphore::new(cores),
            accounts: Default::default(),
            recent: Default::default(),
        }
    }

    /// `markdown` rendered for a caller charged to `account` (docs/api.md,
    /// "Markdown").
    pub async fn render(&self, account: i64, markdown: String) -> Result<Arc<str>, ApiError> {
        use sha2::Digest;
        let key: [u8; 32] = sha2::Sha256::digest(markdown.as_bytes()).into();
        if let Some(html) = self.recent().get(&key) {
            return Ok(html.clone());
        }
        let stopped = |_| ApiError::new(ErrorCode::InternalError, "the renderer has stopped");
        let mine = AccountTurn::take(self, account);
        let _mine = mine.turn.acquire().await.map_err(stopped)?;
        let _turn = self.running.acquire().await.map_err(stopped)?;
        let html: Arc<str> = tokio::task::spawn_blocking(move || render_markdown(&markdown))
            .await
            .map_err(|_| ApiError::new(ErrorCode::InternalError, "rendering the markdown failed"))?
            .into();
        let mut recent = self.recent();
        if recent.len() >= RECENT_RENDERS {
            recent.clear();
        }
        recent.insert(key, html.clone());
        Ok(html)
    }

    fn recent(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<[u8; 32], Arc<str>>> {
        self.recent.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn accounts(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<i64, Arc<tokio::sync::Semaphore>>> {
        self.accounts.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// One account's turn to render, as a render holds or waits for it: the
/// account's entry goes once no render of it holds or waits for the turn,
/// so the map holds only accounts rendering now.
struct AccountTurn<'a> {
    renderer: &'a Renderer,
    account: i64,
    turn: Arc<tokio::sync::Semaphore>,
}

impl<'a> AccountTurn<'a> {
    fn take(renderer: &'a Renderer, account: i64) -> Self {
        let turn =
            renderer.accounts().entry(account).or_insert_with(|| Arc::new(tokio::sync::Semaphore::new(1))).clone();
        AccountTurn { renderer, account, turn }
    }
}

impl Drop for AccountTurn<'_> {
    fn drop(&mut self) {
        let mut accounts = self.renderer.accounts();
        // The map's reference and ours: nobody else holds or waits for it.
        if Arc::strong_count(&self.turn) == 2 {
            accounts.remove(&self.account);
        }
    }
}

/// How deep block quotes and lists nest in rendered HTML (docs/api.md,
/// "Markdown"). Deeper levels are flattened into the 32nd: their text shows,
/// their markers as plain characters. Nesting is what makes a renderer's work
/// grow faster than its input; with this bound, it grows with the body's size.
pub const MAX_NESTING: usize = 32;
/// How many raw HTML tags a body may carry into the sanitizer; past them, the
/// rest of its raw HTML shows as text (docs/api.md, "Markdown").
pub const MAX_RAW_HTML_TAGS: usize = 2048;

/// Markdown → HTML → ammonia's allow-list. Raw HTML in the markdown is kept
/// only as far as the sanitizer allows; links get `rel="noopener noreferrer"`.
/// Bounded: at most [`MAX_NESTING`] levels of quotes and lists, at most
/// [`MAX_RAW_HTML_TAGS`] raw tags, so the work is linear in the body's size.
/// Task-list items (`- [ ]`, `- [x]`) show a disabled checkbox; nothing
/// else makes an `<input>` (docs/api.md, "Markdown").
pub fn render_markdown(markdown: &str) -> String {
    use pulldown_cmark::{Options, Parser, html};
    let options = Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    let bounded = bound_line_markers(markdown);
    let mut unsafe_html = String::with_capacity(markdown.len() * 3 / 2);
    let mut events = Flatten::new(Parser::new_ext(&bounded, options));
    html::push_html(&mut unsafe_html, &mut events);
    let clean = sanitizer().clean(&unsafe_html).to_string();
    if events.tasks == 0 {
        return clean;
    }
    // The sanitizer allows no `<input>`, so a raw one in the body cannot
    // pass as a task's checkbox; each task's marker crossed it as text no
    // body can contain (it holds a fresh random value) and becomes its
    // checkbox only now.
    clean
        .replace(&events.task_marker(true), r#"<input checked="" type="checkbox" disabled="">"#)
        .replace(&events.task_marker(false), r#"<input type="checkbox" disabled="">"#)
}

fn sanitizer() -> &'static ammonia::Builder<'static> {
    static BUILDER: std::sync::OnceLock<ammonia::Builder<'static>> = std::sync::OnceLock::new();
    BUILDER.get_or_init(|| {
        // Ammonia's default allow-list has no `<input>`: a raw one is dropped
        // like any other tag off the list. Task-list checkboxes are put back
        // after cleaning (see `render_markdown`).
        let mut b = ammonia::Builder::default();
        b.url_schemes(["http", "https", "mailto"].into());
        // A task's marker must survive only as text: raw HTML left open
        // around a task list (`<div title="` …) would carry it into an
        // attribute value, where putting the checkbox back would write
        // markup into the attribute.
        b.attribute_filter(|_, _, value| (!value.contains(TASK_MARKER)).then_some(value.into()));
        b
    })
}

/// What every task marker starts with ([`Flatten::task_marker`]).
const TASK_MARKER: &str = "padtask";

/// Escapes the container markers (`>`, `-`, `*`, `+`, `1.`, `1)`) that open
/// a line past the first [`MAX_NESTING`], so the parser never opens more than
/// that many containers on one line: a line of 45 000 `>` is 32 quotes and
/// text. Lines within the bound are passed through untouched.
fn bound_line_markers(markdown: &str) -> std::borrow::Cow<'_, str> {
    let mut out = String::new();
    let mut copied = 0;
    let mut line_start = 0;
    let bytes = markdown.as_bytes();
    while line_start < bytes.len() {
        let line_end = memchr_newline(bytes, line_start);
        let mut i = line_start;
        let mut depth = 0;
        loop {
            while i < line_end && matches!(bytes[i], b' ' | b'\t') {
                i += 1;
            }
            let Some(marker_end) = container_marker(bytes, i, line_end) else { break };
            depth += 1;
            if depth > MAX_NESTING {
                // The backslash goes before the marker's punctuation.
                let punct = marker_end - 1;
                out.push_str(&markdown[copied..punct]);
                out.push('\\');
                copied = punct;
                break;
            }
            i = marker_end;
        }
        line_start = line_end + 1;
    }
    if copied == 0 {
        return std::borrow::Cow::Borrowed(markdown);
    }
    out.push_str(&markdown[copied..]);
    std::borrow::Cow::Owned(out)
}

fn memchr_newline(bytes: &[u8], from: usize) -> usize {
    bytes[from..].iter().position(|&b| b == b'\n').map_or(bytes.len(), |p| from + p)
}

/// The end of the block-quote or list marker at `i`, if one starts there.
fn container_marker(bytes: &[u8], i: usize, end: usize) -> Option<usize> {
    let spaced = |j: usize| j == end || matches!(bytes[j], b' ' | b'\t' | b'\r');
    match bytes.get(i)? {
        _ if i >= end => None,
        b'>' => Some(i + 1),
        b'-' | b'*' | b'+' if spaced(i + 1) => Some(i + 1),
        b'0'..=b'9' => {
            let digits = bytes[i..end].iter().take_while(|b| b.is_ascii_digit()).count();
            let j = i + digits;
            (digits <= 9 && j < end && matches!(bytes[j], b'.' | b')') && spaced(j + 1)).then_some(j + 1)
        }
        _ => None,
    }
}

/// The parser's events with quotes and lists deeper than [`MAX_NESTING`]
/// flattened into their parent (an item's end becomes a line break), and raw
/// HTML past [`MAX_RAW_HTML_TAGS`] turned into text, and task-list markers
/// turned into placeholder text (see `render_markdown`).
struct Flatten<'a, I> {
    events: I,
    /// Random for each render, so no body can spell a placeholder.
    nonce: String,
    /// How many task-list markers became placeholders.
    tasks: usize,
    /// For each open quote, list and item: whether its tags are kept.
    open: Vec<bool>,
    depth: usize,
    raw_tags: usize,
    _text: std::marker::PhantomData<&'a ()>,
}

impl<'a, I: Iterator<Item = pulldown_cmark::Event<'a>>> Flatten<'a, I> {
    fn new(events: I) -> Self {
        Flatten {
            events,
            nonce: crate::auth::random_hex::<16>(),
            tasks: 0,
            open: Vec::new(),
            depth: 0,
            raw_tags: 0,
            _text: std::marker::PhantomData,
        }
    }

    /// The text standing in for a task's checkbox until the HTML is clean:
    /// letters and digits only, which the sanitizer passes unchanged.
    fn task_marker(&self, checked: bool) -> String {
        format!("{TASK_MARKER}{}{}", if checked { "x" } else { "o" }, self.nonce)
    }

    /// Counts the raw tags in `raw`; false once past [`MAX_RAW_HTML_TAGS`].
    fn raw_allowed(&mut self, raw: &str) -> bool {
        self.raw_tags = self.raw_tags.saturating_add(raw.matches('<').count());
        self.raw_tags <= MAX_RAW_HTML_TAGS
    }
}

impl<'a, I: Iterator<Item = pulldown_cmark::Event<'a>>> Iterator for Flatten<'a, I> {
    type Item = pulldown_cmark::Event<'a>;

    fn next(&mut self) -> Option<Self::Item> {
        use pulldown_cmark::{Event, Tag, TagEnd};
        loop {
            let event = self.events.next()?;
            match event {
                Event::Start(Tag::BlockQuote(_) | Tag::List(_)) => {
                    self.depth += 1;
                    let keep = self.depth <= MAX_NESTING;
                    self.open.push(keep);
                    if keep {
                        return Some(event);
                    }
                }
                Event::Start(Tag::Item) => {
                    let keep = self.open.last().copied().unwrap_or(true);
                    self.open.push(keep);
                    if keep {
                        return Some(event);
                    }
                }
                Event::End(TagEnd::BlockQuote(_) | TagEnd::List(_)) => {
                    self.depth = self.depth.saturating_sub(1);
                    if self.open.pop().unwrap_or(true) {
                        return Some(event);
                    }
                }
                Event::End(TagEnd::Item) => {
                    return Some(if self.open.pop().unwrap_or(true) { event } else { Event::HardBreak });
                }
                Event::Html(raw) => {
                    return Some(if self.raw_allowed(&raw) { Event::Html(raw) } else { Event::Text(raw) });
                }
                Event::InlineHtml(raw) => {
                    return Some(if self.raw_allowed(&raw) { Event::InlineHtml(raw) } else { Event::Text(raw) });
                }
                Event::TaskListMarker(checked) => {
                    self.tasks += 1;
                    return Some(Event::Text(self.task_marker(checked).into()));
                }
                _ => return Some(event),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Renderer, render_markdown};

    /// docs/api.md, "Markdown": an account waits behind its own renders, not
    /// everyone else behind it. One core; a render is under way (its permit
    /// held here); account 1 asks for two bodies, then account 2 for one.
    /// Account 2's comes second, before account 1's other: first come, first
    /// served would have made it last.
    #[tokio::test(flavor = "current_thread")]
    async fn an_account_waits_behind_its_own_renders_not_others() {
        let r = std::sync::Arc::new(Renderer::new(1));
        let busy = r.running.try_acquire().expect("the one core is free");
        let (done, mut order) = tokio::sync::mpsc::unbounded_channel();
        for (account, body) in [(1, "one a"), (1, "one b"), (2, "two")] {
            let (r, done) = (r.clone(), done.clone());
            tokio::spawn(async move {
                r.render(account, body.to_string()).await.unwrap();
                done.send(body).unwrap();
            });
            // Let it reach its wait before the next one asks.
            for _ in 0..10 {
                tokio::task::yield_now().await;
            }
        }
        drop(busy);
        let mut got = Vec::new();
        for _ in 0..3 {
            got.push(order.recv().await.unwrap());
        }
        assert_eq!(got, ["one a", "two", "one b"]);
        assert!(r.accounts().is_empty(), "no account's turn outlives its renders");
    }

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

#[cfg(test)]
mod bounds {
    use super::{MAX_NESTING, MAX_RAW_HTML_TAGS, TASK_MARKER, render_markdown};

    const BODY: usize = pad_core::BODY_MAX_BYTES;

    /// Renders `md` and checks the work was bounded: no deeper than
    /// [`MAX_NESTING`], output linear in the input, and (loosely, as this
    /// runs unoptimized) quick.
    fn bounded(md: &str) -> String {
        let started = std::time::Instant::now();
        let html = render_markdown(md);
        let took = started.elapsed();
        for tag in ["<blockquote>", "<ul>", "<ol>", "<ol start"] {
            assert!(html.matches(tag).count() <= MAX_NESTING, "{tag} nested past the bound");
        }
        assert!(html.len() <= 8 * md.len() + 1024, "output {} for input {}", html.len(), md.len());
        assert!(took < std::time::Duration::from_secs(10), "took {took:?}");
        html
    }

    #[test]
    fn hostile_nesting_is_flattened_at_the_bound() {
        let html = bounded(&">".repeat(BODY));
        assert_eq!(html.matches("<blockquote>").count(), MAX_NESTING);
        assert!(html.contains("&gt;&gt;&gt;"), "the excess shows as text");
        bounded(&"> ".repeat(BODY / 2));
        let html = bounded(&"1. ".repeat(BODY / 3));
        assert_eq!(html.matches("<ol>").count(), MAX_NESTING);
        bounded(&"- a ".repeat(BODY / 4));
        bounded(&"> - 1. ".repeat(BODY / 7));
        bounded(&format!("{}\n{}", ">".repeat(BODY / 2), "x\n".repeat(BODY / 4)));
        bounded(&format!("{}x\n", "> ".repeat(40)).repeat(BODY / 83));
        // Nesting by indentation is flattened after parsing.
        let indented: String = (0..300).map(|d| format!("{}- x{d}\n", "  ".repeat(d))).collect();
        let html = bounded(&indented);
        assert_eq!(html.matches("<ul>").count(), MAX_NESTING);
        assert!(html.contains("x299"), "flattened items keep their text");
    }

    #[test]
    fn raw_html_past_the_bound_shows_as_text() {
        let html = bounded(&"<div>".repeat(BODY / 5));
        assert!(html.matches("<div>").count() <= MAX_RAW_HTML_TAGS, "{}", html.len());
        assert!(html.contains("&lt;div&gt;"));
        assert!(bounded("<div><b>kept</b></div>").contains("<b>kept</b>"));
    }

    #[test]
    fn shallow_bodies_render_as_before() {
        let html = bounded("> quote\n>> deeper\n\n- a\n  - b\n\n1. one\n2. two\n");
        assert_eq!(html.matches("<blockquote>").count(), 2, "{html}");
        assert!(html.contains("<ul>\n<li>a\n<ul>\n<li>b</li>"), "{html}");
        assert!(html.contains("<ol>"), "{html}");
    }

    #[test]
    fn only_task_list_items_make_checkboxes() {
        let html = render_markdown("- [x] done\n- [ ] todo\n");
        assert_eq!(html.matches("<input").count(), 2, "{html}");
        assert_eq!(html.matches("disabled").count(), 2, "{html}");
        assert_eq!(html.matches("checked").count(), 1, "{html}");
        assert!(html.find("checked").unwrap() < html.find("todo").unwrap(), "the done item is ticked: {html}");
        // Raw `<input>` in a body is dropped as any tag off the allow-list
        // is: no checkbox, ticked or not, and nothing of a form.
        for raw in [
            "hello <input type=text name=q> <input checked>",
            "<input type=\"checkbox\" disabled checked>",
            "<form action=\"https://e.com\"><input type=\"submit\" formaction=\"https://e.com\" value=\"Go\"></form>",
            "- [ ] <input checked> todo\n",
        ] {
            let html = render_markdown(raw);
            let task = usize::from(raw.starts_with("- [ ]"));
            assert_eq!(html.matches("<input").count(), task, "{raw}: {html}");
            for bad in ["checked", "<form", "submit", "formaction", "name="] {
                assert!(!html.contains(bad), "{bad} survived {raw}: {html}");
            }
        }
    }

    #[test]
    fn a_task_marker_carried_into_an_attribute_stays_out_of_it() {
        // Raw HTML left open around a task list carries its markers into
        // the attribute: the attribute is dropped, and no checkbox is made
        // there (nor anywhere but at a task).
        let raw = "<div title=\"\n\n- [ ] one\n- [x] two\n\n<a href=\"\">x</a>\n";
        let html = render_markdown(raw);
        assert!(!html.contains(TASK_MARKER), "{html}");
        assert!(!html.contains("title="), "{html}");
        assert!(html.matches("<input").count() <= 2, "{html}");
        for tag in html.split('<').skip(1) {
            // Every tag's attributes as ammonia wrote them: no quote or
            // bracket written into one afterwards.
            let inside = tag.split('>').next().unwrap_or_default();
            assert_eq!(inside.matches('"').count() % 2, 0, "{tag}: {html}");
        }
    }
}
