"""bench/engine_process.py: which GEMM backend a CTranslate2 worker used, and CT2_USE_MKL reaching it.

CTranslate2 decides once per process, at its first model load, whether to multiply with Intel MKL
(src/cpu/backend.cc: CT2_USE_MKL if set, else MKL on a GenuineIntel CPU in a build with MKL, as
the Linux x86-64 wheels are) and logs the decision at info level (src/utils.cc). Checked: the
parsing of those lines on a log CTranslate2 4.8.5 printed, and a real worker started with
CT2_USE_MKL unset or "0" while the parent has CT2_USE_MKL=1: the worker sees the spec's value, not
the parent's, and CTranslate2's own log in it agrees with the rule read off /proc/cpuinfo.
"""

import os
import pathlib
import platform
import sys

import pytest

pytest.importorskip("ctranslate2")

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "bench"))

import engine_process  # noqa: E402  pylint: disable=wrong-import-position

# What CTranslate2 4.8.5 printed on an Intel Xeon with CT2_VERBOSE=1, as installed (MKL) and with
# CT2_USE_MKL=0 (an int8 model), sentencepiece's line among them as in a "text" worker.
MKL_LOG = """\
[2026-11-26 02:05:37.665] [ctranslate2] [thread 25120] [info] CPU: GenuineIntel (SSE4.1=true, AVX=true, AVX2=true, AVX512=true)
[2026-11-26 02:05:37.666] [ctranslate2] [thread 25120] [info]  - Selected ISA: AVX2
[2026-11-26 02:05:37.666] [ctranslate2] [thread 25120] [info]  - Use Intel MKL: true
[2026-11-26 02:05:37.666] [ctranslate2] [thread 25120] [info]  - SGEMM backend: MKL (packed: true)
[2026-11-26 02:05:37.666] [ctranslate2] [thread 25120] [info]  - GEMM_S16 backend: MKL (packed: true)
[2026-11-26 02:05:37.666] [ctranslate2] [thread 25120] [info]  - GEMM_S8 backend: MKL (packed: true, u8s8 preferred: true)
sentencepiece_processor.cc(1132) LOG(INFO) Loaded a model
[2026-11-26 02:05:38.318] [ctranslate2] [thread 25120] [info] Loaded model /work/alone/ct2_float32 on device cpu:0
[2026-11-26 02:05:38.318] [ctranslate2] [thread 25120] [info]  - Binary version: 6
[2026-11-26 02:05:38.318] [ctranslate2] [thread 25120] [info]  - Model specification revision: 7
[2026-11-26 02:05:38.318] [ctranslate2] [thread 25120] [info]  - Selected compute type: float32
"""
DNNL_INT8_LOG = """\
[2026-11-26 02:05:39.664] [ctranslate2] [thread 25129] [info] CPU: GenuineIntel (SSE4.1=true, AVX=true, AVX2=true, AVX512=true)
[2026-11-26 02:05:39.664] [ctranslate2] [thread 25129] [info]  - Selected ISA: AVX2
[2026-11-26 02:05:39.664] [ctranslate2] [thread 25129] [info]  - Use Intel MKL: false
[2026-11-26 02:05:39.664] [ctranslate2] [thread 25129] [info]  - SGEMM backend: DNNL (packed: false)
[2026-11-26 02:05:39.664] [ctranslate2] [thread 25129] [info]  - GEMM_S16 backend: none (packed: false)
[2026-11-26 02:05:39.664] [ctranslate2] [thread 25129] [info]  - GEMM_S8 backend: DNNL (packed: false, u8s8 preferred: true)
[2026-11-26 02:05:39.747] [ctranslate2] [thread 25129] [info] Loaded model /work/alone/ct2_int8 on device cpu:0
[2026-11-26 02:05:39.747] [ctranslate2] [thread 25129] [info]  - Binary version: 6
[2026-11-26 02:05:39.747] [ctranslate2] [thread 25129] [info]  - Model specification revision: 7
[2026-11-26 02:05:39.747] [ctranslate2] [thread 25129] [info]  - Selected compute type: int8_float32
"""


def test_the_load_log_says_vendor_isa_and_the_backend_of_the_compute_type():
    assert engine_process.ctranslate2_system(MKL_LOG) == {
        "cpu_vendor": "GenuineIntel", "isa": "AVX2", "use_mkl": True, "compute_type": "float32",
        "sgemm": {"backend": "MKL", "packed": True}, "gemm_s16": {"backend": "MKL", "packed": True},
        "gemm_s8": {"backend": "MKL", "packed": True},
        "gemm_backend": {"backend": "MKL", "packed": True, "gemm": "sgemm"}}
    dnnl = engine_process.ctranslate2_system(DNNL_INT8_LOG)
    assert (dnnl["use_mkl"], dnnl["compute_type"]) == (False, "int8_float32")
    assert dnnl["gemm_backend"] == {"backend": "DNNL", "packed": False, "gemm": "gemm_s8"}
    assert dnnl["gemm_s16"] == {"backend": "none", "packed": False}


def test_a_log_without_the_backend_lines_is_refused():
    lines = [line for line in MKL_LOG.splitlines() if "SGEMM" not in line and "Selected ISA" not in line]
    with pytest.raises(ValueError, match="no line for isa, sgemm"):
        engine_process.ctranslate2_system("\n".join(lines))


def _cpu_vendor():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as file:
            return next(line.split(":", 1)[1].strip() for line in file if line.startswith("vendor_id"))
    except (OSError, StopIteration):
        return None


@pytest.fixture(scope="module")
def ct2_model(tmp_path_factory):
    """A CTranslate2 float32 folder of an untrained tiny model (only its load matters here)."""
    from keras_transformer.export import ctranslate2_model  # pylint: disable=import-outside-toplevel
    from tests.helpers.export_models import shared_model_dir  # pylint: disable=import-outside-toplevel

    model_dir = tmp_path_factory.mktemp("run")
    shared_model_dir(tmp_path_factory, model_dir, steps=0)
    path, _ = ctranslate2_model.convert(str(model_dir), str(tmp_path_factory.mktemp("ct2") / "model"))
    return path


@pytest.mark.skipif(_cpu_vendor() is None or platform.machine() != "x86_64",
                    reason="the rule checked is that of CTranslate2's x86-64 builds, read off /proc/cpuinfo")
@pytest.mark.parametrize("use_mkl", [None, "0"])
def test_the_worker_runs_with_the_specs_ct2_use_mkl_not_the_parents(ct2_model, tmp_path, monkeypatch, use_mkl):
    from keras_transformer.config import DecodingConfig  # pylint: disable=import-outside-toplevel

    monkeypatch.setenv(engine_process.USE_MKL, "1")  # the parent's: neither worker may inherit it
    spec = {"engine": "plain", "path": ct2_model, "decoding": DecodingConfig().to_dict(), "threads": 1,
            "batches": [[["▁a"]]], "compute_type": "float32", "inter_threads": 1, "ct2_use_mkl": use_mkl}
    process = engine_process.EngineProcess("plain", spec, str(tmp_path))
    try:
        info = process.ready()
    finally:
        process.close()
    assert info[engine_process.USE_MKL] == use_mkl
    system = info["ctranslate2"]
    assert system["cpu_vendor"] == _cpu_vendor()
    uses_mkl = use_mkl is None and _cpu_vendor() == "GenuineIntel"  # src/cpu/backend.cc, a build with MKL
    assert system["use_mkl"] is uses_mkl
    assert system["gemm_backend"]["gemm"] == "sgemm"
    assert (system["gemm_backend"]["backend"] == "MKL") is uses_mkl
    assert info["compute_type"] == "float32" and info["tensorflow"] is False
