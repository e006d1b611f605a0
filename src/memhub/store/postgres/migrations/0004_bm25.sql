-- BM25 keyword ranking, as SQLite's FTS5 ranks (store/postgres/bm25.py): each row's length in
-- tokens, and the index's row and token counts, kept by the database itself.
-- (0002 and 0003 are other changes' numbers.)

CREATE FUNCTION memhub_tsvector_tokens(v tsvector) RETURNS integer
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$ SELECT coalesce(sum(array_length(positions, 1)), 0)::integer FROM unnest(v) $$;

ALTER TABLE items_fts ADD COLUMN tokens INTEGER GENERATED ALWAYS AS (memhub_tsvector_tokens(text)) STORED;

CREATE TABLE items_fts_stats (
    id     INTEGER PRIMARY KEY CHECK (id = 1),
    rows   BIGINT NOT NULL,
    tokens BIGINT NOT NULL
);
INSERT INTO items_fts_stats(id, rows, tokens) SELECT 1, count(*), coalesce(sum(tokens), 0) FROM items_fts;

-- once per statement, from its transition tables: a bulk insert (a reindex) updates the one
-- row once, not once per row
CREATE FUNCTION memhub_items_fts_stats_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE items_fts_stats SET rows = rows + d.n, tokens = tokens + d.t
        FROM (SELECT count(*) AS n, coalesce(sum(tokens), 0) AS t FROM added) d WHERE id = 1;
    RETURN NULL;
END;
$$;
CREATE FUNCTION memhub_items_fts_stats_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE items_fts_stats SET rows = rows - d.n, tokens = tokens - d.t
        FROM (SELECT count(*) AS n, coalesce(sum(tokens), 0) AS t FROM removed) d WHERE id = 1;
    RETURN NULL;
END;
$$;
CREATE FUNCTION memhub_items_fts_stats_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE items_fts_stats SET tokens = tokens - (SELECT coalesce(sum(tokens), 0) FROM removed)
        + (SELECT coalesce(sum(tokens), 0) FROM added) WHERE id = 1;
    RETURN NULL;
END;
$$;
CREATE TRIGGER items_fts_stats_insert AFTER INSERT ON items_fts REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION memhub_items_fts_stats_added();
CREATE TRIGGER items_fts_stats_delete AFTER DELETE ON items_fts REFERENCING OLD TABLE AS removed
    FOR EACH STATEMENT EXECUTE FUNCTION memhub_items_fts_stats_removed();
CREATE TRIGGER items_fts_stats_update AFTER UPDATE ON items_fts
    REFERENCING OLD TABLE AS removed NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION memhub_items_fts_stats_changed();
