"""Human-judgment benchmarks in one schema, read from the raw releases with the literature's protocol, and
``capeval benchmark`` (see :mod:`capeval.benchmarks.runner`)."""

from capeval.benchmarks.catalog import BENCHMARKS, load
from capeval.benchmarks.loaders import Benchmark
from capeval.benchmarks.pairwise import PairwiseBenchmark

__all__ = ["BENCHMARKS", "Benchmark", "PairwiseBenchmark", "load"]
