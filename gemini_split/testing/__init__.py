"""Test helpers shipped with gemini-split (never imported by its runtime code).

``gemini_split.testing.fake_gemini`` is a local, stdlib-only fake of the
Gemini REST API that speaks the real wire format, so the real google-genai
client can be pointed at it from tests, benchmarks and demos.

``gemini_split.testing.conformance`` is the transport conformance suite
(needs pytest and pytest-trio): a third-party transport subclasses
``TransportConformance`` and runs exactly what gemini-split's own transports
run.
"""
