"""The harness's own process: it forks the solution server, reads the tests and the nonce, runs the test units.

Runs inside the sandbox as the main part of the harness script (see :mod:`grpo_core.rewards.code.harness`, which
appends the call ``_harness()``); the imports below are for linting and tests only and are left out of the script.
Never call ``_harness`` in-process: it forks, removes its own file (``__file__``) and ends with ``os._exit``.
"""

from grpo_core.rewards.code.harness.channel import _channel, _json_reader
from grpo_core.rewards.code.harness.codec import _decode, _encode
from grpo_core.rewards.code.harness.server import _serve


def _same_output(got, want):
    # A program's stdout against the expected one: equal line by line (trailing blanks ignored), else token by
    # token, numbers written with a point or an exponent in the expected output within 1e-6 (absolute or relative).
    def lines(text):
        rows = [line.rstrip() for line in text.strip().splitlines()]
        return rows
    if lines(got) == lines(want):
        return True
    got_tokens, want_tokens = got.split(), want.split()
    if len(got_tokens) != len(want_tokens):
        return False
    for a, b in zip(got_tokens, want_tokens):  # noqa: B905  (lengths checked above)
        if a == b:
            continue
        if not any(c in b for c in ".eE"):
            return False
        try:
            x, y = float(a), float(b)
        except ValueError:
            return False
        if not (abs(x - y) <= 1e-6 or abs(x - y) <= 1e-6 * abs(y)):
            return False
    return True


def _harness():
    import builtins
    import os
    import sys
    import time

    if hasattr(sys, "set_int_max_str_digits"):  # results such as 10**5000 travel as text (the server inherits this)
        sys.set_int_max_str_digits(100_000)
    if not hasattr(builtins, "exit"):  # -S leaves out site's exit() and quit(), which programs end with
        builtins.exit = builtins.quit = sys.exit

    null = os.open(os.devnull, os.O_RDWR)
    # The server is forked first, before anything secret is in this process: the tests and the nonce come on stdin,
    # read below; the server's copy of stdin is closed before it reads anything but the completion's code.
    server_in, to_server = os.pipe()  # (read end, write end)
    from_server, server_out = os.pipe()
    if os.fork() == 0:
        try:
            os.close(to_server)
            os.close(from_server)
            _serve(server_in, server_out)
        finally:
            os._exit(0)
    os.close(server_in)
    os.close(server_out)
    try:
        os.remove(__file__)
    except OSError:
        pass
    try:  # the server runs under the same uid: it must not read this process through /proc/<pid>/mem or ptrace
        import _ctypes

        prctl = _ctypes.dlsym(_ctypes.dlopen(None, 2), "prctl")
        _ctypes.call_function(prctl, (4, 0, 0, 0, 0))  # PR_SET_DUMPABLE, 0
    except Exception:  # noqa: BLE001  (a libc without prctl: the harness runs on)
        pass
    chunks = []
    while True:
        chunk = os.read(0, 1 << 20)
        if not chunk:
            break
        chunks.append(chunk)
    os.dup2(null, 0)
    p = _json_reader()(b"".join(chunks).decode("utf-8", "surrogatepass"))
    del chunks
    nonce, units, repeats, header = p["nonce"], p["units"], p["repeats"], p["header"]
    write, exit_, perf_counter = os.write, os._exit, time.perf_counter
    exec_, compile_, repr_, max_ = exec, compile, repr, max
    Base = BaseException
    out = os.dup(1)
    os.dup2(null, 1)
    os.dup2(null, 2)

    def finish(text):
        write(out, ("\n" + nonce + " " + text + "\n").encode())
        exit_(0)  # no atexit handlers, no waiting for the server

    send, receive = _channel(from_server, to_server, repr_, _json_reader())
    stdio = any(kind == "stdio" for kind, _ in units)
    compiled = []  # before the completion loads: its load is timed
    loads = _json_reader()
    for kind, source in units:
        if kind == "stdio":
            try:
                given, want = loads(source)
                compiled.append((kind, (given + "", want + "")))
            except Base:
                compiled.append(("test", None))
            continue
        try:
            compiled.append((kind, compile_(source, "<test>", "exec")))
        except Base:
            compiled.append((kind, None))
    try:
        header_code = compile_(header, "<prompt>", "exec") if header else None
    except Base:
        header_code = None
    load_start = perf_counter()
    try:
        send({"code": p["code"], "header": header, "stdio": stdio})  # from here on the server runs the completion
    except Base:
        finish("load_error")
    try:
        loaded = receive()
    except Base:
        finish("load_error")
    load_s = perf_counter() - load_start  # work done while loading (a table built at import) is the code's time too
    del p
    if type(loaded) is not dict or loaded.get("load") != "ok":
        load = loaded.get("load") if type(loaded) is dict else None
        finish("syntax_error" if load == "syntax_error" else "load_error")

    class Gone(Exception):
        pass

    class CandidateError(Exception):
        # What the completion raised when its type could steer the tests' own control flow (StopIteration ends a
        # ``map`` or a generator early) or is not an ordinary exception (SystemExit, KeyboardInterrupt...).
        pass

    class Remote:
        # A value of the completion that is not plain data: it can be called and its attributes read (in the
        # server); it equals only itself and has no truth value here.
        __slots__ = ("ref",)

        def __init__(self, ref):
            self.ref = ref

        def __call__(self, *args, **kwargs):
            request = {"op": "call", "ref": self.ref, "args": encode(list(args)), "kwargs": encode(kwargs)}
            return ask(request, args)

        def __getattr__(self, name):
            if name.startswith("__"):
                raise AttributeError(name)
            return ask({"op": "attr", "ref": self.ref, "name": name})

        def __bool__(self):
            raise TypeError("a value of the completion that is not plain data has no truth value")

        def __repr__(self):
            return "<value of the completion>"

    def keep(x):
        if type(x) is Remote:
            return {"r": x.ref}
        attributes = getattr(x, "__dict__", None)
        if type(x) is type(keep) and x.__code__.co_filename == "<test>" and x.__closure__ is None:
            # a function of the tests (``lambda v: v * 10``) passed to the completion: its code, run in the server
            import marshal

            return {"fn": [marshal.dumps(x.__code__).hex(), encode(list(x.__defaults__ or ()))]}
        if type(attributes) is dict and type(x).__module__ == "__tests__":
            # an object of a class the tests define (a TreeNode, a ListNode): a copy of its attributes
            return {"o": [type(x).__name__, encode(attributes)]}
        raise TypeError("only plain data can be passed to the completion, not " + type(x).__name__)

    def encode(x):
        return _encode(x, keep)

    state = {"gone": False, "asked": 0}
    ordinary = (StopIteration, StopAsyncIteration)

    def update(arguments, after):
        # An argument the call changed in place (``nums.sort()``, ``grid[0][0] = 1``): its new content, as data.
        for argument, new in zip(arguments, after):  # noqa: B905  (one answer per argument)
            if new is None:
                continue
            value = _decode(new, Remote)
            if type(argument) is not type(value):
                continue
            if type(argument) in (list, bytearray):
                argument[:] = value
            else:
                argument.clear()
                argument.update(value)

    def ask(request, arguments=()):
        state["asked"] += 1
        if state["gone"]:
            raise Gone("the completion's process is gone")
        try:
            send(request)
            answer = receive()
            if "value" in answer:
                if type(answer.get("args")) is list:
                    update(arguments, answer["args"])
                return _decode(answer["value"], Remote)
            name, message = answer["raise"], answer.get("message")
        except (OSError, EOFError, ValueError, KeyError, TypeError, RecursionError, AttributeError) as exc:
            if isinstance(exc, (OSError, EOFError)):
                state["gone"] = True
            raise Gone("no usable answer from the completion's process") from None
        kind = getattr(builtins, name, None) if type(name) is str else None
        if not (isinstance(kind, type) and issubclass(kind, Exception)) or issubclass(kind, ordinary):
            kind = CandidateError
        try:
            error = kind(message if type(message) is str else "raised by the completion")
        except Base:
            error = CandidateError("raised by the completion: " + str(name))
        raise error

    def run_program(text):
        answer = ask({"op": "run", "stdin": text})
        if type(answer) is not dict or type(answer.get("out")) is not str or answer.get("exit") != 0:
            raise CandidateError("the program failed")
        return answer["out"]

    ns = {"__name__": "__tests__", "__builtins__": builtins}
    names = set()
    import sys

    stdlib = sys.stdlib_module_names - {"antigravity", "this", "idlelib", "tkinter", "turtle", "turtledemo"}
    try:
        for name, value in loaded["names"].items():
            # Only the completion's own names: never a dunder such as ``__builtins__``, never a builtin (a
            # completion's ``abs`` or ``len`` would judge the tests' own checks).
            if not (type(name) is str and name.isidentifier() and not name.startswith("__")):
                continue
            if hasattr(builtins, name):
                continue
            if type(value) is dict and list(value) == ["m"]:
                # A module the completion imported (``math``, which tests may use without importing it): the
                # harness's own copy of the standard library's module, never the completion's (it may be patched).
                module = value["m"]
                if type(module) is str and module.split(".")[0] in stdlib and not module.startswith("_"):
                    try:
                        __import__(module)
                        ns[name] = sys.modules[module]
                    except Base:
                        pass
                continue
            ns[name] = _decode(value, Remote)
            names.add(name)
    except Base:
        finish("load_error")
    del loaded
    if header_code is not None:  # the prompt's helpers, as the prompt wrote them, over any of the completion's
        try:
            exec_(header_code, ns)
        except Base:
            pass
    own = {name: ns[name] for name in names}  # the completion's values, as the tests first see them

    def names_of(code):  # every name a code object (and the functions, lambdas, classes inside it) looks up
        found = set(code.co_names)
        for const in code.co_consts:
            if type(const) is type(code):
                found |= names_of(const)
        return found

    loads_of = [names_of(unit) if kind == "test" and unit is not None else () for kind, unit in compiled]
    clean = dict(ns)

    def one_round():
        # Each test unit: "1" passed, "0" failed, "-" passed without running any of the completion's code (no
        # credit: ``assert True``); setup units before a test count towards it (``x = f(1)``, then ``assert x``).
        ns.clear()
        ns.update(clean)
        bits = []
        state["asked"] = 0
        for index, (kind, unit) in enumerate(compiled):
            # a test that reads a value of the completion (``assert ANSWER == 42``) uses it without a call
            reads = any(name in own and ns.get(name) is own[name] for name in loads_of[index])
            try:
                if kind == "stdio":
                    given, want = unit
                    ok = _same_output(run_program(given), want)
                    if not want.strip():
                        ok = None  # an empty expected output: the empty program would pass
                else:
                    if unit is None:
                        raise SyntaxError("test does not compile")
                    exec_(unit, ns)
                    ok = True
            except Base:
                ok = False
            if kind != "setup":
                if ok is True and state["asked"] == 0 and not reads:
                    ok = None
                bits.append("-" if ok is None else ("1" if ok else "0"))
                state["asked"] = 0
        return bits

    # Every round runs the same units the same way, through the same proxies, and every round is judged; the
    # time is the harness's clock around a round, the slowest round counting (so a completion gains nothing by
    # behaving differently in some rounds, nor by caching results across them), plus the time the completion took
    # to load (so precomputing at import is no way around the clock).
    start = perf_counter()
    bits = one_round()
    slowest = perf_counter() - start
    for _ in range(repeats - 1 if repeats > 1 else 0):
        if "0" in bits or "1" not in bits:
            break
        start = perf_counter()
        again = one_round()
        slowest = max_(slowest, perf_counter() - start)
        bits = ["0" if b == "1" and a != "1" else b for b, a in zip(bits, again)]  # noqa: B905
    finish("passed " + ("".join(bits) or "-") + " " + repr_(load_s + slowest))
