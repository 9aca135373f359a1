"""Packaging: environment.yml and pyproject.toml name the same packages; the notebook export is in sync."""
import pathlib
import re
import shutil
import subprocess
import sys
import tomllib

ROOT = pathlib.Path(__file__).resolve().parents[1]
CONDA_NAMES = {"pytorch": "torch"}  # conda-forge name -> PyPI name


def _name(req: str) -> str:
    return re.split(r"[<>=!~\[; ]", req.strip(), maxsplit=1)[0].lower().replace("_", "-")


def pyproject_packages() -> set[str]:
    proj = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(proj["dependencies"])
    for extra in ("notebooks", "test"):  # `cuda` and `book` are optional on purpose
        reqs += proj["optional-dependencies"][extra]
    return {_name(r) for r in reqs}


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
    "A wheel built from the project holds every .cu/.cuh of kernels/ under tffedu/kernels, unchanged."
    import importlib.util
    import zipfile
    offline = ["--no-build-isolation"] if importlib.util.find_spec("setuptools") else []
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", *offline, "-q",
                    "-w", str(tmp_path), str(ROOT)], check=True, capture_output=True)
    (wheel,) = tmp_path.glob("tffedu-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        shipped = {n.split("/")[-1]: zf.read(n) for n in zf.namelist() if n.startswith("tffedu/kernels/")}
    sources = {p.name: p.read_bytes() for p in (ROOT / "kernels").iterdir() if p.suffix in (".cu", ".cuh")}
    assert sources and shipped == sources
