-- memhub schema v5: claims on items being embedded, so that several processes sharing one
-- store compute each missing vector once (search/backfill.py). A claim is a lease: it ends
-- when the vectors are stored (the claim is released in that transaction) or when `until`
-- passes (the process that held it died), and then another process may take the item.
CREATE TABLE vector_claims (
    item_id  INTEGER NOT NULL,
    embedder TEXT NOT NULL,
    owner    TEXT NOT NULL,
    until    REAL NOT NULL,
    PRIMARY KEY (item_id, embedder)
);
CREATE INDEX vector_claims_until ON vector_claims(until);
