"""Throughput of the exact discrete Gaussian sampler (CKS20 Algorithm 3, dphist/privacy/samplers.py).

    .venv/bin/python bench/gaussian_sampler.py            # 10^7 draws per row; about a minute
    .venv/bin/python bench/gaussian_sampler.py --n 1000000

Prints a markdown table of samples per second drawing from SystemBits (the OS CSPRNG, as production does):
our discrete Gaussian at σ = 1, 10, 100, 1000 (σ² = 1, 100, 10^4, 10^6), our discrete Laplace at scale 10 in
the same run for reference, and, when ``opendp`` is importable, OpenDP's discrete Gaussian (``make_gaussian``
over a vector of i64 atoms, scale σ = 10) on 10^6 draws.  The first call at a σ² fills that σ²'s table of
acceptance words; it is counted in the time.  Each figure is one timed run (the machine is shared).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dphist.privacy.bits import SystemBits  # noqa: E402
from dphist.privacy.samplers import (discrete_gaussian, discrete_gaussian_variance, discrete_laplace,  # noqa: E402
                                     discrete_laplace_variance)


def timed(draw, n: int) -> tuple[float, np.ndarray]:
    start = time.perf_counter()
    sample = draw(n)
    return n / (time.perf_counter() - start), sample


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10**7, help="draws per row of ours (default 10^7)")
    parser.add_argument("--opendp-n", type=int, default=10**6, help="draws for OpenDP (default 10^6)")
    args = parser.parse_args()
    bits = SystemBits()
    rows = []
    for sigma in (10, 1, 100, 1000):
        rate, z = timed(lambda n: discrete_gaussian(sigma * sigma, n, bits), args.n)
        rows.append((f"dphist discrete Gaussian, σ = {sigma}", "yes", args.n, rate,
                     f"{z.var() / discrete_gaussian_variance(sigma * sigma):.4f}"))
    rate, z = timed(lambda n: discrete_laplace(10, n, bits), args.n)
    rows.append(("dphist discrete Laplace, scale 10", "yes", args.n, rate, f"{z.var() / discrete_laplace_variance(10):.4f}"))
    try:
        import opendp.prelude as dp
    except ImportError:
        rows.append(("OpenDP discrete Gaussian, σ = 10", "yes", 0, float("nan"), "opendp not installed"))
    else:
        dp.enable_features("contrib")
        space = dp.vector_domain(dp.atom_domain(T=dp.i64)), dp.l2_distance(T=dp.i64)
        meas = dp.m.make_gaussian(*space, scale=10.0)
        zeros = [0] * args.opendp_n
        rate, z = timed(lambda n: np.asarray(meas(zeros)), args.opendp_n)
        from importlib.metadata import version
        rows.append((f"OpenDP {version('opendp')} discrete Gaussian, σ = 10",
                     "yes", args.opendp_n, rate, f"{z.var() / discrete_gaussian_variance(100):.4f}"))
    print("| sampler (SystemBits / OS CSPRNG) | exact | draws | samples/s | sample var / exact var |")
    print("|---|---|---:|---:|---:|")
    for name, exact, n, rate, check in rows:
        print(f"| {name} | {exact} | {n:,} | {rate:,.0f} | {check} |")


if __name__ == "__main__":
    main()
