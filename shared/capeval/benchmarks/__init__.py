"""Human-judgment benchmarks in one schema (candidate, references, human score per judgment row), read from the
raw releases with the literature's protocol, and ``capeval benchmark`` (see :mod:`capeval.benchmarks.runner`)."""

from capeval.benchmarks.loaders import BENCHMARKS, Benchmark, load

__all__ = ["BENCHMARKS", "Benchmark", "load"]
