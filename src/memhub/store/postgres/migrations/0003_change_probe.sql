-- The change probe (PostgresStore.data_version, SQLite's `PRAGMA data_version`): every write
-- transaction counts itself in its writer's row (one row per open store, `token` random); a
-- store's probe is the sum of the other rows, so it moves when another store commits and not
-- on its own writes. A store that closes folds its count into the row 'retired'.
CREATE TABLE store_writers (
    token   TEXT PRIMARY KEY,
    commits BIGINT NOT NULL
);
