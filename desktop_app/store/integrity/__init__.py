"""The audit log's integrity: the hash chain, the digests an entry holds of the rows beside it, the desk's
signing key and its witness file, the verification of all of these, and the signed export's offline check."""

from ._bound_rows import ROWS_ACTOR, ROWS_STATE, BoundRows
from ._canonical import jcs, jcs_data
from ._chain import CANON_JCS, CANON_LEGACY, GENESIS, VerifyResult, canonical_json, link_hash, split_canonical
from ._digests import BLOB_MIN, message_digests, record_digests, sha, to_json
from ._signed_export import ChainDigests, latest_head, message_entries, trailer, verify_export
from ._signing import HeadNotary, HeadSigner
from ._verify import verify
from ._witness import db_identity

__all__ = [
    "BLOB_MIN",
    "CANON_JCS",
    "CANON_LEGACY",
    "GENESIS",
    "ROWS_ACTOR",
    "ROWS_STATE",
    "BoundRows",
    "ChainDigests",
    "HeadNotary",
    "HeadSigner",
    "VerifyResult",
    "canonical_json",
    "db_identity",
    "jcs",
    "jcs_data",
    "latest_head",
    "link_hash",
    "message_digests",
    "message_entries",
    "record_digests",
    "sha",
    "split_canonical",
    "to_json",
    "trailer",
    "verify",
    "verify_export",
]
