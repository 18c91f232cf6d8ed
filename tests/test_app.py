"""The composition root: arrows only run downward, and the embedded service
is opened once per process."""

from __future__ import annotations

import ast
import json
from io import StringIO
from pathlib import Path

from gemini_split.app import embedded_service_for, resolve_client_settings
from gemini_split.cli import build_parser
from gemini_split.commands.options_from_args import client_options
from gemini_split.environment import Environment
from gemini_split.ui.repl.loop import Repl

PACKAGE = Path(__file__).resolve().parent.parent / "gemini_split"
PLUGINS = PACKAGE.parent / "plugins"

#: cli -> commands -> ui -> app -> {client, server} -> tools -> userfiles
#: -> transport -> protocol. A module may import its own layer and any layer
#: below; client and server never import each other, and the server never
#: imports the tool runtime (it runs it through the tool host the composition
#: root hands it). The shared leaves (errors, environment, exit_status,
#: files…) may be used by anyone and themselves use only userfiles
#: (gemini-cli's files: a leaf package), transport and protocol.
LAYERS = {
    "gemini_split.cli": 0,
    "gemini_split.__main__": 0,
    "gemini_split.commands": 1,
    "gemini_split.sdk": 1,  # the Python SDK: a program's way in, as a command is the shell's
    "gemini_split.ui": 2,
    "gemini_split.acp": 2,  # a face, as the UI is
    "gemini_split.app": 3,
    "gemini_split.client": 4,
    "gemini_split.server": 4,
    "gemini_split.tools": 5,
    "shared": 6,
    "gemini_split.userfiles": 7,
    "gemini_split.transport": 8,
    "gemini_split_loopback": 8,
    "gemini_split_websocket": 8,
    "gemini_split_stdio": 8,
    "gemini_split_unix": 8,
    "gemini_split_grpc": 8,
    "gemini_split.protocol": 9,
}

#: Inside the server, the same rule by sub-package: the service (a
#: connection's way in, operations, tokens) → replicas → the session core →
#: the model and the store, which never import each other → config, a leaf.
SERVER_LAYERS = {
    "gemini_split.server.service": 0,
    "gemini_split.server.ops": 0,
    "gemini_split.server.auth": 0,
    "gemini_split.server.replicas": 1,
    "gemini_split.server.session": 2,
    "gemini_split.server.model": 3,
    "gemini_split.server.store": 3,
    "gemini_split.server.config": 4,
}


#: Pairs of layers that never import each other, whatever their levels.
NEVER_EACH_OTHER = ({"gemini_split.client", "gemini_split.server"}, {"gemini_split.tools", "gemini_split.server"})


#: Inside the session core, the same rule again: the manager → the session
#: → its features (sub-agents, compression, rewind, skills, tool hooks,
#: approvals, server tools, prompts: steps and observers plugged into a
#: request) → the agent chain → the request (its lifecycle, its asks) → the
#: event path's leaves. The chain and the request never import a feature.
SESSION_LAYERS = {
    "gemini_split.server.session.manager": 0,
    "gemini_split.server.session.session": 1,
    "gemini_split.server.session.features": 2,
    "gemini_split.server.session.chain": 3,
    "gemini_split.server.session.request": 4,
    "gemini_split.server.session.broadcast": 5,
    "gemini_split.server.session.outbox": 6,
    "gemini_split.server.session.views": 6,
    "gemini_split.server.session.priority": 6,
}
#: The most lines ``server/session/session.py`` may have: what a request
#: does lives in its body and its features, not in the session.
SESSION_MAX_LINES = 400


def _prefixed(layers: dict[str, int], module: str) -> tuple[str, int] | None:
    for prefix, level in layers.items():
        if module == prefix or module.startswith(prefix + "."):
            return prefix, level
    return None


def _server_layer(module: str) -> tuple[str, int] | None:
    return _prefixed(SERVER_LAYERS, module)


def _layer(module: str) -> tuple[str, int]:
    if module == "gemini_split":  # the package's __init__: __version__, and the SDK's names lent lazily
        return module, LAYERS["gemini_split.sdk"]
    for prefix, level in LAYERS.items():
        if module == prefix or module.startswith(prefix + "."):
            return prefix, level
    return "shared", LAYERS["shared"]


def _module_name(path: Path) -> str:
    root = PACKAGE.parent if path.is_relative_to(PACKAGE) else PLUGINS
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path, module: str) -> list[tuple[int, str]]:
    """Every module ``path`` imports, at module level or inside a function."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            found.append((node.lineno, _resolved(module, path, node) if node.level else node.module or ""))
    return [(line, name) for line, name in found if name.split(".")[0] in ("gemini_split", *LAYERS)]


def _resolved(module: str, path: Path, node: ast.ImportFrom) -> str:
    """The module a relative ``from … import`` in ``path`` names."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    base = package.split(".")
    base = base[: len(base) - node.level + 1]
    return ".".join([*base, node.module] if node.module else base)


def _runtime_modules() -> list[Path]:
    paths = [p for p in PACKAGE.rglob("*.py") if "testing" not in p.relative_to(PACKAGE).parts]
    return paths + list(PLUGINS.rglob("*.py"))


def test_imports_only_run_downward():
    wrong = []
    for path in _runtime_modules():
        module = _module_name(path)
        layer, level = _layer(module)
        for line, imported in _imports(path, module):
            if imported == "gemini_split":  # the package itself: __version__
                continue
            target, target_level = _layer(imported)
            sideways = {layer, target} in NEVER_EACH_OTHER
            if target == "shared" and layer != "shared":
                continue
            if target_level < level or sideways:
                wrong.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {module} ({layer}) imports {imported} ({target})")
    assert wrong == []


def test_inside_the_server_imports_run_down_the_sub_packages():
    """The old cycles (the store's relay importing the service, the session
    manager importing the relay) and any new one fail here."""
    wrong = []
    server = PACKAGE / "server"
    for path in server.rglob("*.py"):
        module = _module_name(path)
        own = _server_layer(module)
        if own is None:
            assert module == "gemini_split.server", f"{module} belongs to no server sub-package: add it to SERVER_LAYERS"
            continue
        for line, imported in _imports(path, module):
            target = _server_layer(imported)
            if target is None or target[0] == own[0]:
                continue
            if target[1] <= own[1]:
                wrong.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {module} ({own[0]}) imports {imported}")
    assert wrong == []


def test_inside_the_session_core_features_plug_into_the_chain_and_the_request_never_back():
    """features → chain → request: a request's lifecycle and the agent
    chain know no feature, and a feature reaches the chain and the request
    only through their public names."""
    wrong = []
    session = PACKAGE / "server" / "session"
    for path in session.rglob("*.py"):
        module = _module_name(path)
        own = _prefixed(SESSION_LAYERS, module)
        if own is None:
            assert module == "gemini_split.server.session", f"{module}: add it to SESSION_LAYERS"
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for line, imported in _imports(path, module):
            target = _prefixed(SESSION_LAYERS, imported)
            if target is None or target[0] == own[0]:
                continue
            if target[1] <= own[1]:
                wrong.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {module} ({own[0]}) imports {imported}")
        for node in ast.walk(tree):
            if not (isinstance(node, ast.ImportFrom) and node.level and own[0].endswith(".features")):
                continue
            source = _prefixed(SESSION_LAYERS, _resolved(module, path, node))
            private = [a.name for a in node.names if a.name.startswith("_")]
            if source is not None and source[1] > own[1] and private:
                wrong.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {module} imports the private "
                             f"{', '.join(private)} of {source[0]}")
    assert wrong == []


def test_the_session_stays_small():
    lines = (PACKAGE / "server" / "session" / "session.py").read_text(encoding="utf-8").count("\n")
    assert lines <= SESSION_MAX_LINES, f"server/session/session.py has {lines} lines (at most {SESSION_MAX_LINES})"


#: What each plugin may import of gemini_split, as it does today: the
#: transport layer, the protocol, and the shared leaves named here, never the
#: server's internals, the client's, a face or a command (the service reaches
#: a plugin through the transport interface; a plugin never reaches back).
#: A plugin that needs more adds it here, deliberately.
PLUGIN_MAY_IMPORT = {
    "gemini_split_loopback": ("gemini_split.transport",),
    "gemini_split_stdio": ("gemini_split.transport",),
    "gemini_split_unix": ("gemini_split.transport", "gemini_split._trio_util"),
    "gemini_split_websocket": ("gemini_split.transport", "gemini_split._trio_util", "gemini_split.errors"),
    "gemini_split_grpc": ("gemini_split.transport", "gemini_split.protocol", "gemini_split.stamping",
                          "gemini_split.errors", "gemini_split"),
}

#: Sans-IO: no event loop, socket, clock-driven library or model SDK.
SANS_IO = ("gemini_split.protocol", "gemini_split.transport.framing", "gemini_split.transport.throttle",
           "gemini_split.transport.discovery")
IO_LIBRARIES = ("trio", "anyio", "asyncio", "socket", "ssl", "httpx", "h11", "wsproto", "grpc", "google", "redis")


def _third_party_imports(path: Path) -> list[tuple[int, str]]:
    """Every absolute import of ``path``: ``import x`` and ``from x import y``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.append((node.lineno, node.module))
    return found


def _allowed(imported: str, prefixes: tuple[str, ...]) -> bool:
    return any(imported == p or (p != "gemini_split" and imported.startswith(p + ".")) for p in prefixes)


def test_every_plugin_imports_only_the_transport_protocol_and_leaves_it_is_pinned_to():
    assert sorted(PLUGIN_MAY_IMPORT) == sorted(p.name for p in PLUGINS.iterdir() if (p / "__init__.py").exists())
    wrong = []
    for path in PLUGINS.rglob("*.py"):
        module = _module_name(path)
        plugin = module.split(".")[0]
        for line, imported in _imports(path, module):
            if imported.split(".")[0] == plugin:
                continue
            if imported.split(".")[0] != "gemini_split" or not _allowed(imported, PLUGIN_MAY_IMPORT[plugin]):
                wrong.append(f"{path.relative_to(PLUGINS.parent)}:{line}: {module} imports {imported}")
    assert wrong == []


def test_gemini_split_reaches_plugins_only_through_the_transport_registry():
    wrong = [f"{path.relative_to(PACKAGE.parent)}:{line}: {name}"
             for path in PACKAGE.rglob("*.py")
             for line, name in _imports(path, _module_name(path))
             if name.split(".")[0] in PLUGIN_MAY_IMPORT]
    assert wrong == []


def test_the_sans_io_modules_import_no_event_loop_socket_or_sdk():
    wrong = []
    for path in _runtime_modules():
        module = _module_name(path)
        if not any(module == m or module.startswith(m + ".") for m in SANS_IO):
            continue
        for line, name in _third_party_imports(path) + _imports(path, module):
            if name.split(".")[0] in IO_LIBRARIES:
                wrong.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {module} imports {name}")
            elif name.startswith("gemini_split.") and not (name.startswith("gemini_split.protocol")
                                                          or name == "gemini_split.errors"
                                                          or any(name == m for m in SANS_IO)):
                wrong.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {module} imports {name}")
    assert wrong == []


def test_runtime_code_never_imports_the_testing_package():
    wrong = [f"{path.relative_to(PACKAGE.parent)}:{line}: {name}"
             for path in _runtime_modules()
             for line, name in _imports(path, _module_name(path))
             if name.startswith("gemini_split.testing")]
    assert wrong == []


def test_nothing_below_the_commands_reads_parsed_arguments():
    # Each command turns its argparse.Namespace into a typed options record
    # (gemini_split/commands/options_from_args.py); below the commands only the parsers'
    # own type callables (argtypes) know argparse.
    allowed = {"gemini_split.cli", "gemini_split.argtypes"}
    wrong = [f"{path.relative_to(PACKAGE.parent)}:{line}"
             for path in _runtime_modules()
             for line, name in _all_imports(path)
             if name == "argparse" and _module_name(path) not in allowed
             and not _module_name(path).startswith("gemini_split.commands.")]
    assert wrong == []


def _all_imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [(node.lineno, alias.name) for node in ast.walk(tree) if isinstance(node, ast.Import)
            for alias in node.names]

def test_clear_and_connect_embedded_are_new_connections_to_the_one_embedded_service(tmp_path):
    # A scripted model answers each model call with the script's next turn:
    # if /clear or /server connect embedded built a new model (a new Gemini
    # client), the script would start over and "first" would come back.
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": "first"}, {"text": "second"}, {"text": "third"}]))
    stdin = StringIO("hello\n/clear\nhello again\n/server connect embedded\nand again\n")
    stdout, stderr = StringIO(), StringIO()
    env = Environment(stdin=stdin, stdout=stdout, stderr=stderr, cwd=tmp_path,
                      environ={"GEMINI_SPLIT_HOME": str(tmp_path / "home"), "NO_COLOR": "1"})
    options = client_options(build_parser().parse_args(["--model", f"scripted:{script}"]))
    settings = resolve_client_settings(options, env)
    service = embedded_service_for(options, env, settings)

    import trio

    status = trio.run(Repl(options, env, settings, embedded=service).run)

    out = stdout.getvalue()
    assert status == 0, out + stderr.getvalue()
    assert [word for word in ("first", "second", "third") if word in out] == ["first", "second", "third"]
    assert out.count("New conversation") == 1 and out.count("Connected: embedded") == 1
    assert len(service.model.requests) == 3  # all three turns reached the one model


def test_a_run_in_this_process_leaves_the_logger_levels_as_it_found_them():
    # serve raises gemini_split's logger to INFO for its run; a one-shot run
    # later in the same process (an embedding program, a test worker) would
    # otherwise print the embedded server's INFO lines on its stderr.
    import logging

    from gemini_split.cli import _log_to

    ours = logging.getLogger("gemini_split")
    before = ours.level
    stop = _log_to(Environment(stdout=StringIO(), stderr=StringIO()), debug=False)
    ours.setLevel(logging.INFO)  # what run_serve does
    stop()
    assert ours.level == before


def _head_and_function_imports(path: Path, module: str) -> tuple[set[str], list[tuple[int, str]]]:
    """The modules ``path`` imports at its head (``TYPE_CHECKING`` blocks
    left out: they import nothing at run time), and those it imports inside
    a function, each with its line; relative imports resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]

    def names(node: ast.Import | ast.ImportFrom) -> list[str]:
        if isinstance(node, ast.Import):
            return [alias.name for alias in node.names]
        if not node.level:
            return [node.module or ""]
        base = package.split(".")
        base = base[: len(base) - node.level + 1]
        return [".".join([*base, node.module] if node.module else base)]

    head = {name for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom)) for name in names(node)}
    inside: list[tuple[int, str]] = []

    def walk(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if in_function and isinstance(child, (ast.Import, ast.ImportFrom)):
                inside.extend((child.lineno, name) for name in names(child))
            walk(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    walk(tree, False)
    return head, inside


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def test_a_function_imports_only_a_heavy_edge_or_to_break_a_listed_cycle():
    """Imports sit at a module's head, where a reader looks for them. Inside
    a function only a module of lazy_imports.EDGES (imported from outside
    that edge: the server's own modules import each other at their heads),
    and not one the module also imports at its head; or an import cycle
    listed, with its reason, in lazy_imports.CYCLES."""
    from gemini_split.lazy_imports import CYCLES, EDGES

    wrong = []
    for path in _runtime_modules():
        module = _module_name(path)
        head, inside = _head_and_function_imports(path, module)
        for line, name in inside:
            where = f"{path.relative_to(PACKAGE.parent)}:{line}: {name}"
            if (module, name) in CYCLES:
                continue
            edge = max((e for e in EDGES if _within(name, e) and not _within(module, e)), key=len, default=None)
            if edge is None:
                wrong.append(f"{where} is no heavy edge (lazy_imports.EDGES) nor a listed cycle: import it at the head")
            elif any(_within(h, edge) for h in head):
                wrong.append(f"{where} is imported at the module's head too")
    assert wrong == []


def test_every_listed_cycle_is_still_a_function_local_import():
    from gemini_split.lazy_imports import CYCLES

    found = set()
    for path in _runtime_modules():
        module = _module_name(path)
        found |= {(module, name) for _, name in _head_and_function_imports(path, module)[1]}
    assert sorted(set(CYCLES) - found) == []


def _import_cycles(package: Path) -> list[list[str]]:
    """The import cycles among the modules of ``package``: every import
    counted (at the head, inside a function, under ``TYPE_CHECKING``), each
    cycle as its modules, sorted."""
    modules = {_module_name(p): p for p in package.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        graph[module] = set()
        for _, name in _imports(path, module):
            while name and name not in modules:  # `from pkg.mod import name`: the module
                name = name.rpartition(".")[0]
            if name and name != module:
                graph[module].add(name)
    # Tarjan's strongly connected components: each of two or more modules is a cycle.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in graph[module]:
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return cycles


def test_the_ui_has_no_import_cycle():
    """The REPL's commands once imported the REPL (for its type, and
    /chat resume for its history lines) while it imported them."""
    assert _import_cycles(PACKAGE / "ui") == []


#: The REPL's class: the top of ui/. Commands see it as
#: gemini_split.ui.repl.command_context.CommandContext.
REPL_MODULE = "gemini_split.ui.repl.loop"


def test_no_command_or_other_ui_module_imports_the_repl_class_module():
    wrong = [f"{path.relative_to(PACKAGE.parent)}:{line}: {name}"
             for path in (PACKAGE / "ui").rglob("*.py") if _module_name(path) != REPL_MODULE
             for line, name in _imports(path, _module_name(path))
             if _within(name, REPL_MODULE)]
    assert wrong == []


def test_the_client_package_has_no_import_cycle():
    """The connection has one owner: ``ProtocolClient`` imports its parts
    (the calls, the reconnector, the turn), and they never import it back,
    not even for annotations: each names what it needs of the client in a
    ``Protocol`` of its own."""
    assert _import_cycles(PACKAGE / "client") == []
