"""Building the optimised copy of an ONNX graph, in a child process that loads only onnxruntime.

Folding the packaged model's int8 weights into float32 (what ``memsearch.models.onnx_runtime.
optimized_copy`` saves once) peaks at ~215 MB over the size of the process that does it, and a
process rarely returns that memory afterwards. So it runs in a child process of this interpreter,
which imports nothing but this module and onnxruntime (~270 MB at its peak, over before the store
opens); only where no child can start (an application embedding Python) does the caller build it
in its own process. This module imports only the standard library until it builds.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

logger = logging.getLogger("memsearch.onnx")

#: What the child runs: this interpreter's import path, then :func:`build_optimized`.
_CHILD = (
    "import json, sys; sys.path[:0] = json.loads(sys.argv[3]); from pathlib import Path; "
    "from memsearch.models.onnx_build import build_optimized; "
    "build_optimized(Path(sys.argv[1]), Path(sys.argv[2]))"
)


def build_optimized(source: Path, target: Path) -> None:
    """Save ``source``'s graph as onnxruntime optimises it to ``target`` (weights beside it)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    # EXTENDED, not ALL: what ALL adds is layout work tuned to this CPU, not worth saving.
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.log_severity_level = 3  # warnings about unused initialisers are noise to users
    options.optimized_model_filepath = str(target)
    options.add_session_config_entry("session.optimized_model_external_initializers_file_name", "weights")
    options.add_session_config_entry(
        "session.optimized_model_external_initializers_min_size_in_bytes", "1024"
    )
    ort.InferenceSession(str(source), options, providers=["CPUExecutionProvider"])


def build_in_child(source: Path, target: Path) -> bool:
    """:func:`build_optimized` in a child process of this interpreter; False if it did not work
    (no usable ``sys.executable``, a crash): the caller then builds in its own process."""
    if not sys.executable:
        return False
    try:
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, str(source), str(target), json.dumps(sys.path)],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=300,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        logger.debug("could not start the graph builder", exc_info=True)
        return False
    if done.returncode != 0 or not target.is_file():
        logger.debug("graph builder failed (%s): %s", done.returncode, done.stderr[-2000:])
        return False
    return True
