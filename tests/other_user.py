"""Another local user, for tests of what memsearch must not trust on a shared machine.

The suite runs as root, so "another user" is a uid with no account (OTHER_UID): files chowned to it
are another user's, and ``as_other_user`` runs a function in a forked child that has become it.
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Callable

OTHER_UID = 4242  # no such user here: files owned by it are "another local user's"


def as_other_user(fn: Callable[[], bytes]) -> Callable[[], bytes]:
    """Start ``fn`` in a forked child that has become uid OTHER_UID; the returned function waits
    for the child and returns what ``fn`` returned (or a "child failed: ..." report)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 0
        try:
            os.close(read_end)
            os.setgid(OTHER_UID)
            os.setuid(OTHER_UID)
            os.write(write_end, fn())
        except BaseException as exc:
            os.write(write_end, f"child failed: {exc!r} {traceback.format_exc()}".encode())
            code = 1
        finally:
            os._exit(code)
    os.close(write_end)

    def collect() -> bytes:
        with os.fdopen(read_end, "rb") as reader:
            report = reader.read()
        os.waitpid(pid, 0)
        return report

    return collect
