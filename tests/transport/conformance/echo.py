"""The conformance suite's echo server, kept importable here for the
transport tests that use it; it lives in :mod:`gemini_split.testing.conformance`."""

from gemini_split.testing.conformance import echo_handler, main

__all__ = ["echo_handler"]

if __name__ == "__main__":
    main()
