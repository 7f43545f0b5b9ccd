"""Which op types a SavedModel uses, and whether stock TF Serving can run them.

Stock `tensorflow/serving` links the core TensorFlow kernels and the tensorflow-text ops, and
nothing else: no Python (`PyFunc`), no other custom-op library (e.g. the `sentencepiece`
package's own TF op), and XLA-only ops have no CPU kernel there. An op is servable when

* it is registered by `import tensorflow` alone, or by `import tensorflow_text` on top of it;
* it has a CPU kernel;
* it is not one of the Python ops or an `Xla*` op.

The registry is read in a fresh interpreter (`python export/ops.py SAVED_MODEL_DIR`, which
imports only tensorflow and tensorflow_text), so ops that other imports of the calling process
registered cannot slip through. The command prints one offender per line and exits 1 if there
is any; `unservable_ops(path)` runs it and returns the offenders.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

PYTHON_OPS = frozenset({"PyFunc", "PyFuncStateless", "EagerPyFunc"})


def saved_model_op_types(saved_model_dir: str) -> set[str]:
    """Every op type in `saved_model.pb`: graph nodes and the nodes of every library function.

    Calls to library functions by name are not op types and are left out.
    """
    from tensorflow.core.protobuf import saved_model_pb2  # pylint: disable=g-import-not-at-top

    saved_model = saved_model_pb2.SavedModel()
    with open(os.path.join(saved_model_dir, "saved_model.pb"), "rb") as file:
        saved_model.ParseFromString(file.read())
    types = set()
    for meta_graph in saved_model.meta_graphs:
        graph = meta_graph.graph_def
        functions = {f.signature.name for f in graph.library.function}
        types |= {node.op for node in graph.node}
        for function in graph.library.function:
            types |= {node.op for node in function.node_def}
        types -= functions
    return types


def _registered_ops() -> set[str]:
    from tensorflow.core.framework import op_def_pb2  # pylint: disable=g-import-not-at-top
    from tensorflow.python.client import pywrap_tf_session as c_api  # pylint: disable=g-import-not-at-top

    buffer = c_api.TF_GetAllOpList()
    try:
        return {op.name for op in op_def_pb2.OpList.FromString(c_api.TF_GetBuffer(buffer)).op}
    finally:
        c_api.TF_DeleteBuffer(buffer)


def _classify(op_types: set[str]) -> dict:
    """Run in a fresh interpreter: imports tensorflow, then tensorflow_text."""
    import tensorflow  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import

    core = _registered_ops()
    import tensorflow_text  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import

    text = _registered_ops() - core
    from tensorflow.python.framework import kernels  # pylint: disable=g-import-not-at-top

    offenders = {}
    for op in sorted(op_types):
        if op not in core and op not in text:
            offenders[op] = "registered by neither core TensorFlow nor tensorflow-text"
        elif op in PYTHON_OPS:
            offenders[op] = "runs Python"
        elif op.startswith("Xla") or op.startswith("_Xla"):
            offenders[op] = "XLA-only"
        elif not any(k.device_type in ("CPU", "DEFAULT") for k in kernels.get_registered_kernels_for_op(op).kernel):
            offenders[op] = "no CPU kernel"
    return {
        "core": sorted(op_types & core),
        "tensorflow_text": sorted(op_types & text),
        "offenders": offenders,
    }


def check(saved_model_dir: str) -> dict:
    """Classifies the op types of a SavedModel in a fresh interpreter.

    Returns:
        `{"core": [...], "tensorflow_text": [...], "offenders": {op: reason}}`.
    """
    if not os.path.isfile(os.path.join(saved_model_dir, "saved_model.pb")):
        raise FileNotFoundError(f"{saved_model_dir}: no saved_model.pb")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--json", saved_model_dir],
        capture_output=True, text=True, env=env, check=False,
    )
    if result.returncode not in (0, 1):
        raise RuntimeError(f"op check failed: {result.stderr.strip().splitlines()[-1:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def unservable_ops(saved_model_dir: str) -> dict[str, str]:
    """`{op type: reason}` for every op of the SavedModel stock TF Serving cannot run."""
    return check(saved_model_dir)["offenders"]


def main(argv: list[str]) -> int:
    as_json = "--json" in argv
    paths = [a for a in argv if a != "--json"]
    if len(paths) != 1:
        print("usage: python export/ops.py [--json] SAVED_MODEL_DIR", file=sys.stderr)
        return 2
    report = _classify(saved_model_op_types(paths[0]))
    if as_json:
        print(json.dumps(report))
    else:
        print(f"{len(report['core'])} core TensorFlow ops, "
              f"{len(report['tensorflow_text'])} tensorflow-text ops: {', '.join(report['tensorflow_text'])}")
        for op, reason in report["offenders"].items():
            print(f"not servable: {op}: {reason}")
    return 1 if report["offenders"] else 0


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    sys.exit(main(sys.argv[1:]))
