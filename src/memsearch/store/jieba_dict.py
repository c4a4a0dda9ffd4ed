"""jieba's word-frequency table in ~9 MB instead of ~75 MB: :class:`CompactFreq`.

jieba keeps its dictionary as one Python dict, ``FREQ``: every word of ``dict.txt`` with its
frequency, and every prefix of a word with frequency 0 (about 580,000 keys). As Python objects that
is ~75 MB, held by every process that segments one Chinese text — with Milvus Lite that is every
``memsearch index`` of a Chinese note and every Chinese search. jieba only ever asks that table
"is this string a key?" and "what is its frequency?", so :class:`CompactFreq` answers the same two
questions from flat arrays: the keys' CRC-32s sorted (binary search), their frequencies, and where
each key's characters start in one string holding every word once (a prefix points into its word).
A CRC match is confirmed by comparing the characters, so answers are exact, never probabilistic.
A lookup costs ~1.7 µs instead of a dict's ~0.05 µs, so the latest 50,000 answers are kept in an
ordinary dict (text repeats its words).

The table is built once from jieba's ``dict.txt`` (~2 s) and kept in ``~/.memsearch/cache``
(keyed by the file's path, size and modification time; written atomically, mode 0600), so later
processes read ~12 MB of arrays in milliseconds. It is not kept in the shared temp folder: a name
there is predictable, and another local user could plant a FIFO (every Chinese index or search
would hang opening it) or a table of their own. The file carries the sha256 of its contents, checked
when it is read (~10 ms); a file that is not a regular file of ours, or does not match, is rebuilt.
Words added at run time (``jieba.add_word``) go into a small ordinary dict consulted first.
"""

from __future__ import annotations

import hashlib
import logging
import struct
import zlib
from array import array
from bisect import bisect_left
from pathlib import Path
from typing import Any

from memsearch import private
from memsearch.errors import PrivatePathError

logger = logging.getLogger("memsearch.store")

#: File header: format tag, key count, word-string length (characters), dictionary total.
_MAGIC = b"memsearch-jieba-freq-2\n"
#: After the tag: the sha256 of everything that follows it.
_DIGEST_SIZE = 32
_HEADER = struct.Struct("<QQQ")
_MISSING: Any = object()
#: Lookups remembered at most (~5 MB of short strings); the memory is cleared when it is full.
RECENT_MAX = 50_000


def _crc(word: str) -> int:
    try:
        return zlib.crc32(word.encode())
    except UnicodeEncodeError:  # a lone surrogate: still a string jieba may be asked about
        return zlib.crc32(word.encode("utf-8", "surrogatepass"))


class CompactFreq:
    """A read-mostly mapping ``str -> int`` with the same keys and values as jieba's ``FREQ``."""

    __slots__ = ("_added", "_freqs", "_hashes", "_lengths", "_offsets", "_recent", "_words", "total")

    def __init__(
        self,
        hashes: array[int],
        offsets: array[int],
        lengths: array[int],
        freqs: array[int],
        words: str,
        total: int,
    ) -> None:
        self._hashes, self._offsets, self._lengths, self._freqs = hashes, offsets, lengths, freqs
        self._words = words
        self._added: dict[str, int] = {}
        #: The answers to the latest lookups (None: not a key), bounded by :data:`RECENT_MAX`:
        #: text repeats its words, and a dict answers ~30 times faster than the binary search.
        self._recent: dict[str, int | None] = {}
        self.total = total

    def get(self, word: str, default: Any = None) -> Any:
        value = self._recent.get(word, _MISSING)
        if value is _MISSING:
            value = self._added[word] if word in self._added else self._find(word)
            if len(self._recent) >= RECENT_MAX:
                self._recent.clear()
            self._recent[word] = value
        return default if value is None else value

    def _find(self, word: str) -> int | None:
        hashes = self._hashes
        h = _crc(word)
        i = bisect_left(hashes, h)
        size = len(word)
        while i < len(hashes) and hashes[i] == h:
            if self._lengths[i] == size and self._words.startswith(word, self._offsets[i]):
                return self._freqs[i]
            i += 1
        return None

    def __contains__(self, word: object) -> bool:
        return isinstance(word, str) and self.get(word) is not None

    def __getitem__(self, word: str) -> int:
        value = self.get(word)
        if value is None:
            raise KeyError(word)
        return int(value)

    def __setitem__(self, word: str, freq: int) -> None:
        self._added[word] = freq
        self._recent.pop(word, None)

    def __len__(self) -> int:
        return len(self._hashes) + sum(1 for word in self._added if self.get(word) is None)

    # --- building and storing -------------------------------------------------------------------

    @classmethod
    def from_dict_file(cls, path: Path) -> CompactFreq:
        """Read a jieba dictionary (``word freq [tag]`` per line) as jieba's ``gen_pfdict`` does:
        a repeated word keeps its last frequency and every line counts towards the total."""
        freq: dict[str, int] = {}
        total = 0
        with path.open("rb") as fh:
            for lineno, raw in enumerate(fh, 1):
                line = raw.strip().decode("utf-8")
                try:
                    word, count = line.split(" ")[:2]
                    value = int(count)
                except ValueError:
                    raise ValueError(f"invalid dictionary entry in {path} at line {lineno}: {line}") from None
                freq[word] = value
                total += value
        return cls._from_words(freq, total)

    @classmethod
    def _from_words(cls, freq: dict[str, int], total: int) -> CompactFreq:
        import numpy as np  # only to sort ~500,000 keys once, while building

        hashes, offsets, lengths, values = array("I"), array("I"), array("H"), array("q")
        prefixes: set[str] = set()
        offset = 0
        for word, value in freq.items():
            hashes.append(_crc(word))
            offsets.append(offset)
            lengths.append(len(word))
            values.append(value)
            for end in range(1, len(word)):
                prefix = word[:end]
                if prefix not in freq and prefix not in prefixes:
                    prefixes.add(prefix)
                    hashes.append(_crc(prefix))
                    offsets.append(offset)
                    lengths.append(end)
                    values.append(0)
            offset += len(word)
        order = np.argsort(np.frombuffer(hashes, dtype=np.uint32), kind="stable")

        def sorted_(column: array[int]) -> array[int]:
            return array(column.typecode, np.frombuffer(column, dtype=column.typecode)[order].tobytes())

        return cls(sorted_(hashes), sorted_(offsets), sorted_(lengths), sorted_(values), "".join(freq), total)

    def to_bytes(self) -> bytes:
        words = self._words.encode("utf-8", "surrogatepass")
        parts = [self._hashes, self._offsets, self._lengths, self._freqs]
        body = _HEADER.pack(len(self._hashes), len(words), self.total)
        body += b"".join(part.tobytes() for part in parts) + words
        return _MAGIC + hashlib.sha256(body).digest() + body

    @classmethod
    def from_bytes(cls, data: bytes) -> CompactFreq:
        if not data.startswith(_MAGIC):
            raise ValueError("not a memsearch jieba table")
        start = len(_MAGIC) + _DIGEST_SIZE
        if hashlib.sha256(memoryview(data)[start:]).digest() != data[len(_MAGIC) : start]:
            raise ValueError("memsearch jieba table does not match its checksum")
        count, words_size, total = _HEADER.unpack_from(data, start)
        position = start + _HEADER.size
        columns = []
        for typecode in ("I", "I", "H", "q"):
            column = array(typecode)
            end = position + count * column.itemsize
            column.frombytes(data[position:end])
            columns.append(column)
            position = end
        if len(data) != position + words_size:
            raise ValueError("truncated memsearch jieba table")
        words = data[position:].decode("utf-8", "surrogatepass")
        return cls(columns[0], columns[1], columns[2], columns[3], words, total)


#: The folder under ``~/.memsearch`` of caches derived from installed files.
CACHE_DIR = "cache"


def cache_name(dict_file: Path) -> str:
    """The cache file's name for ``dict_file``: one per version of it (path, size, mtime)."""
    stat = dict_file.stat()
    key = f"{dict_file.resolve()} | {stat.st_size} bytes | mtime_ns {stat.st_mtime_ns}"
    return f"jieba-{hashlib.sha256(key.encode()).hexdigest()[:16]}.bin"


def cache_path(dict_file: Path) -> Path:
    """Where the table built from ``dict_file`` is kept: ``~/.memsearch/cache`` (private, created)."""
    return private.home_dir(CACHE_DIR) / cache_name(dict_file)


def load(dict_file: Path) -> CompactFreq:
    """The table for ``dict_file``: read from its cache file, else built and cached (best effort:
    without a usable ``~/.memsearch`` the table is built for this process only)."""
    try:
        cached: Path | None = cache_path(dict_file)
    except PrivatePathError:
        logger.debug("no private folder for the jieba table", exc_info=True)
        cached = None
    if cached is not None:
        try:
            return CompactFreq.from_bytes(private.read_private(cached))
        except FileNotFoundError:
            pass
        except (OSError, ValueError, struct.error):
            logger.debug("rebuilding the jieba table %s", cached, exc_info=True)
    table = CompactFreq.from_dict_file(dict_file)
    if cached is not None:
        try:
            private.write_private(cached, table.to_bytes())
        except (OSError, PrivatePathError):  # a full disk: the table still works, it is rebuilt next time
            logger.debug("could not keep the jieba table at %s", cached, exc_info=True)
    return table
