"""Optimised range strategies cached on disk by workload, shape and noise, so a nightly job optimises each once
(docs/algorithms.md §12).

One small .npz per axis strategy (a 2-D product strategy is made of 1-D ones, cached and shared by size), named by
a deterministic key of everything that determines it: the workload kind, n, the noise, the p tried, the restarts,
the seed, the iteration cap and the file format.  A strategy is public (it depends on the shape alone), so the
cache holds nothing private.

A file that cannot be read, or whose contents do not match its key (another workload, n or noise; a Θ of the wrong
shape, negative or not finite), is ignored: the strategy is optimised again and the file rewritten.  Writes go to a
temporary file in the same directory, then ``os.replace``: a reader sees the old file or the new one, never part
of one.  A cache that cannot be written is not an error: the strategy optimised is used all the same, and one
warning per directory says that it was not stored (the next run optimises again).

Where: :func:`default_cache_dir`, the directory named by the environment variable ``DPHIST_CACHE_DIR``, else
``$XDG_CACHE_HOME/dphist/strategies``, else ``~/.cache/dphist/strategies``.
"""

from __future__ import annotations

import os
import tempfile
import warnings
import zipfile
from pathlib import Path
from typing import Callable

import numpy as np

from .optimized import KroneckerStrategy, PIdentityStrategy, default_p_choices, optimise_p_identity
from .range_grams import KroneckerGram, RangeGram, range_gram

__all__ = ["FORMAT", "CACHE_ENV", "cache_key", "cached_strategy", "default_cache_dir", "is_cached"]

#: The file format's version: part of every key, so a change of layout never reads an old file.
FORMAT = 1
#: The environment variable that names the cache directory (tests point it at a temporary one).
CACHE_ENV = "DPHIST_CACHE_DIR"
_warned: set[str] = set()  # the directories already warned about (once each per process)


def default_cache_dir() -> Path:
    """``$DPHIST_CACHE_DIR`` if set and not empty, else ``$XDG_CACHE_HOME/dphist/strategies``, else
    ``~/.cache/dphist/strategies``; read at each call, so a change of the environment takes effect."""
    named = os.environ.get(CACHE_ENV)
    if named:
        return Path(named)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "dphist" / "strategies"


def cache_key(kind: str, n: int, noise: str, p_choices, restarts: int, seed: int, max_iter: int) -> str:
    """The file stem of a 1-D strategy: every setting that determines the optimised result."""
    ps = "-".join(str(int(p)) for p in p_choices)
    return f"{kind}-n{int(n)}-{noise}-p{ps}-r{int(restarts)}-s{int(seed)}-i{int(max_iter)}-v{FORMAT}"


def _read(path: Path, gram: RangeGram, noise: str) -> PIdentityStrategy | None:
    """The strategy stored at ``path``, or None if it is missing, unreadable or does not match."""
    try:
        with np.load(path, allow_pickle=False) as data:
            theta = np.array(data["theta"], dtype=np.float64)
            fields = {name: data[name].item() for name in ("workload", "n", "noise", "objective", "seed",
                                                           "iterations", "format")}
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
        return None
    if (fields["format"] != FORMAT or fields["workload"] != gram.kind or fields["n"] != gram.n
            or fields["noise"] != noise or theta.ndim != 2 or theta.shape[1] != gram.n or theta.shape[0] < 1
            or not np.all(np.isfinite(theta)) or np.any(theta < 0) or not np.isfinite(fields["objective"])):
        return None
    theta.setflags(write=False)
    return PIdentityStrategy(gram.kind, gram.n, noise, theta, float(fields["objective"]), int(fields["seed"]),
                             int(fields["iterations"]))


def _write(path: Path, strategy: PIdentityStrategy) -> None:
    """Store ``strategy`` at ``path`` atomically (a temporary file in the same directory, then os.replace)."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=path.stem + ".", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as out:
            np.savez(out, theta=strategy.theta, workload=np.array(strategy.workload), n=np.array(strategy.n),
                     noise=np.array(strategy.noise), objective=np.array(strategy.objective),
                     seed=np.array(strategy.seed), iterations=np.array(strategy.iterations),
                     format=np.array(FORMAT))
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def _path(directory: Path, axis: RangeGram, noise: str, choices, restarts: int, seed: int, max_iter: int) -> Path:
    return directory / (cache_key(axis.kind, axis.n, noise, choices, restarts, seed, max_iter) + ".npz")


def is_cached(kind: str, n: int, noise: str, cache_dir, *, p_choices=None, restarts: int = 2, seed: int = 0,
              max_iter: int = 1500) -> bool:
    """Whether ``cache_dir`` holds a readable, matching strategy for one column of ``n`` cells (the settings as
    :func:`cached_strategy` takes them): what a run would read instead of optimising."""
    axis = RangeGram(kind, int(n))
    choices = default_p_choices(axis.n, noise) if p_choices is None else tuple(int(p) for p in p_choices)
    return _read(_path(Path(cache_dir), axis, noise, choices, restarts, seed, max_iter), axis, noise) is not None


def _store(directory: Path, path: Path, strategy: PIdentityStrategy) -> None:
    """Write ``strategy`` to ``path``; a failure (a read-only or full disk, no permission) is a warning, once per
    directory, never an error: the strategy in hand is as good as a stored one."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        _write(path, strategy)
    except OSError as exc:
        if str(directory) not in _warned:
            _warned.add(str(directory))
            warnings.warn(f"the strategy cache {directory} cannot be written ({exc.strerror or exc}): the optimised "
                          "strategy is used but not stored, so the next run optimises it again", stacklevel=3)


def cached_strategy(kind: str, shape, noise: str, cache_dir, *, p_choices=None, restarts: int = 2, seed: int = 0,
                    max_iter: int = 1500,
                    optimise: Callable[..., PIdentityStrategy] = optimise_p_identity
                    ) -> PIdentityStrategy | KroneckerStrategy:
    """The optimised strategy for the range workload ``kind`` over ``shape`` under ``noise`` ("l2" or "l1"): read
    from ``cache_dir`` when a matching file is there, else optimised by ``optimise`` (called as
    :func:`~.optimized.optimise_p_identity`: gram, noise, p_choices=, restarts=, seed=, max_iter=) and stored
    (where it can be: see the module docstring).  Several axes give OPT_⊗, one cached strategy per axis.
    ``cache_dir`` None: :func:`default_cache_dir`."""
    gram = range_gram(kind, shape)
    directory = default_cache_dir() if cache_dir is None else Path(cache_dir)
    factors = []
    for axis in (gram.factors if isinstance(gram, KroneckerGram) else (gram,)):
        choices = default_p_choices(axis.n, noise) if p_choices is None else tuple(int(p) for p in p_choices)
        path = _path(directory, axis, noise, choices, restarts, seed, max_iter)
        strategy = _read(path, axis, noise)
        if strategy is None:
            strategy = optimise(axis, noise, p_choices=choices, restarts=restarts, seed=seed, max_iter=max_iter)
            _store(directory, path, strategy)
        factors.append(strategy)
    return KroneckerStrategy(tuple(factors)) if isinstance(gram, KroneckerGram) else factors[0]
