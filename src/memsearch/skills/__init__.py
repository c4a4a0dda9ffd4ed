"""Skills from memory: the candidate store and installing candidates into the agents.

Recurring multi-step workflows found in the journals become *candidate* skills, one
``<memsearch_dir>/skill-candidates/<slug>/SKILL.md`` each (Agent Skills format: front matter with
``name`` and ``description``, then markdown). Candidates are drafts no agent reads; a person makes
one live with an explicit install, which copies its ``SKILL.md`` into a host's skills folder
(:data:`HOST_SKILL_DIRS`).

Why a git repository: the store is edited by a background task without anyone watching, so every
automatic change is one commit (``git log``/``git diff`` show what changed and why, ``git revert``
undoes it). Edits a person makes by hand are committed on their own before the next automatic
change, so an automatic rewrite can never silently lose them. Real ``git`` is run as a subprocess;
when it is missing, writing fails with :class:`~memsearch.errors.GitNotFoundError` (reading and the
session-start hint work without it).

Why ``meta.json`` beside each ``SKILL.md``: the front matter stays the two standard fields every
host understands, and the bookkeeping (when it was made, where and which version was installed)
lives apart from it. It keeps the original memsearch's keys and hash format (``gitblob:`` + git's
blob id of the SKILL.md bytes, what ``git hash-object`` prints), so either tool reads a store the
other wrote; ``installs`` (each destination with the version written there) is ours. A candidate
without ``meta.json`` (written by hand) is still a candidate.

Statuses (:attr:`Candidate.status`):

``pending``   never installed: waiting for review.
``installed`` the current version is what was last installed.
``changed``   installed once, but the candidate has changed since: an update waits for review.
``rejected``  this version was turned down (``skills reject``); a revised one waits again.

Import cost: standard library only (the session-start hook calls :func:`candidates_hint`).

The package is split along those parts; this module re-exports their names, so
``from memsearch.skills import ...`` keeps working:

- :mod:`~memsearch.skills.names`: slugs, SKILL.md front matter, the version hash;
- :mod:`~memsearch.skills.store`: reading candidates, meta.json and statuses, the hint;
- :mod:`~memsearch.skills.repo`: the git repository, the store lock, one-step writes;
- :mod:`~memsearch.skills.write`: creating and updating a candidate;
- :mod:`~memsearch.skills.installing`: install destinations, installing, install states;
- :mod:`~memsearch.skills.compat`: the original's ``add``/``install``.
"""

from memsearch.skills.compat import add, install
from memsearch.skills.installing import (
    HOST_SKILL_DIRS,
    InstallResult,
    InstallState,
    host_skill_dir,
    install_candidate,
    install_states,
)
from memsearch.skills.names import (
    CANDIDATES_DIRNAME,
    MAX_DESCRIPTION_CHARS,
    MAX_NAME_CHARS,
    META_FILE,
    SKILL_FILE,
    render_skill_md,
    slugify,
    split_front_matter,
)
from memsearch.skills.repo import GIT_AUTHOR
from memsearch.skills.store import (
    STATUSES,
    WAITING,
    Candidate,
    candidates_hint,
    candidates_root,
    list_candidates,
    read_candidate,
)
from memsearch.skills.write import WriteResult, decode_body, reject_candidate, write_candidate

__all__ = [
    "CANDIDATES_DIRNAME",
    "GIT_AUTHOR",
    "HOST_SKILL_DIRS",
    "MAX_DESCRIPTION_CHARS",
    "MAX_NAME_CHARS",
    "META_FILE",
    "SKILL_FILE",
    "STATUSES",
    "WAITING",
    "Candidate",
    "InstallResult",
    "InstallState",
    "WriteResult",
    "add",
    "candidates_hint",
    "candidates_root",
    "decode_body",
    "host_skill_dir",
    "install",
    "install_candidate",
    "install_states",
    "list_candidates",
    "read_candidate",
    "reject_candidate",
    "render_skill_md",
    "slugify",
    "split_front_matter",
    "write_candidate",
]
