"""Your answers to the chapters' exercises: one file per chapter, `exercises/chNN.py`.

Each function raises NotImplementedError until you write it. Check your answers with
`pytest tests/exercises -k chNN` (your answers are the `[yours]` tests); the reference solutions
are in `solutions/chNN.py` — look only once you have tried.
"""
