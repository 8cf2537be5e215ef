"""The agent's modules in a process of their own: what the tests import from the agent's
outputs runs in a host process in the agent's domain, and only values cross (docs/sandbox.md,
"Isolated reruns").

Not imported by the project: `sandbox.verdict_channel` ships this file beside the plugin
(/tests/.t1-verdict/t1_isolate.py); the plugin loads it in a rerun the judge asks for with
T1_ISOLATE. It runs on the image's Python: stdlib only, Python 3.6.

The runner's side (`Isolation`): a module whose file is the agent's is made by the import
system as usual, then executed in the host instead of here; its attributes, the values its
functions return and the exceptions they raise come back as
- data, decoded here from JSON and nothing else (None, bool, int, float, str, bytes, list,
  tuple, dict, set, complex): the tests compare them with the judge's own operations;
- a handle (`Remote`) for anything else (a function, an instance, a generator): calling it,
  reading an attribute, indexing or iterating it asks the host. Where the tests hand the
  judgment itself to such a value (compare it, take its truth, ask what it contains or what
  class it is: `WORD_OPS`) the answer is the agent's word: the test is named in an
  `agent_word` record, and its outcome is not the judge's;
- a class of the agent's (`RemoteType`, a real class here: `isinstance`, `pytest.raises`
  work); an exception class mirrors the builtin exception it derives from.
Values the tests hand to the agent's code cross as data, or by pickle (the host is the
agent's: what it unpickles runs there); a list, dict, set or bytearray argument the agent's
code changes is changed here too. What cannot cross fails the test (a TypeError), which
makes it no evidence: the judge vouches only for outcomes that agree with the run in which
the module ran in the runner.

The host (`serve`, run as `python -c <this file>`): the runner starts it as a program, so it
runs in the agent's domain (the plugin's `guard_programs`), reading no test and no report.
"""

import base64
import builtins
import itertools
import json
import os
import pickle
import subprocess
import sys
import threading
import traceback
import types
from typing import Any

ISOLATE_ENV = "T1_ISOLATE"
HOST_ENV = "T1_ISOLATED_HOST"
MAX_LINE = 64 << 20  # bytes of one reply the runner reads
WORD_OPS = ("cmp", "bool", "in", "isinstance", "issubclass")
_BINARY = {
    "+": "__add__", "-": "__sub__", "*": "__mul__", "/": "__truediv__", "//": "__floordiv__",
    "%": "__mod__", "**": "__pow__", "@": "__matmul__", "&": "__and__", "|": "__or__",
    "^": "__xor__", "<<": "__lshift__", ">>": "__rshift__",
}  # fmt: skip
_COMPARE = {"==": "__eq__", "!=": "__ne__", "<": "__lt__", "<=": "__le__", ">": "__gt__",
            ">=": "__ge__"}  # fmt: skip
_MUTABLE = (list, dict, set, bytearray)


# ---- values on the wire (both sides) ----------------------------------------------------------


def encode(value, handle, depth=0):
    """JSON-ready form of `value`: data as itself or tagged; anything else `handle(value)`
    (a dict: a tag of the side's own). Every JSON object on the wire is a tag."""
    if depth > 200:
        raise ValueError("nested too deep to cross")
    t = type(value)
    if value is None or t in (bool, int, str):
        return value
    if t is float:
        return value if value == value and value not in (float("inf"), float("-inf")) else {
            "$f": repr(value)}  # fmt: skip
    if t is list:
        return [encode(v, handle, depth + 1) for v in value]
    if t is tuple:
        return {"$t": [encode(v, handle, depth + 1) for v in value]}
    if t is dict:
        return {"$d": [[encode(k, handle, depth + 1), encode(v, handle, depth + 1)]
                       for k, v in value.items()]}  # fmt: skip
    if t in (set, frozenset):
        return {"$s": [encode(v, handle, depth + 1) for v in value], "f": t is frozenset}
    if t in (bytes, bytearray):
        return {"$b": base64.b64encode(bytes(value)).decode("ascii"), "a": t is bytearray}
    if t is complex:
        return {"$c": [value.real, value.imag]}
    return handle(value)


def decode(obj, handle, depth=0):
    """The value `encode` made; a tag not of data goes to `handle(tag)`."""
    if depth > 200:
        raise ValueError("nested too deep to cross")
    if isinstance(obj, list):
        return [decode(v, handle, depth + 1) for v in obj]
    if not isinstance(obj, dict):
        return obj
    if "$f" in obj:
        return float(obj["$f"])
    if "$t" in obj:
        return tuple(decode(v, handle, depth + 1) for v in obj["$t"])
    if "$d" in obj:
        return {decode(k, handle, depth + 1): decode(v, handle, depth + 1) for k, v in obj["$d"]}
    if "$s" in obj:
        items = [decode(v, handle, depth + 1) for v in obj["$s"]]
        return frozenset(items) if obj.get("f") else set(items)
    if "$b" in obj:
        data = base64.b64decode(obj["$b"])
        return bytearray(data) if obj.get("a") else data
    if "$c" in obj:
        return complex(*obj["$c"])
    return handle(obj)


# ---- the runner's side ------------------------------------------------------------------------


class IsolationError(TypeError):
    """A value could not cross between the tests and the agent's isolated module."""


class Remote:
    # A value of the agent's that lives in the host: every operation asks it (its name, its
    # documentation and its signature too: what the tests introspect is the agent's answer).

    __slots__ = ("_t1_id", "_t1_iso", "__weakref__")
    __doc__ = property(lambda self: self._t1_iso.ask("getattr", self, "__doc__"))  # type: ignore[assignment]
    __name__ = property(lambda self: self._t1_iso.ask("getattr", self, "__name__"))
    __signature__ = property(lambda self: self._t1_iso.signature(self))

    def __dir__(self):
        return self._t1_iso.ask("dir", self)

    def __init__(self, iso, ident):
        object.__setattr__(self, "_t1_id", ident)
        object.__setattr__(self, "_t1_iso", iso)

    def __getattr__(self, name):
        if name.startswith("_t1_"):
            raise AttributeError(name)
        return self._t1_iso.ask("getattr", self, name)

    def __setattr__(self, name, value):
        self._t1_iso.ask("setattr", self, name, value)

    def __delattr__(self, name):
        self._t1_iso.ask("delattr", self, name)

    def __call__(self, *args, **kwargs):
        return self._t1_iso.ask("call", self, args, kwargs)

    def __getitem__(self, key):
        return self._t1_iso.ask("getitem", self, key)

    def __setitem__(self, key, value):
        self._t1_iso.ask("setitem", self, key, value)

    def __delitem__(self, key):
        self._t1_iso.ask("delitem", self, key)

    def __len__(self):
        return self._t1_iso.ask("len", self)

    def __iter__(self):
        return self._t1_iso.ask("iter", self)

    def __next__(self):
        return self._t1_iso.ask("next", self)

    def __contains__(self, item):
        return self._t1_iso.ask("in", self, item)

    def __bool__(self):
        return self._t1_iso.ask("bool", self)

    def __hash__(self):
        return hash((id(self._t1_iso), self._t1_id))

    def __repr__(self):
        return self._t1_iso.ask("repr", self)

    def __str__(self):
        return self._t1_iso.ask("str", self)

    def __format__(self, spec):
        return self._t1_iso.ask("format", self, spec)

    def __int__(self):
        return self._t1_iso.ask("int", self)

    def __float__(self):
        return self._t1_iso.ask("float", self)

    def __index__(self):
        return self._t1_iso.ask("index", self)

    def __enter__(self):
        return self._t1_iso.ask("enter", self)

    def __exit__(self, *exc):
        return self._t1_iso.ask("exit", self)

    def __neg__(self):
        return self._t1_iso.ask("neg", self)

    def __abs__(self):
        return self._t1_iso.ask("abs", self)


def _operators():
    def binary(op, reflected):
        def method(self, other):
            return self._t1_iso.ask("op", op, other, self) if reflected else self._t1_iso.ask(
                "op", op, self, other)  # fmt: skip

        return method

    for op, name in _BINARY.items():
        setattr(Remote, name, binary(op, False))
        setattr(Remote, "__r" + name[2:], binary(op, True))

    def compare(op):
        def method(self, other):
            return self._t1_iso.ask("cmp", op, self, other)

        return method

    for op, name in _COMPARE.items():
        setattr(Remote, name, compare(op))


_operators()


class RemoteType(type):
    """A class of the agent's, seen from the tests: constructing it, reading its attributes
    and `isinstance` ask the host."""

    def __call__(cls, *args, **kwargs):
        return cls._t1_iso.ask("call", cls, args, kwargs)

    def __getattr__(cls, name):
        if name.startswith("_t1_") or name.startswith("__"):
            raise AttributeError(name)
        return cls._t1_iso.ask("getattr", cls, name)

    def __instancecheck__(cls, obj):
        if not isinstance(obj, Remote):
            return False
        return cls._t1_iso.ask("isinstance", obj, cls)

    def __subclasscheck__(cls, sub):
        return isinstance(sub, RemoteType) and cls._t1_iso.ask("issubclass", sub, cls)

    def __dir__(cls):
        return cls._t1_iso.ask("dir", cls)

    @property
    def __signature__(cls):
        return cls._t1_iso.signature(cls)


class RemoteModule(types.ModuleType):
    """A module of the agent's made here and executed in the host."""

    def __getattr__(self, name):
        ident = self.__dict__.get("_t1_id")
        if ident is None or name.startswith("_t1_"):
            raise AttributeError(name)
        return self.__dict__["_t1_iso"].ask("getattr", self, name)

    def __dir__(self):
        iso = self.__dict__.get("_t1_iso")
        theirs = iso.ask("dir", self) if iso is not None else []
        return sorted(set(self.__dict__) - {"_t1_id", "_t1_iso"} | set(theirs))


class Isolation:
    """The runner's end: a host process started on the first module of the agent's, asked
    one request at a time. `word(op)` is told each time a test hands its judgment to a value
    of the agent's (`WORD_OPS`)."""

    def __init__(self, word):
        self.word = word
        self.proc: Any = None
        self.lock = threading.Lock()
        self.classes = {}  # host id -> RemoteType or mirrored exception class

    def loader(self, spec):
        return _Loader(self, spec, spec.loader)

    def _start(self):
        with open(__file__, "rb") as f:  # this file: the host runs it (it cannot read ours)
            source = f.read().decode("utf-8") + "\nserve()\n"
        env = dict(os.environ, **{HOST_ENV: "1"})  # the plugin: a domain writing only scratch
        self.proc = subprocess.Popen(
            [sys.executable, "-c", source], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            close_fds=True, env=env,
        )  # fmt: skip
        self._send({"op": "hello", "path": list(sys.path), "cwd": os.getcwd()})
        self._reply()

    def _send(self, message):
        line = json.dumps(message, separators=(",", ":")) + "\n"
        self.proc.stdin.write(line.encode("utf-8"))
        self.proc.stdin.flush()

    def _reply(self):
        line = self.proc.stdout.readline(MAX_LINE + 1)
        if not line.endswith(b"\n"):
            raise IsolationError("the agent's isolated module ended or answered too much")
        try:
            reply = json.loads(line.decode("utf-8"))
        except (ValueError, RecursionError) as e:
            raise IsolationError(f"the agent's isolated module answered no JSON: {e!r}") from e
        if not isinstance(reply, dict):
            raise IsolationError("the agent's isolated module answered no reply")
        return reply

    def ask(self, op, *args):
        if op in WORD_OPS:
            self.word(op)
        with self.lock:
            if self.proc is None:
                self._start()
            try:
                wire = encode(list(args), self._outgoing)
            except (pickle.PicklingError, TypeError, AttributeError, ValueError) as e:
                raise IsolationError(f"cannot hand {op} to the agent's isolated module: {e}") from e
            self._send({"op": op, "args": wire})
            reply = self._reply()
        if "err" in reply:
            raise self._exception(reply["err"])
        try:
            result = self._incoming(reply["ok"])
            back = [(int(i), self._incoming(state)) for i, state in reply.get("back", [])]
        except Exception as e:  # noqa: BLE001 - an answer that does not decode is no value
            raise IsolationError(f"the agent's isolated module answered no value: {e!r}") from e
        handed = _call_args(args) if op == "call" else []
        for i, state in back:
            if 0 <= i < len(handed):
                _update(handed[i], state)
        return result

    def _outgoing(self, value):
        if isinstance(value, Remote) and value._t1_iso is self:
            return {"$r": value._t1_id}
        if isinstance(value, (RemoteType, RemoteModule)) and value.__dict__.get("_t1_iso") is self:
            return {"$r": value.__dict__["_t1_id"]}
        if isinstance(value, type) and self._mirrored(value) is not None:
            return {"$r": self._mirrored(value)}
        return {"$p": base64.b64encode(pickle.dumps(value, 2)).decode("ascii")}

    def _mirrored(self, cls):
        for ident, known in self.classes.items():
            if known is cls:
                return ident
        return None

    def _incoming(self, wire):
        return decode(wire, self._handle)

    def _handle(self, tag):
        if "$x" in tag:  # a builtin class (an exception's base, `type(x)`)
            found = getattr(builtins, str(tag["$x"]), None)
            if isinstance(found, type):
                return found
            raise IsolationError(f"no builtin class {tag['$x']!r}")
        ident = int(tag["$h"])
        kind = tag.get("k")
        if kind == "exc":
            return self._exception_class(ident, tag)
        if kind == "class":
            cls = self.classes.get(ident)
            if cls is None:
                doc = tag.get("d") if isinstance(tag.get("d"), str) else None
                cls = RemoteType(str(tag.get("n", "AgentClass")), (object,), {"__doc__": doc})
                type.__setattr__(cls, "_t1_id", ident)
                type.__setattr__(cls, "_t1_iso", self)
                self.classes[ident] = cls
            return cls
        return Remote(self, ident)

    def _exception_class(self, ident, tag):
        cls = self.classes.get(ident)
        if cls is None:
            bases = tuple(b for b in (self._incoming(b) for b in tag.get("b", []))
                          if isinstance(b, type) and issubclass(b, Exception))  # fmt: skip
            try:
                cls = type(str(tag.get("n", "AgentError")), bases or (Exception,), {})
            except TypeError:  # bases whose layouts conflict
                cls = type(str(tag.get("n", "AgentError")), (Exception,), {})
            self.classes[ident] = cls
        return cls

    def _exception(self, err):
        try:
            cls = self._incoming(err["cls"])
            args = self._incoming(err.get("args", {"$t": []}))
        except Exception:  # noqa: BLE001 - an answer that does not decode is an error here
            cls, args = IsolationError, ()
        if not isinstance(cls, type) or not issubclass(cls, Exception):
            cls = type(getattr(cls, "__name__", "AgentError"), (RuntimeError,), {})
        args = args if isinstance(args, tuple) else (args,)
        try:
            exc = cls.__new__(cls, *args)
            exc.args = args
        except Exception:  # noqa: BLE001 - a class that will not take these arguments
            exc = IsolationError(*args)
        note = err.get("tb")
        if isinstance(note, str):
            exc.__cause__ = IsolationError("raised in the agent's isolated module:\n" + note)
        return exc

    def signature(self, value):
        """`inspect.Signature` of a callable of the agent's, from the host's description."""
        import inspect

        params = []
        for name, kind, has_default, default in self.ask("signature", value):
            params.append(inspect.Parameter(
                str(name), inspect._ParameterKind(int(kind)),
                default=default if has_default else inspect.Parameter.empty,
            ))  # fmt: skip
        return inspect.Signature(params)

    def execute(self, module, spec):
        ident = self.ask(
            "import",
            spec.name,
            spec.origin,
            spec.submodule_search_locations and list(spec.submodule_search_locations),
        )
        module.__dict__["_t1_id"] = ident
        module.__dict__["_t1_iso"] = self
        module.__class__ = RemoteModule


def _call_args(args):
    """The positional and keyword values of a `call` request, in the host's order."""
    _target, positional, keywords = args
    return list(positional) + [keywords[k] for k in sorted(keywords)]


def _update(value, state):
    """`value` (a list, dict, set or bytearray the tests handed over) changed as the agent's
    code changed its copy."""
    if isinstance(value, (list, bytearray)):
        value[:] = state
    elif isinstance(value, (dict, set)):
        value.clear()
        value.update(state)


class _Loader:
    """The loader of an agent's module under isolation: the module is made here as usual and
    executed in the host."""

    def __init__(self, iso, spec, loader):
        self.iso, self.spec, self.inner = iso, spec, loader

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        self.iso.execute(module, self.spec)

    def __getattr__(self, name):  # get_source, is_package, ... as the original loader
        return getattr(self.inner, name)


# ---- the host: the agent's side --------------------------------------------------------------


def serve():
    """Answer the runner's requests on stdin/stdout until it closes them; what the agent's
    code prints goes to stderr."""
    wire_in = os.fdopen(os.dup(0), "rb")
    wire_out = os.fdopen(os.dup(1), "wb")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(2, 1)
    objects = {}
    counter = itertools.count(1)
    ids = {}

    def keep(value):
        key = id(value)
        if key not in ids:
            ids[key] = next(counter)
            objects[ids[key]] = value
        return ids[key]

    def handle(value):
        if isinstance(value, type):
            name = value.__name__
            if getattr(builtins, name, None) is value:
                return {"$x": name}
            if issubclass(value, BaseException):
                return {"$h": keep(value), "k": "exc", "n": value.__name__,
                        "b": [encode(b, handle) for b in value.__bases__]}  # fmt: skip
            doc = value.__doc__ if isinstance(value.__doc__, str) else None
            return {"$h": keep(value), "k": "class", "n": value.__name__, "d": doc}
        return {"$h": keep(value)}

    def incoming(tag):
        if "$r" in tag:
            return objects[int(tag["$r"])]
        if "$p" in tag:
            return pickle.loads(base64.b64decode(tag["$p"]))
        raise ValueError("unknown tag")

    def answer(message):
        op = message["op"]
        if op == "hello":
            sys.path[:] = message["path"]
            os.chdir(message["cwd"])
            return None, []
        args = decode(message["args"], incoming)
        back: list = []
        if op == "import":
            return keep(_import(*args)), back
        if op == "call":
            target, positional, keywords = args
            handed = list(positional) + [keywords[k] for k in sorted(keywords)]
            before = [json.dumps(encode(v, handle)) if type(v) in _MUTABLE else None
                      for v in handed]  # fmt: skip
            result = target(*positional, **keywords)
            for i, v in enumerate(handed):  # what the agent's code changed of the tests' values
                if before[i] is not None:
                    now = encode(v, handle)
                    if json.dumps(now) != before[i]:
                        back.append([i, now])
            return result, back
        return _operate(op, args), back

    for line in wire_in:
        try:
            result, back = answer(json.loads(line.decode("utf-8")))
            reply = {"ok": encode(result, handle), "back": back}
        except BaseException as e:  # noqa: BLE001 - every failure of the agent's code is an answer
            try:
                args = encode(tuple(e.args), handle)
            except Exception:  # noqa: BLE001
                args = {"$t": [str(e)]}
            reply = {"err": {"cls": encode(type(e), handle), "args": args,
                             "tb": traceback.format_exc()[-4000:]}}  # fmt: skip
        wire_out.write((json.dumps(reply, separators=(",", ":")) + "\n").encode("utf-8"))
        wire_out.flush()


def _import(name, origin, locations):
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        name, origin, submodule_search_locations=locations
    )
    if spec is None or spec.loader is None:
        raise ImportError(f"no module at {origin}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _operate(op, args):
    """One operation on a value of the agent's, in the host."""
    import operator

    if op == "getattr":
        return getattr(args[0], args[1])
    if op == "setattr":
        return setattr(args[0], args[1], args[2])
    if op == "delattr":
        return delattr(args[0], args[1])
    if op == "getitem":
        return args[0][args[1]]
    if op == "setitem":
        args[0][args[1]] = args[2]
        return None
    if op == "delitem":
        del args[0][args[1]]
        return None
    if op == "cmp":
        name, left, right = args
        return getattr(operator, _COMPARE[name].strip("_"))(left, right)
    if op == "op":
        name, left, right = args
        fn = _BINARY[name].strip("_")
        return (getattr(operator, fn, None) or getattr(operator, fn + "_"))(left, right)
    if op == "iter":
        return iter(args[0])
    if op == "next":
        return next(args[0])
    if op == "in":
        return args[1] in args[0]
    if op == "isinstance":
        return isinstance(args[0], args[1])
    if op == "issubclass":
        return issubclass(args[0], args[1])
    if op == "dir":
        return [str(name) for name in dir(args[0])]
    if op == "signature":
        import inspect

        params = inspect.signature(args[0]).parameters.values()
        return [[p.name, int(p.kind), p.default is not p.empty,
                 None if p.default is p.empty else p.default] for p in params]  # fmt: skip
    if op == "format":
        return format(args[0], args[1])
    if op == "enter":
        return args[0].__enter__()
    if op == "exit":
        return args[0].__exit__(None, None, None)
    unary = {"len": len, "bool": bool, "repr": repr, "str": str, "int": int, "float": float,
             "index": operator.index, "neg": operator.neg, "abs": abs}  # fmt: skip
    return unary[op](args[0])  # type: ignore[operator]
