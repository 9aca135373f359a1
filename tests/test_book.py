"""The book as a course, checked on the committed notebooks (no kernel runs here):

* every plot cell holds its picture, and no output holds a path of the machine that ran it;
* no empty cells;
* the reading order holds: no notebook uses a tffedu module that a later notebook builds
  (read from the notebooks' own imports and the nbdev export map `#| default_exp`);
* every notebook's title is "NN · Title" (the book's sidebar lists them);
* every chapter ends with Summary, TFFInfer and us, and Exercises, whose checks exist;
* the book's table of contents holds every notebook once, in reading order;
* every part is one sitting: at most PART_WORDS words of prose, no markdown cell over
  MARKDOWN_WORDS words, no code cell over CODE_LINES lines.

A few notebooks are being rewritten as these tests land; they are listed in KNOWN with what is
still wrong, as strict xfails: when a rewrite fixes a notebook its test passes unexpectedly and
fails, which says to remove the entry.
"""
import re

import pytest

from notebook_util import (ROOT, code_cells, export_map, exported_module, has_picture,
                           is_plot_cell, machine_paths, notebooks, output_texts, read, used_modules)

NB = {p.stem: p for p in notebooks()}

# notebook -> {test: what is wrong}, for notebooks under rewrite by their owners
_LONG = "too long for one sitting: to be split into parts (issue 28)"
KNOWN = {}

# measured-looking numbers the prose may quote without an output beside them: constants of the
# code, a device's data sheet, measurements of another chapter or benchmark (named in the text)
CITED = {
    "03a_quant": {"0.5 %"},                  # Q8_0's error, from the table of every type above it
    "06_planner": {"10 %"},                  # the two allocators' overhead, read off the plot
    "07_cpu_ops": {"100×", "4×"},            # numpy's float16 fallback; float32 / Q8_0 bytes
    "09_kvcache": {"85%"},                   # the picture's waste, rounded
    "10_cuda_basics": {"20 ms", "3.9 µs"},   # time_ms's warm-up; chapter 13's timeline
    "11_matmul": {"17.8 µs"},                # two 53 MB matrices at the copy rate its output prints
    "12a_flash_hopper": {"0.59×"},           # part 12's versions 2 and 3 against SDPA
    "13_gpu_runtime": {"5 %"},               # chapter 11's GEMV tiling of gate/up, timed alone
    "14a_engine": {"20 ms"},                 # part 14b's decode rate of SmolLM2 on the CPU
    "14b_engine_at_work": {"0.2 ms"},        # benchmarks/profile_decode.py's host share
    "15_serve": {"50 ms"},                   # the health pinger's period
}

# one sitting (CONTRIBUTING's ~3,500 words, ~400-word markdown cells, ~80-line code cells; the ~
# is the slack here)
PART_WORDS, MARKDOWN_WORDS, CODE_LINES = 3800, 450, 100

# the tour runs the finished engine first, on purpose: it may use any module
READS_AHEAD = {"00_tour"}


def per_notebook(test: str):
    "Parametrize over the notebooks; a KNOWN entry for `test` makes that notebook a strict xfail."
    params = []
    for stem in NB:
        why = KNOWN.get(stem, {}).get(test)
        marks = [pytest.mark.xfail(reason=why, strict=True)] if why else []
        params.append(pytest.param(stem, marks=marks, id=stem))
    return pytest.mark.parametrize("stem", params)


@per_notebook("pictures")
def test_plot_cells_have_pictures(stem):
    nb = read(NB[stem])
    missing = [i for i, c in code_cells(nb) if is_plot_cell(c) and not has_picture(c)]
    assert not missing, (f"{stem}: plot cell(s) {missing} hold no picture: execute the notebook "
                         "with tools/nbbuild.py (the inline backend), on the GPU machine for gpu cells")


# the lines of a cell that only shows kernels (chapter 10's show_kernel)
SHOW_LINES = ("show_kernel(", " ", "print()", "from tffedu.ops.cuda import show_kernel")


@per_notebook("kernels")
def test_printed_kernels_are_the_shipped_ones(stem, capsys):
    "A cell that only shows kernels prints the .cu files as they are now: a kernel changed since is re-shown."
    from tffedu.ops.cuda import show_kernel
    stale = []
    for i, c in code_cells(read(NB[stem])):
        lines = [ln for ln in c.source.splitlines() if ln.strip()]
        if "show_kernel(" not in c.source or not all(ln.startswith(SHOW_LINES) for ln in lines):
            continue
        exec(c.source, {"show_kernel": show_kernel})
        if capsys.readouterr().out != "".join(o.text for o in c.outputs if o.output_type == "stream"):
            stale.append(i)
    assert not stale, f"{stem}: cell(s) {stale} print kernels as they were: re-execute them"


@per_notebook("paths")
def test_no_machine_paths_in_outputs(stem):
    nb = read(NB[stem])
    found = [(i, p) for i, c in code_cells(nb) for t in output_texts(c) for p in machine_paths(t)]
    assert not found, f"{stem}: outputs show paths of the machine that ran them: {found[:5]}"


def test_machine_path_pattern():
    "The detector itself, on outputs we have seen and on ones that are fine."
    bad = ["GGUFFile('/root/.cache/tffedu/x.gguf', v3)", "allocated at /tmp/ipykernel_29/1.py:5",
           "/work/main/.venv/lib/python3.11/site-packages/tqdm/auto.py:21: TqdmWarning",
           "/home/ann/model", "path=/tmp/tmp9mrhjy6b/tiny-qwen3"]
    good = ["~/.cache/tffedu/x.gguf", "tiny-qwen3/model.safetensors", "1/2 = 0.5", "a /tmp b"[:3],
            "https://github.com/ggml-org/llama.cpp/blob/master/docs/gguf.md", "ratio 3/4"]
    assert all(machine_paths(s) for s in bad), [s for s in bad if not machine_paths(s)]
    assert not any(machine_paths(s) for s in good), [s for s in good if machine_paths(s)]


@per_notebook("empty")
def test_no_empty_cells(stem):
    nb = read(NB[stem])
    empty = [i for i, c in enumerate(nb.cells) if not c.source.strip()]
    assert not empty, f"{stem}: empty cell(s) {empty}"


@per_notebook("reading_order")
def test_reading_order(stem):
    "A notebook uses tffedu modules built by itself or by notebooks before it, never after."
    if stem in READS_AHEAD:
        pytest.skip(f"{stem} runs the finished engine first, by design")
    built_by = export_map()
    order = list(NB)
    late = {mod: (built_by[mod], lines) for mod, lines in used_modules(read(NB[stem])).items()
            if mod in built_by and order.index(built_by[mod]) > order.index(stem)}
    assert not late, f"{stem} uses modules that later notebooks build: " + "; ".join(
        f"{m} ({nb}): {lines[0]!r}" for m, (nb, lines) in late.items())


def test_reading_order_finds_forward_uses():
    "The reader of imports sees what the test needs to see (on a notebook made here)."
    import nbformat
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in [
        "#| default_exp tensor", "from tffedu.memory import MemoryBlock",
        "def f():\n    from tffedu import sampling\n    return tffedu.load()",
        "OPS.get('rmsnorm', 'cpu')", "import tffedu.gguf as g"]])
    assert exported_module(nb) == "tffedu.tensor"
    used = used_modules(nb)
    assert {"tffedu.memory", "tffedu.sampling", "tffedu.engine", "tffedu.ops.cpu",
            "tffedu.gguf"} <= set(used), used


SECTIONS = ["Summary", "TFFInfer and us", "Exercises"]


def headings(nb) -> list[str]:
    return [m.group(1).strip() for c in nb.cells if c.cell_type == "markdown"
            for m in re.finditer(r"^##\s+(.+)$", c.source, re.M)]


@per_notebook("title")
def test_title_is_number_dot_name(stem):
    "One style in the sidebar: '03a · Quantized blocks ...', the notebook's number first."
    first = next(c.source for c in read(NB[stem]).cells if c.cell_type == "markdown")
    assert first.startswith(f"# {stem.split('_')[0]} · "), f"{stem}: title {first.splitlines()[0]!r}"


@per_notebook("sections")
def test_chapter_ends_with_summary_tffinfer_exercises(stem):
    nb = read(NB[stem])
    h = headings(nb)
    assert h[-3:] == SECTIONS, f"{stem}: the last three sections are {h[-3:]}, not {SECTIONS}"
    ex = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown").split("## Exercises")[-1]
    key = "ch" + stem.split("_")[0]
    assert f"python -m tffedu.exercises {key}`" in ex, \
        f"{stem}: the exercises do not say how to check them (python -m tffedu.exercises {key})"
    assert "tests/exercises -k" not in ex, f"{stem}: one spelling: `pytest tests/exercises/test_{key}.py`"
    assert (ROOT / "tests" / "exercises" / f"test_{key}.py").exists(), f"no checks for {key}"
    n = len(re.findall(r"^\*\*\d+\.", ex, re.M))
    assert 2 <= n <= 4, f"{stem}: {n} exercises (2-4, numbered **1.** ...)"


def toc_files() -> list[str]:
    "Every file the book's table of contents names, in order (globs expanded as jupyter-book does)."
    import yaml
    toc = yaml.safe_load((ROOT / "book" / "_toc.yml").read_text())
    out = []

    def walk(entries):
        for e in entries:
            if "file" in e:
                out.append(e["file"])
            if "glob" in e:
                out.extend(sorted(str(p.relative_to(ROOT).with_suffix(""))
                                  for p in ROOT.glob(e["glob"] + ".ipynb")))
            for key in ("chapters", "sections"):
                walk(e.get(key, []))

    walk(toc.get("parts", []))
    return out


def test_toc_holds_every_notebook_in_reading_order():
    listed = [f for f in toc_files() if f.startswith("notebooks/")]
    assert listed == [f"notebooks/{s}" for s in NB], (
        "book/_toc.yml must list every notebook once, in the order of their names")


def test_toc_is_written_by_booktoc():
    "A new notebook appears in the book by running tools/booktoc.py; this says when it was not."
    import subprocess
    import sys
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "booktoc.py"), "--check"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_bibliography_names_the_sources():
    bib = (ROOT / "book" / "references.bib").read_text()
    for needle in ("FlashAttention", "PagedAttention", "GGUF", "TFFInfer", "github.com/NKKdev/TFFinfer"):
        assert needle in bib, needle


@per_notebook("size")
def test_a_part_is_one_sitting(stem):
    cells = read(NB[stem]).cells
    prose = [len(c.source.split()) for c in cells if c.cell_type == "markdown"]
    too_long = [f"a code cell of {n} lines" for c in cells if c.cell_type == "code"
                and (n := len(c.source.splitlines())) > CODE_LINES]
    too_long += [f"a markdown cell of {n} words" for n in prose if n > MARKDOWN_WORDS]
    if sum(prose) > PART_WORDS:
        too_long.append(f"{sum(prose)} words of prose")
    assert not too_long, f"{stem}: " + "; ".join(too_long)


# a measured number in prose: digits with a unit of time, rate or ratio ("6.5 ms", "1.64×", "38 %")
MEASURED = re.compile(r"(?<![\w.])(\d[\d,]*(?:\.\d+)?)\s*(?:×(?!\s*\d)|x\b(?!\s*\d)|%|ms\b|µs\b|us\b|"
                      r"t/s|tokens/s|GB/s|TB/s|TFLOP/s|TFLOPS)")
NUMBER = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?")


def _quoted(number: str, outputs: set) -> bool:
    "Whether an output number reads as `number` at its precision (2.96 is quoted as 3.0, 4907 as 4,907)."
    x = number.replace(",", "")
    places = len(x.split(".")[1]) if "." in x else 0
    return any(round(y, places) == float(x) for y in outputs)


@per_notebook("numbers")
def test_numbers_in_prose_come_from_outputs(stem):
    """Every measured number the prose quotes is printed by a cell of the same notebook (a lab
    note, a `> **Lab note.**` box, may cite an earlier run)."""
    nb = read(NB[stem])
    outputs = {float(n.replace(",", "")) for _, c in code_cells(nb) for text in output_texts(c)
               for n in NUMBER.findall(text)}
    missing = []
    for c in nb.cells:
        if c.cell_type != "markdown":
            continue
        prose = re.sub(r"(?ms)^> \*\*Lab note\.\*\*.*?(?=^[^>]|\Z)", "", c.source)
        missing += [m.group(0) for m in MEASURED.finditer(prose) if not _quoted(m.group(1), outputs)
                    and m.group(0) not in CITED.get(stem, ())]
    assert not missing, f"{stem}: prose quotes numbers no output prints: {missing}"


GLOSSARY = ROOT / "book" / "glossary.md"


def _anchor(heading: str) -> str:
    "MyST's anchor of a heading (myst_heading_anchors): lower case, punctuation dropped, spaces to -."
    return re.sub(r"\s+", "-", re.sub(r"[^\w\s-]", "", heading.strip().lower()))


def test_glossary_links_land_on_a_term():
    terms = {_anchor(h) for h in re.findall(r"^#{2,3} (.+)$", GLOSSARY.read_text(), re.M)}
    for stem, path in NB.items():
        for c in read(path).cells:
            for anchor in re.findall(r"glossary\.md#([\w-]+)", c.source if c.cell_type == "markdown" else ""):
                assert anchor in terms, f"{stem}: links glossary.md#{anchor}, which is no term"
