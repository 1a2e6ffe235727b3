"""The database: the ORM models, sessions and engines, the migrations runner, the fast PostgreSQL paths."""
