"""PostgreSQL backend (psycopg 3, psycopg_pool, pgvector): `open_store("postgresql://…")`."""

from memhub.store.postgres.database import PostgresStore

__all__ = ["PostgresStore"]
