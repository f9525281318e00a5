"""For checking an adapter against its trainer's real code: with AGENTWORLD_UPSTREAM naming a
checkout of the trainer's repository (or the folder of its package), a driver imports the real base
classes from there instead of its stand-ins. Heavy modules (torch, ray, vllm, pandas, ...) are
stubbed with permissive empty modules, so only the trainer's own Python runs. CI uses the
stand-ins; nothing of upstream is part of this repository."""
import importlib.abc
import importlib.machinery
import sys
import types

HEAVY = {"torch", "ray", "vllm", "pandas", "numpy", "transformers", "datasets", "deepspeed", "flash_attn",
         "omegaconf", "hydra", "wandb", "tensordict", "peft", "accelerate", "sqlite3_stub", "openai", "httpx",
         "aiohttp", "jinja2", "tqdm", "func_timeout", "modelscope", "swift_heavy", "loguru",
         "pydantic", "fastapi", "uvicorn", "tiktoken", "safetensors", "sympy", "math_verify", "pylatexenc", "codetiming",
         "jaxtyping", "bs4", "faiss", "litellm", "sentencepiece", "mcp"}


class _Any(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        m = _Any(self.__name__ + "." + name)
        m.__path__ = []
        setattr(self, name, m)
        return m

    def __call__(self, *a, **k):
        return _Any(self.__name__ + "()")

    def __getitem__(self, key):
        return _Any(self.__name__ + "[]")

    def __iter__(self):
        return iter(())

    def __or__(self, other):  # type hints such as DictConfig | dict
        return self

    __ror__ = __or__

    def __mro_entries__(self, bases):
        return (object,)


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in HEAVY:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        m = _Any(spec.name)
        m.__path__ = []
        return m

    def exec_module(self, module):
        pass


def install(*paths, extra=()):
    """Puts paths first on sys.path and stubs the heavy modules (plus extra)."""
    HEAVY.update(extra)
    sys.path[:0] = list(paths)
    sys.meta_path.insert(0, _Finder())
