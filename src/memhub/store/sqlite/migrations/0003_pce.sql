-- memhub schema v3: the pce toolset (seed 000): policy versions, feedback, active contexts.

-- Every applied policy, newest last: the current policy is the row with the highest id.
CREATE TABLE pce_policies (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    version    TEXT NOT NULL UNIQUE,
    yaml       TEXT NOT NULL,
    doc        TEXT NOT NULL,                 -- JSON of the validated document
    author     TEXT NOT NULL,
    approver   TEXT,
    signed     INTEGER NOT NULL DEFAULT 0,    -- 1: the signature was verified
    diff       TEXT NOT NULL DEFAULT '[]',    -- JSON list of "path: old -> new"
    applied_at TEXT NOT NULL
);

-- Feedback signals, one per (claim, principal, time bucket): a repeat in the bucket is ignored.
CREATE TABLE pce_feedback (
    claim_id  INTEGER NOT NULL REFERENCES items(id) ON DELETE CASCADE,
    principal TEXT NOT NULL,
    ts_bucket INTEGER NOT NULL,
    signal    TEXT NOT NULL,
    score     REAL,
    at        TEXT NOT NULL,
    PRIMARY KEY (claim_id, principal, ts_bucket)
);

-- Active contexts: the ranked claim ids of one activate call, readable until they expire.
CREATE TABLE pce_active_contexts (
    id         TEXT PRIMARY KEY,              -- ac_<random>
    owner      TEXT NOT NULL,
    body       TEXT NOT NULL,                 -- JSON: claim ids, scores, allowed classes, parameters
    created_at TEXT NOT NULL,
    expires_at TEXT NOT NULL
);
CREATE INDEX pce_active_contexts_expiry ON pce_active_contexts(expires_at);
