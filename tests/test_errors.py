"""The error tree: one module holds every class, its docstring draws them all, and every class
survives the trip through the memory service by name (so a routed command fails exactly like a
direct one: same class, message, hint and exit code)."""

from __future__ import annotations

import ast
import inspect
import json
from pathlib import Path

import pytest

from memsearch import errors
from memsearch.service.protocol import decode_message, error_from_payload, error_payload

SRC = Path(errors.__file__).resolve().parent
CLASSES = sorted(
    (c for c in vars(errors).values() if inspect.isclass(c) and issubclass(c, errors.MemSearchError)),
    key=lambda c: c.__name__,
)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_every_error_round_trips_through_the_service_by_name(cls: type[errors.MemSearchError]) -> None:
    sent = cls("something failed", "do this instead")
    line = json.dumps({"ok": False, "error": error_payload(sent)}).encode()
    message = decode_message(line)
    assert message is not None
    got = error_from_payload(message["error"])
    assert type(got) is cls
    assert (got.message, got.hint) == (sent.message, sent.hint)
    assert errors.exit_code_for(got) == errors.exit_code_for(sent)


def test_the_docstring_draws_every_class() -> None:
    doc = errors.__doc__ or ""
    assert [c.__name__ for c in CLASSES if f" {c.__name__}" not in doc] == []


def test_no_error_class_lives_outside_errors_py() -> None:
    """Other modules import (and so re-export) the classes they raise; none defines one."""
    outside = []
    for path in SRC.rglob("*.py"):
        if path.name == "errors.py" and path.parent == SRC:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and any(
                isinstance(b, ast.Name) and (b.id.endswith("Error") or b.id == "MemSearchError")
                for b in node.bases
            ):
                outside.append(f"{path.relative_to(SRC)}:{node.name}")
    assert outside == []


def test_old_import_paths_still_work() -> None:
    from memsearch.engine.expand import StaleChunkError
    from memsearch.llm import LLMError
    from memsearch.transcript import TurnNotFoundError

    assert StaleChunkError is errors.StaleChunkError
    assert LLMError is errors.LLMError
    assert TurnNotFoundError is errors.TurnNotFoundError


def test_an_error_line_never_quotes_a_secret() -> None:
    """An error may quote what it was given or read (a query, a day, a model's answer); its line is
    printed, logged and handed to models, so private spans and secrets are taken out of it."""
    from memsearch.errors import InvalidArgumentError

    token = "ghp_" + "Zx9Ab1" * 6
    exc = InvalidArgumentError(
        f"not a day: {token!r}", hint="pass <private>the PIN 4455</private> YYYY-MM-DD"
    )
    line = exc.one_line()
    assert token not in line and "4455" not in line
    assert line.startswith("not a day: '[REDACTED:github-token]'") and "YYYY-MM-DD" in line
