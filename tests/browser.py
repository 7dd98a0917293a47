"""Headless Chromium (Debian's `chromium` package; scripts/setup.sh installs it) reading a
page's DOM after its scripts ran (helpers for the tests; imported by name)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile

FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]  # fmt: skip


def rendered_dom(path: str, timeout: float = 60) -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    assert exe, "chromium is not installed (bash scripts/setup.sh installs Debian's package)"
    with tempfile.TemporaryDirectory(prefix="ppx-chromium-") as profile:
        out = subprocess.run(
            [exe, *FLAGS, f"--user-data-dir={profile}", "--dump-dom", f"file://{path}"],
            capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout
