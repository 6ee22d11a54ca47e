"""`write_checkpoint(known=...)`: with the slots of its last write it skips parsing them, and
does exactly what a call that parses the file does (same bytes written, same result),
including after another writer changed the file and after a reset."""

from __future__ import annotations

import os
import random

from privlab.query.audit.checkpoint import write_checkpoint


def test_known_slots_write_what_parsing_writes(tmp_path) -> None:
    gen = random.Random(3)
    fds = [os.open(tmp_path / name, os.O_RDWR | os.O_CREAT, 0o600) for name in ("a", "b")]
    known = None
    seq = 0
    try:
        for step in range(300):
            action = gen.random()
            if action < 0.1:  # another process moves the checkpoint (both files alike)
                for fd in fds:
                    write_checkpoint(fd, seq + 5, f"other{step}", b"k")
                seq += 5
                continue
            seq += gen.choice([1, 1, 2, -3])  # now and then an older head: left as it is
            reset = action > 0.97
            cached = write_checkpoint(fds[0], seq, f"h{step}", b"k", reset, known)
            parsed = write_checkpoint(fds[1], seq, f"h{step}", b"k", reset)
            assert (cached is None) == (parsed is None)
            if cached is not None:
                assert cached == parsed
                known = cached
            assert os.pread(fds[0], 1024, 0) == os.pread(fds[1], 1024, 0)
        assert known is not None and max(known[1]) > 0
    finally:
        for fd in fds:
            os.close(fd)
