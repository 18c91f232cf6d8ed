"""Benchmark: two PyPI libraries against the code they could replace
(issue 41 item 7; the verdicts are in docs/performance.md).

* ``pathspec`` (``GitIgnoreSpec``) against ``gemini_split/client/gitignore.py``
  (``IgnoreRules``, RE2-compiled): the cost of the import and of compiling a
  60-line ``.gitignore`` in a fresh process, matching 20,000 paths, and one
  hostile pattern (a ``.gitignore`` is a file a model may have written)
  against a long file name;
* ``tree-sitter`` with ``tree-sitter-bash`` against the parser half of
  ``gemini_split/shell_split.py``: the cost of the import and of loading the
  grammar in a fresh process, parsing a corpus of commands (tree-sitter's
  tree alone, before any conversion to the words the policy needs), and
  how many of the commands ``shell_split`` refuses (its tests' list)
  tree-sitter parses without an error node, so that an adapter would have
  to refuse them itself.

Neither library is a dependency: ``pip install pathspec tree-sitter
tree-sitter-bash`` first.

    python bench/parser_candidates.py [--runs N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gemini_split.gitignore import IgnoreRules  # noqa: E402
from gemini_split.shell_split import ShellParseError, split_command  # noqa: E402

#: A Python project's .gitignore, as GitHub's template writes it (abridged).
GITIGNORE = """\
__pycache__/
*.py[cod]
*$py.class
*.so
.Python
build/
develop-eggs/
dist/
downloads/
eggs/
.eggs/
lib/
lib64/
parts/
sdist/
var/
wheels/
*.egg-info/
.installed.cfg
*.egg
MANIFEST
*.manifest
*.spec
pip-log.txt
pip-delete-this-directory.txt
htmlcov/
.tox/
.nox/
.coverage
.coverage.*
.cache
nosetests.xml
coverage.xml
*.cover
*.py,cover
.hypothesis/
.pytest_cache/
*.mo
*.pot
*.log
local_settings.py
db.sqlite3
instance/
.webassets-cache
.scrapy
docs/_build/
target/
.ipynb_checkpoints
profile_default/
ipython_config.py
.pdm.toml
__pypackages__/
celerybeat-schedule
*.sage.py
.env
.venv
env/
venv/
!keep.log
/secrets/**/*.key
"""
HOSTILE_PATTERN = "*a*a*a*a*a*a*a*a*a*a*b"

SHELL_CORPUS = [
    "git status", "git diff --staged", "ls -la src", "npm test", "pytest -q tests/tools -x",
    "echo hi && ls", "a || b ; c | d & e |& f", "echo 'a;b' \"c|d\" e\\&f", "e\\cho \"h\"'i'",
    "echo $(date) `whoami`", 'echo "x $(a "$(b)") y"', "(a; b) && c", "echo hi # a comment; rm -rf /",
    "grep -rn 'TODO' src | sort | uniq -c | sort -rn | head -20",
    "find . -name '*.py' -exec wc -l {} + | tail -1", "cd build && cmake .. && make -j2 2>&1 | tail -5",
    "python -c 'import sys; print(sys.version)'", "FOO=1 BAR=\"x y\" env | grep FOO > out.txt 2>&1",
]
#: What shell_split refuses (tests/tools/test_shell_split.py's list).
REFUSED = [
    "echo 'unterminated", 'echo "unterminated', "echo `unterminated", "echo $(unterminated",
    "echo )", "(echo", "; echo", "echo &&", "echo | ", "a && && b",
    "cat <<EOF\nx\nEOF", "cat <(ls)", "echo >(ls)",
    "echo $((1+2))", "echo $[1+2]", "((x++))",
    "echo ${x:-$(id)}", "echo ${!x}", "echo ${x@P}", "echo ${#x}",
    "if true; then id; fi", "for x in a; do id; done", "while true; do id; done",
    "{ id; }", "[[ -f x ]]", "f() { id; }", "function f { id; }", "! id", "time id", "coproc id",
    "case x in a) id;; esac", "echo hi\\", "echo $()", "(echo) word",
    "echo \"`echo \\\"x\\\"`\"",
]


#: Imported before the clock starts: what the paths that would use either
#: library have loaded already (RE2 too: both compile with it).
PRELUDE = "import gemini_split, msgspec, re, re2, trio"


def fresh_process_ms(code: str, runs: int) -> float:
    """Median milliseconds of ``code`` (timed inside a fresh interpreter,
    bytecode cached, after :data:`PRELUDE`), over ``runs`` processes."""
    timed = f"{PRELUDE}\nimport time; t = time.perf_counter()\n{code}\nprint((time.perf_counter() - t) * 1000)"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    root = str(Path(__file__).resolve().parents[1])
    samples = []
    for i in range(runs + 1):
        out = subprocess.run([sys.executable, "-c", timed], capture_output=True, text=True, check=True, env=env,
                             cwd=root)
        if i:
            samples.append(float(out.stdout))
    return statistics.median(samples)


def per_call_us(fn, items, repeat: int = 5) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for item in items:
            fn(item)
        best = min(best, time.perf_counter() - start)
    return best / len(items) * 1e6


def gitignore_figures(runs: int) -> list[tuple[str, str, str]]:
    import pathspec

    lines = GITIGNORE.splitlines()
    ours_start = fresh_process_ms(
        f"from gemini_split.gitignore import IgnoreRules\nr = IgnoreRules(); r.add_lines({lines!r})", runs)
    theirs_start = fresh_process_ms(
        f"import pathspec\npathspec.GitIgnoreSpec.from_lines({lines!r}, backend='re2')", runs)
    ours = IgnoreRules()
    ours.add_lines(lines)
    # "re2", not its default "best": that falls back to Python's
    # backtracking re when google-re2 is missing.
    spec = pathspec.GitIgnoreSpec.from_lines(lines, backend="re2")
    paths = [f"pkg{i % 50}/mod{i}.{('py', 'pyc', 'log', 'txt')[i % 4]}" for i in range(20_000)]
    ours_us = per_call_us(lambda p: ours.is_ignored(p, False), paths)
    theirs_us = per_call_us(lambda p: spec.check_file(p).include, paths)
    agree = sum(ours.is_ignored(p, False) == bool(spec.check_file(p).include) for p in paths)
    hostile = HOSTILE_PATTERN
    name = "a" * 28
    bad_ours = IgnoreRules()
    bad_ours.add_lines([hostile])
    bad_spec = pathspec.GitIgnoreSpec.from_lines([hostile], backend="simple")
    start = time.perf_counter()
    bad_ours.is_ignored(name, False)
    hostile_ours = time.perf_counter() - start
    start = time.perf_counter()
    bad_spec.check_file(name)
    hostile_theirs = time.perf_counter() - start
    return [
        ("import + compile the 60-line .gitignore (fresh process)", f"{ours_start:.1f} ms", f"{theirs_start:.1f} ms"),
        ("one path matched (20,000 paths)", f"{ours_us:.1f} µs", f"{theirs_us:.1f} µs"),
        ("verdicts that agree", f"{agree} of {len(paths)}", ""),
        (f"{hostile!r} against a {len(name)}-character name", f"{hostile_ours * 1000:.3f} ms",
         f"{hostile_theirs * 1000:.1f} ms (its Python re backend)"),
    ]


def shell_figures(runs: int) -> list[tuple[str, str, str]]:
    import tree_sitter
    import tree_sitter_bash

    ours_start = fresh_process_ms("from gemini_split.shell_split import split_command\nsplit_command('git status')",
                                  runs)
    theirs_start = fresh_process_ms(
        "import tree_sitter, tree_sitter_bash\n"
        "p = tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))\np.parse(b'git status')", runs)
    parser = tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))

    def ours(command: str) -> None:
        try:
            split_command(command)
        except ShellParseError:
            pass

    ours_us = per_call_us(ours, SHELL_CORPUS * 50)
    theirs_us = per_call_us(lambda c: parser.parse(c.encode()), SHELL_CORPUS * 50)
    clean = [c for c in REFUSED if not parser.parse(c.encode()).root_node.has_error]
    # bash joins a backslash-newline inside a word: this runs rm.
    continued = "r\\\nm -rf /tmp/x"
    (ours_cmd,) = split_command(continued)
    theirs_name = parser.parse(continued.encode()).root_node.children[0].child_by_field_name("name").text.decode()
    return [
        ("import + grammar, one command (fresh process)", f"{ours_start:.1f} ms", f"{theirs_start:.1f} ms"),
        (f"one command ({len(SHELL_CORPUS)}-command corpus)", f"{ours_us:.1f} µs (words and refusals)",
         f"{theirs_us:.1f} µs (the tree alone)"),
        (f"of the {len(REFUSED)} refused commands, parsed without an error node", "0 (all refused)",
         f"{len(clean)}"),
        (f"the command {continued!r} runs (bash: 'rm')", repr(ours_cmd.words[0].text), repr(theirs_name)),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=9, help="fresh processes per start-up figure")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    for title, ours, theirs, rows in [
        ("gitignore", "client/gitignore.py", "pathspec", gitignore_figures(args.runs)),
        ("shell parser", "shell_split.py", "tree-sitter-bash", shell_figures(args.runs)),
    ]:
        print(f"{title:62} {ours:>24} {theirs:>24}")
        for what, a, b in rows:
            print(f"  {what:60} {a:>24} {b:>24}")
        print()
    print(f"load average (1 min) {load:.2f} at the start, {os.getloadavg()[0]:.2f} at the end; {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
