#!/usr/bin/env python3
"""Write the learner's file exercises/chNN.py from the reference solutions/chNN.py:
the same names, signatures and docstrings, every body `raise NotImplementedError`.

    python tools/exercise_stubs.py ch05 [ch07 ...]     # or --all

tests/exercises/test_stubs.py checks that the two files agree (names and signatures).
"""
import ast
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def stub_source(ch: str) -> str:
    tree = ast.parse((ROOT / "solutions" / f"{ch}.py").read_text())
    doc = ast.get_docstring(tree).replace("reference solutions", "your answers")
    out = [f'"""{doc}\n\nWrite each function, then check it: python -m tffedu.exercises {ch}\n'
           f'(the reference answers are in solutions/{ch}.py: look once you have tried)\n"""']
    # the GPU exercises' kernel files: the learner's copy in exercises/kernels/ (solutions' own helper
    # has the same name and takes no chapter)
    out += [ast.unparse(n).replace("from solutions import", "from exercises import")
            for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    out += [ast.unparse(n) for n in tree.body
            if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "__all__"]
    # constants the exercises use (UPPER_CASE names), with the comment line above each
    src = (ROOT / "solutions" / f"{ch}.py").read_text().splitlines()
    for n in tree.body:
        name = getattr(n.targets[0], "id", "") if isinstance(n, ast.Assign) else ""
        if name.isupper() and name != "__ALL__":
            comment = src[n.lineno - 2] if n.lineno >= 2 and src[n.lineno - 2].startswith("#") else ""
            block = "\n".join(src[n.lineno - 1:n.end_lineno])
            out.append("\n" + (comment + "\n" if comment else "") + block)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
            ret = f" -> {ast.unparse(node.returns)}" if node.returns else ""
            body = f'raise NotImplementedError("{ch}: {node.name} is yours to write")'
            last = node.body[-1]
            if (isinstance(last, ast.Return) and isinstance(last.value, ast.Call)
                    and getattr(last.value.func, "id", "") == "kernel_file"):      # a kernel to edit
                body = f'return kernel_file("{last.value.args[0].value}", "{ch}")'
            out.append(f'\n\ndef {node.name}({ast.unparse(node.args)}){ret}:\n'
                       f'    """{ast.get_docstring(node, clean=False)}"""\n'
                       f'    {body}')
    return "\n".join(out) + "\n"


def main(chapters):
    if chapters == ["--all"]:
        chapters = sorted(p.stem for p in (ROOT / "solutions").glob("ch*.py"))
    for ch in chapters:
        (ROOT / "exercises" / f"{ch}.py").write_text(stub_source(ch))
        print("wrote", f"exercises/{ch}.py")


if __name__ == "__main__":
    main(sys.argv[1:])
