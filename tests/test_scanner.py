"""Scanner: file discovery and ignore rules, robustness of the walk and of
``read_markdown`` against bad input."""

from __future__ import annotations

import contextlib
import os
import pathlib
import tempfile
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from memsearch.errors import ConfigValueError, MemSearchError
from memsearch.scanner import (
    MAX_MARKDOWN_BYTES,
    BinaryFileError,
    DecodedText,
    FileTooLargeError,
    NotARegularFileError,
    ScannedFile,
    decode_markdown,
    read_markdown,
    scan,
    scan_paths,
    should_index_path,
)

NOBODY = 65534


def _write(path: Path, text: str = "# note\nbody\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _rel(files: list[ScannedFile], root: Path) -> list[str]:
    return [f.path.relative_to(root).as_posix() for f in files]


@contextlib.contextmanager
def _unprivileged() -> Iterator[None]:
    """Make permission bits bite: root ignores them, so drop to ``nobody`` for the block."""
    if os.geteuid() != 0:
        yield
        return
    os.setegid(NOBODY)
    os.seteuid(NOBODY)
    try:
        yield
    finally:
        os.seteuid(0)
        os.setegid(0)


@pytest.fixture
def world_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory ``nobody`` can reach (pytest's tmp root is private to root)."""
    if os.geteuid() != 0:
        yield tmp_path
        return
    with tempfile.TemporaryDirectory() as name:
        os.chmod(name, 0o755)
        yield Path(name).resolve()


# --- discovery ------------------------------------------------------------------------------------


def test_finds_markdown_recursively(tmp_path: Path) -> None:
    for name in ["a.md", "sub/b.markdown", "sub/deep/c.MD", "notes.txt", "sub/readme"]:
        _write(tmp_path / name)
    assert _rel(scan_paths([tmp_path]), tmp_path) == ["a.md", "sub/b.markdown", "sub/deep/c.MD"]


def test_a_bare_path_is_one_input(tmp_path: Path) -> None:
    _write(tmp_path / "a.md")
    assert _rel(scan_paths(str(tmp_path)), tmp_path) == ["a.md"]
    assert _rel(scan(tmp_path).files, tmp_path) == ["a.md"]


def test_custom_extensions(tmp_path: Path) -> None:
    _write(tmp_path / "a.md")
    _write(tmp_path / "b.txt")
    assert _rel(scan_paths([tmp_path], extensions=(".txt",)), tmp_path) == ["b.txt"]
    assert _rel(scan_paths([tmp_path], extensions=("TXT", "md")), tmp_path) == ["a.md", "b.txt"]


def test_hidden_entries_skipped_unless_asked(tmp_path: Path) -> None:
    for name in ["a.md", ".hidden.md", ".obsidian/x.md", "sub/.git/y.md"]:
        _write(tmp_path / name)
    assert _rel(scan_paths([tmp_path]), tmp_path) == ["a.md"]
    assert _rel(scan_paths([tmp_path], ignore_hidden=False), tmp_path) == [
        ".hidden.md",
        ".obsidian/x.md",
        "a.md",
        "sub/.git/y.md",
    ]


def test_hidden_root_is_walked(tmp_path: Path) -> None:
    root = tmp_path / ".memsearch" / "memory"
    _write(root / "2026-03-25.md")
    assert _rel(scan_paths([root]), root) == ["2026-03-25.md"]


def test_single_file_input_and_stat_fields(tmp_path: Path) -> None:
    path = _write(tmp_path / ".hidden" / "one.md", "hello")
    (found,) = scan_paths([path])
    st = path.stat()
    assert found == ScannedFile(path, st.st_mtime, 5, st.st_mtime_ns)
    assert scan_paths([_write(tmp_path / "x.txt")]) == []


def test_tilde_inputs_are_expanded(tmp_path: Path) -> None:
    _write(Path.home() / "notes" / "n.md")
    assert [f.path for f in scan_paths(["~/notes"])] == [Path.home().resolve() / "notes" / "n.md"]


def test_dedup_by_real_path_first_occurrence_wins(tmp_path: Path) -> None:
    _write(tmp_path / "b.md")
    _write(tmp_path / "sub" / "a.md")
    (tmp_path / "a-link.md").symlink_to(tmp_path / "b.md")
    files = scan_paths([tmp_path / "sub", tmp_path, tmp_path / "b.md"])
    # The walk meets a-link.md before b.md, so the link's walk path is the one kept.
    assert _rel(files, tmp_path) == ["a-link.md", "sub/a.md"]


def test_missing_inputs_are_skipped(tmp_path: Path) -> None:
    _write(tmp_path / "a.md")
    result = scan([tmp_path / "nope", tmp_path])
    assert _rel(result.files, tmp_path) == ["a.md"]
    assert result.problems == []


# --- ignore rules (opt-in .gitignore-style files) -------------------------------------------------


def test_ignore_rules_disabled_by_default(tmp_path: Path) -> None:
    _write(tmp_path / ".gitignore", "*.md\n")
    _write(tmp_path / "a.md")
    assert _rel(scan_paths([tmp_path]), tmp_path) == ["a.md"]


def test_gitignore_honoured_when_enabled(tmp_path: Path) -> None:
    _write(tmp_path / ".gitignore", "drafts/\nsecret.md\n")
    for name in ["a.md", "secret.md", "drafts/d.md", "sub/secret.md"]:
        _write(tmp_path / name)
    assert _rel(scan_paths([tmp_path], ignore_files=[".gitignore"]), tmp_path) == ["a.md"]


def test_no_ignore_files_from_parents_of_the_root(tmp_path: Path) -> None:
    _write(tmp_path / ".gitignore", "*.md\n")
    root = tmp_path / "notes"
    _write(root / "a.md")
    assert _rel(scan_paths([root], ignore_files=[".gitignore"]), root) == ["a.md"]


def test_pinned_nested_ignore_files_with_negation(tmp_path: Path) -> None:
    _write(tmp_path / ".gitignore", "*.draft.md\n")
    _write(tmp_path / "docs" / ".gitignore", "private.md\n!keep.draft.md\n")
    for name in ["public.md", "private.md", "keep.draft.md", "other.draft.md"]:
        _write(tmp_path / "docs" / name)
    got = _rel(scan_paths([tmp_path], ignore_files=[".gitignore"]), tmp_path)
    assert got == ["docs/keep.draft.md", "docs/public.md"]


def test_pinned_ignore_file_order_then_excludes(tmp_path: Path) -> None:
    _write(tmp_path / ".gitignore", "from-git.md\n")
    _write(tmp_path / ".cursorignore", "from-cursor.md\n!from-git.md\n")
    for name in ["from-git.md", "from-cursor.md", "final.md"]:
        _write(tmp_path / name)
    got = scan_paths([tmp_path], ignore_files=[".gitignore", ".cursorignore"], exclude=["final.md"])
    assert _rel(got, tmp_path) == ["from-git.md"]
    # Order matters: with .gitignore last, its rule has the final word.
    got = scan_paths([tmp_path], ignore_files=[".cursorignore", ".gitignore"], exclude=["final.md"])
    assert _rel(got, tmp_path) == []


def test_exclude_alone_enables_rules_and_wins(tmp_path: Path) -> None:
    _write(tmp_path / ".gitignore", "!*.md\n")
    for name in ["a.md", "archive/old.md", "b.md"]:
        _write(tmp_path / name)
    got = scan_paths([tmp_path], ignore_files=[".gitignore"], exclude=["archive/", "b.md"])
    assert _rel(got, tmp_path) == ["a.md"]


def test_negation_cannot_reinclude_inside_ignored_directory(tmp_path: Path) -> None:
    _write(tmp_path / ".gitignore", "build/\n")
    _write(tmp_path / "build" / ".gitignore", "!keep.md\n")
    _write(tmp_path / "build" / "keep.md")
    assert scan_paths([tmp_path], ignore_files=[".gitignore"]) == []


def test_explicit_file_bypasses_rules(tmp_path: Path) -> None:
    _write(tmp_path / ".gitignore", "*.md\n")
    path = _write(tmp_path / "a.md")
    assert [f.path for f in scan_paths([path], ignore_files=[".gitignore"], exclude=["a.md"])] == [path]


@pytest.mark.parametrize("bad", ["", "  ", ".", "..", "sub/.gitignore", "..\\x", "/abs"])
def test_invalid_ignore_file_names(tmp_path: Path, bad: str) -> None:
    with pytest.raises(ConfigValueError) as info:
        scan_paths([tmp_path], ignore_files=[bad])
    assert isinstance(info.value, ValueError)
    assert str(info.value) == f"Ignore file must be a filename without directory components: {bad!r}"
    assert info.value.hint
    with pytest.raises(ValueError):
        should_index_path(tmp_path / "a.md", [tmp_path], ignore_files=[bad])


def test_ignore_files_read_once_per_walk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _write(tmp_path / ".gitignore", "skip.md\n")
    for i in range(20):
        _write(tmp_path / f"n{i}.md")
        _write(tmp_path / "sub" / f"m{i}.md")
    reads: list[str] = []
    original = pathlib.Path.read_bytes

    def counting(self: Path) -> bytes:
        reads.append(self.name)
        return original(self)

    monkeypatch.setattr(pathlib.Path, "read_bytes", counting)
    assert len(scan_paths([tmp_path], ignore_files=[".gitignore", ".ignore"])) == 40
    assert reads == [".gitignore"]


@pytest.mark.parametrize("follow_links", [True, False])
def test_a_walk_looks_at_each_file_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, follow_links: bool
) -> None:
    """``index`` of a folder walks it on every run (10,000 files in a team's memory): each file
    costs one ``stat``, not one more per folder above it (a real path resolved per file was ~10
    system calls a file, 0.3 s of a one-file change at 10,000 files). Links are still found."""
    deep = tmp_path / "a" / "b" / "c"
    for i in range(30):
        _write(deep / "memory" / f"2026-01-{i + 1:02d}.md")
    (deep / "memory" / "link.md").symlink_to(deep / "memory" / "2026-01-01.md")
    calls: list[str] = []
    for name in ("stat", "lstat"):
        original = getattr(os, name)

        def counting(path: object, *args: object, _original: object = original, **kwargs: object) -> object:
            calls.append(str(path))
            return _original(path, *args, **kwargs)  # type: ignore[operator]

        monkeypatch.setattr(os, name, counting)
    result = scan([deep], follow_links=follow_links)
    monkeypatch.undo()
    assert len(result.files) == 30
    if follow_links:
        assert not result.problems  # the link is the same file: kept once, by its real path
    else:
        assert [reason for _, reason in result.problems] == [
            "a symbolic link (links are not followed in this index)"
        ]
    # a call per walked file; only the root and the link are resolved, a call per folder above them
    # (counted against the folder's depth: pytest's temporary folder is deeper under xdist)
    files = Counter(call for call in calls if Path(call).parent == deep / "memory")
    assert [n for name, n in files.items() if not name.endswith(("link.md", "01-01.md"))] == [1] * 29
    assert len(calls) - sum(files.values()) <= 4 * len(deep.parts)


# --- should_index_path (the one rule index and watch share) ---------------------------------------


def test_should_index_path_agrees_with_scan(tmp_path: Path) -> None:
    _write(tmp_path / ".gitignore", "*.draft.md\nbuild/\n")
    _write(tmp_path / "docs" / ".gitignore", "private.md\n!keep.draft.md\n")
    names = [
        "a.md",
        "x.draft.md",
        "docs/private.md",
        "docs/keep.draft.md",
        "docs/public.md",
        "build/out.md",
        ".hidden/h.md",
        "notes.txt",
        "final.md",
    ]
    for name in names:
        _write(tmp_path / name)
    options = {"ignore_files": [".gitignore"], "exclude": ["final.md"]}
    scanned = set(_rel(scan_paths([tmp_path], **options), tmp_path))  # type: ignore[arg-type]
    assert scanned == {"a.md", "docs/keep.draft.md", "docs/public.md"}
    for name in names:
        assert should_index_path(tmp_path / name, [tmp_path], **options) == (name in scanned), name  # type: ignore[arg-type]


def test_should_index_path_roots(tmp_path: Path) -> None:
    notes = _write(tmp_path / "notes" / "a.md")
    single = _write(tmp_path / "single.md")
    other = _write(tmp_path / "other" / "b.md")
    roots = [tmp_path / "notes", single, tmp_path / "missing"]
    assert should_index_path(notes, roots)
    assert should_index_path(single, roots)
    assert not should_index_path(other, roots)
    assert not should_index_path(tmp_path / "notes" / "c.txt", roots)


def test_should_index_path_sees_ignore_edits_live(tmp_path: Path) -> None:
    path = _write(tmp_path / "a.md")
    assert should_index_path(path, [tmp_path], ignore_files=[".gitignore"])
    _write(tmp_path / ".gitignore", "a.md\n")
    assert not should_index_path(path, [tmp_path], ignore_files=[".gitignore"])


# --- robustness -----------------------------------------------------------------------------------


def test_symlink_loops_do_not_hang_or_crash(tmp_path: Path) -> None:
    _write(tmp_path / "sub" / "a.md")
    (tmp_path / "sub" / "up").symlink_to(tmp_path, target_is_directory=True)  # directory cycle
    (tmp_path / "self.md").symlink_to(tmp_path / "self.md")  # a link to itself
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    result = scan([tmp_path, tmp_path / "loop"])
    assert _rel(result.files, tmp_path) == ["sub/a.md"]
    problem_paths = {Path(p).name for p, _ in result.problems}
    assert problem_paths == {"self.md", "loop"}


def test_broken_symlink_is_a_problem(tmp_path: Path) -> None:
    (tmp_path / "gone.md").symlink_to(tmp_path / "nowhere.md")
    result = scan([tmp_path])
    assert result.files == []
    assert [Path(p).name for p, _ in result.problems] == ["gone.md"]


def test_fifo_is_skipped_and_reported(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.md"
    os.mkfifo(fifo)
    _write(tmp_path / "a.md")
    result = scan([tmp_path, fifo])
    assert _rel(result.files, tmp_path) == ["a.md"]
    assert result.problems == [(str(fifo), "not a regular file")] * 2


def test_read_markdown_does_not_block_on_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.md"
    os.mkfifo(fifo)
    outcome: list[BaseException] = []
    worker = threading.Thread(target=lambda: _capture(lambda: read_markdown(fifo), outcome), daemon=True)
    worker.start()
    worker.join(timeout=5)
    if worker.is_alive():  # unblock the reader so the test run can finish, then fail
        with open(fifo, "wb"):
            pass
        pytest.fail("read_markdown blocked on a FIFO")
    assert len(outcome) == 1 and isinstance(outcome[0], NotARegularFileError)


def _capture(call: object, sink: list[BaseException]) -> None:
    try:
        call()  # type: ignore[operator]
    except BaseException as exc:
        sink.append(exc)


def test_unreadable_directory_is_reported_and_the_rest_scanned(world_dir: Path) -> None:
    _write(world_dir / "ok.md")
    locked = world_dir / "locked"
    _write(locked / "secret.md")
    locked.chmod(0)
    try:
        with _unprivileged():
            result = scan([world_dir])
    finally:
        locked.chmod(0o755)
    assert _rel(result.files, world_dir) == ["ok.md"]
    assert result.problems == [(str(locked), "Permission denied")]


def test_unreadable_file_raises_oserror(world_dir: Path) -> None:
    path = _write(world_dir / "private.md")
    path.chmod(0)
    with _unprivileged(), pytest.raises(PermissionError):
        read_markdown(path)


# --- read_markdown --------------------------------------------------------------------------------


def test_read_plain_utf8(tmp_path: Path) -> None:
    path = tmp_path / "a.md"
    path.write_bytes("# Ünïcode 中文\r\nline\n".encode())
    assert read_markdown(path) == DecodedText("# Ünïcode 中文\r\nline\n", None)


def test_read_strips_utf8_bom(tmp_path: Path) -> None:
    path = tmp_path / "a.md"
    path.write_bytes(b"\xef\xbb\xbf# Title\n")
    assert read_markdown(path) == DecodedText("# Title\n", None)


def test_read_invalid_utf8_is_replaced_with_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "bad.md"
    path.write_bytes(b"ok text \xff.")
    decoded = read_markdown(path)
    assert decoded.text == "ok text \ufffd."
    assert decoded.warning == (f"invalid UTF-8 in {path} at byte 8; undecodable bytes replaced with U+FFFD")
    path.write_bytes(b"\xef\xbb\xbfab\xc3(")  # offset counts the BOM: it is a byte of the file
    assert read_markdown(path).warning == (
        f"invalid UTF-8 in {path} at byte 5; undecodable bytes replaced with U+FFFD"
    )


def test_read_utf16_with_bom(tmp_path: Path) -> None:
    path = tmp_path / "win.md"
    path.write_bytes("# Notes\r\nfrom Notepad\r\n".encode("utf-16"))
    assert read_markdown(path) == DecodedText("# Notes\r\nfrom Notepad\r\n", None)


def test_binary_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "image.md"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    with pytest.raises(BinaryFileError) as info:
        read_markdown(path)
    assert isinstance(info.value, MemSearchError)
    assert str(info.value) == f"{path} looks like a binary file, not markdown"
    assert info.value.hint


def test_nul_byte_after_the_sniff_window_is_text(tmp_path: Path) -> None:
    path = tmp_path / "long.md"
    path.write_bytes(b"a" * 8192 + b"\x00")
    assert read_markdown(path).text == "a" * 8192 + "\x00"


def test_too_large_file_is_refused(tmp_path: Path) -> None:
    assert MAX_MARKDOWN_BYTES == 100 * 1024 * 1024
    path = tmp_path / "big.md"
    path.write_bytes(b"x" * 2048)
    with pytest.raises(FileTooLargeError) as info:
        read_markdown(path, max_bytes=1024)
    assert str(info.value) == f"{path} is 2.0 KiB, larger than the 1.0 KiB limit for a markdown file"
    assert info.value.hint
    assert read_markdown(path, max_bytes=2048).text == "x" * 2048


def test_default_size_limit_applies(tmp_path: Path) -> None:
    path = tmp_path / "huge.md"
    with open(path, "wb") as fh:  # sparse: no 100 MiB actually written
        fh.truncate(MAX_MARKDOWN_BYTES + 1)
    with pytest.raises(FileTooLargeError):
        read_markdown(path)


def test_decode_markdown_matches_read_markdown(tmp_path: Path) -> None:
    path = tmp_path / "a.md"
    for data in (b"\xef\xbb\xbf# T\n", b"bad \xfe byte", "# 中文\n".encode()):
        path.write_bytes(data)
        assert decode_markdown(data, path) == read_markdown(path)
    with pytest.raises(BinaryFileError):
        decode_markdown(b"\x00\x01", path)


def test_missing_file_raises_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_markdown(tmp_path / "nope.md")


def test_scanned_file_is_frozen(tmp_path: Path) -> None:
    f = ScannedFile(tmp_path, 1.0, 2)
    assert f.mtime_ns == 0
    with pytest.raises(AttributeError):
        f.size = 3  # type: ignore[misc]
