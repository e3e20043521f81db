"""A GGUF file's header walked once with every count checked against the bytes left in the file.

gguf's own reader (GGUFReader) trusts the counts it reads: an array that claims 2**40 items in a
114-byte file makes it loop, one empty numpy view per item, until memory runs out. So every
reader of a file a person gives (the model field, the Chat tab) walks it here first, holding only
offsets: no value is built, so a real file's vocabulary costs no memory beyond the file's own map.
Layout (little-endian, or all big-endian): magic, version (uint32), tensor count and key count
(uint64), the keys (string key, uint32 type, value), then each tensor's name, dims, type and offset.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass, field
from pathlib import Path

# Bytes of one value of each fixed-size GGUF type (gguf.GGUFValueType: 0-7, 10-12).
FIXED_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
STRING, ARRAY = 8, 9
MIN_SIZES = {**FIXED_SIZES, STRING: 8, ARRAY: 12}  # a string's length; an array's type and count
MIN_KEY_BYTES = 8 + 4 + 1       # the key's length, the value's type, the smallest value
MIN_TENSOR_BYTES = 8 + 4 + 4 + 8  # the name's length, dims count, type, offset
MAX_NESTING = 4                 # arrays of arrays; llama.cpp itself reads none
READ_VERSIONS = (2, 3)          # gguf's reader's (READER_SUPPORTED_VERSIONS): 64-bit counts and lengths
NAME_SHOWN = 80                 # bytes of a key or tensor name kept for an error's text
VALUE_KEPT = 512                # bytes of a string value read_gguf_header keeps (names, licences, not templates)
SCALAR_CODES = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}


class GGUFLayoutError(ValueError):
    """A count or length in the header that the file's size cannot hold; the text says which, where."""


@dataclass
class GGUFHeader:
    """What read_gguf_header keeps: scalar values (strings cut to VALUE_KEPT bytes), each array's item
    count (`arrays`), and every tensor's (name, dims, ggml type code); no tensor data is read."""
    version: int = 0
    fields: dict = field(default_factory=dict)
    arrays: dict = field(default_factory=dict)
    tensors: list = field(default_factory=list)


def check_gguf_header(path: Path) -> None:
    """Raises GGUFLayoutError when a count or length in the header claims more than the file holds."""
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
        _Walk(data).header()


def read_gguf_header(path: Path) -> GGUFHeader:
    """The header's facts, walked with the same checks (GGUFLayoutError); for listing a file without
    gguf's reader, which builds a numpy view per vocabulary entry. A version it does not read: only `version`."""
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
        walk = _Walk(data, keep=GGUFHeader())
        walk.header()
        return walk.keep


class _Walk:
    def __init__(self, data, keep: GGUFHeader | None = None):
        self.data, self.at = data, 0
        self.order = "<"
        self.keep = keep  # None: only check

    def header(self) -> None:
        self.skip(4, "the magic bytes")
        version = self.unpack("I", "the version")
        if version & 0xFFFF == 0:   # written on a big-endian machine (gguf's own test)
            self.order = ">"
            version = struct.unpack(">I", struct.pack("<I", version))[0]
        if self.keep is not None:
            self.keep.version = version
        if version not in READ_VERSIONS:
            return  # gguf's reader refuses it with its own sentence; version 1 had 32-bit counts
        tensors = self.unpack("Q", "the tensor count")
        keys = self.unpack("Q", "the metadata key count")
        self.fits(keys, MIN_KEY_BYTES, f"the header claims {keys} metadata keys")
        for _ in range(keys):
            key = self.string("a metadata key", keep=True).decode("utf-8", "replace")
            kind, start = self.unpack("I", f"the type of key {key!r}"), self.at
            self.value(kind, f"key {key!r}", 0)
            if self.keep is not None:
                self.remember(key, kind, start)
        self.fits(tensors, MIN_TENSOR_BYTES, f"the header claims {tensors} tensors")
        for _ in range(tensors):
            name = self.string("a tensor name", keep=True).decode("utf-8", "replace")
            dims = self.unpack("I", f"the dims count of tensor {name!r}")
            start = self.skip(8 * dims + 4 + 8, f"tensor {name!r} with {dims} dims")
            if self.keep is not None:
                shape = struct.unpack_from(f"{self.order}{dims}Q", self.data, start)
                kind = struct.unpack_from(self.order + "I", self.data, start + 8 * dims)[0]
                self.keep.tensors.append((name, shape, kind))

    def remember(self, key: str, kind: int, start: int) -> None:
        """The value just walked past (at `start`), already checked to fit."""
        if kind in SCALAR_CODES:
            self.keep.fields[key] = struct.unpack_from(self.order + SCALAR_CODES[kind], self.data, start)[0]
        elif kind == STRING:
            length = struct.unpack_from(self.order + "Q", self.data, start)[0]
            raw = self.data[start + 8:start + 8 + min(length, VALUE_KEPT)]
            self.keep.fields[key] = raw.decode("utf-8", "replace")
        elif kind == ARRAY:
            self.keep.arrays[key] = struct.unpack_from(self.order + "Q", self.data, start + 4)[0]

    def value(self, kind: int, what: str, depth: int) -> None:
        if kind in FIXED_SIZES:
            self.skip(FIXED_SIZES[kind], what)
        elif kind == STRING:
            self.string(what)
        elif kind == ARRAY:
            if depth == MAX_NESTING:
                raise GGUFLayoutError(f"{what} nests arrays more than {MAX_NESTING} deep at byte {self.at}")
            item = self.unpack("I", f"the item type of {what}")
            count = self.unpack("Q", f"the item count of {what}")
            if item not in MIN_SIZES:
                raise GGUFLayoutError(f"{what} has items of unknown type {item} at byte {self.at}")
            self.fits(count, MIN_SIZES[item], f"{what} claims an array of {count} items")
            if item in FIXED_SIZES:
                self.skip(count * FIXED_SIZES[item], what)
            else:
                for _ in range(count):
                    self.value(item, what, depth + 1)
        else:
            raise GGUFLayoutError(f"{what} has a value of unknown type {kind} at byte {self.at}")

    def string(self, what: str, keep: bool = False) -> bytes:
        """The string's first bytes when `keep` (names, for the error texts), else b"": a value is skipped."""
        length = self.unpack("Q", f"the length of {what}")
        self.fits(length, 1, f"{what} claims a string of {length} bytes")
        start = self.skip(length, what)
        return self.data[start:min(self.at, start + NAME_SHOWN)] if keep else b""

    def fits(self, count: int, each: int, claim: str) -> None:
        """`count` items of at least `each` bytes must fit in what is left, checked before any is read."""
        left = len(self.data) - self.at
        if count * each > left:
            raise GGUFLayoutError(f"{claim} at byte {self.at}, but only {left} bytes are left")

    def unpack(self, code: str, what: str) -> int:
        return struct.unpack(self.order + code, self.take(struct.calcsize(code), what))[0]

    def take(self, size: int, what: str) -> bytes:
        start = self.skip(size, what)
        return self.data[start:self.at]

    def skip(self, size: int, what: str) -> int:
        """Moves past `size` bytes that the file must hold; returns where they start."""
        self.fits(size, 1, f"{what} needs {size} bytes")
        start, self.at = self.at, self.at + size
        return start
