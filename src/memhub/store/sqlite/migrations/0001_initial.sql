-- memhub schema v1: the shared tables of DESIGN.md §3.

CREATE TABLE principals (
    id           TEXT PRIMARY KEY,               -- the user or agent name ("alice", "ci-bot")
    kind         TEXT NOT NULL DEFAULT 'user' CHECK (kind IN ('user', 'agent')),
    role         TEXT NOT NULL DEFAULT 'member' CHECK (role IN ('admin', 'member')),
    api_key_hash TEXT UNIQUE,                    -- sha256 of the API key, NULL for local users
    current_session_id TEXT,
    created_at   TEXT NOT NULL
);

CREATE TABLE projects (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    name        TEXT NOT NULL UNIQUE,
    description TEXT,
    attrs       TEXT NOT NULL DEFAULT '{}',      -- JSON: asana_url, ...
    owner       TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL
);

CREATE TABLE project_members (
    project_id INTEGER NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    principal  TEXT NOT NULL,
    role       TEXT NOT NULL CHECK (role IN ('owner', 'editor', 'viewer')),
    created_at TEXT NOT NULL,
    PRIMARY KEY (project_id, principal)
);
CREATE INDEX project_members_principal ON project_members(principal);

CREATE TABLE sessions (
    id         TEXT PRIMARY KEY,
    principal  TEXT NOT NULL,
    name       TEXT,
    project_id INTEGER REFERENCES projects(id) ON DELETE SET NULL,
    status     TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'ended')),
    created_at TEXT NOT NULL,
    ended_at   TEXT
);
CREATE INDEX sessions_principal ON sessions(principal, created_at);

-- Everything searchable: memory, claim, decision, topic, log, note chunk.
CREATE TABLE items (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    kind           TEXT NOT NULL,
    project_id     INTEGER REFERENCES projects(id) ON DELETE CASCADE,
    session_id     TEXT,
    parent_id      INTEGER REFERENCES items(id) ON DELETE CASCADE,  -- containment: log->topic, topic->topic
    owner          TEXT NOT NULL,
    scope          TEXT NOT NULL CHECK (scope IN ('global', 'user', 'project', 'session')),
    boundary_class TEXT NOT NULL DEFAULT 'internal',
    status         TEXT NOT NULL DEFAULT 'active',
    title          TEXT,
    body           TEXT NOT NULL DEFAULT '',
    norm_text      TEXT NOT NULL DEFAULT '',     -- NFKC + casefold of title and body: substring search
    tags           TEXT NOT NULL DEFAULT '[]',   -- JSON array
    attrs          TEXT NOT NULL DEFAULT '{}',   -- JSON object, kind-specific
    content_hash   TEXT,
    importance     REAL NOT NULL DEFAULT 0.5,
    quality        REAL NOT NULL DEFAULT 0.0,
    access_count   INTEGER NOT NULL DEFAULT 0,
    created_at     TEXT NOT NULL,
    updated_at     TEXT NOT NULL,
    expires_at     TEXT
);
CREATE INDEX items_project_kind ON items(project_id, kind, id);
CREATE INDEX items_parent_kind ON items(parent_id, kind, id);
CREATE INDEX items_kind_created ON items(kind, created_at);
CREATE INDEX items_owner_scope ON items(owner, scope);
CREATE INDEX items_session ON items(session_id) WHERE session_id IS NOT NULL;
CREATE INDEX items_hash ON items(content_hash);

-- Text index: Latin words stemmed by porter, CJK runs pre-cut into bigrams (core/text.py).
CREATE VIRTUAL TABLE items_fts USING fts5(
    text,
    tokenize = 'porter unicode61 remove_diacritics 2'
);

-- Typed edges: association, relation, entity, supersedes, evidence, wiki-link.
CREATE TABLE links (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    src        INTEGER NOT NULL REFERENCES items(id) ON DELETE CASCADE,
    dst        INTEGER NOT NULL REFERENCES items(id) ON DELETE CASCADE,
    type       TEXT NOT NULL,
    subtype    TEXT,
    strength   REAL NOT NULL DEFAULT 1.0,
    attrs      TEXT NOT NULL DEFAULT '{}',
    created_at TEXT NOT NULL,
    UNIQUE (src, dst, type, subtype)
);
CREATE INDEX links_dst ON links(dst, type);

-- Embeddings, keyed by embedder id. vector_log gives every process an incremental change feed.
CREATE TABLE vectors (
    id       INTEGER PRIMARY KEY,
    item_id  INTEGER NOT NULL REFERENCES items(id) ON DELETE CASCADE,
    embedder TEXT NOT NULL,
    dim      INTEGER NOT NULL,
    vec      BLOB NOT NULL,                      -- float32, little-endian, L2-normalised
    UNIQUE (item_id, embedder)                   -- a compact index: existence checks skip the blobs
);

CREATE TABLE vector_log (
    seq      INTEGER PRIMARY KEY AUTOINCREMENT,
    item_id  INTEGER NOT NULL,
    embedder TEXT NOT NULL,
    op       TEXT NOT NULL CHECK (op IN ('put', 'del'))
);
CREATE INDEX vector_log_embedder ON vector_log(embedder, seq);

CREATE TRIGGER items_delete_vectors BEFORE DELETE ON items BEGIN
    INSERT INTO vector_log(item_id, embedder, op)
        SELECT OLD.id, embedder, 'del' FROM vectors WHERE item_id = OLD.id;
    DELETE FROM items_fts WHERE rowid = OLD.id;
END;

-- Append-only audit log; each row's hash covers the previous row's hash.
CREATE TABLE events (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    at         TEXT NOT NULL,
    principal  TEXT NOT NULL,
    tool       TEXT NOT NULL,
    outcome    TEXT NOT NULL,                    -- "ok" or an error code
    detail     TEXT NOT NULL DEFAULT '{}',       -- JSON: ids touched, boundary decision; never raw arguments
    prev_hash  TEXT NOT NULL,
    hash       TEXT NOT NULL
);

CREATE TRIGGER events_no_update BEFORE UPDATE ON events BEGIN
    SELECT RAISE(ABORT, 'events are append-only');
END;
CREATE TRIGGER events_no_delete BEFORE DELETE ON events BEGIN
    SELECT RAISE(ABORT, 'events are append-only');
END;
