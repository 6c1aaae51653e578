"""One local 2-CPU Ray for consecutive Ray test modules: starting and stopping a Ray instance costs about 10 seconds,
and an idle one about 4 % of a core, so it starts with the first module that asks for it (``ray_session``) and stops
at the first module that does not."""

import os
import sys

import pytest

RAY_WORKER_ENV = ("HF_HUB_CACHE", "HF_HUB_OFFLINE", "HF_EVALUATE_OFFLINE", "HF_DATASETS_OFFLINE",
                  "TRANSFORMERS_OFFLINE", "CAPEVAL_CACHE", "TOKENIZERS_PARALLELISM")


def _shutdown_ray():
    ray = sys.modules.get("ray")  # never imported for modules that do not use it
    if ray is not None and ray.is_initialized():
        ray.shutdown()


@pytest.fixture(scope="module", autouse=True)
def ray_only_where_used(request):
    """A module without a ``local_ray`` fixture runs without the Ray an earlier module started."""
    if not hasattr(request.module, "local_ray"):
        _shutdown_ray()


@pytest.fixture(scope="module")
def ray_session(tiny_hub):
    """A local Ray (never another address), started unless running; its workers get the tiny hub cache and the
    offline settings."""
    ray = pytest.importorskip("ray")
    if not ray.is_initialized():
        env = {k: os.environ[k] for k in RAY_WORKER_ENV if k in os.environ}
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, object_store_memory=256 * 2**20,
                 runtime_env={"env_vars": {**env, "OMP_NUM_THREADS": "1"}})
    return ray


@pytest.fixture(scope="session", autouse=True)
def no_ray_left():
    yield
    _shutdown_ray()
