"""The audit store: sqlmodel tables, a SQLite/SQLAlchemy RecordStore with one writer thread,
hash-chained audit entries, queries, export and verification."""

from ._charts import ChartData
from ._export import CSV_COLUMNS, write_records
from ._query import AuditQuery, RecordRow, StoreStats
from ._sql_store import SqlStore
from ._tables import SCHEMA_VERSION
from .integrity import HeadSigner, VerifyResult, canonical_json, verify_export

__all__ = [
    "CSV_COLUMNS",
    "SCHEMA_VERSION",
    "AuditQuery",
    "ChartData",
    "HeadSigner",
    "RecordRow",
    "SqlStore",
    "StoreStats",
    "VerifyResult",
    "canonical_json",
    "verify_export",
    "write_records",
]
