-- memhub schema v2: what associative memory (seed 003) filters and walks on.

ALTER TABLE items ADD COLUMN category TEXT;
CREATE INDEX items_category ON items(category) WHERE category IS NOT NULL;
CREATE INDEX items_kind_id ON items(kind, id);
CREATE INDEX items_kind_importance ON items(kind, importance, id);
CREATE INDEX links_src ON links(src, type);

-- Tags as rows, so tag search is an index lookup rather than a JSON scan. Columns are in key
-- order: SQLite 3.40's quick_check misreports NULLs in WITHOUT ROWID tables otherwise.
CREATE TABLE item_tags (
    tag     TEXT NOT NULL,
    item_id INTEGER NOT NULL REFERENCES items(id) ON DELETE CASCADE,
    PRIMARY KEY (tag, item_id)
) WITHOUT ROWID;
CREATE INDEX item_tags_item ON item_tags(item_id);
INSERT INTO item_tags(item_id, tag) SELECT i.id, j.value FROM items i, json_each(i.tags) j;
