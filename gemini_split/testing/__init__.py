"""Test helpers shipped with gemini-split.

``gemini_split.testing.fake_gemini`` is a local, stdlib-only fake of the
Gemini REST API that speaks the real wire format, so the real google-genai
client can be pointed at it from tests, benchmarks and demos.
"""
