"""Request bodies as gunicorn reads them: chunk sizes bounded, bytes received counted.

gunicorn's `ChunkedReader` believes a chunk's declared size: after `<40 hex digits>\r\n` it waits
for that many bytes, so a review of a few bytes went unanswered until the body deadline (then 408).
Here a chunk that would take the body past `--max-body-bytes` is refused as soon as its size line
arrives (`BodyTooLarge`, answered 413), whatever follows it.

A body read blocks until the reader has all it asked for, so the application alone cannot say
how much of a slow body had arrived when its deadline passed ("0 bytes received" after 1,000).
`MeteredBody` counts the bytes received from the socket since the body began, for the 408's message
(`received_bytes`).

gunicorn takes `Transfer-Encoding: gzip, chunked` (or `deflate`, `compress` before `chunked`),
undoes the chunked framing and passes the still-coded bytes on (gunicorn/http/message.py
`set_body_reader`, 27.0.1), which the webhook does not decode. RFC 9112 section 6.1: a server that
receives a request with a transfer coding it does not understand should answer 501. So
`refuse_undecoded_codings` raises gunicorn's `UnsupportedTransferCoding` for them, before the body
is read, and the worker answers it as it answers an unknown coding: 501, a JSON message naming the
coding, the connection closed (the unread body cannot be told from a next request).

All three are installed by `install`, from gunicorn's `pre_request` hook (webhook.serving.server),
before the application sees the request, for every worker class.
"""

from __future__ import annotations

from typing import Any

from gunicorn.http.body import Body, ChunkedReader
from gunicorn.http.errors import UnsupportedTransferCoding

from webhook.serving.app import BodyTooLarge


class BoundedChunkedReader(ChunkedReader):  # type: ignore[misc]  # gunicorn is untyped
    """gunicorn's chunked reader, refusing the chunk that would make the body exceed `limit` bytes
    as soon as its size line is read."""

    def __init__(self, req: Any, unreader: Any, limit: int) -> None:
        super().__init__(req, unreader)
        self.limit = limit
        self.declared = 0  # the sizes of the chunks so far

    def parse_chunk_size(self, unreader: Any, data: Any = None) -> tuple[int, Any]:
        size, rest = super().parse_chunk_size(unreader, data)
        self.declared += size
        if self.declared > self.limit:
            raise BodyTooLarge(f"a chunked body of more than {self.limit} bytes (a chunk of {size} bytes declared)")
        return size, rest


class MeteredBody(Body):  # type: ignore[misc]
    """gunicorn's request body, knowing how many of its bytes have arrived so far."""

    def __init__(self, reader: Any, unreader: Any) -> None:
        super().__init__(reader)
        self._unreader = unreader
        # Bytes that came with the headers are already buffered; the rest arrive through recv.
        self._buffered = len(unreader.buf.getvalue())
        self._start = _received_total(unreader)

    def received_bytes(self) -> int:
        """Bytes of the body (framing included, for a chunked one) received from the client."""
        return self._buffered + _received_total(self._unreader) - self._start


def _received_total(unreader: Any) -> int:
    """The bytes `unreader` has received from its socket so far. The count is put in once per
    connection (the unreader serves every request of a keep-alive connection)."""
    counter: list[int] | None = getattr(unreader, "netqos_received", None)
    if counter is None:
        counter = unreader.netqos_received = [0]
        receive = unreader.chunk

        def counted(*args: Any) -> bytes:
            data: bytes = receive(*args)
            counter[0] += len(data)
            return data

        unreader.chunk = counted
    return counter[0]


class UndecodedTransferCoding(UnsupportedTransferCoding):  # type: ignore[misc]
    """A transfer coding gunicorn accepts but passes on undecoded (answered 501)."""

    def __init__(self, coding: str, header: str) -> None:
        super().__init__(header)
        self.coding = coding

    def __str__(self) -> str:
        return (
            f"transfer coding {self.coding!r} (Transfer-Encoding: {self.hdr}) is not decoded here, only "
            "chunked; send the body without it"
        )


def refuse_undecoded_codings(req: Any) -> None:
    """Raise `UndecodedTransferCoding` for the first transfer coding of `req` other than chunked.
    gunicorn has already refused (400 or 501) every other shape than codings before one `chunked`."""
    for name, value in getattr(req, "headers", ()):
        if name == "TRANSFER-ENCODING":
            for coding in value.split(","):
                if coding.strip(" \t").lower() != "chunked":
                    raise UndecodedTransferCoding(coding.strip(" \t"), value)


def install(req: Any, max_body_bytes: int) -> None:
    """Refuse the transfer codings the webhook does not decode; put the bounded chunked reader and
    the meter into gunicorn's request `req`, whose body has not been read yet."""
    refuse_undecoded_codings(req)
    unreader: Any = getattr(req, "unreader", None)
    body: Any = getattr(req, "body", None)
    if unreader is None or type(body) is not Body:  # not an HTTP/1.1 request of gunicorn's parser
        return
    reader = body.reader
    if isinstance(reader, ChunkedReader):
        reader = BoundedChunkedReader(req, unreader, max_body_bytes)
    req.body = MeteredBody(reader, unreader)
