"""Packaging: environment.yml and pyproject.toml name the same packages; the notebook export is in sync."""
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tomllib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
CONDA_NAMES = {"pytorch": "torch"}  # conda-forge name -> PyPI name


def _name(req: str) -> str:
    return re.split(r"[<>=!~\[; ]", req.strip(), maxsplit=1)[0].lower().replace("_", "-")


def pyproject_packages() -> set[str]:
    proj = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(proj["dependencies"])
    for extra in ("notebooks", "serve", "book", "test"):  # `cuda` is for GPU machines only
        reqs += proj["optional-dependencies"][extra]
    return {_name(r) for r in reqs} - {"tffedu"}   # test names the other extras: tffedu[notebooks,book]


def environment_packages() -> set[str]:
    names = set()
    for line in (ROOT / "environment.yml").read_text().splitlines():
        m = re.match(r"^\s*-\s+([A-Za-z0-9_.\-]+)", line.split("#")[0])
        if m and m.group(1) not in ("pip", "python", "-e", "conda-forge"):
            n = _name(m.group(1))
            names.add(CONDA_NAMES.get(n, n))
    return names


def test_environment_yml_matches_pyproject():
    py, env = pyproject_packages(), environment_packages()
    assert py == env, f"only in pyproject: {sorted(py - env)}; only in environment.yml: {sorted(env - py)}"


def test_nbdev_export_is_in_sync(tmp_path):
    "Exporting the notebooks into a copy of the tree reproduces tffedu/ byte for byte."
    for item in ("pyproject.toml", "notebooks", "tffedu"):
        src = ROOT / item
        (shutil.copytree if src.is_dir() else shutil.copy)(src, tmp_path / item)
    exe = pathlib.Path(sys.executable).with_name("nbdev-export")
    subprocess.run([str(exe) if exe.exists() else "nbdev-export"], cwd=tmp_path, check=True,
                   capture_output=True)
    changed = [str(p.relative_to(tmp_path)) for p in sorted((tmp_path / "tffedu").rglob("*.py"))
               if p.read_bytes() != (ROOT / p.relative_to(tmp_path)).read_bytes()]
    new = [str(p.relative_to(tmp_path)) for p in (tmp_path / "tffedu").rglob("*.py")
           if not (ROOT / p.relative_to(tmp_path)).exists()]
    assert not changed and not new, f"run nbdev-export: out of sync {changed + new}"


def test_wheel_ships_the_kernels(tmp_path):
    """A wheel built from the project holds every .cu/.cuh of kernels/ (and of kernels/ladder/, the
    ladder's rungs) under tffedu/kernels, unchanged."""
    import importlib.util
    import zipfile
    offline = ["--no-build-isolation"] if importlib.util.find_spec("setuptools") else []
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", *offline, "-q",
                    "-w", str(tmp_path), str(ROOT)], check=True, capture_output=True)
    (wheel,) = tmp_path.glob("tffedu-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        shipped = {n[len("tffedu/kernels/"):]: zf.read(n) for n in zf.namelist()
                   if n.startswith("tffedu/kernels/") and n.endswith((".cu", ".cuh"))}
    sources = {p.relative_to(ROOT / "kernels").as_posix(): p.read_bytes()
               for p in (ROOT / "kernels").rglob("*") if p.suffix in (".cu", ".cuh")}
    assert sources and shipped == sources


def _imports(source: str) -> set[str]:
    "Top-level names of the modules a code cell imports (IPython's %magics and !commands left out)."
    import ast
    code = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())
    out = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            out.add(node.module.split(".")[0])
    return out


def test_notebooks_extra_brings_what_the_chapters_import():
    """`pip install -e ".[notebooks]"` is enough to run every chapter's CPU cells: each package a
    notebook imports is the standard library's, the project's own, or named by the core
    dependencies, the notebooks extra or (GPU cells, guarded imports) the cuda extra."""
    import json
    proj = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = proj["optional-dependencies"]
    allowed = {_name(r) for r in proj["dependencies"] + extras["notebooks"] + extras["serve"] + extras["cuda"]}
    own = {"tffedu", "tests", "hf_models", "spm_vocab", "benchmarks"}     # the package and the clone's helpers
    dist = {"yaml": "pyyaml", "starlette": "fastapi", "IPython": "ipykernel"}   # import name -> distribution (that brings it)
    missing = {}
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for cell in json.loads(nb.read_text())["cells"]:
            for mod in _imports("".join(cell["source"])) if cell["cell_type"] == "code" else ():
                name = dist.get(mod, mod).replace("_", "-")
                if mod not in sys.stdlib_module_names and mod not in own and name not in allowed:
                    missing.setdefault(mod, set()).add(nb.stem)
    assert not missing, f"imported by notebooks but in no extra they install: {missing}"


# what only the team's own machines have; a user's clone has none of it
TOOLING = re.compile(r"\.\./shared\b|\$OUT\b|\bcarry=|\brun\(command=|\bdevice tool\b|\bWHL_DIR\b|"
                     r"\.whl/setup\.sh|/\.carry\b|\bAPI\.md\b|\bDESIGN\.md\b")


def test_nothing_points_at_the_teams_own_tooling():
    "Scripts, docs and code speak of a clone, pip and a CUDA machine: nothing a user lacks."
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split()
    hits = []
    for f in files:
        if f.startswith("benchmarks/results/") or f.endswith("NOTES_ch10_12.md") or \
                f == "tests/test_packaging.py":
            continue              # dated records of past runs, and this list
        try:
            text = (ROOT / f).read_text()
        except (UnicodeDecodeError, FileNotFoundError):
            continue
        hits += [f"{f}: {m.group(0)}" for m in TOOLING.finditer(text)]
    assert not hits, hits[:20]


@pytest.mark.parametrize("argv, words", [
    (["benchmarks/race_llamacpp.sh"], "--llama-cpp FOLDER|TARBALL"),
    (["benchmarks/race_llamacpp.sh", "--llama-cpp", "no/such/folder"], "no/such/folder: no such"),
    (["benchmarks/race_llamacpp.sh", "--fast"], "usage: bash benchmarks/race_llamacpp.sh"),
    (["tools/gpu_check.sh", "--bogus"], "usage: bash tools/gpu_check.sh"),
])
def test_gpu_scripts_check_their_arguments_first(argv, words):
    "Before any install, build or GPU probe: a wrong call says what it takes (status 2)."
    env = {k: v for k, v in os.environ.items() if k not in ("LLAMA_CPP", "LLAMA_BIN")}
    r = subprocess.run(["bash", *argv], cwd=ROOT, capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 2 and words in r.stdout + r.stderr, r.stdout + r.stderr


def test_race_checks_a_prebuilt_llamacpp_folder_first():
    "LLAMA_BIN (llama.cpp's tools built already) stands for --llama-cpp; a folder that is not there is named."
    r = subprocess.run(["bash", "benchmarks/race_llamacpp.sh"], cwd=ROOT, capture_output=True, text=True, timeout=60,
                       env={**os.environ, "LLAMA_BIN": "no/such/bin"})
    assert r.returncode == 2 and "LLAMA_BIN=no/such/bin: no such folder" in r.stdout + r.stderr, r.stdout + r.stderr


def test_every_module_says_what_it_is():
    """Each module's docstring is its first statement (`help(tffedu.memory)` shows it; nbdev writes
    `__all__` after a `from __future__` import), and says enough to be listed in the package's
    module index (tffedu/__init__.py's docstring, written by nbdev-export)."""
    import ast
    import tffedu
    for path in sorted((ROOT / "tffedu").rglob("*.py")):
        if path.name.startswith("_"):
            continue
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        assert len(doc.splitlines()) > 3, f"{name}: a docstring of {len(doc.splitlines())} lines"
        assert f"- `{name}`: " in tffedu.__doc__, f"{name} is not in tffedu/__init__.py's module index"


# methods on purpose under a second name: module functions offered as methods too (the functions
# serve any model, chapter 08's included; the methods are the API)
ALIASES = {("Model", "generate_batch"), ("Model", "stream")}


def test_methods_live_under_their_own_names():
    """A method written outside its class body is named as it is called (`Engine.step`, not
    `_step`): it joins the class with @patch, which keeps the name."""
    import importlib
    import pkgutil
    import types
    import tffedu
    bad = []
    for info in pkgutil.walk_packages(tffedu.__path__, "tffedu."):
        mod = importlib.import_module(info.name)
        for cls in [v for v in vars(mod).values() if isinstance(v, type) and v.__module__ == mod.__name__]:
            for name, attr in vars(cls).items():
                fn = attr.fget if isinstance(attr, property) else getattr(attr, "__func__", attr)
                if not isinstance(fn, types.FunctionType) or not fn.__module__.startswith("tffedu"):
                    continue
                outside = not fn.__qualname__.startswith(cls.__qualname__ + ".")   # not in the body
                if outside and fn.__qualname__ != f"{cls.__qualname__}.{name}" and (cls.__name__, name) not in ALIASES:
                    bad.append(f"{mod.__name__}.{cls.__qualname__}.{name} is {fn.__qualname__}")
    assert not bad, bad
