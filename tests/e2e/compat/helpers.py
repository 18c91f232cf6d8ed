"""Running the real CLI in this process against a fake Gemini server, in an
isolated home (no real ~/.gemini, no /etc/gemini-cli)."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path

from gemini_split.cli import main
from gemini_split.environment import Environment

API_KEY = "test-key-123"
FIXTURES = Path(__file__).parent / "fixtures"


@dataclass
class Result:
    status: int
    stdout: str
    stderr: str

    def json_lines(self) -> list[dict]:
        return [json.loads(line) for line in self.stdout.splitlines() if line.strip()]


@dataclass
class Sandbox:
    """A home, a config dir and a project directory under ``root``."""

    root: Path

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def config_dir(self) -> Path:
        return self.home / ".gemini"

    @property
    def project(self) -> Path:
        return self.root / "project"

    @property
    def system_settings(self) -> Path:
        return self.root / "etc" / "gemini-cli" / "settings.json"

    def setup(self) -> "Sandbox":
        self.config_dir.mkdir(parents=True, exist_ok=True)
        self.project.mkdir(parents=True, exist_ok=True)
        return self

    def write_json(self, path: Path, value) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(value if isinstance(value, str) else json.dumps(value))
        return path

    def user_settings(self, value) -> Path:
        return self.write_json(self.config_dir / "settings.json", value)

    def project_settings(self, value) -> Path:
        return self.write_json(self.project / ".gemini" / "settings.json", value)

    def environ(self, fake=None, **extra: str) -> dict[str, str]:
        env = {
            "HOME": str(self.home),
            "GEMINI_SPLIT_HOME": str(self.config_dir),
            "GEMINI_CLI_SYSTEM_SETTINGS_PATH": str(self.system_settings),
            "GEMINI_API_KEY": API_KEY,
            "PATH": "/usr/bin:/bin",
        }
        if fake is not None:
            env["GOOGLE_GEMINI_BASE_URL"] = fake.url
        env.update(extra)
        return env

    def run(self, args: list[str], *, fake=None, stdin: str = "", cwd: Path | None = None,
            **extra: str) -> Result:
        out, err = io.StringIO(), io.StringIO()
        env = Environment(stdin=io.StringIO(stdin), stdout=out, stderr=err,
                          environ=self.environ(fake, **extra), cwd=cwd or self.project)
        status = main(args, env)
        return Result(int(status), out.getvalue(), err.getvalue())


def declared_tools(request: dict) -> list[str]:
    """The function names a recorded model request offered the model."""
    names = []
    for tool in request["body"].get("tools") or []:
        for decl in tool.get("functionDeclarations") or []:
            names.append(decl["name"])
    return names
