"""Started by mlbench-stall --exec (it puts this folder first on PYTHONPATH): probes every
torch.utils.data.DataLoader iteration of the script (probe/mlbench_probe.py), then runs the
sitecustomize this one shadows (Debian's installs apport's exception hook there)."""

import importlib.machinery
import importlib.util
import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(_here))  # probe/, for mlbench_probe
import mlbench_probe  # noqa: E402

mlbench_probe.install()

_rest = [p for p in sys.path if os.path.abspath(p or ".") != _here]
_spec = importlib.machinery.PathFinder.find_spec("sitecustomize", _rest)
if _spec is not None and _spec.origin and os.path.dirname(os.path.abspath(_spec.origin)) != _here:
    _module = importlib.util.module_from_spec(_spec)
    try:
        _spec.loader.exec_module(_module)
    except Exception as e:  # the shadowed hook's failure must not stop the script
        print(f"mlbench_probe: the system sitecustomize failed: {e}", file=sys.stderr)
