//! What the tools need from pad: one method per API call they make. Two
//! implementations answer with the same wire types and the same refusals:
//! the typed HTTP client (`pad mcp` over stdio, with the CLI's profile), and
//! the server's in-process adapter behind `POST /mcp`, which calls the very
//! route handlers the HTTP API uses with the caller it already authenticated.

use std::sync::Arc;

use async_trait::async_trait;
use pad_client::{Client, ClientError};
use pad_core::api::{
    ClaimBody, ClaimNextBody, ClaimNextResponse, ClaimResponse, CompleteBody, CompleteResponse, FailBody, FailResponse,
    FrontierList, FrontierQuery, ItemPage, ListQuery, Me, NewComment, ReleaseBody, ReleaseResponse, RenewBody,
    RenewLeasesBody, RenewLeasesResponse, RenewResponse,
};
use pad_core::{Comment, Item, ItemPatch, NewItem};

/// An answer, or the API's refusal (`ClientError::Api` with the same code,
/// message and details an HTTP caller would get).
pub type ApiResult<T> = Result<T, ClientError>;

#[async_trait]
pub trait PadApi: Send + Sync {
    /// Where this pad is, for the session brief.
    fn server(&self) -> String;
    async fn me(&self) -> ApiResult<Me>;
    async fn list_items(&self, ws: &str, query: &ListQuery) -> ApiResult<ItemPage>;
    async fn item(&self, ws: &str, item_ref: &str) -> ApiResult<Item>;
    async fn create_item(&self, ws: &str, new: &NewItem) -> ApiResult<Item>;
    async fn update_item(&self, ws: &str, item_ref: &str, patch: &ItemPatch) -> ApiResult<Item>;
    async fn add_comment(&self, ws: &str, item_ref: &str, body: &NewComment) -> ApiResult<Comment>;
    async fn frontier(&self, ws: &str, query: &FrontierQuery) -> ApiResult<FrontierList>;
    async fn claim(&self, ws: &str, item_ref: &str, body: &ClaimBody) -> ApiResult<ClaimResponse>;
    async fn renew(&self, ws: &str, item_ref: &str, body: &RenewBody) -> ApiResult<RenewResponse>;
    async fn release(&self, ws: &str, item_ref: &str, body: &ReleaseBody) -> ApiResult<ReleaseResponse>;
    async fn complete(&self, ws: &str, item_ref: &str, body: &CompleteBody) -> ApiResult<CompleteResponse>;
    async fn fail(&self, ws: &str, item_ref: &str, body: &FailBody) -> ApiResult<FailResponse>;
    async fn claim_next(&self, ws: &str, body: &ClaimNextBody) -> ApiResult<ClaimNextResponse>;
    async fn renew_leases(&self, ws: &str, body: &RenewLeasesBody) -> ApiResult<RenewLeasesResponse>;
}

/// The API of one `POST /mcp` request, put in the request's extensions by the
/// server once it has authenticated the caller; the tools of that request
/// run against it.
#[derive(Clone)]
pub struct CallerApi(pub Arc<dyn PadApi>);

#[async_trait]
impl PadApi for Client {
    fn server(&self) -> String {
        self.base_url().to_string()
    }
    async fn me(&self) -> ApiResult<Me> {
        Client::me(self).await
    }
    async fn list_items(&self, ws: &str, query: &ListQuery) -> ApiResult<ItemPage> {
        Client::list_items(self, ws, query).await
    }
    async fn item(&self, ws: &str, item_ref: &str) -> ApiResult<Item> {
        Client::item(self, ws, item_ref).await
    }
    async fn create_item(&self, ws: &str, new: &NewItem) -> ApiResult<Item> {
        Client::create_item(self, ws, new).await
    }
    async fn update_item(&self, ws: &str, item_ref: &str, patch: &ItemPatch) -> ApiResult<Item> {
        Client::update_item(self, ws, item_ref, patch).await
    }
    async fn add_comment(&self, ws: &str, item_ref: &str, body: &NewComment) -> ApiResult<Comment> {
        Client::add_comment(self, ws, item_ref, body).await
    }
    async fn frontier(&self, ws: &str, query: &FrontierQuery) -> ApiResult<FrontierList> {
        Client::frontier(self, ws, query).await
    }
    async fn claim(&self, ws: &str, item_ref: &str, body: &ClaimBody) -> ApiResult<ClaimResponse> {
        Client::claim(self, ws, item_ref, body).await
    }
    async fn renew(&self, ws: &str, item_ref: &str, body: &RenewBody) -> ApiResult<RenewResponse> {
        Client::renew(self, ws, item_ref, body).await
    }
    async fn release(&self, ws: &str, item_ref: &str, body: &ReleaseBody) -> ApiResult<ReleaseResponse> {
        Client::release(self, ws, item_ref, body).await
    }
    async fn complete(&self, ws: &str, item_ref: &str, body: &CompleteBody) -> ApiResult<CompleteResponse> {
        Client::complete(self, ws, item_ref, body).await
    }
    async fn fail(&self, ws: &str, item_ref: &str, body: &FailBody) -> ApiResult<FailResponse> {
        Client::fail(self, ws, item_ref, body).await
    }
    async fn claim_next(&self, ws: &str, body: &ClaimNextBody) -> ApiResult<ClaimNextResponse> {
        Client::claim_next(self, ws, body).await
    }

    async fn renew_leases(&self, ws: &str, body: &RenewLeasesBody) -> ApiResult<RenewLeasesResponse> {
        Client::renew_leases(self, ws, body).await
    }
}
