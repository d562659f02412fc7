-- pad's SQLite schema. Times are INTEGER microseconds since the Unix epoch
-- (UTC), so lease predicates compare integers and index well.

CREATE TABLE users (
    id          INTEGER PRIMARY KEY,
    email       TEXT NOT NULL UNIQUE,
    created_at  INTEGER NOT NULL
);

CREATE TABLE workspaces (
    id                          INTEGER PRIMARY KEY,
    slug                        TEXT NOT NULL UNIQUE,
    name                        TEXT NOT NULL,
    created_at                  INTEGER NOT NULL,
    default_ttl_seconds         INTEGER NOT NULL DEFAULT 900,
    max_ttl_seconds             INTEGER NOT NULL DEFAULT 86400,
    quarantine_after_expiries   INTEGER NOT NULL DEFAULT 3
);

CREATE TABLE members (
    workspace_id  INTEGER NOT NULL REFERENCES workspaces(id),
    user_id       INTEGER NOT NULL REFERENCES users(id),
    role          TEXT NOT NULL CHECK (role IN ('owner', 'editor', 'viewer')),
    added_at      INTEGER NOT NULL,
    PRIMARY KEY (workspace_id, user_id)
);

CREATE TABLE tokens (
    id            INTEGER PRIMARY KEY,
    user_id       INTEGER NOT NULL REFERENCES users(id),
    name          TEXT NOT NULL,
    hash          TEXT NOT NULL UNIQUE,   -- SHA-256 of the secret; the secret is never stored
    created_at    INTEGER NOT NULL,
    last_used_at  INTEGER,
    revoked_at    INTEGER
);

-- Kinds own their prefix's ref counter: numbers are allocated here and never reused.
CREATE TABLE kinds (
    workspace_id  INTEGER NOT NULL REFERENCES workspaces(id),
    name          TEXT NOT NULL,
    prefix        TEXT NOT NULL,
    next_number   INTEGER NOT NULL DEFAULT 1,
    PRIMARY KEY (workspace_id, name),
    UNIQUE (workspace_id, prefix)
);

CREATE TABLE items (
    id            INTEGER PRIMARY KEY,
    workspace_id  INTEGER NOT NULL REFERENCES workspaces(id),
    prefix        TEXT NOT NULL,
    number        INTEGER NOT NULL,
    kind          TEXT NOT NULL,
    title         TEXT NOT NULL,
    body          TEXT NOT NULL,
    status        TEXT NOT NULL,
    priority      INTEGER NOT NULL,          -- 0 low .. 3 critical
    labels        TEXT NOT NULL DEFAULT '[]', -- JSON array of strings
    parent_id     INTEGER REFERENCES items(id),
    assignee_id   INTEGER REFERENCES users(id),
    created_by    INTEGER NOT NULL REFERENCES users(id),
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL,
    deleted_at    INTEGER,
    version       INTEGER NOT NULL DEFAULT 1,
    -- The lease as last written; NULL holder = released. Live iff expires_at > now.
    lease_holder       TEXT,
    lease_user_id      INTEGER REFERENCES users(id),
    lease_session_id   TEXT,
    lease_acquired_at  INTEGER,
    lease_renewed_at   INTEGER,
    lease_expires_at   INTEGER,
    lease_ttl_seconds  INTEGER,
    -- Highest epoch ever granted; survives release so epochs are never reused.
    lease_epoch        INTEGER NOT NULL DEFAULT 0,
    lease_expiries     INTEGER NOT NULL DEFAULT 0,
    lease_note         TEXT,
    lease_note_holder  TEXT,
    UNIQUE (workspace_id, prefix, number)
);
CREATE INDEX items_by_lease_expiry ON items (workspace_id, lease_expires_at);

CREATE TABLE item_blockers (
    item_id     INTEGER NOT NULL REFERENCES items(id),
    blocker_id  INTEGER NOT NULL REFERENCES items(id),
    PRIMARY KEY (item_id, blocker_id)
);
CREATE INDEX item_blockers_by_blocker ON item_blockers (blocker_id);

CREATE TABLE item_versions (
    id        INTEGER PRIMARY KEY,
    item_id   INTEGER NOT NULL REFERENCES items(id),
    version   INTEGER NOT NULL,
    actor_id  INTEGER NOT NULL REFERENCES users(id),
    at        INTEGER NOT NULL,
    changes   TEXT NOT NULL,                  -- JSON {field: {from, to}}
    UNIQUE (item_id, version)
);

CREATE TABLE comments (
    id          INTEGER PRIMARY KEY,
    item_id     INTEGER NOT NULL REFERENCES items(id),
    author_id   INTEGER NOT NULL REFERENCES users(id),
    body        TEXT NOT NULL,
    created_at  INTEGER NOT NULL
);
CREATE INDEX comments_by_item ON comments (item_id, id);

-- Written in the same transaction as the change it records (SPEC §7).
CREATE TABLE events (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    workspace_id  INTEGER NOT NULL REFERENCES workspaces(id),
    type          TEXT NOT NULL,
    item_ref      TEXT,
    actor_id      INTEGER REFERENCES users(id),
    at            INTEGER NOT NULL,
    data          TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX events_by_workspace ON events (workspace_id, id);
