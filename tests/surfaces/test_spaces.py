"""``capeval publish-spaces --dry-run DIR``: Space folders that install and start on their own.

Always on: the folders (wheel, requirements, system packages, card YAML) and every app started from its folder in
this venv with tiny weights, with ``java`` off PATH unless the Space declares a Java runtime in ``packages.txt``
(the Hub's image has none). Opt-in (``CAPEVAL_SPACES_E2E=1``, or a comma-separated list of modules; default
``hice_s``, the heaviest): what the Hub does, in a fresh venv without system site-packages: ``pip install -r
requirements.txt`` plus the pinned gradio from a folder holding only ``requirements.txt`` (the Hub installs it
before it copies the repository), the wheel served by URL from 127.0.0.1 as the Hub serves ``resolve/main``,
``python app.py`` on 127.0.0.1 with tiny weights, and the page rendered by headless Chromium. It prints the venv
build and start times.
"""

import functools
import http.server
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import venv
import zipfile
from pathlib import Path

import pytest

from capeval.cli import main
from capeval.cli.publish_spaces import WHEEL_URL, card_fields, space_requirements, system_packages
from capeval.core.errors import InputError
from capeval.core.version import __version__
from capeval.modules import available_modules

gradio = pytest.importorskip("gradio")

CHROMIUM = "/usr/bin/chromium"
E2E = os.environ.get("CAPEVAL_SPACES_E2E", "")


@pytest.fixture(scope="module")
def spaces(tmp_path_factory, source_tree_lock):
    out = tmp_path_factory.mktemp("spaces")
    with source_tree_lock:  # the wheel is built in the checkout
        assert main(["publish-spaces", "--output", str(out)]) == 0
    return out


def module_extras(name):
    (line,) = [ln for ln in (available_modules()[name] / "requirements.txt").read_text().splitlines()
               if ln.startswith("capeval")]
    return re.fullmatch(r"capeval(\[[\w,]+\])?", line).group(1) or ""


def test_dry_run_writes_a_space_folder_per_module_with_the_wheel(spaces):
    modules = available_modules()
    assert sorted(p.name for p in spaces.iterdir()) == sorted(modules)
    for name, source in modules.items():
        folder = spaces / name
        (wheel,) = folder.glob("capeval-*.whl")
        assert wheel.name == f"capeval-{__version__}-py3-none-any.whl"
        assert {"app.py", "README.md", f"{name}.py", "requirements.txt", "packages.txt"} <= \
            {p.name for p in folder.iterdir()}
        assert (folder / "packages.txt").read_text().split() == (source / "packages.txt").read_text().split()
        for kept in ("app.py", "README.md", f"{name}.py"):
            assert (folder / kept).read_bytes() == (source / kept).read_bytes(), kept
        url = WHEEL_URL.format(repo_id=f"capeval/{name}", name=name, wheel=wheel.name)
        assert (folder / "requirements.txt").read_text().splitlines() == [f"capeval{module_extras(name)} @ {url}"]
        with zipfile.ZipFile(wheel) as archive:
            files = set(archive.namelist())
            metadata = archive.read(f"capeval-{__version__}.dist-info/METADATA").decode()
        assert {"capeval/demo.py", "capeval/testing/__init__.py",
                f"capeval/evaluate_modules/{source.parent.name}/{name}/app.py"} <= files
        for extra in filter(None, module_extras(name).strip("[]").split(",")):
            assert f"Provides-Extra: {extra}" in metadata, extra


def test_cards_pin_the_gradio_and_python_these_tests_ran(spaces):
    """The Hub installs ``gradio==sdk_version`` on ``python_version``: both are what the apps are served with here
    (the gradio 5.0.0 that the cards used to pin imports ``HfFolder``, gone from today's huggingface_hub)."""
    for name in available_modules():
        fields = card_fields(spaces / name / "README.md")
        assert fields["sdk_version"] == gradio.__version__, f"{name}: pin sdk_version to the tested gradio"
        assert fields["python_version"] == f"{sys.version_info.major}.{sys.version_info.minor}", name
        assert (spaces / name / fields["app_file"]).is_file()


def test_requirements_and_card_errors(tmp_path):
    assert space_requirements("# demo\ncapeval[hice]\n\nextra-package>=1\n", "https://x/w.whl") == \
        "# demo\ncapeval[hice] @ https://x/w.whl\nextra-package>=1\n"
    with pytest.raises(InputError, match="no capeval line"):
        space_requirements("torch\n", "https://x/w.whl")
    (tmp_path / "README.md").write_text("# no header\n")
    with pytest.raises(InputError, match="no YAML header"):
        card_fields(tmp_path / "README.md")
    assert main(["publish-spaces", "--output", str(tmp_path / "out"), "--wheel", str(tmp_path / "README.md")]) == 2
    with pytest.raises(InputError, match="packages.txt is missing"):
        system_packages(tmp_path)
    (tmp_path / "packages.txt").write_text("default-jre-headless\nlibgl1 # comment\n")
    with pytest.raises(InputError, match=r"not Debian package names: \['#'\]"):
        system_packages(tmp_path)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def declares_java(folder: Path) -> bool:
    return any(re.search(r"-(jre|jdk)(-headless)?$", name) for name in (folder / "packages.txt").read_text().split())


def path_without(program: str, bin_dir: Path) -> str:
    """A PATH finding everything the current one does but ``program``: ``bin_dir`` holding links to the rest."""
    bin_dir.mkdir(exist_ok=True)
    for directory in os.environ["PATH"].split(os.pathsep):
        for entry in sorted(Path(directory).glob("*")) if Path(directory).is_dir() else ():
            link = bin_dir / entry.name
            if entry.name != program and not os.path.lexists(link) and os.access(entry, os.X_OK):
                link.symlink_to(entry.resolve())
    return str(bin_dir)


def start_app(python, folder: Path, hub_cache: Path, path: str = None):
    """``python app.py`` in ``folder`` as the Hub starts a Space, on 127.0.0.1, offline, with the tiny weights."""
    port = free_port()
    env = {**os.environ, "PATH": path or os.environ["PATH"], "GRADIO_SERVER_NAME": "127.0.0.1",
           "GRADIO_SERVER_PORT": str(port),
           "GRADIO_ANALYTICS_ENABLED": "False", "HF_HUB_CACHE": str(hub_cache), "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1"}
    log = open(folder / "app.log", "w")
    process = subprocess.Popen([str(python), "app.py"], cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT)
    return process, f"http://127.0.0.1:{port}/"


def wait_until_served(process, url: str, log: Path, timeout: float = 1500) -> dict:
    start = time.perf_counter()
    while time.perf_counter() - start < timeout:
        if process.poll() is not None:
            pytest.fail(f"the app exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url + "config", timeout=5) as response:
                return json.loads(response.read())
        except OSError:
            time.sleep(1)
    pytest.fail(f"not served after {timeout} s:\n{log.read_text()[-3000:]}")


def stop(process):
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()


def test_every_app_starts_from_its_built_space_folder(spaces, tiny_hub, tmp_path):
    """Each Space folder's ``app.py`` (started as the Hub starts it, in this venv, with ``java`` off PATH unless
    its ``packages.txt`` installs a Java runtime) serves its page; a metric's opens with the first example scored
    with the tiny weights, says that they are tiny random test weights, and carries the metric card."""
    no_java = path_without("java", tmp_path / "bin-without-java")
    assert subprocess.run(["sh", "-c", "command -v java"], env={"PATH": no_java}).returncode != 0
    started = {name: start_app(sys.executable, spaces / name, tiny_hub,
                               None if declares_java(spaces / name) else no_java)
               for name in sorted(available_modules())}
    try:
        for name, (process, url) in started.items():
            config = json.dumps(wait_until_served(process, url, spaces / name / "app.log"))
            if available_modules()[name].parent.name == "metrics":  # the scorer demos (capeval.demo.build_demo)
                assert "Metric card" in config and "tiny random TEST weights" in config, name
                assert "hashcode" in config, name
    finally:
        for process, _ in started.values():
            stop(process)


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.mark.skipif(not E2E, reason="opt-in: CAPEVAL_SPACES_E2E=1 (a fresh venv with torch: GBs from PyPI)")
@pytest.mark.timeout(2400)  # a venv with torch takes 8-15 min to build on a busy 2-core machine
@pytest.mark.parametrize("name", ["hice_s"] if E2E in ("", "1") else E2E.split(","))
def test_space_installs_in_a_fresh_venv_starts_and_renders(tmp_path, name, source_tree_lock):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler,
                                                                                directory=str(tmp_path / "spaces")))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with source_tree_lock:
            assert main(["publish-spaces", "--output", str(tmp_path / "spaces"), "--modules", name,
                         "--wheel-url", base + "/{name}/{wheel}"]) == 0
        figures = fresh_venv_run(tmp_path, tmp_path / "spaces" / name)
        print(f"\n{name}: {json.dumps(figures)}")
    finally:
        server.shutdown()


# run by the fresh venv's python: a tiny model for every registered weight whose libraries the Space installs
TINY_WEIGHTS_THIS_SPACE_CAN_BUILD = """
import sys
from capeval.core.hub import registered_weights
from capeval.testing import populate_tiny_hub_cache
for name in registered_weights():
    try:
        populate_tiny_hub_cache(sys.argv[1], [name])
    except ImportError:  # e.g. diffusers' weights in a Space without the roundtrip extra
        pass
"""


def fresh_venv_run(tmp_path: Path, folder: Path) -> dict:
    fields = card_fields(folder / "README.md")
    env_dir = tmp_path / f"venv-{folder.name}"
    mounted = tmp_path / f"requirements-only-{folder.name}"
    mounted.mkdir()
    (mounted / "requirements.txt").write_text((folder / "requirements.txt").read_text())
    start = time.perf_counter()
    venv.EnvBuilder(with_pip=True, system_site_packages=False).create(env_dir)
    python = env_dir / "bin" / "python"
    install = subprocess.run([str(python), "-m", "pip", "install", "-q", "-r", "requirements.txt",
                              f"gradio[oauth]=={fields['sdk_version']}"], cwd=mounted, capture_output=True, text=True)
    assert install.returncode == 0, install.stderr[-3000:]
    figures = {"venv_build_s": round(time.perf_counter() - start, 1)}
    hub = tmp_path / f"hub-{folder.name}"
    subprocess.run([str(python), "-c", TINY_WEIGHTS_THIS_SPACE_CAN_BUILD, str(hub)], check=True,
                   env={**os.environ, "HF_HUB_OFFLINE": "1"})
    start = time.perf_counter()
    process, url = start_app(python, folder, hub)
    try:
        config = json.dumps(wait_until_served(process, url, folder / "app.log"))
        figures["start_s"] = round(time.perf_counter() - start, 1)
        shot = tmp_path / f"{folder.name}.png"
        dom = render(url, tmp_path, shot)
    finally:
        stop(process)
    assert shot.stat().st_size > 10_000
    assert "card" in dom  # the metric (or measurement) card's accordion, rendered by the front end
    if available_modules()[folder.name].parent.name == "metrics":
        assert "tiny random TEST weights" in config and "Metric card" in dom
    return figures


def render(url: str, tmp_path: Path, shot: Path) -> str:
    """Headless Chromium: a screenshot at phone width, and the DOM once the front end has rendered."""
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: apt-get install -y chromium")
    flags = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             f"--user-data-dir={tmp_path / 'profile'}", "--window-size=390,2000", "--virtual-time-budget=20000"]
    subprocess.run([*flags, f"--screenshot={shot}", url], check=True, capture_output=True, timeout=180)
    return subprocess.run([*flags, "--dump-dom", url], check=True, capture_output=True, text=True, timeout=180).stdout
