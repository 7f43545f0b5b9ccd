"""Which op types a SavedModel uses, and whether stock TF Serving can run them.

Stock `tensorflow/serving` links the core TensorFlow kernels and the tensorflow-text ops, and
nothing else: no Python (`PyFunc`), no other custom-op library (e.g. the `sentencepiece`
package's own TF op), and XLA-only ops have no CPU kernel there. An op is servable when

* it is registered by `import tensorflow` alone, or by `import tensorflow_text` on top of it;
* it has a CPU kernel;
* it is not one of the Python ops or an `Xla*` op.

The registry is read in a fresh interpreter (`python -m keras_transformer.export.servable_ops SAVED_MODEL_DIR`,
which imports only tensorflow and tensorflow_text), so ops that other imports of the calling
process registered cannot slip through. The command prints one offender per line and exits 1
if there is any; `unservable_ops(path)` runs it and returns the offenders.
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


def check(saved_model_dir: str) -> dict:
    """Classifies the op types of a SavedModel in a fresh interpreter.

    Returns:
        `{"core": [...], "tensorflow_text": [...], "offenders": {op: reason}}`.
    """
    if not os.path.isfile(os.path.join(saved_model_dir, "saved_model.pb")):
        raise FileNotFoundError(f"{saved_model_dir}: no saved_model.pb")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # where `export` is importable
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=path)
    result = subprocess.run(
        [sys.executable, "-m", "keras_transformer.export.servable_ops", "--json", saved_model_dir],
        capture_output=True, text=True, env=env, check=False,
    )
    if result.returncode not in (0, 1):
        raise RuntimeError(f"op check failed: {result.stderr.strip().splitlines()[-1:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def unservable_ops(saved_model_dir: str) -> dict[str, str]:
    """`{op type: reason}` for every op of the SavedModel stock TF Serving cannot run."""
    return check(saved_model_dir)["offenders"]
