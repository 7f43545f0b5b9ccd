"""Quiet TensorFlow start-up for the commands: native stderr silenced, devices initialised.

Nothing here runs on import: the process-wide settings (environment variables, file
descriptor 2) change only when an entry point calls `start_tensorflow` (or `errors.run`).
"""

from __future__ import annotations

import contextlib
import os
import sys


class NativeStderrSilencer:
    """Points file descriptor 2 at /dev/null between start() and stop() (both idempotent)."""

    def __init__(self):
        self._saved = None

    def start(self):
        if self._saved is None:
            sys.stderr.flush()
            self._saved = os.dup(2)
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 2)
            os.close(devnull)

    def stop(self):
        if self._saved is not None:
            sys.stderr.flush()
            os.dup2(self._saved, 2)
            os.close(self._saved)
            self._saved = None


@contextlib.contextmanager
def silence_native_stderr():
    """Sends file descriptor 2 to /dev/null: TensorFlow's C++ start-up lines ignore TF_CPP_MIN_LOG_LEVEL
    (tensorflow#100442). Python exceptions raised inside still reach the restored stderr."""
    silencer = NativeStderrSilencer()
    silencer.start()
    try:
        yield
    finally:
        silencer.stop()


def start_tensorflow(cpu_replicas: int = 0, threads: int = 0):
    """Imports TensorFlow quietly and initialises its devices; returns the module.

    With `TF_CONFIG` set (several machines), the devices are left uninitialised:
    `MultiWorkerMirroredStrategy` (`keras_transformer.training.distribution.create_strategy`)
    must configure its collectives before they are.

    Args:
        cpu_replicas: if > 1, split the CPU into that many logical devices (for
            MirroredStrategy over CPUs); must happen before devices are used.
        threads: if > 0, TensorFlow's intra-op and inter-op thread pools get that many
            threads (`tf.config.threading`, which refuses once the runtime has started:
            set here, between the import and the devices). 0: TensorFlow's default (all cores).
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    # A best-fit-with-coalescing pool for CPU tensors, as on GPUs, instead of malloc:
    # the step's large buffers (the logits) then come back from the pool each step
    # rather than as fresh mmap'd pages the kernel must zero (the kernel time this
    # saves is measured in docs/speed.md#training-step-design). Read when the devices are created, so
    # it must be set before; TF_CPU_ALLOCATOR_USE_BFC=false restores malloc (where TensorFlow
    # runs oneDNN's kernels, on by default on AVX-512 hosts, it pools CPU memory itself).
    os.environ.setdefault("TF_CPU_ALLOCATOR_USE_BFC", "true")
    with silence_native_stderr():
        import tensorflow as tf

        if threads > 0:
            tf.config.threading.set_intra_op_parallelism_threads(threads)
            tf.config.threading.set_inter_op_parallelism_threads(threads)
        if os.environ.get("TF_CONFIG"):
            return tf
        if cpu_replicas > 1:
            cpu = tf.config.list_physical_devices("CPU")[0]
            tf.config.set_logical_device_configuration(
                cpu, [tf.config.LogicalDeviceConfiguration()] * cpu_replicas
            )
        tf.config.list_logical_devices()
        consume_onednn_dtype_warning(tf)
    return tf


def consume_onednn_dtype_warning(tf) -> None:
    """Lets TensorFlow print its one-time "oneDNN supports DT_INT64 only on platforms with
    AVX-512. Falling back to the default Eigen-based implementation ..." while native stderr is
    silenced. TensorFlow logs it at ERROR level (util.cc, once per process, whatever the data
    type and even on AVX-512 CPUs) the first time an eager op of a type oneDNN skips is
    rewritten, e.g. an int64 transpose inside a tokenizer's ragged ops: a command would
    otherwise show it, mid-run, as if something had failed. Nothing is lost: those ops
    run on TensorFlow's own kernels either way."""
    tf.transpose(tf.zeros([1, 1], tf.int64))
