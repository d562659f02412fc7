-- pad's PostgreSQL schema: the same tables and meaning as the SQLite one
-- (crates/pad-sqlite/migrations/0001_init.sql). Times are timestamptz, which
-- keeps microseconds, as the SQLite backend's integer micros do.

CREATE TABLE users (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    email       text NOT NULL UNIQUE,
    created_at  timestamptz NOT NULL
);

CREATE TABLE workspaces (
    id                          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    slug                        text NOT NULL UNIQUE,
    name                        text NOT NULL,
    created_at                  timestamptz NOT NULL,
    default_ttl_seconds         integer NOT NULL DEFAULT 900,
    max_ttl_seconds             integer NOT NULL DEFAULT 86400,
    quarantine_after_expiries   integer NOT NULL DEFAULT 3
);

CREATE TABLE members (
    workspace_id  bigint NOT NULL REFERENCES workspaces(id),
    user_id       bigint NOT NULL REFERENCES users(id),
    role          text NOT NULL CHECK (role IN ('owner', 'editor', 'viewer')),
    added_at      timestamptz NOT NULL,
    PRIMARY KEY (workspace_id, user_id)
);

CREATE TABLE tokens (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id       bigint NOT NULL REFERENCES users(id),
    name          text NOT NULL,
    hash          text NOT NULL UNIQUE,   -- SHA-256 of the secret; the secret is never stored
    created_at    timestamptz NOT NULL,
    last_used_at  timestamptz,
    revoked_at    timestamptz
);

-- Kinds own their prefix's ref counter: numbers are allocated here (the
-- UPDATE … RETURNING row lock serializes creates per kind) and never reused.
-- `position` keeps the order kinds were added in, as SQLite's rowid does.
CREATE TABLE kinds (
    workspace_id  bigint NOT NULL REFERENCES workspaces(id),
    name          text NOT NULL,
    prefix        text NOT NULL,
    next_number   bigint NOT NULL DEFAULT 1,
    position      bigint GENERATED ALWAYS AS IDENTITY,
    PRIMARY KEY (workspace_id, name),
    UNIQUE (workspace_id, prefix)
);

CREATE TABLE items (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    workspace_id  bigint NOT NULL REFERENCES workspaces(id),
    prefix        text NOT NULL,
    number        bigint NOT NULL,
    kind          text NOT NULL,
    title         text NOT NULL,
    body          text NOT NULL,
    status        text NOT NULL,
    priority      bigint NOT NULL,               -- 0 low .. 3 critical
    labels        text[] NOT NULL DEFAULT '{}',  -- in the order they were added
    parent_id     bigint REFERENCES items(id),
    assignee_id   bigint REFERENCES users(id),
    created_by    bigint NOT NULL REFERENCES users(id),
    created_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL,
    deleted_at    timestamptz,
    version       bigint NOT NULL DEFAULT 1,
    -- The lease as last written; NULL holder = released. Live iff expires_at > now.
    lease_holder       text,
    lease_user_id      bigint REFERENCES users(id),
    lease_session_id   text,
    lease_acquired_at  timestamptz,
    lease_renewed_at   timestamptz,
    lease_expires_at   timestamptz,
    lease_ttl_seconds  integer,
    -- Highest epoch ever granted; survives release so epochs are never reused.
    lease_epoch        bigint NOT NULL DEFAULT 0,
    lease_expiries     bigint NOT NULL DEFAULT 0,
    lease_note         text,
    lease_note_holder  text,
    UNIQUE (workspace_id, prefix, number)
);
CREATE INDEX items_by_lease_expiry ON items (workspace_id, lease_expires_at);
-- Every instance's expiry observer looks across workspaces for recorded leases.
CREATE INDEX items_leased_by_expiry ON items (lease_expires_at) WHERE lease_holder IS NOT NULL;

CREATE TABLE item_blockers (
    item_id     bigint NOT NULL REFERENCES items(id),
    blocker_id  bigint NOT NULL REFERENCES items(id),
    PRIMARY KEY (item_id, blocker_id)
);
CREATE INDEX item_blockers_by_blocker ON item_blockers (blocker_id);

CREATE TABLE item_versions (
    id        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    item_id   bigint NOT NULL REFERENCES items(id),
    version   bigint NOT NULL,
    actor_id  bigint NOT NULL REFERENCES users(id),
    at        timestamptz NOT NULL,
    changes   jsonb NOT NULL,                  -- {field: {from, to}}
    UNIQUE (item_id, version)
);

CREATE TABLE comments (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    item_id     bigint NOT NULL REFERENCES items(id),
    author_id   bigint NOT NULL REFERENCES users(id),
    body        text NOT NULL,
    created_at  timestamptz NOT NULL
);
CREATE INDEX comments_by_item ON comments (item_id, id);

-- Written in the same transaction as the change it records (SPEC §7). Ids
-- come from a sequence, so they increase but may have gaps (rolled back
-- transactions), and with several writers an id can commit after a larger one.
CREATE TABLE events (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    workspace_id  bigint NOT NULL REFERENCES workspaces(id),
    type          text NOT NULL,
    item_ref      text,
    actor_id      bigint REFERENCES users(id),
    at            timestamptz NOT NULL,
    data          jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX events_by_workspace ON events (workspace_id, id);
