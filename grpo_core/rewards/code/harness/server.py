"""The solution server: the process that runs the completion's code and answers the harness's calls.

Runs inside the sandbox, as part of the harness script (see :mod:`grpo_core.rewards.code.harness`), forked by the
harness before the harness reads the tests or the nonce; the imports below are for linting and tests only and are
left out of the script, where every module's names share one namespace.
"""

from grpo_core.rewards.code.harness.channel import _channel, _json_text
from grpo_core.rewards.code.harness.codec import _SERVER_SIDE, _decode, _encode


def _serve(rfd, wfd):
    # The solution server, forked from the harness before the harness read the tests or the nonce.
    import os
    from _json import encode_basestring_ascii as escape

    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # stdin held the tests (unread here); stdout and stderr are the sandbox's, not the server's
        os.dup2(null, fd)
    os.close(null)
    eval_, literals = eval, {"__builtins__": {}, "nan": float("nan"), "inf": float("inf")}
    send, receive = _channel(rfd, wfd, lambda m: _json_text(m, escape), lambda text: eval_(text, literals))
    import sys

    exec_, compile_, Base, fork, waitpid = exec, compile, BaseException, os.fork, os.waitpid
    refs = []

    def keep(x):
        refs.append(x)
        return {"r": len(refs) - 1}

    def encode(x):
        return _encode(x, keep)

    def decode(v):
        return _decode(v, lambda ref: refs[ref])

    request = receive()
    code, header, stdio = request["code"], request["header"], request["stdio"]
    del request
    try:
        compiled = compile_(code, "<completion>", "exec")
    except Base:
        send({"load": "syntax_error"})
        return
    del code
    builtins_ = __builtins__
    ns = {"__name__": "__solution__", "__builtins__": builtins_}
    _SERVER_SIDE["globals"] = ns
    if header:  # the prompt's own helpers (HumanEval's ``poly``), which the completion may use without repeating
        try:
            exec_(compile_(header, "<prompt>", "exec"), ns)
        except Base:
            pass
    if stdio:
        send({"load": "ok", "names": {}})
    else:
        try:
            exec_(compiled, ns)
        except Base:
            send({"load": "load_error"})
            return
        names = {}
        module_type = type(os)
        for name, value in list(ns.items()):
            if name.startswith("__"):
                continue
            t = type(value)
            if t is module_type:  # the harness imports its own copy: the completion may have patched this one
                try:
                    names[name] = {"m": str(value.__name__)}
                except Base:
                    pass
                continue
            if hasattr(t, "__next__") or hasattr(t, "read"):  # a top-level iterator or file stays in the server
                names[name] = keep(value)
                continue
            try:
                names[name] = encode(value)
            except Base:
                names[name] = keep(value)
        send({"load": "ok", "names": names})

    def run_program(text):
        # One run of a stdin/stdout program, in a fresh process: its stdin is ``text``, its stdout comes back.
        data = text.encode("utf-8", "surrogatepass")
        inp = os.memfd_create("stdin")
        out = os.memfd_create("stdout")
        os.write(inp, data)
        os.lseek(inp, 0, 0)
        pid = fork()
        if pid == 0:
            status = 1
            try:
                os.close(rfd)
                os.close(wfd)
                os.dup2(inp, 0)
                os.dup2(out, 1)
                try:
                    exec_(compiled, {"__name__": "__main__", "__builtins__": builtins_})
                    status = 0
                except SystemExit as stop:
                    status = 0 if stop.code in (None, 0) else 1
                try:
                    sys.stdout.flush()
                except Base:
                    status = 1
            except Base:
                pass
            finally:
                os._exit(status)
        os.close(inp)
        _, code = waitpid(pid, 0)
        size = os.lseek(out, 0, 2)
        os.lseek(out, 0, 0)
        chunks, left = [], min(size, 8 * 1024 * 1024)
        while left > 0:
            chunk = os.read(out, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        os.close(out)
        return {"out": b"".join(chunks).decode("utf-8", "replace"), "exit": code}

    while True:
        request = receive()
        try:
            if request["op"] == "run":
                answer = {"value": encode(run_program(request["stdin"]))}
            else:
                target = refs[request["ref"]]
                if request["op"] == "call":
                    args = decode(request["args"])
                    value = target(*args, **decode(request["kwargs"]))
                    answer = {"value": encode(value)}
                    mutable = (list, dict, set, bytearray)
                    # A function that returns nothing works in place (``nums.sort()``, LeetCode's "modify nums
                    # in-place"): the caller sees what the call did to its arguments. One that returns a value
                    # does not send them back, so it cannot also rewrite the list the tests compare it with
                    # (``assert f(xs) == sorted(xs)``).
                    if value is None and any(type(a) in mutable for a in args):
                        answer["args"] = [encode(a) if type(a) in mutable else None for a in args]
                else:
                    answer = {"value": encode(getattr(target, request["name"]))}
        except Base as exc:
            try:
                answer = {"raise": type(exc).__name__}
            except Base:
                answer = {"raise": "Exception"}
            try:  # the message, for tests that check it (``assert "negative" in str(e)``): plain text only
                message = str(exc)
                if type(message) is str:
                    answer["message"] = message[:2000]
            except Base:
                pass
        send(answer)
