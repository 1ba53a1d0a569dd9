"""`pip install ./Backends/python` works in a fresh virtual environment, and the installed
package (not the source folder) runs the seed's line."""

import os
import shutil
import subprocess
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(os.environ.get("RB_SKIP_INSTALL") == "1", reason="RB_SKIP_INSTALL=1")
def test_pip_install_in_a_fresh_venv(tmp_path):
    # --system-site-packages: setuptools (and wheel) may come from this Python, with no network
    # (--no-index --no-build-isolation). Where they cannot build a wheel (setuptools < 70.1
    # without the wheel package), pip's ordinary isolated build fetches them from the registry.
    # Installed from a copy, so that the build's own files (build/, *.egg-info) stay out of the tree.
    source = tmp_path / "realtime-backend"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__", ".pytest_cache", ".benchmarks"))
    venv.EnvBuilder(system_site_packages=True, with_pip=True).create(tmp_path / "venv")
    python = tmp_path / "venv" / ("Scripts" if os.name == "nt" else "bin") / "python"
    offline = [str(python), "-m", "pip", "install", "--no-index", "--no-build-isolation", "--no-deps", "-q", str(source)]
    install = subprocess.run(offline, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    if install.returncode != 0:
        isolated = [str(python), "-m", "pip", "install", "--no-deps", "-q", str(source)]
        install = subprocess.run(isolated, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert install.returncode == 0, install.stdout + install.stderr
    script = (
        "import realtime_backend, sys\n"
        "from realtime_backend import Realtime, canonical_json\n"
        "assert 'site-packages' in realtime_backend.__file__, realtime_backend.__file__\n"
        "orders = {'1042': type('O', (), {'user_id': 'ann'})()}\n"
        "find_order = orders.get\n"
        "realtime = Realtime(app_key='k', app_secret='s', clock=lambda: 0)\n"
        "realtime.room('order:{id}', lambda user, p: (order := find_order(p['id'])) is not None and order.user_id == user, history=20)\n"
        "print(canonical_json({n: sorted(e) for n, e in realtime.authorize_rooms(['order:1042', 'order:7'], 'ann')['rooms'].items()}))\n"
    )
    run = subprocess.run([str(python), "-c", script], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == '{"order:1042":["expires","token"],"order:7":["error"]}'
    shown = subprocess.run([str(python), "-m", "pip", "show", "realtime-backend"], capture_output=True, text=True, timeout=60)
    assert "Name: realtime-backend" in shown.stdout and "Requires: \n" in shown.stdout + "\n"
