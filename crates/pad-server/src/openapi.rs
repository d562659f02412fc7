//! The OpenAPI document served at `/openapi.json`, generated from the
//! handlers' annotations and types. `openapi.json` at the crate root is the
//! committed copy; a test fails when the two drift apart.

use utoipa::OpenApi;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};

use crate::routes::{events, import, items, leases, render, webhooks, workspaces};

#[derive(OpenApi)]
#[openapi(
    info(title = "pad", description = "A work-item tracker with execution leases. All routes need `Authorization: Bearer <token>`."),
    paths(
        workspaces::me, workspaces::list, workspaces::create, workspaces::show, workspaces::update_settings, workspaces::me_in,
        workspaces::kinds, workspaces::add_kind, workspaces::members, workspaces::set_member,
        workspaces::tokens, workspaces::create_token, workspaces::revoke_token, workspaces::remove_member,
        items::list, items::create, items::show, items::update, items::delete, items::restore,
        items::history, items::comments, items::comment, import::import, render::body_html, render::render,
        leases::claim, leases::renew, leases::release, leases::complete, leases::fail, leases::requeue, leases::frontier, leases::claim_next, leases::renew_leases,
        events::page, events::stream, crate::session::create, crate::session::delete,
        webhooks::create, webhooks::list, webhooks::delete, webhooks::test, webhooks::deliveries, webhooks::resume,
    ),
    modifiers(&Bearer),
    security(("bearer" = [])),
)]
struct ApiDoc;

struct Bearer;

impl utoipa::Modify for Bearer {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        let components = doc.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

pub fn spec() -> utoipa::openapi::OpenApi {
    let mut doc = ApiDoc::openapi();
    // The version is the crate's, not utoipa's guess from the environment.
    doc.info.version = env!("CARGO_PKG_VERSION").to_string();
    doc
}
