"""Classifies a SavedModel's ops in this (fresh) interpreter: `python -m keras_transformer.export.servable_ops DIR`.

Imports tensorflow, reads the op registry, then tensorflow_text, and reads it again, so
each op of the SavedModel is known as core TensorFlow, tensorflow-text, or neither (see
`keras_transformer.export.ops`, which runs this command and reads its `--json` report). Prints one line per
op stock TF Serving cannot run and exits 1 if there is any.
"""

from __future__ import annotations

import json
import os
import sys

from keras_transformer.export import ops


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
        elif op in ops.PYTHON_OPS:
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


def main(argv: list[str]) -> int:
    as_json = "--json" in argv
    paths = [a for a in argv if a != "--json"]
    if len(paths) != 1:
        print("usage: python -m keras_transformer.export.servable_ops [--json] SAVED_MODEL_DIR", file=sys.stderr)
        return 2
    report = _classify(ops.saved_model_op_types(paths[0]))
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
