"""Load functions and classes out of an unpacked sglang wheel by AST, without importing sglang.

scripts/sglang-sizing-oracle evaluates SGLang's own sizing code with the GPU stubbed. Importing
`sglang.srt.*` pulls in torch, CUDA kernels and hundreds of modules; instead `Loader.get(module,
name)` reads `module`'s source from the wheel, takes the exact top-level statement that defines
`name` (a def, a class, an assignment), and execs it in a namespace of that module. Every global
name the statement reads is resolved the same way first: a definition of the same module, an
import of another sglang module (loaded by the same rule), or, for anything outside sglang (torch,
numpy, msgspec, transformers) or a function the caller stubs (the GPU readings, the server-args
context getters), the object in `stubs`. Imports inside a function body go through the same
resolution (the namespace's `__import__`), so a body runs as written. A name no rule resolves is
an `Unresolved` that raises with its module and name when touched: the run stops rather than
evaluating anything but the wheel's code and the named stubs.

`Loader.used` lists every (file, name) that was loaded from the wheel: the provenance each
golden row records.
"""

from __future__ import annotations

import ast
import builtins
import textwrap
import sys
import types
from pathlib import Path
from typing import Any


_NOTHING = object()
_INDEX: dict = {}  # (root, module) → parsed source, shared by every Loader of a run
_CODE: dict = {}
_LINES: dict = {}


class Unresolved:
    """A global no rule resolved: fails loudly, naming it, once it is used."""

    def __init__(self, where: str):
        self._where = where

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        raise NameError(f"oracle: unresolved {self._where}.{attr} (add a stub)")

    def __call__(self, *a: Any, **k: Any) -> Any:
        raise NameError(f"oracle: unresolved {self._where} called (add a stub)")

    def __repr__(self) -> str:
        return f"<unresolved {self._where}>"


class _Module(types.ModuleType):
    """What `import x` / `from x import y` inside a loaded body returns: attributes load lazily."""

    def __init__(self, loader: Loader, name: str):
        super().__init__(name)
        self._loader = loader

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return self._loader.get(self.__name__, attr)


class Loader:
    def __init__(self, root: Path, stubs: dict[str, Any]):
        """`root`: the unpacked wheel (holding sglang/). `stubs`: "module.name" → object (wins
        over the wheel), or "module" → a module-like object for a non-sglang import."""
        self.root = root
        self.stubs = stubs
        self.used: list[str] = []
        self._ns: dict[str, dict[str, Any]] = {}
        self._defs: dict[str, dict[str, list[ast.stmt]]] = {}
        self._imports: dict[str, dict[str, tuple[str, str | None]]] = {}
        self._src: dict[str, str] = {}
        self._loading: set[tuple[str, str]] = set()
        self._stars: dict[str, list[str]] = {}

    # ------------------------------------------------------------ modules
    def path(self, module: str) -> Path | None:
        base = self.root / module.replace(".", "/")
        for cand in (base.with_suffix(".py"), base / "__init__.py"):
            if cand.is_file():
                return cand
        return None

    def is_sglang(self, module: str) -> bool:
        return module == "sglang" or module.startswith("sglang.")

    def _index(self, module: str) -> None:
        if module in self._defs:
            return
        cached = _INDEX.get((self.root, module))
        if cached:
            self._src[module], self._defs[module], self._imports[module], self._stars[module] = cached
            return
        p = self.path(module)
        defs: dict[str, list[ast.stmt]] = {}
        imports: dict[str, tuple[str, str | None]] = {}
        stars: list[str] = []
        self._stars[module] = stars
        src = p.read_text() if p else ""
        self._src[module] = src
        tree = ast.parse(src) if src else ast.Module(body=[], type_ignores=[])
        package = module if p and p.name == "__init__.py" else module.rpartition(".")[0]

        def visit(stmts: list[ast.stmt]) -> None:
            for node in stmts:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    defs.setdefault(node.name, []).append(node)
                elif isinstance(node, ast.Assign):
                    for t in node.targets:  # names bound (x = / x, y =), not x.attr = or x[k] =
                        elts = t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t]
                        for n in elts:
                            if isinstance(n, ast.Name):
                                defs.setdefault(n.id, []).append(node)
                elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value:
                    defs.setdefault(node.target.id, []).append(node)
                elif isinstance(node, ast.ImportFrom):
                    mod = _absolute(node.module, node.level, package)
                    for a in node.names:
                        if a.name == "*":
                            stars.append(mod)
                        else:
                            imports[a.asname or a.name] = (mod, a.name)
                elif isinstance(node, ast.Import):
                    for a in node.names:
                        if a.asname:
                            imports[a.asname] = (a.name, None)
                        else:
                            top = a.name.split(".")[0]
                            imports[top] = (top, None)
                elif isinstance(node, ast.If):
                    # `if TYPE_CHECKING:` imports are for annotations only; other ifs: both branches
                    test = ast.unparse(node.test)
                    if "TYPE_CHECKING" not in test:
                        visit(node.body)
                    visit(node.orelse)
                elif isinstance(node, ast.Try):
                    visit(node.body)
                    for h in node.handlers:
                        visit(h.body)

        visit(tree.body)
        self._defs[module], self._imports[module] = defs, imports
        _INDEX[(self.root, module)] = (src, defs, imports, stars)

    def namespace(self, module: str) -> dict[str, Any]:
        if module not in self._ns:
            mod = types.ModuleType(module)  # dataclasses looks the class's module up in sys.modules
            ns: dict[str, Any] = mod.__dict__
            ns["__builtins__"] = self._builtins(module)
            sys.modules[module] = mod
            self._ns[module] = ns
        return self._ns[module]

    def _builtins(self, module: str) -> dict[str, Any]:
        """The module's builtins: Python's, an `__import__` that loads from the wheel, and a
        `__missing__` that resolves any other global on first use (CPython looks a global up
        through a builtins mapping that is not an exact dict with __getitem__)."""
        loader = self
        package = module.rpartition(".")[0]

        def _import(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
            mod = _absolute(name, level, package) if level else name
            if loader.is_sglang(mod) and loader.path(mod) is None and not (loader.root / mod.replace(".", "/")).is_dir():
                raise ImportError(f"No module named {mod!r}")  # as Python would: a fallback SGLang wrote runs
            if fromlist:
                return loader.module(mod)
            return loader.module(mod.split(".")[0]) if not loader.is_sglang(mod) else loader.module(mod)

        class _Lazy(dict):
            def __missing__(self, name: str) -> Any:
                value = loader.resolve(module, name)
                if value is _NOTHING:
                    raise KeyError(name)
                return value

        b = _Lazy(vars(builtins))
        b["__import__"] = _import
        return b

    def module(self, name: str) -> Any:
        if name in self.stubs:
            return self.stubs[name]
        if self.is_sglang(name):
            return _Module(self, name)
        top = name.split(".")[0]
        if top in sys.stdlib_module_names:  # the standard library is itself
            import importlib
            return importlib.import_module(name)
        if top in self.stubs:  # a submodule of a stubbed package: the package's stub serves it
            return self.stubs[top]
        return Unresolved(name)

    # ------------------------------------------------------------ names
    def resolve(self, module: str, name: str) -> Any:
        """A global of `module` read by loaded code: loaded now, or _NOTHING (a NameError)."""
        self._index(module)
        key = f"{module}.{name}"
        if (key in self.stubs or name in self._defs[module] or name in self._imports[module]
                or any(self.is_sglang(st) for st in self._stars.get(module, []))):
            value = self.get(module, name)
            if isinstance(value, Unresolved) and name not in self._imports[module]:
                return _NOTHING
            self.namespace(module)[name] = value
            return value
        return _NOTHING

    def get(self, module: str, name: str) -> Any:
        """`module.name` from the stubs, else from the wheel's source."""
        key = f"{module}.{name}"
        if key in self.stubs:
            return self.stubs[key]
        if not self.is_sglang(module):
            mod = self.module(module)
            return getattr(mod, name, Unresolved(key)) if not isinstance(mod, Unresolved) else Unresolved(key)
        ns = self.namespace(module)
        if name in ns:
            return ns[name]
        self._index(module)
        if name in self._defs[module]:
            if (module, name) in self._loading:
                return Unresolved(key)
            self._loading.add((module, name))
            try:
                for node in self._defs[module][name]:
                    self._exec(module, node)
            finally:
                self._loading.discard((module, name))
            self.used.append(f"{self.path(module).relative_to(self.root)}:{name}")
            return ns.get(name, Unresolved(key))
        if name in self._imports[module]:
            src_mod, attr = self._imports[module][name]
            value = self.module(src_mod) if attr is None else self.get(src_mod, attr)
            ns[name] = value
            return value
        if self.path(f"{module}.{name}"):  # a submodule
            return _Module(self, f"{module}.{name}")
        for star in self._stars.get(module, []):
            if self.is_sglang(star):
                self._index(star)
                if name in self._defs[star] or name in self._imports[star]:
                    ns[name] = self.get(star, name)
                    return ns[name]
        return Unresolved(key)

    def _exec(self, module: str, node: ast.stmt) -> None:
        ns = self.namespace(module)
        first = node.lineno
        code = self._segment(module, node) or ast.unparse(node)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.decorator_list:
            start = first = min(d.lineno for d in node.decorator_list)
            lines = self._src[module].splitlines()[start - 1:node.end_lineno]
            code = "\n".join(lines)
        key = (self.root, module, id(node))
        if key not in _CODE:
            _CODE[key] = compile("\n" * (first - 1) + textwrap.dedent(code), f"<wheel {module}>", "exec")
        exec(_CODE[key], ns)

    def _segment(self, module: str, node: ast.AST) -> str:
        """A statement's source lines (ast.get_source_segment re-splits the file every call)."""
        key = (self.root, module)
        if key not in _LINES:
            _LINES[key] = self._src[module].splitlines()
        lines = _LINES[key][node.lineno - 1:node.end_lineno]
        return "\n".join(lines) + "\n"

    def function_node(self, module: str, func: str, cls: str | None = None) -> ast.FunctionDef:
        """The AST of `module`'s function `func`, or of `cls`'s method `func`: the statements the oracle
        picks from (SGLang's own, as written)."""
        self._index(module)
        if cls is None:
            return next(n for n in self._defs[module][func] if isinstance(n, ast.FunctionDef))
        klass = next(n for n in self._defs[module][cls] if isinstance(n, ast.ClassDef))
        return next(n for n in klass.body if isinstance(n, ast.FunctionDef) and n.name == func)

    def method(self, module: str, cls: str, name: str) -> Any:
        """A class's method as a plain function (to call with a stub `self`)."""
        self._index(module)
        for node in self._defs[module].get(cls, []):
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name == name:
                        ns = self.namespace(module)
                        key = (self.root, module, id(item))
                        if key not in _CODE:
                            code = textwrap.dedent(self._segment(module, item) or "")
                            _CODE[key] = compile("\n" * (item.lineno - 1) + code, f"<wheel {module}.{cls}>", "exec")
                        local: dict[str, Any] = {}
                        exec(_CODE[key], ns, local)
                        fn = local[name]
                        if isinstance(item.decorator_list, list) and any(
                                isinstance(d, ast.Name) and d.id == "staticmethod" for d in item.decorator_list):
                            fn = fn.__func__ if isinstance(fn, staticmethod) else fn
                        if isinstance(fn, property):
                            fn = fn.fget
                        if any(ast.unparse(d) in ("property", "cached_property", "functools.cached_property")
                               for d in item.decorator_list):
                            fn._oracle_property = True  # the decorator is not re-applied: the caller reads it
                        self.used.append(f"{self.path(module).relative_to(self.root)}:{cls}.{name}")
                        return fn
        raise NameError(f"oracle: {module}.{cls}.{name} not in the wheel")

    def run_top_level_calls(self, module: str) -> None:
        """Run the module's top-level call statements (a registry filled at import), as written."""
        src = self.path(module).read_text() if self.path(module) else ""
        ns = self.namespace(module)
        for node in ast.parse(src).body:
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
                code = compile("\n" * (node.lineno - 1) + self._segment(module, node), f"<wheel {module}>", "exec")
                exec(code, ns)
        self.used.append(f"{self.path(module).relative_to(self.root)}:(its top-level registrations)")

    def has(self, module: str, name: str) -> bool:
        self._index(module)
        return name in self._defs[module]


def _absolute(mod: str | None, level: int, package: str) -> str:
    if not level:
        return mod or ""
    parts = package.split(".") if package else []
    parts = parts[: len(parts) - level + 1] if level > 1 else parts
    return ".".join(parts + ([mod] if mod else []))


def _free_names(node: ast.AST) -> set[str]:
    """Names a statement reads (a superset of its free globals: locals are filtered at runtime)."""
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
