"""Chapter 15 (serving): reference solutions."""

__all__ = ["sse_events", "safe_length"]


def sse_events(raw: bytes) -> list[tuple]:
    """Exercise 15.1 (medium): the events of a server-sent-event stream, as a browser or OpenAI's
    client reads them: a list of (event, data) — `event` the last `event:` field (None if none),
    `data` the `data:` fields joined by newlines. Lines end with CR LF, LF or CR; a field is
    `name: value` (one space after the colon is dropped, a line without a colon is a name with an
    empty value); lines starting with ":" are comments; unknown names are ignored. A blank line
    ends an event, and dispatches it if it had an `event` or `data` field; text after the last
    blank line is not an event. (No `id:` or `retry:` lines are given.)"""
    text = raw.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
    out, event, data = [], None, []
    for line in text.split("\n")[:-1]:          # the text after the last line end is unfinished
        if not line:
            if event is not None or data:
                out.append((event, "\n".join(data)))
            event, data = None, []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "event":
            event = value
        elif name == "data":
            data.append(value)
    return out


def safe_length(text: str, stops: list[str]) -> int:
    """Exercise 15.2 (medium): how much of a choice's text so far a stream may send, when the
    answer ends before the first stop string (which is left out) and nothing sent can be taken
    back: the start of the first stop in `text`; or, if none is there yet, len(text) minus the
    longest tail of `text` that is the beginning of some stop (more text could complete it)."""
    hits = [text.find(s) for s in stops if s in text]
    if hits:
        return min(hits)
    hold = max((k for s in stops for k in range(1, len(s)) if text.endswith(s[:k])), default=0)
    return len(text) - hold
