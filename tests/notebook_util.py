"""Reading the committed chapter notebooks as data: cells, plot cells, imports, the export map.

Used by tests/test_book.py (what the notebooks hold) and tests/test_book_render.py (the built book).
"""
import ast
import pathlib
import re

import pytest

# the test extra brings it; a GPU machine with only the cuda extra skips the notebook tests
nbformat = pytest.importorskip("nbformat", reason="reading notebooks needs nbformat (pip install -e '.[test]')")

ROOT = pathlib.Path(__file__).resolve().parents[1]
NBS = ROOT / "notebooks"


def notebooks() -> list[pathlib.Path]:
    "The chapter notebooks in reading order: the order of their names (00 < 01 < 02 < 02a < 03 ...)."
    return sorted(NBS.glob("[0-9][0-9]*.ipynb"))


def read(path) -> nbformat.NotebookNode:
    return nbformat.read(path, as_version=4)


def code_cells(nb):
    return [(i, c) for i, c in enumerate(nb.cells) if c.cell_type == "code"]


def parse(source: str) -> ast.Module | None:
    "The cell as Python, IPython magics and shell lines blanked; None if it is not Python."
    lines = ["" if ln.lstrip().startswith(("%", "!")) else ln for ln in source.splitlines()]
    try:
        return ast.parse("\n".join(lines))
    except SyntaxError:
        return None


def _calls_outside_defs(tree):
    "Every call the cell makes when it runs: calls inside def/class/lambda bodies are skipped."
    todo = list(ast.iter_child_nodes(tree))
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(node, ast.Call):
            yield ast.unparse(node.func)
        todo.extend(ast.iter_child_nodes(node))


# pyplot calls that make or show a figure (helpers such as plt.get_cmap do not)
FIGURE_CALLS = {"subplots", "figure", "subplot", "show", "plot", "imshow", "matshow", "bar",
                "barh", "scatter", "hist", "pie", "stairs", "step", "semilogy", "semilogx", "loglog"}


def is_plot_cell(cell) -> bool:
    "A code cell that draws a matplotlib figure when it runs (a def that draws is not one)."
    tree = parse(cell.source)
    if tree is None:
        return False
    for name in _calls_outside_defs(tree):
        mod, _, fn = name.rpartition(".")
        if mod in ("plt", "pyplot", "matplotlib.pyplot") and fn in FIGURE_CALLS:
            return True
    return False


def has_picture(cell) -> bool:
    return any(k in o.get("data", {}) for o in cell.outputs for k in ("image/png", "image/svg+xml"))


def output_texts(cell):
    "Every text a cell's outputs hold: streams, text/* data, tracebacks."
    for o in cell.outputs:
        if o.output_type == "stream":
            yield o.text
        elif o.output_type == "error":
            yield "\n".join(o.traceback)
        else:
            for mime, v in o.get("data", {}).items():
                if mime.startswith("text/") or mime == "application/json":
                    yield v if isinstance(v, str) else str(v)


# an absolute path of the machine that ran the notebook: /root/..., /home/x/..., /tmp/..., a venv's
# site-packages, C:\Users\...; a path inside a string literal or after '=' or '(' counts too
MACHINE_PATH = re.compile(
    r"(?:(?<=^)|(?<=[\s'\"=(:\[,]))"
    r"(/(?:root|home|tmp|Users|work|private|var/folders|opt|mnt|scratch)/[^\s'\")\],]+"
    r"|/[^\s'\"]*site-packages/[^\s'\"]*"
    r"|[A-Za-z]:\\Users\\[^\s'\"]+)", re.M)


def machine_paths(text: str) -> list[str]:
    return MACHINE_PATH.findall(text)


DEFAULT_EXP = re.compile(r"^#\|\s*default_exp\s+(\S+)", re.M)


def exported_module(nb) -> str | None:
    "'tffedu.<name>' of the notebook's `#| default_exp name`, or None."
    for _, c in code_cells(nb):
        m = DEFAULT_EXP.search(c.source)
        if m:
            return "tffedu." + m.group(1)
    return None


def export_map() -> dict[str, str]:
    "tffedu module -> the notebook (stem) that builds it."
    out = {}
    for p in notebooks():
        mod = exported_module(read(p))
        if mod:
            out[mod] = p.stem
    return out


# tffedu's lazy top-level names (tffedu/__init__.py, _LAZY) and the module each one loads
def lazy_names() -> dict[str, str]:
    import tffedu
    return {name: f"tffedu.{mod}" for name, mod in tffedu._LAZY.items()}


def backend_modules() -> dict[str, tuple[str, ...]]:
    "backend -> the modules that register its ops (chapter 01's BACKENDS records)."
    from tffedu.factory import BACKENDS
    return {name: b.op_modules for name, b in BACKENDS.items()}


def op_module(op: str, backend: str) -> str | None:
    "The module that registers `op` on `backend` in the package (imports that backend's modules)."
    from tffedu.factory import OPS
    try:
        return OPS.get(op, backend).__module__
    except Exception:
        return None


_OPS_BACKEND_CALLS = {"get": 1, "has": 1, "load_backend": 0, "ops": 0}


def used_modules(nb) -> dict[str, list[str]]:
    """tffedu module -> the lines of the notebook that use it: imports (at any depth: a lazy import
    in a function runs when the notebook calls it), `tffedu.<lazy name>` attributes, and op-registry
    calls that load a backend by name (`OPS.get(op, "cpu")` imports chapter 07's ops)."""
    lazy, backends = lazy_names(), backend_modules()
    uses: dict[str, list[str]] = {}

    def add(mod, node, src):
        uses.setdefault(mod, []).append(ast.get_source_segment(src, node) or ast.unparse(node))

    for _, cell in code_cells(nb):
        src = "\n".join("" if ln.lstrip().startswith(("%", "!")) else ln
                        for ln in cell.source.splitlines())
        tree = parse(cell.source)
        if tree is None:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module == "tffedu":
                    for a in node.names:
                        add(lazy.get(a.name, f"tffedu.{a.name}"), node, src)
                elif node.module.startswith("tffedu."):
                    add(node.module, node, src)
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.startswith("tffedu."):
                        add(a.name, node, src)
            elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                  and node.value.id == "tffedu" and node.attr in lazy):
                add(lazy[node.attr], node, src)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                pos = _OPS_BACKEND_CALLS.get(node.func.attr)
                owner = ast.unparse(node.func.value)
                if pos is None or owner not in ("OPS", "factory.OPS", "tffedu.factory.OPS"):
                    continue
                if len(node.args) > pos and isinstance(node.args[pos], ast.Constant):
                    backend = node.args[pos].value
                    mods = backends.get(backend, ())
                    if pos == 1 and isinstance(node.args[0], ast.Constant):  # get/has: one op
                        mod = op_module(node.args[0].value, backend)
                        mods = [mod] if mod else mods
                    for mod in mods:
                        add(mod, node, src)
    return uses
