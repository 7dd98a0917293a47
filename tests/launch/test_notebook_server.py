"""The notebook front end on a fresh machine: `jupyter lab` starts headless, serves the
notebooks through its REST API (the contents API), opens the jupytext-paired `.py` as a
notebook (the pairing is live, not just the files), refuses a wrong token, and shuts down
without leaving a process behind."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from ppx_helpers import ROOT

NOTEBOOKS = ("compare", "postmortem", "flip_timeline")
BOOT_S = 120.0  # jupyter's first start imports a lot; the machine is small and shared


def free_port() -> int:
    from ppx.supervisor import free_port as fp

    return fp()


def api(base: str, path: str, token: str, method: str = "GET") -> tuple[int, dict]:
    req = urllib.request.Request(f"{base}{path}", method=method)
    req.add_header("Authorization", f"token {token}")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            body = r.read()
            return r.status, json.loads(body) if body else {}
    except urllib.error.HTTPError as e:
        return e.code, {}


@pytest.fixture
def server(tmp_path: Path):
    pytest.importorskip("jupyterlab")
    port, token = free_port(), secrets.token_hex(16)
    env = dict(
        os.environ,
        JUPYTER_CONFIG_DIR=str(tmp_path / "cfg"),  # the user's own ~/.jupyter stays out of it
        JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"),
        JUPYTER_DATA_DIR=str(tmp_path / "data"),
    )
    log = open(tmp_path / "jupyter.log", "w")
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "jupyterlab", "--no-browser",
            "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
            "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
            f"--ServerApp.root_dir={os.path.join(ROOT, 'notebooks')}",
            # containers and CI often run as root, which jupyter refuses without this flag
            *(["--allow-root"] if os.geteuid() == 0 else []),
        ],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group: the no-orphan check below reads it
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + BOOT_S
        while True:
            assert proc.poll() is None, (tmp_path / "jupyter.log").read_text()[-3000:]
            try:
                if api(base, "/api/status", token)[0] == 200:
                    break
            except OSError:
                pass
            assert time.time() < deadline, "jupyter lab did not answer within the boot budget"
            time.sleep(0.5)
        yield proc, base, token
    finally:
        if proc.poll() is None:  # the test failed before its own shutdown: no orphan either way
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        log.close()


def test_jupyter_lab_serves_the_notebooks_and_shuts_down(server) -> None:
    proc, base, token = server
    status, listing = api(base, "/api/contents", token)
    assert status == 200
    names = {item["name"] for item in listing["content"]}
    for nb in NOTEBOOKS:
        assert f"{nb}.ipynb" in names and f"{nb}.py" in names, names
        status, model = api(base, f"/api/contents/{nb}.ipynb", token)
        assert status == 200 and model["type"] == "notebook", (nb, status)
        cells = model["content"]["cells"]
        assert any("ppx.analysis" in "".join(c["source"]) for c in cells), nb
        # jupytext's contents manager is active: the paired py:percent file opens as a notebook
        status, paired = api(base, f"/api/contents/{nb}.py", token)
        assert status == 200 and paired["type"] == "notebook", (nb, status, paired.get("type"))
        assert len(paired["content"]["cells"]) == len(cells), nb
    # the red arm: the token is really checked
    assert api(base, "/api/contents", "not-" + token)[0] == 403
    assert api(base, "/api/shutdown", token, method="POST")[0] == 200
    proc.wait(60)
    with pytest.raises(ProcessLookupError):  # nothing of the server's group is left
        os.killpg(proc.pid, 0)
