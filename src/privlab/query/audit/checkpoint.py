"""The audit log's checkpoint: the signed head (sequence number and MAC) kept in a file apart
from the database, so that deleting the newest rows is detected too.

Two fixed-size slots written in place (`pwrite`, the older slot each time) under an exclusive
`flock`: a rename per append costs milliseconds on some filesystems, this costs microseconds,
and a torn write leaves the other slot intact. The newest valid slot is the checkpoint; a slot
that is not a checkpoint record means the file was damaged or edited.
"""

from __future__ import annotations

import fcntl
import hmac
import json
import os
from typing import Any

_SLOT = 256  # bytes per checkpoint slot


def _read_slots(data: bytes) -> list[Any]:
    """The two checkpoint slots: a dict, None (empty) or "invalid"."""
    out: list[Any] = []
    for i in range(2):
        chunk = data[i * _SLOT:(i + 1) * _SLOT].strip(b" \n\x00")
        if not chunk:
            out.append(None)
            continue
        try:
            item = json.loads(chunk)
            int(item["seq"]), str(item["hash"])
            out.append(item)
        except (ValueError, KeyError, TypeError):
            out.append("invalid")
    return out



def _checkpoint_mac(key: bytes | None, seq: int, head: str) -> str | None:
    if key is None:
        return None
    return hmac.digest(key, f"privlab-audit-head:{seq}:{head}".encode(), "sha256").hex()


def read_locked(fd: int) -> bytes:
    """The checkpoint file's bytes (one more than two slots: a longer file is not ours)."""
    fcntl.flock(fd, fcntl.LOCK_SH)
    try:
        return os.pread(fd, 2 * _SLOT + 1, 0)
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)


def parse_checkpoint(data: bytes) -> dict[str, Any] | None:
    """The newest slot (None: no checkpoint; {"invalid": True}: damaged or edited)."""
    if not data.strip():
        return None
    slots = _read_slots(data)
    if any(x == "invalid" for x in slots) or len(data) > 2 * _SLOT:
        return {"invalid": True}
    valid = [x for x in slots if isinstance(x, dict)]
    return max(valid, key=lambda x: int(x["seq"])) if valid else None


def checkpoint_problem(cp: dict[str, Any], name: str, key: bytes | None) -> str | None:
    """What is wrong with the checkpoint record itself (None: sound and signed)."""
    if cp.get("invalid"):
        return f"checkpoint {name}: damaged or edited (not a checkpoint record)"
    try:
        seq, head = int(cp["seq"]), str(cp["hash"])
    except (KeyError, TypeError, ValueError):
        return f"checkpoint {name}: unreadable"
    if key is not None and not hmac.compare_digest(
            str(cp.get("mac")), _checkpoint_mac(key, seq, head) or ""):
        return (f"checkpoint {name}: signature invalid (edited, or written with another "
                "key)")
    return None


def write_checkpoint(fd: int, seq: int, head: str, key: bytes | None,
                     reset: bool = False, known: tuple[bytes, tuple[int, int]] | None = None
                     ) -> tuple[bytes, tuple[int, int]] | None:
    """Record (seq, hash) of the newest row, signed with `key`; never moves it backwards
    (several processes append to one log), except on `reset` (`accept_broken`: the head the
    checkpoint names is gone), which writes both slots. Returns what the file now holds and
    its slots' sequence numbers (None: left as it was, a newer head is recorded). `known`:
    such a pair from an earlier call; when the file still holds exactly those bytes its
    slots are not parsed again (the gateway writes the checkpoint after every commit)."""
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        data = os.pread(fd, 2 * _SLOT, 0)
        if known is not None and known[0] == data:
            seqs = list(known[1])
        else:
            seqs = [int(x["seq"]) if isinstance(x, dict) and "seq" in x else -1
                    for x in _read_slots(data)]
        if max(seqs) >= seq and not reset:
            return None
        record = json.dumps({"seq": seq, "hash": head, "mac": _checkpoint_mac(key, seq, head)})
        line = record.ljust(_SLOT - 1).encode("utf-8")[:_SLOT - 1] + b"\n"
        offsets = (0, _SLOT) if reset else (_SLOT * (0 if seqs[0] <= seqs[1] else 1),)
        content = bytearray(data.ljust(2 * _SLOT if reset else offsets[0] + _SLOT, b"\x00"))
        for offset in offsets:
            os.pwrite(fd, line, offset)
            content[offset:offset + _SLOT] = line
            seqs[offset // _SLOT] = seq
        return bytes(content), (seqs[0], seqs[1])
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
