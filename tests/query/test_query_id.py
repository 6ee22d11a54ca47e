"""The gateway's query ids: `uuid.uuid4().hex`, built without the UUID object (issue 32)."""

from __future__ import annotations

import os
import uuid

from privlab.query.gateway import _new_query_id, _uuid4_hex


def test_query_id_is_uuid4_hex_of_the_same_bytes() -> None:
    for raw in [bytes(16), b"\xff" * 16, *(os.urandom(16) for _ in range(500))]:
        assert _uuid4_hex(raw) == uuid.UUID(bytes=raw, version=4).hex


def test_query_ids_are_fresh_version_4_uuids() -> None:
    ids = {_new_query_id() for _ in range(1000)}
    assert len(ids) == 1000
    for qid in ids:
        parsed = uuid.UUID(hex=qid)
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122 and parsed.hex == qid
