"""Your answers to the chapters' exercises: one file per chapter, `exercises/chNN.py`.

Each function raises NotImplementedError until you write it. Check your answers with
`python -m tffedu.exercises chNN` (one line per exercise: not answered yet, correct, or wrong and
why); the reference solutions are in `solutions/chNN.py` — look only once you have tried.
"""
