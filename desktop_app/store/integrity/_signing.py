"""The keyed part of the audit chain: an installation's Ed25519 signer, the signed head (seq, hash, count)
of each commit, and the notary that registers the key and signs the head inside the writer's transaction."""

from __future__ import annotations

import base64
import getpass
import hashlib
import logging
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from ._canonical import jcs
from ._chain import canonical_json
from ._witness import read_witness, write_witness

log = logging.getLogger(__name__)

_DOMAIN = b"agent-desk/audit-head/v1\x00"
_EXPORT_DOMAIN = b"agent-desk/audit-export/v1\x00"
_BATCH_DOMAIN = b"agent-desk/audit-batch/v1\x00"
WITNESS_INTERVAL_S = 0.1  # at most this long between a commit and its witness: at most ~10 witness writes/s

# (sql, params) runner inside the writer's open transaction.
Execute = Callable[[str, dict[str, Any]], Any]

SELECT_DB_ID = "SELECT db_id FROM audit_db WHERE id = 1"
INSERT_DB_ID = "INSERT INTO audit_db (id, db_id, created_at) VALUES (1, :db_id, :at)"
SELECT_KEYS = "SELECT key_id, public_key, host, user_name, registered_at, first_seq FROM desk_keys"
INSERT_KEY = ("INSERT INTO desk_keys (key_id, algorithm, public_key, host, user_name, registered_at, first_seq) "
              "VALUES (:key_id, 'ed25519', :public_key, :host, :user_name, :registered_at, :first_seq)")
UPSERT_HEAD_SIGNATURE = (
    "INSERT INTO audit_head_signatures (key_id, db_id, seq, hash, count, signature, signed_at) "
    "VALUES (:key_id, :db_id, :seq, :hash, :count, :signature, :signed_at) ON CONFLICT (key_id) DO UPDATE SET "
    "db_id = excluded.db_id, seq = excluded.seq, hash = excluded.hash, count = excluded.count, "
    "signature = excluded.signature, signed_at = excluded.signed_at")
SELECT_HEAD_SIGNATURES = "SELECT key_id, db_id, seq, hash, count, signature, signed_at FROM audit_head_signatures"
# One row per commit: that commit's signed head, and where its entries start.
INSERT_BATCH = ("INSERT INTO audit_batches (last_seq, first_seq, key_id, hash, signature, signed_at) "
                "VALUES (:seq, :first_seq, :key_id, :hash, :signature, :signed_at)")


_PLAIN = re.compile(r"[ !#-\[\]-~]*")  # printable ASCII but the quote and the backslash: JSON writes it as it is


def flat_jcs(body: dict[str, str | int]) -> str:
    """RFC 8785 of a flat object of plain ASCII strings and small integers (a signed message's body), written
    directly; anything else goes through `jcs`. The same text either way (a test compares them)."""
    parts = []
    for k in sorted(body):
        v = body[k]
        if isinstance(v, str) and _PLAIN.fullmatch(v) and _PLAIN.fullmatch(k):
            parts.append(f'"{k}":"{v}"')
        elif type(v) is int and abs(v) <= 2**53 - 1 and _PLAIN.fullmatch(k):
            parts.append(f'"{k}":{v}')
        else:
            return jcs(body)
    return "{" + ",".join(parts) + "}"


def key_id_of(public_key: bytes) -> str:
    """A key's fingerprint: what people compare, and what names it in the database and the witness."""
    return "ed25519:" + hashlib.sha256(public_key).hexdigest()[:32]


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def unb64(text: str) -> bytes:
    return base64.b64decode(text.encode("ascii"), validate=True)


@dataclass(slots=True, frozen=True)
class SignedHead:
    """A database's chain head as one key signed it: the last seq, its hash, and how many entries lead to it."""

    db_id: str
    seq: int
    hash: str
    count: int
    key_id: str
    signature: str = field(default="", repr=False)  # base64 Ed25519 signature of message()
    signed_at: float = 0.0

    def message(self) -> bytes:
        body = {"db_id": self.db_id, "seq": self.seq, "hash": self.hash, "count": self.count,
                "key_id": self.key_id}
        return _DOMAIN + flat_jcs(body).encode("utf-8")  # ASCII text and integers: the same bytes in form 1

    def to_dict(self) -> dict[str, Any]:
        # by hand: dataclasses.asdict deep-copies each field, which cost the writer's commits more than signing
        return {"db_id": self.db_id, "seq": self.seq, "hash": self.hash, "count": self.count,
                "key_id": self.key_id, "signature": self.signature, "signed_at": self.signed_at}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SignedHead:
        return cls(db_id=str(d["db_id"]), seq=int(d["seq"]), hash=str(d["hash"]), count=int(d["count"]),
                   key_id=str(d["key_id"]), signature=str(d["signature"]), signed_at=float(d["signed_at"]))


def signature_ok(public_key: bytes, signature_b64: str, message: bytes) -> bool:
    """True when `signature_b64` is `public_key`'s Ed25519 signature of `message`; False for any bad input."""
    try:
        Ed25519PublicKey.from_public_bytes(public_key).verify(unb64(signature_b64), message)
    except (InvalidSignature, ValueError, TypeError):
        return False
    return True


def head_signature_ok(head: SignedHead, public_key: bytes) -> bool:
    return key_id_of(public_key) == head.key_id and signature_ok(public_key, head.signature, head.message())


def batch_message(db_id: str, first_seq: int, last_seq: int, hash_: str, key_id: str) -> bytes:
    """What a desk signs for each commit: "I wrote entries first_seq..last_seq, and the chain ends at hash_".
    The head alone would only say "I saw the chain up to here"; the first seq makes the batch its own."""
    body = {"db_id": db_id, "first_seq": first_seq, "last_seq": last_seq, "hash": hash_, "key_id": key_id}
    return _BATCH_DOMAIN + flat_jcs(body).encode("utf-8")


def export_message(head: SignedHead | None, records: int, records_sha256: str, exported_at: float,
                   canonical: str | None = "rfc8785") -> bytes:
    """What an exporter signs. `canonical` is the trailer's: "rfc8785" (every export since RFC 8785), or None
    for an older export, whose floats were written as Python writes them."""
    body = {"head": head.to_dict() if head else None, "records": records, "records_sha256": records_sha256,
            "exported_at": exported_at}
    return _EXPORT_DOMAIN + (jcs(body) if canonical == "rfc8785" else canonical_json(body)).encode("utf-8")


class HeadSigner:
    """An installation's signing key, and where its witnesses go. Built by the caller that opens the store
    (the store does not read the keyring); `seed` is the 32-byte Ed25519 private key."""

    def __init__(self, seed: bytes, *, witness_dir: str | Path | None = None, host: str | None = None,
                 user: str | None = None) -> None:
        self._key = Ed25519PrivateKey.from_private_bytes(seed)
        self.public_key = self._key.public_key().public_bytes_raw()
        self.key_id = key_id_of(self.public_key)
        self.witness_dir = Path(witness_dir) if witness_dir is not None else None
        self.host = host if host is not None else socket.gethostname()
        self.user = user if user is not None else _user()

    def __repr__(self) -> str:
        return f"HeadSigner({self.key_id})"

    def sign(self, message: bytes) -> str:
        return b64(self._key.sign(message))

    def sign_head(self, db_id: str, seq: int, hash_: str, count: int) -> SignedHead:
        unsigned = SignedHead(db_id, seq, hash_, count, self.key_id, "", time.time())
        return SignedHead(db_id, seq, hash_, count, self.key_id, self.sign(unsigned.message()),
                          unsigned.signed_at)


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no user name in this environment (a container without passwd)
        return "?"


class HeadNotary:
    """The writer's side: in each committing transaction that moves the head, register the key (first time)
    and sign the new head; after the commit, hand the head to the witness thread (coalesced, off the writer)."""

    def __init__(self, signer: HeadSigner, where: str) -> None:
        self.signer = signer
        self.where = where  # the database's identity for its witness file (path or URL)
        self.db_id: str | None = None
        self._registered = False
        self._pending: SignedHead | None = None  # signed in the open transaction, not yet committed
        self._witness: _WitnessThread | None = None
        # The keys registered in the database as this installation last signed: its witness names them, so
        # verify can tell a desk this installation knew from one that appeared after the witnessed head.
        self._keys: tuple[str, ...] = ()
        # The head this notary last committed: while the head read in a transaction is still that one, no other
        # writer committed since, so no key was registered (a key is only registered in a commit that moves the
        # head) and `_keys` holds; otherwise they are read again.
        self._keys_at: int | None = None

    def sign_in_tx(self, execute: Execute, fetch: Callable[[str], list[Any]], first_seq: int, seq: int,
                   hash_: str) -> None:
        """Called inside the transaction, after the batch's entries first_seq..seq: the head is now (seq, hash_).
        Two signatures per commit: the head (this key's last one is kept), and the batch, which claims its
        entries (each names this desk, hashed in) for this desk."""
        if self.db_id is None:
            rows = fetch(SELECT_DB_ID)
            if rows:
                self.db_id = str(rows[0][0])
            else:
                self.db_id = uuid.uuid4().hex
                execute(INSERT_DB_ID, {"db_id": self.db_id, "at": time.time()})
        registered: list[str] = []
        if not self._registered or (self.signer.witness_dir and self._keys_at != first_seq - 1):
            registered = [r[0] for r in fetch(SELECT_KEYS)]
            self._keys = tuple(sorted({*registered, self.signer.key_id}))
        elif not self._keys:
            self._keys = (self.signer.key_id,)
        if not self._registered:
            if self.signer.key_id not in registered:
                execute(INSERT_KEY, {"key_id": self.signer.key_id, "public_key": b64(self.signer.public_key),
                                     "host": self.signer.host, "user_name": self.signer.user,
                                     "registered_at": time.time(), "first_seq": first_seq})
        head = self.signer.sign_head(self.db_id, seq, hash_, seq)
        execute(UPSERT_HEAD_SIGNATURE, {**head.to_dict()})
        batch = self.signer.sign(batch_message(self.db_id, first_seq, seq, hash_, self.signer.key_id))
        execute(INSERT_BATCH, {**head.to_dict(), "first_seq": first_seq, "signature": batch})
        self._pending = head

    def committed(self) -> None:
        head, self._pending = self._pending, None
        if head is None:
            return
        self._registered = True
        self._keys_at = head.seq
        if self.signer.witness_dir is not None:
            if self._witness is None:
                self._witness = _WitnessThread(self._write_witness)
                self._witness.start()
            self._witness.offer(head, self._keys)

    def rolled_back(self) -> None:
        self._pending = None
        self._keys_at = None  # what the undone transaction read is no proof of anything
        if not self._registered:
            self.db_id = None  # it may have been made in the transaction that was undone

    def close(self) -> None:
        """Write the last head's witness and stop the witness thread (the writer calls this as it ends)."""
        if self._witness is not None:
            self._witness.close()

    def _write_witness(self, head: SignedHead, keys: tuple[str, ...]) -> None:
        folder = self.signer.witness_dir
        assert folder is not None
        # Another process of this installation may have witnessed a later head of the same database. Its
        # signature is not checked here (verify does): a forged higher witness only makes verify fail louder.
        current, _ = read_witness(folder, self.where, self.signer.key_id)
        if current is not None and current.get("db_id") == head.db_id and _int(current.get("seq")) > head.seq:
            return
        write_witness(folder, self.where, self.signer.key_id,
                      {**head.to_dict(), "public_key": b64(self.signer.public_key), "keys": list(keys)})


class _WitnessThread(threading.Thread):
    """Writes the latest committed head at most every WITNESS_INTERVAL_S; the heads in between are dropped,
    as the last one vouches for them. Its file I/O never holds up the writer's commits."""

    def __init__(self, write: Callable[[SignedHead, tuple[str, ...]], None]) -> None:
        super().__init__(name="agent-desk-store-witness", daemon=True)
        self._write = write
        self._cond = threading.Condition()
        self._latest: tuple[SignedHead, tuple[str, ...]] | None = None
        self._stopping = False
        self._idle = False  # waiting for a head (not coalescing): only then does a new head wake it

    def offer(self, head: SignedHead, keys: tuple[str, ...]) -> None:
        with self._cond:
            self._latest = (head, keys)
            if self._idle:  # a wake-up per commit would cost the writer's commits a thread switch each
                self._cond.notify()

    def close(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify()
        self.join()

    def run(self) -> None:
        while True:
            with self._cond:
                self._idle = True
                self._cond.wait_for(lambda: self._latest is not None or self._stopping)
                self._idle = False
                head, self._latest = self._latest, None
                stopping = self._stopping
            if head is not None:
                try:
                    self._write(*head)
                except Exception:  # the commit stands; verify says the witness is behind
                    log.exception("the audit head's witness could not be written")
            if stopping:
                return
            with self._cond:  # coalesce: let the heads of the next interval pile up (only the last is kept)
                self._cond.wait_for(lambda: self._stopping, timeout=WITNESS_INTERVAL_S)


def _int(value: Any) -> int:
    return value if isinstance(value, int) else -1


def witness_head(data: dict[str, Any], public_key: bytes) -> SignedHead | None:
    """The witness's head when `public_key` signed it; None when it is malformed or signed otherwise."""
    try:
        head = SignedHead.from_dict(data)
    except (KeyError, TypeError, ValueError):
        return None
    return head if head_signature_ok(head, public_key) else None
