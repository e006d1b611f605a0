-- memhub PostgreSQL schema v2: state that several replicas on one database share.

-- Claims on items being embedded (SQLite migration 0005): each missing vector is computed by
-- one replica. A claim is a lease: released with the vectors it was for, or taken over once
-- `until` (seconds since the epoch) has passed (its replica died).
CREATE TABLE vector_claims (
    item_id  BIGINT NOT NULL,
    embedder TEXT NOT NULL,
    owner    TEXT NOT NULL,
    until    DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (item_id, embedder)
);
CREATE INDEX vector_claims_until ON vector_claims(until);

-- Rate-limit token buckets shared by every replica (services/ratelimit.py), one row per
-- (key, class), updated by one atomic upsert per call. UNLOGGED: not written to the WAL (a
-- crash empties it, and a bucket that is not there starts full, which is what it would be).
CREATE UNLOGGED TABLE rate_buckets (
    key     TEXT NOT NULL,
    class   TEXT NOT NULL,
    tokens  DOUBLE PRECISION NOT NULL,
    at      DOUBLE PRECISION NOT NULL,
    cap     DOUBLE PRECISION NOT NULL,
    rate    DOUBLE PRECISION NOT NULL,
    granted INTEGER NOT NULL,
    PRIMARY KEY (key, class)
);
CREATE INDEX rate_buckets_at ON rate_buckets(at);
