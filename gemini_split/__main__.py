"""``python -m gemini_split`` is the same program as ``gemini-split``."""

from gemini_split.cli import run

if __name__ == "__main__":
    run()
