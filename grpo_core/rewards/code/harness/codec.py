"""Values between the harness and the solution server: plain data as JSON-ready structures, with tags.

Runs inside the sandbox, as part of the harness script (see :mod:`grpo_core.rewards.code.harness`): standard library
only, no module-level imports. ``_encode`` turns a value into plain data (None, bool, int, float, str, lists, and
one-key dicts tagging tuples ``t``, dicts ``d``, sets ``s``/``f``, bytes ``b``/``ba``, complex ``c``, ranges ``rg``,
iterators ``i``, standard-library value types, and references ``r`` to values that stay where they were made);
``_decode`` rebuilds it from builtin types only, so no method of the completion's classes runs in the receiver.
"""

def _encode(x, keep, depth=0):
    # Plain data as JSON: None, bool, int, float, str natively; lists as lists; other builtins tagged. Subclasses of
    # builtins become their base value; iterators become their items (at most 100000); anything else a reference.
    if depth > 200:
        raise RecursionError("value nested too deeply")
    t = type(x)
    if x is None or t is bool or t is int or t is float or t is str:
        return x
    if t is list:
        return [_encode(v, keep, depth + 1) for v in x]
    if t is tuple:
        return {"t": [_encode(v, keep, depth + 1) for v in x]}
    if t is dict:
        return {"d": [[_encode(k, keep, depth + 1), _encode(v, keep, depth + 1)] for k, v in x.items()]}
    if t is set or t is frozenset:
        return {"s" if t is set else "f": [_encode(v, keep, depth + 1) for v in x]}
    if t is bytes or t is bytearray:
        return {"b" if t is bytes else "ba": x.hex()}
    if t is complex:
        return {"c": [x.real, x.imag]}
    if t is range:
        return {"rg": [x.start, x.stop, x.step]}
    value = _encode_stdlib(x, t, keep, depth)
    if value is not None:
        return value
    for base in (int, float, str, bytes):
        if isinstance(x, base):
            return _encode(getattr(base, "__" + base.__name__ + "__")(x), keep, depth)
    for base in (list, tuple, dict, set, frozenset):
        if isinstance(x, base):
            return _encode(base(dict.items(x) if base is dict else x), keep, depth)
    if hasattr(t, "__next__") and hasattr(t, "__iter__"):
        items = []
        for v in x:
            items.append(_encode(v, keep, depth + 1))
            if len(items) > 100000:
                raise ValueError("iterator too long")
        return {"i": items}
    return keep(x)


def _encode_stdlib(x, t, keep, depth):
    # Value types of the standard library that results often are (Fraction, Decimal, deque, Counter, OrderedDict,
    # defaultdict of a builtin, namedtuple, dates): sent as their plain parts and rebuilt by the receiver from its own
    # copy of the module, so the comparison there is the real type's. Looked up in sys.modules: a module that was
    # never imported has no instances. None for anything else.
    import sys
    modules = sys.modules
    for module_name, class_name, tag in _STDLIB_TYPES:
        module = modules.get(module_name)
        if module is None or t is not getattr(module, class_name, None):
            continue
        if tag == "fr":
            return {tag: [_encode(int.__int__(x.numerator), keep), _encode(int.__int__(x.denominator), keep)]}
        if tag == "dc":
            return {tag: str.__str__(t.__str__(x))}
        if tag in ("dq", "od", "ct"):
            items = list(x.items()) if tag != "dq" else list(x)
            extra = x.maxlen if tag == "dq" else None
            return {tag: [_encode(items, keep, depth + 1), extra if type(extra) is int else None]}
        if tag == "dd":
            factory = x.default_factory
            name = factory.__name__ if factory in (int, float, str, list, dict, set, tuple, bool) else None
            return {tag: [_encode(list(dict.items(x)), keep, depth + 1), name]}
        if tag in ("date", "datetime", "time", "timedelta"):
            parts = [x.days, x.seconds, x.microseconds] if tag == "timedelta" else [t.isoformat(x)]
            return {tag: [p if type(p) in (int, str) else str(p) for p in parts]}
    if isinstance(x, tuple) and type(getattr(t, "_fields", None)) is tuple and t.__bases__ == (tuple,):
        fields = [str(f) for f in t._fields if type(f) is str]
        if len(fields) == len(x):  # a namedtuple: its fields by name too
            return {"nt": [str(t.__name__), fields, [_encode(v, keep, depth + 1) for v in tuple.__iter__(x)]]}
    return None


_STDLIB_TYPES = (
    ("fractions", "Fraction", "fr"), ("decimal", "Decimal", "dc"), ("collections", "deque", "dq"),
    ("collections", "OrderedDict", "od"), ("collections", "Counter", "ct"), ("collections", "defaultdict", "dd"),
    ("datetime", "datetime", "datetime"), ("datetime", "date", "date"), ("datetime", "time", "time"),
    ("datetime", "timedelta", "timedelta"),
)


_SERVER_SIDE = {}  # the solution server's namespace, set in the server process only (see the "fn" tag)


def _decode_stdlib(tag, body, remote):
    # The receiver's own instance of a standard value type sent by _encode_stdlib; None for another tag.
    if tag == "fr":
        import fractions
        return fractions.Fraction(int(_decode(body[0], remote)), int(_decode(body[1], remote)))
    if tag == "dc":
        import decimal
        return decimal.Decimal(str(body))
    if tag in ("dq", "od", "ct", "dd"):
        import collections
        items, extra = _decode(body[0], remote), body[1]
        if tag == "dq":
            return collections.deque(items, extra if type(extra) is int else None)
        if tag == "dd":
            kinds = {"int": int, "float": float, "str": str, "list": list, "dict": dict, "set": set, "tuple": tuple,
                     "bool": bool}
            return collections.defaultdict(kinds.get(extra), items)
        return collections.OrderedDict(items) if tag == "od" else collections.Counter(dict(items))
    if tag in ("date", "datetime", "time", "timedelta"):
        import datetime
        kind = getattr(datetime, tag)
        return kind(*[int(p) for p in body]) if tag == "timedelta" else kind.fromisoformat(str(body[0]))
    if tag == "nt":
        import collections
        name, fields, items = body
        try:
            kind = collections.namedtuple(str(name), [str(f) for f in fields])
        except ValueError:
            return tuple(_decode(i, remote) for i in items)
        return kind(*[_decode(i, remote) for i in items])
    if tag == "fn":
        # A function of the tests passed to the completion (``apply(lambda v: v * 10, xs)``), rebuilt in the server
        # from its code with the completion's globals. Only the server accepts code: the harness never runs any.
        if "globals" not in _SERVER_SIDE:
            raise ValueError("code is accepted by the solution server only")
        import marshal
        import types
        code, defaults = marshal.loads(bytes.fromhex(body[0])), _decode(body[1], remote)
        return types.FunctionType(code, _SERVER_SIDE["globals"], None, tuple(defaults) if defaults else None)
    if tag == "o":
        name, attributes = body
        kind = type(str(name) if str(name).isidentifier() else "Object", (), {})
        instance = kind()
        for key, value in _decode(attributes, remote).items():
            if type(key) is str and not key.startswith("__"):
                setattr(instance, key, value)
        return instance
    return None


def _decode(v, remote):
    t = type(v)
    if v is None or t is bool or t is int or t is float or t is str:
        return v
    if t is list:
        return [_decode(i, remote) for i in v]
    if t is not dict or len(v) != 1:
        raise ValueError("not plain data")
    (tag, body), = v.items()
    if tag == "d":
        return {_decode(k, remote): _decode(i, remote) for k, i in body}
    if tag in ("b", "ba"):
        return (bytes if tag == "b" else bytearray).fromhex(body)
    if tag == "c":
        return complex(float(body[0]), float(body[1]))
    if tag == "rg":
        return range(*[int(i) for i in body])
    if tag == "r":
        return remote(body)
    if tag not in ("t", "s", "f", "i"):
        return _decode_stdlib(tag, body, remote)
    items = [_decode(i, remote) for i in body]
    kinds = {"t": tuple, "s": set, "f": frozenset, "i": iter}
    return kinds[tag](items)
