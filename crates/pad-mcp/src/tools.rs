//! The tools themselves: each one call of [`PadApi`], its arguments in
//! `args.rs` and its answer mapped by `errors.rs`.

use pad_core::api::{
    COUNT_FIELD, ClaimBody, ClaimNextBody, CompleteBody, ErrorBody, FailBody, ListQuery, NewComment, ReleaseBody,
    RenewBody, RenewEntry, RenewLeasesBody, WAIT_ALIAS, WAIT_FIELD,
};
use pad_core::{ItemPatch, NewItem};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, tool, tool_router};

use crate::PadTools;
use crate::args::*;
use crate::errors::{answer, error_envelope, refused};

/// The value, or the tool's refusal (an [`ErrorBody`] in the API's
/// envelope) as its answer.
macro_rules! or_refuse {
    ($result:expr) => {
        match $result {
            Ok(value) => value,
            Err(refusal) => return Ok(refused(refusal)),
        }
    };
}

/// Runs a tool body with the call's client, turning a missing token into a tool error.
macro_rules! with_client {
    ($self:ident, $ctx:ident, |$c:ident| $body:expr) => {
        match $self.client(&$ctx) {
            Ok($c) => answer($body.await),
            Err(refusal) => Ok(refusal),
        }
    };
}

#[tool_router(vis = "pub(crate)")]
impl PadTools {
    #[tool(
        annotations(read_only_hint = true, open_world_hint = false),
        description = "List items in a workspace, oldest first, with filters. An item's `lease` is present only while someone holds it."
    )]
    async fn pad_item_list(
        &self, Parameters(a): Parameters<ListArgs>, ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let q = ListQuery {
            status: a.status.clone(),
            kind: a.kind.clone(),
            label: a.label.clone(),
            leased: a.leased,
            q: a.q.clone(),
            limit: a.limit,
            cursor: a.cursor.clone(),
            ..Default::default()
        };
        with_client!(self, ctx, |c| c.list_items(self.ws(&a.workspace), &q))
    }

    #[tool(
        annotations(read_only_hint = true, open_world_hint = false),
        description = "Show one item by ref (e.g. TASK-5): title, body, status, priority, labels, links, and its live lease if any."
    )]
    async fn pad_item_show(
        &self, Parameters(a): Parameters<RefArgs>, ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        with_client!(self, ctx, |c| c.item(self.ws(&a.workspace), &a.item_ref))
    }

    #[tool(
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        ),
        description = "Create an item. Returns it, with its new ref."
    )]
    async fn pad_item_create(
        &self, Parameters(a): Parameters<CreateArgs>, ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let new = NewItem {
            title: a.title.clone(),
            body: a.body.clone().unwrap_or_default(),
            kind: a.kind.clone(),
            priority: a.priority,
            labels: a.labels.clone(),
            parent: a.parent.clone(),
            blocked_by: a.blocked_by.clone(),
            assignee: a.assignee.clone(),
            not_before: None,
        };
        with_client!(self, ctx, |c| c.create_item(self.ws(&a.workspace), &new))
    }

    #[tool(
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = true, open_world_hint = false),
        description = "Update an item's content or status. Pass lease_epoch (from your claim) so the write is refused with lease_lost if you no longer hold the lease; pass expected_updated_at to refuse with update_conflict if someone else edited it since you read it."
    )]
    async fn pad_item_update(
        &self, Parameters(a): Parameters<UpdateArgs>, ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let patch = ItemPatch {
            title: a.title.clone(),
            body: a.body.clone(),
            status: a.status,
            priority: a.priority,
            add_labels: a.add_labels.clone(),
            remove_labels: a.remove_labels.clone(),
            expected_updated_at: a.expected_updated_at,
            lease_epoch: a.lease_epoch,
            ..Default::default()
        };
        with_client!(self, ctx, |c| c.update_item(self.ws(&a.workspace), &a.item_ref, &patch))
    }

    #[tool(
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        ),
        description = "Add a comment (markdown) to an item: progress reports, findings, questions for a human."
    )]
    async fn pad_item_comment(
        &self, Parameters(a): Parameters<CommentArgs>, ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let body = NewComment { body: a.body.clone() };
        with_client!(self, ctx, |c| c.add_comment(self.ws(&a.workspace), &a.item_ref, &body))
    }

    #[tool(
        annotations(read_only_hint = true, open_world_hint = false),
        description = "The ready work: open items that are not blocked and not leased, highest priority first, then oldest. Does not claim anything; use pad_claim_next to take one atomically."
    )]
    async fn pad_frontier(
        &self, Parameters(a): Parameters<FrontierArgs>, ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let q = a.filter.query(a.limit);
        with_client!(self, ctx, |c| c.frontier(self.ws(&a.workspace), &q))
    }

    #[tool(
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        description = "Claim an item's execution lease: exclusive, expiring ownership for ttl_seconds (default 900). Leave holder and session_id out: this session has its own, distinct from every other agent session. Claiming again in the same session refreshes it (refreshed: true). Fails with lease_held when another worker holds it: details.holder and details.expires_in_seconds say who and for how long; choose other work. Remember the returned lease.epoch for renew, fenced updates, complete, fail and release (lease.lease_id may stand in for it in all but fenced updates). previous_note carries the last holder's handoff note."
    )]
    async fn pad_item_claim(
        &self, Parameters(a): Parameters<ClaimArgs>, ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let (holder, session_id) = self.claimant(&a.holder, &a.session_id);
        let body = ClaimBody {
            holder: Some(holder),
            session_id: Some(session_id),
            ttl_seconds: or_refuse!(ttl(&a.ttl_seconds)),
            note: a.note.clone(),
            refresh: None,
            max_hold_seconds: a.max_hold_seconds,
        };
        with_client!(self, ctx, |c| c.claim(self.ws(&a.workspace), &a.item_ref, &body))
    }

    #[tool(
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        description = "Extend your live lease (heartbeat). Call it before a third of the TTL is left. Needs the epoch (or lease_id) from your claim. lease_lost means the lease already expired or another worker took over: stop working on the item. A note records progress for whoever claims next."
    )]
    async fn pad_item_renew(
        &self, Parameters(a): Parameters<RenewArgs>, ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let holder = or_refuse!(self.holder_for(&a.holder));
        let body = RenewBody {
            epoch: a.epoch,
            lease_id: a.lease_id,
            holder,
            ttl_seconds: or_refuse!(ttl(&a.ttl_seconds)),
            note: a.note.clone(),
        };
        with_client!(self, ctx, |c| c.renew(self.ws(&a.workspace), &a.item_ref, &body))
    }

    #[tool(
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = true, open_world_hint = false),
        description = "Release your lease when you stop working on an item, so others can claim it at once. Idempotent: released: false means there was no live lease. Refused with lease_held if another worker holds it."
    )]
    async fn pad_item_release(
        &self, Parameters(a): Parameters<ReleaseArgs>, ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let holder = or_refuse!(self.holder_for(&a.holder));
        let body = ReleaseBody { holder, epoch: a.epoch, lease_id: a.lease_id, ..Default::default() };
        with_client!(self, ctx, |c| c.release(self.ws(&a.workspace), &a.item_ref, &body))
    }

    #[tool(
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        ),
        description = "Atomically pick the best ready item matching the filter (highest priority, then oldest) and claim its lease for you. Concurrent callers never get the same item. Returns item: null when nothing is ready. Set autonomous: true to skip items marked needs-human. count claims several at once (see grants); wait_seconds (or wait) waits for work when none is ready."
    )]
    async fn pad_claim_next(
        &self, Parameters(a): Parameters<ClaimNextArgs>, ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let (holder, session_id) = self.claimant(&a.holder, &a.session_id);
        let body = ClaimNextBody {
            filter: a.filter.filter(),
            holder: Some(holder),
            session_id: Some(session_id),
            ttl_seconds: or_refuse!(ttl(&a.ttl_seconds)),
            note: a.note.clone(),
            max_hold_seconds: a.max_hold_seconds,
            count: or_refuse!(whole(COUNT_FIELD, &a.count)),
            // Both passed on as given: the server refuses both at once.
            wait_seconds: or_refuse!(whole(WAIT_FIELD, &a.wait_seconds)),
            wait: or_refuse!(whole(WAIT_ALIAS, &a.wait)),
        };
        with_client!(self, ctx, |c| c.claim_next(self.ws(&a.workspace), &body))
    }

    #[tool(
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        description = "Heartbeat for many leases at once: extends each live lease you hold (by ref and epoch or lease_id, at most 100). Each answer stands alone, in the order asked: lease when renewed, error (e.g. lease_lost: stop working on that item) when not."
    )]
    async fn pad_leases_renew(
        &self, Parameters(a): Parameters<RenewLeasesArgs>, ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let holder = or_refuse!(self.holder_for(&a.holder));
        let leases = a.leases.iter().enumerate().map(|(i, l)| {
            Ok(RenewEntry {
                item_ref: l.item_ref.clone(),
                epoch: l.epoch,
                lease_id: l.lease_id,
                holder: holder.clone(),
                ttl_seconds: ttl(&l.ttl_seconds).map_err(|e| e.within(&format!("leases[{i}]")))?,
                note: l.note.clone(),
            })
        });
        let body = RenewLeasesBody { leases: or_refuse!(leases.collect::<Result<_, ErrorBody>>()) };
        with_client!(self, ctx, |c| c.renew_leases(self.ws(&a.workspace), &body))
    }

    #[tool(
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = false, open_world_hint = false),
        description = "Finish an item you hold: sets its status (default done) and ends your lease in one step, fenced by the lease's epoch or lease_id (or both). lease_lost means the lease already expired or was taken over: nothing was changed; stop working on the item. With next ({} or a filter as pad_claim_next's), the same call then claims the next ready item for you: the answer's next holds it and its lease (item: null when none is ready)."
    )]
    async fn pad_item_complete(
        &self, Parameters(a): Parameters<CompleteArgs>, ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let holder = or_refuse!(self.holder_for(&a.holder));
        let next = or_refuse!(self.next_claim(&a.next, &holder));
        let body = CompleteBody { epoch: a.epoch, lease_id: a.lease_id, holder, status: a.status, next };
        with_client!(self, ctx, |c| c.complete(self.ws(&a.workspace), &a.item_ref, &body))
    }

    #[tool(
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = false, open_world_hint = false),
        description = "Give up on an item you hold: ends your lease and counts a failed attempt, fenced by the lease's epoch or lease_id (or both). Say in note what went wrong and what is left: the next worker reads it. The item is retried later (backoff); after repeated failures it is quarantined (labelled needs-human, quarantined: true). Use it instead of pad_item_release when the attempt failed. With next, the same call then claims the next ready item, as pad_item_complete does."
    )]
    async fn pad_item_fail(
        &self, Parameters(a): Parameters<FailArgs>, ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let holder = or_refuse!(self.holder_for(&a.holder));
        let next = or_refuse!(self.next_claim(&a.next, &holder));
        let body =
            FailBody { epoch: a.epoch, lease_id: a.lease_id, holder, note: a.note.clone(), max_failures: None, next };
        with_client!(self, ctx, |c| c.fail(self.ws(&a.workspace), &a.item_ref, &body))
    }

    #[tool(
        annotations(read_only_hint = true, open_world_hint = false),
        description = "Your session brief: who you are (user, holder, workspace, server), the leases you hold with time left, the top of the ready work, how many items wait for a human, and the tools to use. Call it first."
    )]
    async fn pad_prime(
        &self, Parameters(a): Parameters<PrimeArgs>, ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let client = match self.client(&ctx) {
            Ok(c) => c,
            Err(refusal) => return Ok(refusal),
        };
        Ok(match self.prime(client.as_ref(), self.ws(&a.workspace), a.holder.as_deref()).await {
            Ok(p) => {
                let mut result = CallToolResult::structured(serde_json::to_value(&p).unwrap_or_default());
                result.content = vec![rmcp::model::ContentBlock::text(p.to_markdown())];
                result
            }
            Err(e) => CallToolResult::structured_error(error_envelope(&e)),
        })
    }
}
