"""Is an input what its name says it is? A task's data file named like a binary format (a
`.db`, a `.pcap`, a `.gz`, a `.png`) must at least begin as that format does: its signature
(magic bytes), or for formats without one a header the format's own reader accepts (a tar
header's checksum, a pickle's opcodes). One that does not is a broken input: the task cannot
be done as written (a `.db` that is a model's prose about a database, an `.npy` that is the
script meant to generate it). Damage past a valid signature (a truncated archive, a database
with a bad page) is not judged: a recovery task ships exactly that. Pure; `format_problem`
says why.
"""

from __future__ import annotations

import io
import pickletools
import posixpath
import tarfile
from collections.abc import Callable

Check = Callable[[bytes], bool]


def _sig(*magic: bytes, at: tuple[int, ...] = (0,)) -> Check:
    return lambda data: any(data[o : o + len(m)] == m for m in magic for o in at)


def _tar(data: bytes) -> bool:
    try:  # the first header's checksum; what follows it may be cut short
        tarfile.TarInfo.frombuf(data[:512], "utf-8", "surrogateescape")
    except tarfile.TarError:
        return False
    return True


def _pickle(data: bytes) -> bool:
    if data[:1] == b"\x80" and data[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        return True  # a binary protocol's PROTO opcode
    try:  # protocols 0 and 1: disassembled, never loaded
        pickletools.dis(data[:1_000_000], out=io.StringIO())
    except Exception:  # noqa: BLE001 - any refusal of the disassembler is the answer
        return False
    return True


def _elf(data: bytes) -> bool:
    head = data[:400].decode("utf-8", "replace")
    # a linker script (`GNU ld script`, `INPUT(...)`) stands in for a shared library
    return (
        data[:4] == b"\x7fELF"
        or "GNU ld script" in head
        or head.lstrip().startswith(("INPUT", "GROUP"))
    )


_SQLITE = _sig(b"SQLite format 3\x00")
_ZIP = _sig(b"PK\x03\x04", b"PK\x05\x06", b"PK\x07\x08")
_GZIP = _sig(b"\x1f\x8b")
_JPEG = _sig(b"\xff\xd8\xff")
_HDF5 = _sig(b"\x89HDF\r\n\x1a\n", at=(0, 512, 1024, 2048))
_PCAP = _sig(b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\xc3\xd4", b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d")
# suffix -> (what the name claims, the check)
FORMATS: dict[str, tuple[str, Check]] = {
    **{s: ("a SQLite database", _SQLITE) for s in (".db", ".sqlite", ".sqlite3")},
    **{
        s: ("a zip archive", _ZIP)
        for s in (".zip", ".jar", ".war", ".apk", ".whl", ".docx", ".xlsx", ".pptx", ".odt", ".npz")
    },  # fmt: skip
    ".gz": ("gzip data", _GZIP),
    ".tgz": ("gzip data", _GZIP),
    ".bz2": ("bzip2 data", _sig(b"BZh")),
    ".xz": ("xz data", _sig(b"\xfd7zXZ\x00")),
    ".tar": ("a tar archive", _tar),
    ".pkl": ("a pickle", _pickle),
    ".pickle": ("a pickle", _pickle),
    ".so": ("a shared library", _elf),
    ".o": ("an object file", _elf),
    ".a": ("a static library", _sig(b"!<arch>\n")),
    ".png": ("a PNG image", _sig(b"\x89PNG\r\n\x1a\n")),
    ".jpg": ("a JPEG image", _JPEG),
    ".jpeg": ("a JPEG image", _JPEG),
    ".gif": ("a GIF image", _sig(b"GIF87a", b"GIF89a")),
    ".bmp": ("a BMP image", _sig(b"BM")),
    ".webp": ("a WebP image", _sig(b"WEBP", at=(8,))),
    ".tiff": ("a TIFF image", _sig(b"II*\x00", b"MM\x00*")),
    ".pdf": ("a PDF document", lambda data: b"%PDF" in data[:1024]),
    ".wav": ("a WAV file", _sig(b"WAVE", at=(8,))),
    ".npy": ("a NumPy array", _sig(b"\x93NUMPY")),
    ".h5": ("an HDF5 file", _HDF5),
    ".hdf5": ("an HDF5 file", _HDF5),
    ".parquet": ("a Parquet file", _sig(b"PAR1")),
    ".pcap": ("a packet capture", _PCAP),
    ".pcapng": ("a packet capture", _sig(b"\x0a\x0d\x0d\x0a")),
    ".class": ("a Java class", _sig(b"\xca\xfe\xba\xbe")),
    ".exe": ("a Windows executable", _sig(b"MZ")),
    ".dll": ("a Windows library", _sig(b"MZ")),
    ".wasm": ("a WebAssembly module", _sig(b"\x00asm")),
    ".7z": ("a 7-Zip archive", _sig(b"7z\xbc\xaf\x27\x1c")),
}


def _what_it_is(data: bytes) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return f"{len(data):,} bytes of other binary data"
    first = " ".join(text.split())[:80]
    return f"{len(data):,} bytes of text beginning {first!r}"


def format_problem(name: str, data: bytes) -> str | None:
    """Why `data` is not the format `name` claims (None: it is, or nothing is claimed)."""
    suffix = posixpath.splitext(name.lower())[1]
    if suffix not in FORMATS:
        return None
    kind, check = FORMATS[suffix]
    if check(data):
        return None
    return f"named like {kind} ({suffix}), but it does not begin as one: {_what_it_is(data)}"
