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

CREATE FUNCTION memhub_items_fts_stats() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        UPDATE items_fts_stats SET rows = rows - 1, tokens = tokens - OLD.tokens WHERE id = 1;
    END IF;
    IF TG_OP IN ('UPDATE', 'INSERT') THEN
        UPDATE items_fts_stats SET rows = rows + 1, tokens = tokens + NEW.tokens WHERE id = 1;
    END IF;
    RETURN NULL;
END;
$$;
CREATE TRIGGER items_fts_stats AFTER INSERT OR UPDATE OR DELETE ON items_fts
    FOR EACH ROW EXECUTE FUNCTION memhub_items_fts_stats();
