"""The built book, as a reader sees it: build it (Jupyter Book 1.x, about 5 s), then open every
chapter page in headless Chromium and check that

* the build gave no warning;
* every picture the notebook holds is on the page, loaded and drawn (naturalWidth > 0, on screen);
* no code cell shows an nbdev directive line (`#| export`), and every gpu cell is marked;
* index.html is the first page, drawn with its styles and links (not a redirect).

Needs Debian's chromium and chromium-driver (CI installs them: .ci/run); skipped where they are
not installed.
"""
import pathlib
import subprocess
import sys

import pytest

from browser_util import chromium
from notebook_util import ROOT, code_cells, notebooks, read

pytestmark = pytest.mark.slow



@pytest.fixture(scope="module")
def book(tmp_path_factory):
    "Build the book into a fresh folder: (html folder, the build's log)."
    pytest.importorskip("jupyter_book", reason="the book needs jupyter-book<2 (pip install -e '.[test]')")
    out = tmp_path_factory.mktemp("book")
    jb = pathlib.Path(sys.executable).with_name("jupyter-book")      # the CLI of this environment
    proc = subprocess.run([str(jb) if jb.exists() else "jupyter-book", "build", str(ROOT), "--config",
                           str(ROOT / "book/_config.yml"), "--toc", str(ROOT / "book/_toc.yml"),
                           "--path-output", str(out)], capture_output=True, text=True, timeout=600,
                          cwd=ROOT)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-3000:]
    return out / "_build" / "html", log


def test_book_builds_without_warnings(book):
    _, log = book
    warnings = [ln for ln in log.splitlines() if "WARNING" in ln or "ERROR" in ln]
    assert not warnings, "\n".join(warnings[:20])


@pytest.fixture(scope="module")
def browser():
    yield from chromium()


# what the page shows of each cell output picture: loaded, decoded, laid out with a size
PICTURES_JS = """
return Array.from(document.querySelectorAll('div.cell_output img')).map(img => {
  img.scrollIntoView();
  const r = img.getBoundingClientRect();
  return [img.getAttribute('src'), img.complete, img.naturalWidth, r.width, r.height];
});"""


def image_outputs(nb) -> int:
    return sum("image/png" in o.get("data", {}) or "image/svg+xml" in o.get("data", {})
               for _, c in code_cells(nb) for o in c.outputs)


@pytest.mark.parametrize("path", notebooks(), ids=lambda p: p.stem)
def test_rendered_page_shows_every_figure(book, browser, path):
    html, _ = book
    page = html / "notebooks" / f"{path.stem}.html"
    assert page.exists(), f"{page.name} was not built: is it in book/_toc.yml? (tools/booktoc.py)"
    browser.get(page.as_uri())
    shown = browser.execute_script(PICTURES_JS)
    broken = [s for s in shown if not (s[1] and s[2] > 0 and s[3] > 0 and s[4] > 0)]
    assert not broken, f"{path.stem}: pictures not drawn: {broken}"
    assert len(shown) == image_outputs(read(path)), (
        f"{path.stem}: the notebook holds {image_outputs(read(path))} pictures, the page shows {len(shown)}")


@pytest.mark.parametrize("path", notebooks(), ids=lambda p: p.stem)
def test_rendered_page_hides_directives_and_marks_gpu_cells(book, browser, path):
    html, _ = book
    browser.get((html / "notebooks" / f"{path.stem}.html").as_uri())
    code = browser.execute_script(
        "return Array.from(document.querySelectorAll('div.cell_input pre')).map(p => p.innerText);")
    shown_directives = [c.splitlines()[0] for c in code if any(ln.startswith("#|") for ln in c.splitlines())]
    assert not shown_directives, f"{path.stem}: directive lines on the page: {shown_directives[:3]}"
    gpu_cells = sum("gpu" in c.metadata.get("tags", []) for _, c in code_cells(read(path)))
    notes = browser.execute_script(
        "return Array.from(document.querySelectorAll('div.cell.tag_gpu p.gpu-note'))"
        ".filter(p => p.getBoundingClientRect().height > 0).length;")
    assert notes == gpu_cells, f"{path.stem}: {gpu_cells} gpu cells, {notes} marked on the page"


def test_pages_link_the_bibliography(book):
    html, _ = book
    refs = (html / "book" / "references.html").read_text()
    for key in ("FlashAttention", "PagedAttention", "GGUF", "TFFInfer"):
        assert key in refs, key


def test_index_is_the_first_page_not_a_redirect(book, browser):
    html, _ = book
    index = (html / "index.html").read_text()
    assert 'http-equiv="Refresh"' not in index
    browser.get((html / "index.html").as_uri())
    title = browser.execute_script("return document.querySelector('h1').innerText;")
    assert title.startswith("tffedu: an LLM inference engine")
    styled = browser.execute_script(
        "return Array.from(document.styleSheets).filter(s => s.href && s.href.includes('_static')).length;")
    assert styled > 0, "the page's style sheets did not load"
    links = browser.execute_script(   # the sidebar's chapter links, resolved by the browser
        "return Array.from(document.querySelectorAll('nav a.reference.internal')).map(a => a.href);")
    chapters = [h for h in links if "/notebooks/" in h]
    assert len(chapters) >= len(notebooks())
    assert all(pathlib.Path(h.split("#")[0].removeprefix("file://")).is_file() for h in chapters)
