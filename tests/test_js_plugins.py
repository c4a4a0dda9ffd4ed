"""The JavaScript plugin modules' own tests (node's built-in runner), run as part of pytest.

The JS tests drive plugins/openclaw/index.js and plugins/opencode/index.js against a fake host API
and a fake ``memsearch`` on PATH that logs its argv; they live beside the other hook fixtures
(tests/fixtures/hooks/<platform>/) because plugins/ holds only manifests, skills and short modules.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures" / "hooks"
ROOT = Path(__file__).resolve().parents[1]


def test_js_plugin_tests_pass() -> None:
    node = shutil.which("node")
    assert node is not None, "node (v20 or newer) must be on PATH to test the JavaScript plugins"
    suites = sorted(str(p.relative_to(ROOT)) for p in FIXTURES.glob("*/*.test.mjs"))
    assert len(suites) >= 1, "no JavaScript plugin tests found"
    proc = subprocess.run([node, "--test", *suites], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "# fail 0" in proc.stdout
