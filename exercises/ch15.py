"""Chapter 15 (serving): your answers.

Write each function, then check it: python -m tffedu.exercises ch15
(the reference answers are in solutions/ch15.py: look once you have tried)
"""
__all__ = ['sse_events', 'safe_length']


def sse_events(raw: bytes) -> list[tuple]:
    """Exercise 15.1 (medium): the events of a server-sent-event stream, as a browser or OpenAI's
    client reads them: a list of (event, data) — `event` the last `event:` field (None if none),
    `data` the `data:` fields joined by newlines. Lines end with CR LF, LF or CR; a field is
    `name: value` (one space after the colon is dropped, a line without a colon is a name with an
    empty value); lines starting with ":" are comments; unknown names are ignored. A blank line
    ends an event, and dispatches it if it had an `event` or `data` field; text after the last
    blank line is not an event. (No `id:` or `retry:` lines are given.)"""
    raise NotImplementedError("ch15: sse_events is yours to write")


def safe_length(text: str, stops: list[str]) -> int:
    """Exercise 15.2 (medium): how much of a choice's text so far a stream may send, when the
    answer ends before the first stop string (which is left out) and nothing sent can be taken
    back: the start of the first stop in `text`; or, if none is there yet, len(text) minus the
    longest tail of `text` that is the beginning of some stop (more text could complete it)."""
    raise NotImplementedError("ch15: safe_length is yours to write")
