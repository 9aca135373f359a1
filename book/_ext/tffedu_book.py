"""Sphinx extension of the tffedu book (Jupyter Book 1.x, loaded through book/_config.yml).

* nbdev directive lines (`#| default_exp tensor`, `#| export`) are tooling, not content: they are
  cut from the code cells of the rendered book; a cell that held nothing else (`#| default_exp`)
  disappears, and an exported cell gets a note saying which module of the package it becomes.
* cells tagged `gpu` get a visible note: they run only where PyCUDA finds an NVIDIA GPU, and the
  output shown is the one from the GPU machine.
* the site's index.html is the first page itself, not a redirect to it (a meta refresh that some
  renderers and link previews show as a blank page).
"""
import pathlib
import re

from docutils import nodes

DIRECTIVE = re.compile(r"^#\|\s*(\S+)\s*(.*)$")
GPU_NOTE = ("GPU cell — runs only where PyCUDA finds an NVIDIA GPU (skipped elsewhere); "
            "the output shown is from a run on an H200.")


def _is(node, cls):
    return isinstance(node, nodes.container) and cls in node.get("classes", [])


def _note(text, cls):
    return nodes.paragraph("", "", nodes.Text(text), classes=["tffedu-note", cls])


def tidy_cells(app, doctree):
    module = None
    for cell in list(doctree.findall(lambda n: _is(n, "cell"))):
        inputs = [c for c in cell.children if _is(c, "cell_input")]
        if "tag_gpu" in cell.get("classes", []):
            cell.insert(0, _note(GPU_NOTE, "gpu-note"))
        if not inputs:
            continue
        for lit in list(inputs[0].findall(nodes.literal_block)):
            lines = lit.astext().splitlines()
            directives = [DIRECTIVE.match(ln) for ln in lines if DIRECTIVE.match(ln)]
            if not directives:
                continue
            for d in directives:
                if d.group(1) == "default_exp":
                    module = d.group(2).strip()
            rest = "\n".join(ln for ln in lines if not DIRECTIVE.match(ln)).strip("\n")
            if not rest:
                if any(_is(c, "cell_output") for c in cell.children):
                    inputs[0].parent.remove(inputs[0])
                else:
                    cell.parent.remove(cell)
                break
            lit.rawsource = rest
            lit.children = [nodes.Text(rest)]
            if any(d.group(1) in ("export", "exporti", "exports") for d in directives) and module:
                path = "tffedu/" + module.replace(".", "/") + ".py"
                cell.insert(0, _note(f"exported to {path}", "export-note"))


def write_index(app, exception):
    """index.html = the root page (book/intro.html) with a <base> element, so that its relative
    links resolve from where that page lives. Runs before sphinx-external-toc's build-finished
    hook, which then leaves the file alone (it writes its redirect only where none exists)."""
    root = app.config.root_doc
    page = pathlib.Path(app.outdir) / f"{root}.html"
    if exception is not None or app.builder.name != "html" or root == "index" or not page.is_file():
        return
    html = page.read_text("utf-8").replace("<head>", f'<head>\n<base href="{root}.html">', 1)
    (pathlib.Path(app.outdir) / "index.html").write_text(html, "utf-8")


def setup(app):
    app.connect("doctree-read", tidy_cells)
    app.connect("build-finished", write_index, priority=400)
    app.add_css_file("tffedu.css")
    return {"parallel_read_safe": True, "parallel_write_safe": True}
