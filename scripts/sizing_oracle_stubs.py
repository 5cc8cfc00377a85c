"""The stand-ins the sizing oracle gives SGLang's code in place of torch, the GPU and the runtime.

Only what is not sizing arithmetic is stubbed: torch's dtypes (their byte widths), numpy's
prod/sum, msgspec's Struct and transformers' PretrainedConfig as plain attribute holders, the
GPU readings (free memory, capacity) and SGLang's server-args context (`get_schedule()` & co.,
`resolving_view`, `declare_resolution`) as one attribute bag holding the case's flags.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import types
from typing import Any


class DType:
    def __init__(self, name: str, itemsize: int):
        self.name, self.itemsize = name, itemsize

    def __repr__(self) -> str:
        return f"torch.{self.name}"


def fake_torch() -> types.SimpleNamespace:
    dt = {n: DType(n, s) for n, s in [("float32", 4), ("float16", 2), ("bfloat16", 2), ("float8_e4m3fn", 1),
                                       ("float8_e5m2", 1), ("int64", 8), ("int32", 4), ("uint8", 1),
                                       ("int8", 1), ("float4_e2m1fn_x2", 1), ("float64", 8)]}
    t = types.SimpleNamespace(**dt)
    t.float = dt["float32"]
    t.half = dt["float16"]
    t.dtype = DType
    t.Tensor = type("Tensor", (), {})
    t._utils = types.SimpleNamespace(_element_size=lambda d: d.itemsize)
    t.iinfo = lambda d: types.SimpleNamespace(max=2 ** (8 * d.itemsize - 1) - 1)
    t.finfo = lambda d: types.SimpleNamespace(bits=8 * d.itemsize)
    t.cuda = types.SimpleNamespace(is_available=lambda: True, get_device_capability=lambda *a: (9, 0))
    t.distributed = types.SimpleNamespace(is_initialized=lambda: False)
    t.version = types.SimpleNamespace(cuda="12.8", hip=None)
    t.__name__ = "torch"
    return t


def fake_numpy() -> types.SimpleNamespace:
    return types.SimpleNamespace(prod=lambda xs: math.prod(xs), sum=lambda xs: sum(xs))


class Struct:
    """msgspec.Struct as a keyword-initialised holder with class-level defaults."""

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__()

    def __init__(self, **kw: Any) -> None:
        for k, v in kw.items():
            object.__setattr__(self, k, v)

    def __getattr__(self, k: str) -> Any:
        raise AttributeError(f"{type(self).__name__}.{k}")


def fake_msgspec() -> types.SimpleNamespace:
    return types.SimpleNamespace(Struct=Struct, field=lambda default=None, **k: default, UNSET=None,
                                 structs=types.SimpleNamespace(replace=dataclasses.replace))


class PretrainedConfig:
    """transformers.PretrainedConfig as an attribute holder of config.json's fields."""

    model_type = ""

    def __init__(self, **kw: Any) -> None:
        for k, v in kw.items():
            if isinstance(v, dict) and k.endswith("_config"):
                v = PretrainedConfig(**v)
            try:
                setattr(self, k, v)
            except AttributeError:  # a property of the real class
                pass

    def get_text_config(self, decoder: bool = False) -> Any:
        return getattr(self, "text_config", None) or self

    def to_dict(self) -> dict:
        return dict(vars(self))


class _Transformers(types.SimpleNamespace):
    """transformers: any other class it exports (a model's config class SGLang subclasses or
    isinstance-checks) is a distinct PretrainedConfig subclass of that name."""

    def __getattr__(self, k: str) -> Any:
        if k[:1].isupper():
            cls = type(k, (PretrainedConfig,), {})
            setattr(self, k, cls)
            return cls
        raise AttributeError(k)


def fake_transformers() -> types.SimpleNamespace:
    return _Transformers(PretrainedConfig=PretrainedConfig, PreTrainedConfig=PretrainedConfig,
                         __version__="4.57.0", logging=types.SimpleNamespace(get_logger=logging.getLogger),
                         rope_config_validation=lambda *a, **k: None)  # a config check, no sizing


class Bag:
    """An attribute bag that names the attribute SGLang read and the case did not give."""

    def __init__(self, name: str, **kw: Any):
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_d", dict(kw))

    def __getattr__(self, k: str) -> Any:
        d = object.__getattribute__(self, "_d")
        if k in d:
            return d[k]
        raise AttributeError(f"oracle: {object.__getattribute__(self, '_name')}.{k} not set by the case")

    def __setattr__(self, k: str, v: Any) -> None:
        self._d[k] = v

    def set(self, **kw: Any) -> None:
        self._d.update(kw)

    def has(self, k: str) -> bool:
        return k in self._d


class EnvVar:
    def __init__(self, default: Any):
        self.default = default

    def get(self) -> Any:
        return self.default

    def is_set(self) -> bool:
        return False

    def set(self, v: Any) -> None:
        self.default = v


class Envs:
    """SGLang's `envs` with every variable unset: each `get()` is its default as the wheel's
    sglang/srt/environ.py declares it (`NAME = EnvBool(False)`), read by AST."""

    def __init__(self, defaults: dict[str, Any]):
        self._defaults = defaults

    def __getattr__(self, k: str) -> EnvVar:
        if k.startswith("__"):
            raise AttributeError(k)
        if k not in self._defaults:
            raise AttributeError(f"oracle: environ.py declares no {k}")
        return EnvVar(self._defaults[k])


_ENV_DEFAULTS: dict[str, dict[str, Any]] = {}  # wheel root → environ.py's defaults: parsed once a run


def envs_from_wheel(root: Any) -> Envs:
    if str(root) not in _ENV_DEFAULTS:
        _ENV_DEFAULTS[str(root)] = _env_defaults(root)
    return Envs(dict(_ENV_DEFAULTS[str(root)]))


def _env_defaults(root: Any) -> dict[str, Any]:
    import ast
    from pathlib import Path

    defaults: dict[str, Any] = {}
    p = Path(root) / "sglang/srt/environ.py"
    if p.is_file():
        for node in ast.walk(ast.parse(p.read_text())):
            if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and len(node.targets) == 1
                    and isinstance(node.targets[0], ast.Name)):
                args = node.value.args
                try:
                    defaults[node.targets[0].id] = ast.literal_eval(args[0]) if args else None
                except ValueError:
                    defaults[node.targets[0].id] = None
    return defaults


def quiet_logging() -> None:
    logging.disable(logging.WARNING)
