//! The HTTP API's wire shapes (docs/api.md), shared by the server and the typed
//! client so the two cannot drift apart. Item and lease shapes live in
//! [`crate::model`] and [`crate::lease`].

// One module per concept, as in `model/`; everything is re-exported here so
// `pad_core::api::Foo` is the one path callers use.
mod accounts;
pub use accounts::{
    CreateKind, CreateToken, CreateWorkspace, KindList, Me, MemberList, SetMember, TokenCreated, TokenList,
    TokenScopeKind, WorkspaceList, WorkspaceRole, WorkspaceView,
};
mod batch;
pub use batch::{
    Batch, CLAIM_NEXT_COUNT_MAX, CLAIM_NEXT_WAIT_MAX_SECONDS, COUNT_FIELD, Grant, RENEW_LEASES_MAX, RenewEntry,
    RenewLeasesBody, RenewLeasesResponse, RenewResult, WAIT_ALIAS, WAIT_FIELD,
};
mod errors;
pub use errors::{ErrorBody, ErrorCode, ErrorEnvelope, LeaseHeldDetails};
mod events;
pub use events::{EventPage, EventsQuery};
mod import;
pub use import::{
    IMPORT_COMMENTS_MAX, IMPORT_ITEMS_MAX, IMPORT_KEY_MAX, IMPORT_KINDS_MAX, IMPORT_WRITES_MAX, ImportItem,
    ImportRequest, ImportResult, ImportedRef, ValidImportItem,
};
mod items;
pub use items::{
    COMMENTS_LIMIT_DEFAULT, COMMENTS_LIMIT_MAX, CommentList, DeleteQuery, HISTORY_LIMIT_DEFAULT, HISTORY_LIMIT_MAX,
    ItemPage, ListQuery, NewComment, PAGE_BYTES_MAX, PageQuery, VersionList,
};
mod leases;
pub use leases::{
    ClaimBody, ClaimNextBody, ClaimNextResponse, ClaimResponse, CompleteBody, CompleteResponse, FailBody, FailResponse,
    FrontierList, FrontierQuery, ReleaseBody, ReleaseResponse, RenewBody, RenewResponse, TTL_FIELD, TtlSeconds,
};

/// A comma-separated query value's parts, blanks dropped.
fn split(s: &Option<String>) -> Vec<&str> {
    s.as_deref().map(|s| s.split(',').map(str::trim).filter(|p| !p.is_empty()).collect()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use utoipa::PartialSchema;

    /// The OpenAPI attributes take literals; these are the enforced limits.
    #[test]
    fn lease_bodies_state_the_enforced_limits() {
        for schema in [ClaimBody::schema(), RenewBody::schema(), ReleaseBody::schema(), ClaimNextBody::schema()] {
            let s = serde_json::to_value(schema).unwrap();
            assert_eq!(s["properties"]["holder"]["maxLength"], crate::NAME_MAX, "{s}");
            assert_eq!(s["properties"]["holder"]["minLength"], 1);
            if let Some(ttl) = s["properties"].get("ttl_seconds") {
                assert_eq!(ttl["maximum"], crate::lease::TTL_MAX_SECONDS);
            }
        }
        let new = serde_json::to_value(CreateWorkspace::schema()).unwrap();
        assert_eq!(new["properties"]["name"]["maxLength"], crate::NAME_MAX);
        let c = serde_json::to_value(NewComment::schema()).unwrap();
        assert_eq!(c["properties"]["body"]["maxLength"], crate::COMMENT_MAX_BYTES);
    }
}
