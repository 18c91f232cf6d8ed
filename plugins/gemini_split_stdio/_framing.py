"""JSON-lines framing, shared with the ``unix:`` transport: it lives in
:mod:`gemini_split.transport.framing` (sans-IO, no trio), so a transport that needs only
the framing does not import this plugin's process code."""

from gemini_split.transport.framing import LineSplitter, LineTooLong, LineWriter, decode_line, encode_line

__all__ = ["LineSplitter", "LineTooLong", "LineWriter", "decode_line", "encode_line"]
