//! A typed async client for pad's HTTP API (docs/api.md): one method per route,
//! answering with pad-core's wire types, and one error type, [`ClientError`],
//! that knows the CLI's exit codes.

mod error;
mod sse;

use std::fmt;
use std::time::Duration;

use pad_core::api::{
    COMMENTS_LIMIT_MAX, ClaimBody, ClaimNextBody, ClaimNextResponse, ClaimResponse, CommentList, CompleteBody,
    CompleteResponse, CreateKind, CreateToken, CreateWorkspace, DeleteQuery, EventsQuery, FailBody, FailResponse,
    FrontierList, FrontierQuery, HISTORY_LIMIT_MAX, ItemPage, KindList, ListQuery, Me, MemberList, NewComment,
    PageQuery, ReleaseBody, ReleaseResponse, RenewBody, RenewLeasesBody, RenewLeasesResponse, RenewResponse, SetMember,
    TokenCreated, TokenList, VersionList, WorkspaceList, WorkspaceView,
};
use pad_core::{Comment, Event, Item, ItemPatch, Kind, Member, NewItem};
use reqwest::{Method, RequestBuilder, header};
use serde::de::DeserializeOwned;

pub use error::{ClientError, HeldLease};
pub use reqwest::Url;
pub use sse::EventStream;

pub type Result<T, E = ClientError> = std::result::Result<T, E>;

/// Long enough for a slow database, short enough that a hung server does not
/// hang a script forever.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// Idle connections are dropped before the server's 10 s bound on an idle
/// keep-alive connection (docs/api.md, Limits), so a request never races the
/// server closing the connection it was sent on.
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(5);
/// An event stream has no total deadline; silence this long (the server
/// sends a keep-alive every 15 s) means the connection is dead.
const STREAM_READ_TIMEOUT: Duration = Duration::from_secs(45);

/// A connection to one server as one identity. Cheap to clone.
#[derive(Clone)]
pub struct Client {
    base_url: Url,
    token: String,
    http: reqwest::Client,
    /// For event streams: the same, without the total timeout.
    streaming: reqwest::Client,
}

/// Never prints the token.
impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client").field("base_url", &self.base_url.as_str()).finish_non_exhaustive()
    }
}

impl Client {
    /// `base_url` is the server's root (`http://127.0.0.1:7777`, or one with
    /// a path prefix behind a proxy); `/api/v1/…` is appended to it.
    pub fn new(base_url: Url, token: impl Into<String>) -> Result<Self> {
        if base_url.cannot_be_a_base() || !matches!(base_url.scheme(), "http" | "https") {
            return Err(ClientError::Protocol(format!("{base_url} is not an http(s) URL")));
        }
        let builder = || {
            reqwest::Client::builder()
                .connect_timeout(CONNECT_TIMEOUT)
                .pool_idle_timeout(POOL_IDLE_TIMEOUT)
                .user_agent(concat!("pad/", env!("CARGO_PKG_VERSION")))
        };
        let http = builder().timeout(REQUEST_TIMEOUT).build().map_err(ClientError::from_transport)?;
        let streaming = builder().read_timeout(STREAM_READ_TIMEOUT).build().map_err(ClientError::from_transport)?;
        Ok(Self { base_url, token: token.into(), http, streaming })
    }

    pub fn base_url(&self) -> &Url {
        &self.base_url
    }

    // --- identity and workspaces -------------------------------------------

    pub async fn me(&self) -> Result<Me> {
        self.json(self.request(Method::GET, &["me"])).await
    }

    pub async fn workspaces(&self) -> Result<WorkspaceList> {
        self.json(self.request(Method::GET, &["workspaces"])).await
    }

    pub async fn create_workspace(&self, body: &CreateWorkspace) -> Result<WorkspaceView> {
        self.json(self.request(Method::POST, &["workspaces"]).json(body)).await
    }

    pub async fn workspace(&self, ws: &str) -> Result<WorkspaceView> {
        self.json(self.request(Method::GET, &["workspaces", ws])).await
    }

    /// Change the workspace's lease settings (`PATCH /workspaces/{ws}`; owners).
    pub async fn update_settings(&self, ws: &str, patch: &pad_core::settings::SettingsPatch) -> Result<WorkspaceView> {
        self.json(self.request(Method::PATCH, &["workspaces", ws]).json(patch)).await
    }

    /// The caller's view of one workspace (`GET /workspaces/{ws}/me`).
    pub async fn my_workspace(&self, ws: &str) -> Result<WorkspaceView> {
        self.json(self.request(Method::GET, &["workspaces", ws, "me"])).await
    }

    pub async fn kinds(&self, ws: &str) -> Result<KindList> {
        self.json(self.request(Method::GET, &["workspaces", ws, "kinds"])).await
    }

    pub async fn create_kind(&self, ws: &str, body: &CreateKind) -> Result<Kind> {
        self.json(self.request(Method::POST, &["workspaces", ws, "kinds"]).json(body)).await
    }

    // --- items ---------------------------------------------------------------

    pub async fn list_items(&self, ws: &str, query: &ListQuery) -> Result<ItemPage> {
        self.json(self.request(Method::GET, &["workspaces", ws, "items"]).query(query)).await
    }

    pub async fn create_item(&self, ws: &str, body: &NewItem) -> Result<Item> {
        self.json(self.request(Method::POST, &["workspaces", ws, "items"]).json(body)).await
    }

    /// A whole import, all or nothing (docs/api.md, "Import").
    pub async fn import(&self, ws: &str, body: &pad_core::api::ImportRequest) -> Result<pad_core::api::ImportResult> {
        self.json(self.request(Method::POST, &["workspaces", ws, "import"]).json(body)).await
    }

    pub async fn item(&self, ws: &str, item_ref: &str) -> Result<Item> {
        self.json(self.item_request(Method::GET, ws, item_ref, None)).await
    }

    pub async fn update_item(&self, ws: &str, item_ref: &str, patch: &ItemPatch) -> Result<Item> {
        self.json(self.item_request(Method::PATCH, ws, item_ref, None).json(patch)).await
    }

    /// Soft delete; answers with the deleted item.
    pub async fn delete_item(&self, ws: &str, item_ref: &str, query: &DeleteQuery) -> Result<Item> {
        self.json(self.item_request(Method::DELETE, ws, item_ref, None).query(query)).await
    }

    pub async fn restore_item(&self, ws: &str, item_ref: &str) -> Result<Item> {
        self.json(self.item_request(Method::POST, ws, item_ref, Some("restore"))).await
    }

    /// One page of the item's history, newest first (docs/api.md, "Pages of
    /// history and comments").
    pub async fn history_page(&self, ws: &str, item_ref: &str, query: &PageQuery) -> Result<VersionList> {
        self.json(self.item_request(Method::GET, ws, item_ref, Some("history")).query(query)).await
    }

    /// The item's whole history, newest first: every page, in turn.
    pub async fn history(&self, ws: &str, item_ref: &str) -> Result<VersionList> {
        let versions = all_pages(HISTORY_LIMIT_MAX, |query| async move {
            let page = self.history_page(ws, item_ref, &query).await?;
            Ok((page.versions, page.next_cursor))
        })
        .await?;
        Ok(VersionList { versions, next_cursor: None })
    }

    /// One page of the item's comments, oldest first.
    pub async fn comments_page(&self, ws: &str, item_ref: &str, query: &PageQuery) -> Result<CommentList> {
        self.json(self.item_request(Method::GET, ws, item_ref, Some("comments")).query(query)).await
    }

    /// All of the item's comments, oldest first: every page, in turn.
    pub async fn comments(&self, ws: &str, item_ref: &str) -> Result<CommentList> {
        let comments = all_pages(COMMENTS_LIMIT_MAX, |query| async move {
            let page = self.comments_page(ws, item_ref, &query).await?;
            Ok((page.comments, page.next_cursor))
        })
        .await?;
        Ok(CommentList { comments, next_cursor: None })
    }

    pub async fn add_comment(&self, ws: &str, item_ref: &str, body: &NewComment) -> Result<Comment> {
        self.json(self.item_request(Method::POST, ws, item_ref, Some("comments")).json(body)).await
    }

    // --- leases (docs/leases.md) ----------------------------------------------------

    pub async fn claim(&self, ws: &str, item_ref: &str, body: &ClaimBody) -> Result<ClaimResponse> {
        self.json(self.item_request(Method::POST, ws, item_ref, Some("claim")).json(body)).await
    }

    pub async fn renew(&self, ws: &str, item_ref: &str, body: &RenewBody) -> Result<RenewResponse> {
        self.json(self.item_request(Method::POST, ws, item_ref, Some("renew")).json(body)).await
    }

    pub async fn release(&self, ws: &str, item_ref: &str, body: &ReleaseBody) -> Result<ReleaseResponse> {
        self.json(self.item_request(Method::POST, ws, item_ref, Some("release")).json(body)).await
    }

    /// L15: sets the status (default `done`) and ends the lease, fenced by
    /// `epoch` or `lease_id`, in one step.
    pub async fn complete(&self, ws: &str, item_ref: &str, body: &CompleteBody) -> Result<CompleteResponse> {
        self.json(self.item_request(Method::POST, ws, item_ref, Some("complete")).json(body)).await
    }

    /// L14: reports a failed attempt: ends the lease, counts the failure and
    /// defers the item's next hand-out by claim-next.
    pub async fn fail(&self, ws: &str, item_ref: &str, body: &FailBody) -> Result<FailResponse> {
        self.json(self.item_request(Method::POST, ws, item_ref, Some("fail")).json(body)).await
    }

    /// Ready items, best first (L11): what `claim_next` would pick from.
    pub async fn frontier(&self, ws: &str, query: &FrontierQuery) -> Result<FrontierList> {
        self.json(self.request(Method::GET, &["workspaces", ws, "frontier"]).query(query)).await
    }

    /// Claims the best ready items (L11), `body.count` at most; none when
    /// nothing is ready. A long poll (`wait_seconds`) gets that much more time
    /// than other requests before the client gives up on it.
    pub async fn claim_next(&self, ws: &str, body: &ClaimNextBody) -> Result<ClaimNextResponse> {
        // A wait the server refuses adds nothing.
        let wait = Duration::from_secs(body.wait_asked().and_then(|w| u64::try_from(w).ok()).unwrap_or(0));
        let req = self.request(Method::POST, &["workspaces", ws, "claim-next"]).json(body);
        self.json(req.timeout(REQUEST_TIMEOUT + wait)).await
    }

    /// One heartbeat for many leases (L4): each renewed or refused on its
    /// own, in the order asked.
    pub async fn renew_leases(&self, ws: &str, body: &RenewLeasesBody) -> Result<RenewLeasesResponse> {
        self.json(self.request(Method::POST, &["workspaces", ws, "leases", "renew"]).json(body)).await
    }

    // --- events (docs/api.md, Events) ----------------------------------------------------

    /// A page of events matching `query` (`after`, `limit`, `ref`, `type`).
    pub async fn events_where(&self, ws: &str, query: &EventsQuery) -> Result<Vec<Event>> {
        let page: pad_core::api::EventPage =
            self.json(self.request(Method::GET, &["workspaces", ws, "events"]).query(query)).await?;
        Ok(page.events)
    }

    /// Up to `limit` events with ids greater than `after`, oldest first.
    pub async fn events(&self, ws: &str, after: i64, limit: u32) -> Result<Vec<Event>> {
        let query = [("after", after.to_string()), ("limit", limit.to_string())];
        let page: pad_core::api::EventPage =
            self.json(self.request(Method::GET, &["workspaces", ws, "events"]).query(&query)).await?;
        Ok(page.events)
    }

    /// Opens the live stream of events with ids greater than `after` (all of
    /// them for 0). Refusals (a bad token, too many open streams) are errors
    /// here, before any event; the stream itself ends when the connection
    /// does, and resuming is another call with the last id seen.
    pub async fn event_stream(&self, ws: &str, after: i64) -> Result<EventStream> {
        self.event_stream_where(ws, after, &EventsQuery::default()).await
    }

    /// [`event_stream`](Self::event_stream) with the server filtering it:
    /// `ref` and `type` of `query` (its `after` and `limit` are not used).
    pub async fn event_stream_where(&self, ws: &str, after: i64, query: &EventsQuery) -> Result<EventStream> {
        let filters = EventsQuery { item_ref: query.item_ref.clone(), kind: query.kind.clone(), ..Default::default() };
        let request = self
            .streaming
            .get(self.url(&["workspaces", ws, "events", "stream"]))
            .query(&filters)
            .bearer_auth(&self.token)
            .header(header::ACCEPT, "text/event-stream")
            .header("last-event-id", after.to_string());
        let response = request.send().await.map_err(ClientError::from_transport)?;
        if !response.status().is_success() {
            let (status, retry_after) = (response.status().as_u16(), retry_after(&response));
            let body = response.bytes().await.map_err(ClientError::from_transport)?;
            return Err(ClientError::from_answer(status, retry_after, &body));
        }
        Ok(EventStream::new(response))
    }

    // --- members and tokens --------------------------------------------------

    pub async fn members(&self, ws: &str) -> Result<MemberList> {
        self.json(self.request(Method::GET, &["workspaces", ws, "members"])).await
    }

    /// Adds a member, or changes an existing member's role.
    pub async fn set_member(&self, ws: &str, body: &SetMember) -> Result<Member> {
        self.json(self.request(Method::POST, &["workspaces", ws, "members"]).json(body)).await
    }

    /// Removes a member; their tokens scoped to `ws` are revoked.
    pub async fn remove_member(&self, ws: &str, email: &str) -> Result<()> {
        self.send(self.request(Method::DELETE, &["workspaces", ws, "members", email])).await.map(drop)
    }

    pub async fn tokens(&self, ws: &str) -> Result<TokenList> {
        self.json(self.request(Method::GET, &["workspaces", ws, "tokens"])).await
    }

    /// The answer is the only time the token's secret is shown.
    pub async fn create_token(&self, ws: &str, body: &CreateToken) -> Result<TokenCreated> {
        self.json(self.request(Method::POST, &["workspaces", ws, "tokens"]).json(body)).await
    }

    pub async fn revoke_token(&self, ws: &str, id: i64) -> Result<()> {
        self.send(self.request(Method::DELETE, &["workspaces", ws, "tokens", &id.to_string()])).await.map(drop)
    }

    // --- webhooks (docs/webhooks.md) -----------------------------------------

    /// The answer is the only time the signing secret is shown.
    pub async fn create_webhook(
        &self, ws: &str, body: &pad_core::webhook::CreateWebhook,
    ) -> Result<pad_core::webhook::WebhookCreated> {
        self.json(self.request(Method::POST, &["workspaces", ws, "webhooks"]).json(body)).await
    }

    pub async fn webhooks(&self, ws: &str) -> Result<pad_core::webhook::WebhookList> {
        self.json(self.request(Method::GET, &["workspaces", ws, "webhooks"])).await
    }

    pub async fn delete_webhook(&self, ws: &str, id: i64) -> Result<()> {
        self.send(self.request(Method::DELETE, &["workspaces", ws, "webhooks", &id.to_string()])).await.map(drop)
    }

    /// Resumes a paused subscription and answers it.
    pub async fn resume_webhook(&self, ws: &str, id: i64) -> Result<pad_core::webhook::Webhook> {
        self.json(self.request(Method::POST, &["workspaces", ws, "webhooks", &id.to_string(), "resume"])).await
    }

    /// Sends a `webhook.test` delivery now and answers how it went.
    pub async fn test_webhook(&self, ws: &str, id: i64) -> Result<pad_core::webhook::WebhookDelivery> {
        self.json(self.request(Method::POST, &["workspaces", ws, "webhooks", &id.to_string(), "test"])).await
    }

    /// The delivery log, newest first.
    pub async fn webhook_deliveries(
        &self, ws: &str, id: i64, limit: Option<u32>,
    ) -> Result<pad_core::webhook::DeliveryList> {
        let q = pad_core::webhook::DeliveriesQuery { limit };
        self.json(self.request(Method::GET, &["workspaces", ws, "webhooks", &id.to_string(), "deliveries"]).query(&q))
            .await
    }

    // --- plumbing ------------------------------------------------------------

    /// `segments` are percent-encoded one by one, so a ref or slug typed by a
    /// person can never reach another route.
    fn url(&self, segments: &[&str]) -> Url {
        let mut url = self.base_url.clone();
        url.set_query(None);
        url.set_fragment(None);
        // `new` refused URLs that cannot take a path.
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().extend(["api", "v1"]).extend(segments);
        }
        url
    }

    fn request(&self, method: Method, segments: &[&str]) -> RequestBuilder {
        self.http
            .request(method, self.url(segments))
            .bearer_auth(&self.token)
            .header(header::ACCEPT, "application/json")
    }

    fn item_request(&self, method: Method, ws: &str, item_ref: &str, action: Option<&str>) -> RequestBuilder {
        let mut segments = vec!["workspaces", ws, "items", item_ref];
        segments.extend(action);
        self.request(method, &segments)
    }

    async fn json<T: DeserializeOwned>(&self, request: RequestBuilder) -> Result<T> {
        let body = self.send(request).await?;
        serde_json::from_slice(&body).map_err(|e| ClientError::Protocol(format!("{e} in {}", error::snippet(&body))))
    }

    /// Sends and answers with the body of a 2xx answer, or the error.
    async fn send(&self, request: RequestBuilder) -> Result<Vec<u8>> {
        let response = request.send().await.map_err(ClientError::from_transport)?;
        let (status, retry_after) = (response.status(), retry_after(&response));
        let body = response.bytes().await.map_err(ClientError::from_transport)?;
        if status.is_success() {
            Ok(body.to_vec())
        } else {
            Err(ClientError::from_answer(status.as_u16(), retry_after, &body))
        }
    }
}

/// `Retry-After` in seconds (`lease_held`, `rate_limited`).
fn retry_after(response: &reqwest::Response) -> Option<u64> {
    response.headers().get(header::RETRY_AFTER).and_then(|v| v.to_str().ok()).and_then(|v| v.trim().parse().ok())
}

/// Every entry of a paged list, `limit` a page: `page` answers one page's
/// entries and its `next_cursor`, until there is none.
async fn all_pages<T, F, Fut>(limit: u32, mut page: F) -> Result<Vec<T>>
where
    F: FnMut(PageQuery) -> Fut,
    Fut: std::future::Future<Output = Result<(Vec<T>, Option<String>)>>,
{
    let (mut all, mut cursor) = (Vec::new(), None);
    loop {
        let (entries, next) = page(PageQuery { limit: Some(limit), cursor }).await?;
        all.extend(entries);
        match next {
            Some(next) => cursor = Some(next),
            None => return Ok(all),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(base: &str) -> Client {
        Client::new(Url::parse(base).unwrap(), "t").unwrap()
    }

    #[test]
    fn urls_append_to_the_base_and_encode_segments() {
        let c = client("http://127.0.0.1:7777");
        assert_eq!(
            c.url(&["workspaces", "default", "items"]).as_str(),
            "http://127.0.0.1:7777/api/v1/workspaces/default/items"
        );
        let c = client("https://example.test/pad/?x=1");
        assert_eq!(c.url(&["me"]).as_str(), "https://example.test/pad/api/v1/me");
        assert_eq!(c.url(&["workspaces", "a/b?c"]).as_str(), "https://example.test/pad/api/v1/workspaces/a%2Fb%3Fc");
    }

    #[test]
    fn only_http_urls_are_accepted() {
        assert!(Client::new(Url::parse("mailto:a@b").unwrap(), "t").is_err());
        assert!(Client::new(Url::parse("ftp://x").unwrap(), "t").is_err());
    }

    #[test]
    fn debug_hides_the_token() {
        let c = Client::new(Url::parse("http://x").unwrap(), "secret-token").unwrap();
        assert!(!format!("{c:?}").contains("secret"));
    }

    #[tokio::test]
    async fn a_closed_port_is_unavailable() {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let c = client(&format!("http://127.0.0.1:{port}"));
        let e = c.me().await.unwrap_err();
        assert!(matches!(e, ClientError::Unavailable(_)), "{e:?}");
    }

    /// One answer, whatever the request: a 429 with `Retry-After: 7`.
    #[tokio::test]
    async fn retry_after_reaches_the_error() {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            let mut head = Vec::new();
            let mut byte = [0_u8; 1];
            // A GET has no body: its head is the whole request.
            while !head.ends_with(b"\r\n\r\n") && conn.read(&mut byte).is_ok_and(|n| n == 1) {
                head.push(byte[0]);
            }
            let body = r#"{"error":{"code":"rate_limited","message":"slow down","details":{}}}"#;
            let answer = format!(
                "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 7\r\nContent-Type: application/json\r\n\
                 Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            conn.write_all(answer.as_bytes()).unwrap();
        });
        let e = client(&base).me().await.unwrap_err();
        assert!(matches!(e, ClientError::Api { status: 429, retry_after: Some(7), .. }), "{e:?}");
        assert_eq!(e.code(), Some(pad_core::api::ErrorCode::RateLimited));
        assert_eq!(e.retry_after(), Some(std::time::Duration::from_secs(7)));
    }
}
