"""Reading a whole ``multipart/form-data`` body into its fields, for the mock's file uploads.

The mock keeps its own small reader (bodies are small and already whole) instead of the gateway's streaming parser,
so each checks the other. Facts relied on (RFC 7578 and RFC 2046 section 5.1.1): the Content-Type's ``boundary``
parameter (1 to 70 characters, possibly quoted) delimits parts as ``--boundary`` at the start of a line; the first
delimiter may open the body, later ones follow a CRLF that belongs to the delimiter; after a delimiter come the
part's headers, ending with an empty line, then its content; ``--boundary--`` closes the body; text before the first
delimiter and after the last is ignored; each part's ``Content-Disposition: form-data; name="..."`` names its field
(``filename="..."`` for a file).
"""

from __future__ import annotations

from email.message import Message


class FormError(ValueError):
    """The body is not well-formed multipart/form-data."""


def _params(header: str, value: str) -> Message:
    holder = Message()
    holder[header] = value
    return holder


def boundary_of(content_type: str) -> str:
    """The boundary of a ``multipart/form-data`` Content-Type; FormError when it is not one or has none."""
    holder = _params("content-type", content_type)
    if holder.get_content_type() != "multipart/form-data":
        raise FormError("the body must be multipart/form-data")
    boundary = holder.get_param("boundary")
    if not isinstance(boundary, str) or not 1 <= len(boundary) <= 70:
        raise FormError("the multipart/form-data Content-Type has no valid boundary")
    return boundary


def _part(raw: bytes) -> tuple[str, str | None, bytes]:
    head, sep, content = raw.partition(b"\r\n\r\n")
    if not sep:
        raise FormError("a part's headers do not end with an empty line")
    disposition = None
    for line in head.decode("utf-8", "replace").split("\r\n"):
        name, colon, value = line.partition(":")
        if colon and name.strip().lower() == "content-disposition":
            disposition = _params("content-disposition", value.strip())
    if disposition is None or disposition.get_content_disposition() != "form-data":
        raise FormError("a part has no Content-Disposition: form-data header")
    field = disposition.get_param("name", header="content-disposition")
    if not isinstance(field, str) or not field:
        raise FormError("a part's Content-Disposition has no name")
    filename = disposition.get_param("filename", header="content-disposition")
    return field, filename if isinstance(filename, str) else None, content


def parse_form(content_type: str, body: bytes) -> tuple[dict[str, bytes], dict[str, str]]:
    """``(field name -> content, field name -> filename)`` of the body; a repeated field keeps its last part."""
    delimiter = b"\r\n--" + boundary_of(content_type).encode("latin-1")
    pieces = (b"\r\n" + body).split(delimiter)
    if len(pieces) < 2:
        raise FormError("the body has no part")
    fields: dict[str, bytes] = {}
    filenames: dict[str, str] = {}
    for piece in pieces[1:]:
        if piece.startswith(b"--"):
            return fields, filenames
        line_end = piece.find(b"\r\n")
        if line_end < 0 or piece[:line_end].strip(b" \t"):
            raise FormError("a delimiter is not followed by a line break")
        name, filename, content = _part(piece[line_end + 2:])
        fields[name] = content
        if filename is not None:
            filenames[name] = filename
        else:
            filenames.pop(name, None)
    raise FormError("the body ends before the closing delimiter")
