"""The pipe protocol between the harness and the solution server: length-prefixed JSON messages.

Runs inside the sandbox, as part of the harness script (see :mod:`grpo_core.rewards.code.harness`): standard library
only, no module-level imports. Neither side imports ``json`` (its import, through ``re``, costs more than the rest of
the server's start-up): the harness reads JSON with ``_json``'s C scanner (``_json_reader``); the server writes it
with ``_json_text`` and ``_json``'s C string escaper, and reads the harness's requests (trusted plain data built by
``_encode``) as Python literals, ``eval``-ed without builtins.
"""

def _json_reader():
    # JSON text -> value with the C scanner of ``json`` but without importing ``json`` (nor ``re``, its cost).
    import _json

    class Context:
        strict = True
        object_hook = object_pairs_hook = None
        parse_float, parse_int, memo = float, int, {}
        parse_constant = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}.__getitem__

    scan = _json.make_scanner(Context())

    def loads(text):
        value, end = scan(text, 0)
        if text[end:].strip():
            raise ValueError("extra data after the JSON value")
        return value

    return loads


def _channel(rfd, wfd, dumps, loads):
    # Length-prefixed messages over two pipes; ``dumps``/``loads`` turn a message into text and back.
    import os
    # Bound now: the completion may patch builtins and modules of the server before the channel is used.
    read, write, min_, len_, from_bytes = os.read, os.write, min, len, int.from_bytes

    def send(message):
        data = dumps(message).encode("utf-8", "surrogatepass")
        data = len_(data).to_bytes(4, "big") + data
        while data:
            data = data[write(wfd, data):]

    def receive():
        def exact(n):
            chunks, left = [], n
            while left:
                chunk = read(rfd, min_(left, 1 << 20))
                if not chunk:
                    raise EOFError("the other process is gone")
                chunks.append(chunk)
                left -= len_(chunk)
            return b"".join(chunks)

        size = from_bytes(exact(4), "big")
        if size > 32 * 1024 * 1024:
            raise ValueError("message too large")
        return loads(exact(size).decode("utf-8", "surrogatepass"))

    return send, receive


def _json_text(x, escape):
    t = type(x)
    if x is None:
        return "null"
    if t is bool:
        return "true" if x else "false"
    if t is int:
        return int.__repr__(x)
    if t is float:
        text = float.__repr__(x)
        return {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}.get(text, text)
    if t is str:
        return escape(x)
    if t is list:
        return "[" + ",".join([_json_text(v, escape) for v in x]) + "]"
    if t is dict:
        return "{" + ",".join([escape(k) + ":" + _json_text(v, escape) for k, v in x.items()]) + "}"
    raise TypeError("not JSON: " + t.__name__)
