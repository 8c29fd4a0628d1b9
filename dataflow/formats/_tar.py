"""The tar layout, read from a stream and written, without :mod:`tarfile` (what
:class:`~dataflow.WebDatasetData` and its serializer stand on).

A tar file is a sequence of members, each a 512-byte header block followed by its data padded
to a multiple of 512 bytes, and ends with a zero block (writers add two, then pad the file to
a multiple of 10,240 bytes). Every member header starts at a 512-byte boundary, so reading can
start at any member's header: :func:`read_members` is given the byte offset it starts at.

Read: POSIX ustar (with its ``prefix`` field), GNU tar (``L`` long names) and pax (``x``
extended headers: ``path`` and ``size``) members, sizes in octal or base-256; both header
checksum conventions (unsigned and signed sums) are accepted, as :mod:`tarfile` does.
Global pax headers (``g``) and long link names (``K``) are skipped; GNU sparse members are
refused. Written: ustar headers, names over 100 bytes split into ``prefix``/``name`` at a
``/`` when they fit, else preceded by a pax header holding the ``path``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from .._errors import FormatError

__all__ = ["BLOCK", "END_BLOCKS", "TarError", "member_header", "read_members", "record_padding"]

BLOCK = 512
RECORD = 20 * BLOCK  # writers pad the archive to a multiple of this
END_BLOCKS = bytes(2 * BLOCK)
_ZERO = bytes(BLOCK)
_REGULAR = (b"0", b"\0", b"7")
_NO_DATA = (b"1", b"2", b"3", b"4", b"5", b"6")  # links, devices, directories, FIFOs: size is not data
_MAX_OCTAL = 8**11 - 1  # the largest size an 11-digit octal field holds


class TarError(FormatError):
    """A damaged or truncated archive; ``member`` is the name of the member it was in, when
    its header could be read (its data could not)."""

    def __init__(self, message: str, member: str | None = None) -> None:
        super().__init__(message)
        self.member = member


def _octal(field: bytes) -> int:
    """A numeric header field: octal digits (NUL/space padded), or base-256 (GNU, high bit
    set) for values too large for octal."""
    if field[0] & 0x80:
        value = int.from_bytes(field[1:], "big")
        return value - (1 << (8 * (len(field) - 1))) if field[0] == 0xFF else value
    text = field.split(b"\0", 1)[0].strip(b" ")
    return int(text, 8) if text else 0


def _checksum_ok(buf: bytes) -> bool:
    stored = _octal(buf[148:156])
    unsigned = sum(buf) - sum(buf[148:156]) + 8 * 32
    if stored == unsigned:
        return True
    signed = unsigned - 256 * sum(1 for b in buf if b > 127) + 256 * sum(1 for b in buf[148:156] if b > 127)
    return stored == signed


def _pax(data: bytes) -> dict[str, str]:
    """The ``key=value`` records of a pax extended header (``"<length> key=value\\n"``)."""
    out: dict[str, str] = {}
    pos = 0
    while pos < len(data) and data[pos] != 0:
        space = data.index(b" ", pos)
        length = int(data[pos:space])
        if length <= 0:
            raise ValueError("a pax record of length 0")
        key, _, value = data[space + 1 : pos + length - 1].partition(b"=")
        out[key.decode("utf-8", "surrogateescape")] = value.decode("utf-8", "surrogateescape")
        pos += length
    return out


def read_members(
    read: Callable[[int], bytes], offset: int = 0, skip: Callable[[int], object] | None = None
) -> Iterator[tuple[int, str, bytes]]:
    """``(header offset, name, data)`` of each regular file member read through ``read``
    (a file's ``read``), which starts at byte ``offset`` of the archive (a member's first
    header). The header offset is where the member's headers begin (its pax or long-name
    header, when it has one): reading again from there yields it again. Other members
    (directories, links, ...) are skipped. Stops at the end-of-archive block.

    A damaged or truncated archive raises :class:`~dataflow.FormatError` whose message
    names the member (when its header could be read) and the byte offset, but not the file:
    the caller adds it. A stream that ends at a member boundary without the end-of-archive
    block is truncated too (tar writers always end with it). With ``skip`` (a function that
    moves the file ``n`` bytes forward), file data is skipped instead of read and yielded as
    ``b""``: a scan of the headers alone."""
    pos = offset
    start = offset  # where the current member's headers began
    long_name: str | None = None
    pax: dict[str, str] = {}
    while True:
        buf = read(BLOCK)
        if len(buf) < BLOCK:
            what = "ends without the end-of-archive block" if not buf else "ends inside a member header"
            where = f"after member {long_name!r}" if long_name else f"at byte offset {pos}"
            raise TarError(f"{where}: the archive {what} (the file is truncated)")
        if buf == _ZERO:
            return
        raw_name = buf[:100].split(b"\0", 1)[0]
        name = raw_name.decode("utf-8", "surrogateescape")
        if not _checksum_ok(buf):
            raise TarError(
                f"member {name!r} at byte offset {pos}: corrupt header (checksum mismatch)"
            )
        try:
            size = _octal(buf[124:136])
        except ValueError:
            raise TarError(
                f"member {name!r} at byte offset {pos}: corrupt header (bad size field)"
            ) from None
        kind = buf[156:157]
        if buf[257:263] == b"ustar\0" and buf[345] != 0:  # POSIX: a long name split in two
            name = buf[345:500].split(b"\0", 1)[0].decode("utf-8", "surrogateescape") + "/" + name
        if kind in _NO_DATA:
            size = 0
        elif "size" in pax and kind not in (b"x", b"g", b"L", b"K"):
            size = int(pax["size"])
        padded = size + (-size % BLOCK)
        if kind in _REGULAR:
            if long_name is not None:
                name = long_name
            if "path" in pax:
                name = pax["path"]
            if skip is not None:
                skip(padded)
                yield start, name, b""
                pos += BLOCK + padded
                start, long_name, pax = pos, None, {}
                continue
            data = read(size)
            pad = read(padded - size) if padded > size else b""
            if len(data) < size or len(pad) < padded - size:
                raise TarError(
                    f"member {name!r} at byte offset {start}: the archive ends inside its data "
                    f"({size} bytes; the file is truncated)",
                    name,
                )
            if not (kind == b"\0" and name.endswith("/")):  # an old-style directory
                yield start, name, data
        else:
            body = read(padded)
            if len(body) < padded:
                raise TarError(
                    f"member {name!r} at byte offset {pos}: the archive ends inside it "
                    f"(the file is truncated)"
                )
            if kind == b"S":
                raise TarError(
                    f"member {name!r} at byte offset {pos}: GNU sparse members are not supported"
                )
            if kind == b"L":
                long_name = body[:size].split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
                pos += BLOCK + padded
                continue
            if kind == b"x":
                try:
                    pax = _pax(body[:size])
                except ValueError as e:
                    raise TarError(f"member at byte offset {pos}: corrupt pax header ({e})") from None
                pos += BLOCK + padded
                continue
            if kind in (b"K", b"g"):
                pos += BLOCK + padded
                continue
        pos += BLOCK + padded
        start, long_name, pax = pos, None, {}


def _field(value: int, width: int) -> bytes:
    return b"%0*o\0" % (width - 1, value)


def _ustar(name: bytes, prefix: bytes, size: int, mtime: int, kind: bytes) -> bytes:
    head = b"".join(
        (
            name.ljust(100, b"\0"),
            b"0000444\0",  # mode r--r--r--, as webdataset writes
            b"0000000\0",
            b"0000000\0",
            _field(size, 12),
            _field(mtime, 12),
            b"        ",  # the checksum, counted as spaces
            kind,
            bytes(100),
            b"ustar\x0000",
            bytes(64),  # owner and group names
            b"0000000\0",
            b"0000000\0",
            prefix.ljust(155, b"\0"),
            bytes(12),
        )
    )
    return head[:148] + b"%06o\0 " % sum(head) + head[156:]


def member_header(name: str, size: int, mtime: int) -> bytes:
    """The header block(s) of a regular file member ``name`` of ``size`` bytes: one ustar
    header, preceded by a pax header holding the path when it does not fit ustar's fields."""
    if size > _MAX_OCTAL:
        raise ValueError(f"a member of {size} bytes is larger than a ustar header can describe (8 GiB)")
    raw = name.encode("utf-8", "surrogateescape")
    if len(raw) <= 100:
        return _ustar(raw, b"", size, mtime, b"0")
    cut = raw.find(b"/", max(0, len(raw) - 101))
    if 0 < cut <= 155 and len(raw) - cut - 1 <= 100:
        return _ustar(raw[cut + 1 :], raw[:cut], size, mtime, b"0")
    record = b" path=" + raw + b"\n"
    length = len(record) + len(str(len(record)))
    length += len(str(length)) - len(str(len(record)))  # the length counts its own digits
    body = str(length).encode() + record
    ext = _ustar(b"././@PaxHeader", b"", len(body), mtime, b"x")
    return ext + body + bytes(-len(body) % BLOCK) + _ustar(raw[:100], b"", size, mtime, b"0")


def record_padding(size: int) -> bytes:
    """The end-of-archive blocks and the zero padding after them, for an archive of ``size``
    bytes so far: the file ends at a multiple of the 10,240-byte record, as tar writes it."""
    total = size + len(END_BLOCKS)
    return END_BLOCKS + bytes(-total % RECORD)
