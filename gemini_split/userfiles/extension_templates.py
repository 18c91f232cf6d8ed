"""What ``gemini-split extensions new PATH [TEMPLATE]`` writes: gemini-cli's
boilerplate extensions, by its template names, each one a working
extension in gemini-cli's format (``gemini-extension.json`` and the parts
it shows).

The files are this program's own (gemini-cli's examples are JavaScript;
these need only ``python3`` and ``sh``). Templates for parts gemini-split
does not use (an extension's ``policies/`` and ``themes``) are not offered.
Each template is ``{relative path: text}``; a path ending in ``.sh`` or
``.py`` under ``scripts/`` or at the top is made executable.
"""

from __future__ import annotations

_MCP_SERVER = '''\
#!/usr/bin/env python3
"""A small MCP server (stdio, JSON-RPC 2.0 lines) with one tool, using only
the standard library. Edit TOOLS and call() to make it yours."""

import json
import sys

TOOLS = [{
    "name": "fetch_posts",
    "description": "Fetches a list of posts (a fixed example list).",
    "inputSchema": {"type": "object", "properties": {}},
}]


def call(name, arguments):
    if name == "fetch_posts":
        posts = [{"id": 1, "title": "Hello from the mcp-server example"}]
        return {"content": [{"type": "text", "text": json.dumps({"posts": posts})}]}
    return {"content": [{"type": "text", "text": f"unknown tool {name}"}], "isError": True}


def answer(message):
    method, params = message.get("method"), message.get("params") or {}
    if method == "initialize":
        return {"protocolVersion": params.get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "mcp-server-example", "version": "1.0.0"}}
    if method == "tools/list":
        return {"tools": TOOLS}
    if method == "tools/call":
        return call(params.get("name"), params.get("arguments") or {})
    if method == "ping":
        return {}
    raise LookupError(method)


for line in sys.stdin:
    try:
        message = json.loads(line)
    except ValueError:
        continue
    if "id" not in message:
        continue  # a notification
    try:
        reply = {"jsonrpc": "2.0", "id": message["id"], "result": answer(message)}
    except LookupError as exc:
        reply = {"jsonrpc": "2.0", "id": message["id"],
                 "error": {"code": -32601, "message": f"method not found: {exc}"}}
    print(json.dumps(reply), flush=True)
'''

TEMPLATES: dict[str, dict[str, str]] = {
    "custom-commands": {
        "gemini-extension.json": '{\n  "name": "custom-commands",\n  "version": "1.0.0"\n}\n',
        "commands/fs/grep-code.toml": 'description = "Search the code for a pattern and summarize the findings"\n'
                                      'prompt = """\nPlease summarize the findings for the pattern `{{args}}`.\n\n'
                                      'Search Results:\n!{grep -r {{args}} .}\n"""\n',
    },
    "exclude-tools": {
        "gemini-extension.json": '{\n  "name": "excludeTools",\n  "version": "1.0.0",\n'
                                 '  "excludeTools": ["run_shell_command(rm -rf)"]\n}\n',
    },
    "hooks": {
        "gemini-extension.json": '{\n  "name": "hooks-example",\n  "version": "1.0.0"\n}\n',
        "hooks/hooks.json": '{\n  "hooks": {\n    "SessionStart": [\n      {\n        "hooks": [\n'
                            '          {\n            "type": "command",\n'
                            '            "command": "sh ${extensionPath}/scripts/on-start.sh"\n'
                            '          }\n        ]\n      }\n    ]\n  }\n}\n',
        "scripts/on-start.sh": '#!/bin/sh\n# Runs when a session starts; what it prints (a JSON object) is read.\n'
                               'echo \'{"systemMessage": "Hello from the hooks-example extension"}\'\n',
    },
    "mcp-server": {
        "gemini-extension.json": '{\n  "name": "mcp-server-example",\n  "version": "1.0.0",\n  "mcpServers": {\n'
                                 '    "pythonServer": {\n      "command": "python3",\n'
                                 '      "args": ["${extensionPath}${/}example.py"],\n'
                                 '      "cwd": "${extensionPath}"\n    }\n  }\n}\n',
        "example.py": _MCP_SERVER,
    },
    "skills": {
        "gemini-extension.json": '{\n  "name": "skills-example",\n  "version": "1.0.0"\n}\n',
        "skills/greeter/SKILL.md": '---\nname: greeter\ndescription: A friendly greeter skill\n---\n\n'
                                   'You are a friendly greeter. When the user says "hello" or asks for a greeting,\n'
                                   'you should reply with: "Greetings from the skills-example extension!"\n',
    },
}

#: gemini-cli's templates gemini-split does not offer, and why.
NOT_OFFERED = {
    "policies": "gemini-split does not read an extension's policies/ (put the rules in your own policy files)",
    "themes-example": "gemini-split does not read an extension's themes",
}
