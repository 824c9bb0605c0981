"""`clew doctor` (issue 17): the preflight on a machine without CUDA, GPU counting under
CUDA_VISIBLE_DEVICES and MIG, tensor-parallel sizes that divide the heads, the SLURM layout."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from clew.cli import doctor
from clew.cli.doctor import (
    DoctorError,
    parse_smi_list,
    plan_layout,
    tensor_parallel_sizes,
    visible_devices,
)
from clew.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
GIB = 1024 ** 3

FOUR_H100 = "".join(f"GPU {i}: NVIDIA H100 80GB HBM3 (UUID: GPU-{i}aaa-0000)\n" for i in range(4))
MIG_A100 = """GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-5d5ba0d6-d33d)
  MIG 3g.20gb     Device  0: (UUID: MIG-c6d4f1ef-42e4)
  MIG 3g.20gb     Device  1: (UUID: MIG-cba663e8-9bed)
GPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-77aa0000-1111)
"""


def test_gpus_from_nvidia_smi_with_mig_lines():
    gpus = parse_smi_list(MIG_A100)
    assert [(g.index, g.name, len(g.migs)) for g in gpus] == [
        (0, "NVIDIA A100-SXM4-40GB", 2), (1, "NVIDIA A100-SXM4-40GB", 0)]
    # nvidia-smi -L prints 4 lines; CUDA sees the two MIG instances and the whole second GPU
    assert visible_devices(gpus, None) == ["MIG-c6d4f1ef-42e4", "MIG-cba663e8-9bed",
                                           "GPU-77aa0000-1111"]


@pytest.mark.parametrize("cvd, expected", [
    (None, ["GPU-0aaa-0000", "GPU-1aaa-0000", "GPU-2aaa-0000", "GPU-3aaa-0000"]),
    ("2,3", ["2", "3"]),
    ("1, 0", ["1", "0"]),
    ("GPU-2aaa", ["GPU-2aaa"]),          # a UUID prefix names a device, as CUDA accepts
    ("0,7,1", ["0"]),                    # CUDA stops at the first entry naming no device
    ("", []), ("-1", []), ("NoDevFiles", []),
])
def test_visible_gpus_honour_cuda_visible_devices(cvd, expected):
    assert visible_devices(parse_smi_list(FOUR_H100), cvd) == expected


def test_visible_gpus_without_nvidia_smi_trust_the_scheduler():
    assert visible_devices([], "0,1") == ["0", "1"]
    assert visible_devices([], None) == []


@pytest.mark.parametrize("heads, kv, limit, sizes", [
    (28, 4, 8, [1, 2, 4]),          # Qwen2.5-7B: 7 divides the heads but not the 4 KV heads
    (64, 8, 8, [1, 2, 4, 8]),       # Llama-3.1-70B, Qwen2.5-72B
    (14, 2, 8, [1, 2]),             # Qwen2.5-0.5B
    (32, 8, 3, [1, 2]),
    (40, 8, 8, [1, 2, 4, 8]),       # 5 divides the 40 heads, not the 8 KV heads
])
def test_tensor_parallel_sizes_divide_the_heads(heads, kv, limit, sizes):
    assert tensor_parallel_sizes(heads, kv, limit) == sizes
    assert all(heads % t == 0 for t in sizes)


def test_layout_one_engine_per_gpu_for_a_model_that_fits():
    gpus = ["0", "1", "2", "3"]
    assert plan_layout(gpus, 28, 4, 15 * GIB, 80 * GIB) == (1, [["0"], ["1"], ["2"], ["3"]])


def test_layout_tensor_parallel_for_a_large_model():
    gpus = [str(i) for i in range(8)]
    tp, groups = plan_layout(gpus, 64, 8, 145 * GIB, 80 * GIB)
    assert tp == 4 and groups == [gpus[:4], gpus[4:]]
    # size unknown: one engine over every GPU that the heads allow
    assert plan_layout(gpus[:6], 28, 4) == (2, [["0", "1"], ["2", "3"], ["4", "5"]])


def test_layout_checks_a_given_tensor_parallel_size():
    gpus = ["0", "1", "2", "3"]
    assert plan_layout(gpus, 28, 4, tp=2) == (2, [["0", "1"], ["2", "3"]])
    with pytest.raises(DoctorError, match="does not divide the model's 28 attention heads"):
        plan_layout(gpus, 28, 4, tp=3)
    with pytest.raises(DoctorError, match="does not fit the 4 visible GPU"):
        plan_layout(gpus, 28, 4, tp=8)
    with pytest.raises(DoctorError, match="no GPU is visible"):
        plan_layout([], 28, 4)


def test_layout_gives_each_mig_instance_its_own_engine():
    migs = ["MIG-a", "MIG-b"]
    assert plan_layout(migs, 64, 8, 145 * GIB, 80 * GIB) == (1, [["MIG-a"], ["MIG-b"]])
    with pytest.raises(DoctorError, match="MIG instances cannot"):
        plan_layout(migs, 64, 8, tp=2)


# --- the report --------------------------------------------------------------------------------
def test_doctor_without_cuda_prints_one_screen(capsys, monkeypatch):
    monkeypatch.setattr(doctor, "_run", lambda *cmd: None)   # no nvidia-smi here
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    lines = dict(line.split(None, 1) for line in out.splitlines() if line[:1].isalpha()
                 and not line.startswith("missing"))
    assert lines["CUDA"].strip() == "not available"
    assert lines["driver"].startswith("none found")
    assert "0 visible of 0" in lines["GPUs"]
    assert lines["torch"].startswith(__import__("torch").__version__)
    assert "transformers" in lines["training"] and "vllm" in lines
    assert "no CUDA device visible to torch" in out
    assert len(out.splitlines()) <= 30
    # a GPU run needs CUDA: --require-gpu says so with its exit status
    assert main(["doctor", "--require-gpu"]) == 1


def test_doctor_flags_an_old_driver_and_an_old_gpu(monkeypatch):
    import torch

    def smi(*cmd):
        if cmd[1] == "-L":
            return "GPU 0: Tesla V100-SXM2-32GB (UUID: GPU-v100)\n"
        return "0, 32768, 7.0, 550.54.15\n"

    monkeypatch.setattr(torch.version, "cuda", "13.0")
    report = doctor.collect(env={"HF_HUB_OFFLINE": "1", "CC": "cc"}, smi=smi)
    text = doctor.render(report)
    assert "NVIDIA 550.54.15" in text and "Tesla V100-SXM2-32GB, 32 GiB" in text
    assert "driver 550.54.15 is too old for torch's CUDA 13.0 (needs >= 580)" in text
    assert "compute capability 7.0; vLLM's CUDA build needs 7.5" in text
    assert "HF_HUB_OFFLINE is not set" not in text


def test_doctor_layout_for_a_local_model(tiny_model_dir, capsys, monkeypatch):
    def smi(*cmd):
        return FOUR_H100 if cmd[1] == "-L" else "81559\n" * 4

    monkeypatch.setattr(doctor, "_run", smi)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    assert main(["doctor", "--layout", str(tiny_model_dir), "--shell"]) == 0
    assert capsys.readouterr().out == "1 0 1 2 3\n"
    assert main(["doctor", "--layout", str(tiny_model_dir), "--tp", "2", "--shell"]) == 0
    assert capsys.readouterr().out == "2 0,1 2,3\n"
    assert main(["doctor", "--layout", str(tiny_model_dir), "--tp", "3"]) == 2
    assert capsys.readouterr().err.startswith(
        "error: tensor parallel size 3 does not divide the model's 2 attention heads")
    assert main(["doctor", "--layout", "/no/such/model"]) == 2
    assert "error: model /no/such/model: no config.json" in capsys.readouterr().err


# --- the SLURM script, with fake nvidia-smi, clew and sbatch -----------------------------------
def _exe(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


@pytest.fixture
def slurm(tmp_path):
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    log = tmp_path / "calls.log"
    # clew: the real `clew doctor --layout`, every other command logged with its GPUs
    _exe(bin_ / "clew", f"""#!/bin/bash
if [[ "$1" == doctor ]]; then exec {sys.executable} -m clew.cli "$@"; fi
echo "CVD=${{CUDA_VISIBLE_DEVICES:-unset}} $*" >>{log}
""")
    _exe(bin_ / "sbatch", f"#!/bin/bash\necho \"sbatch $*\" >>{log}\n")

    def run(smi: str, smi_status: int = 0, **env):
        (tmp_path / "smi-list.txt").write_text(smi)
        _exe(bin_ / "nvidia-smi", f"""#!/bin/bash
if [[ "$1" == -L ]]; then cat {tmp_path / "smi-list.txt"}; else printf '81559\\n%.0s' 1 2 3 4; fi
exit {smi_status}
""")
        full = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
        full.update({"PATH": f"{bin_}:{os.environ['PATH']}", "CLEW": str(bin_ / "clew"),
                     "DOCTOR": "0", "OUT": str(tmp_path / "out"), "SUITE": "toy:test",
                     "SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_COUNT": "2",
                     "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_JOB_ID": "77", **env})
        if log.exists():
            log.unlink()
        proc = subprocess.run(["bash", str(ROOT / "scripts/slurm/search_array.sbatch")],
                              check=False, env=full, capture_output=True, text=True,
                              timeout=300)
        calls = log.read_text().splitlines() if log.exists() else []
        return proc, calls
    return run


def test_slurm_runs_one_shard_per_gpu_for_a_small_model(slurm, tiny_model_dir):
    proc, calls = slurm(FOUR_H100, MODEL=str(tiny_model_dir), CUDA_VISIBLE_DEVICES="0,1,2,3")
    assert proc.returncode == 0, proc.stderr
    searches = sorted(c for c in calls if " search " in c)
    assert [c.split()[0] for c in searches] == ["CVD=0", "CVD=1", "CVD=2", "CVD=3"]
    assert all(f"--shard {4 + i}/8 " in searches[i] for i in range(4))
    assert all("tensor_parallel_size=1" in c for c in searches)
    # task 1 is not the first: it queues no merge
    assert not any(c.startswith("sbatch") for c in calls)


def test_slurm_first_task_queues_the_merge_of_every_shard(slurm, tiny_model_dir):
    proc, calls = slurm(FOUR_H100, MODEL=str(tiny_model_dir), CUDA_VISIBLE_DEVICES="2,3",
                        SLURM_ARRAY_TASK_ID="0", TP="2")
    assert proc.returncode == 0, proc.stderr
    merge = next(c for c in calls if c.startswith("sbatch"))
    assert "afterok:77" in merge and "shard-1-of-2" in merge and "shard-2-of" not in merge
    search = next(c for c in calls if " search " in c)
    assert search.startswith("CVD=2,3 ") and "tensor_parallel_size=2" in search


def test_slurm_mig_instances_each_get_a_shard(slurm, tiny_model_dir):
    proc, calls = slurm(MIG_A100, MODEL=str(tiny_model_dir))
    assert proc.returncode == 0, proc.stderr
    assert sorted(c.split()[0] for c in calls if " search " in c) == [
        "CVD=GPU-77aa0000-1111", "CVD=MIG-c6d4f1ef-42e4", "CVD=MIG-cba663e8-9bed"]


def test_slurm_stops_with_one_error_line(slurm, tiny_model_dir):
    # a failing nvidia-smi under pipefail: no GPU to count, one error, no shard started
    proc, calls = slurm("garbage\n", smi_status=9, MODEL=str(tiny_model_dir))
    assert proc.returncode != 0 and not calls
    assert proc.stderr.strip().splitlines()[-1].startswith("error: no GPU is visible")
    proc, calls = slurm(FOUR_H100, MODEL=str(tiny_model_dir), TP="3")
    assert proc.returncode != 0 and not calls
    assert "error: tensor parallel size 3 does not divide the model's 2 attention heads" in \
        proc.stderr


def test_slurm_cpu_mode_runs_one_shard_with_the_spec_as_given(slurm, tmp_path):
    """CPU=1: no GPU preflight or layout (no nvidia-smi answers here), one shard on the CPUs,
    MODEL a whole model spec (the real scheduler runs it in tests/test_slurm_cluster.py)."""
    proc, calls = slurm("garbage\n", smi_status=9, CPU="1", MODEL=f"hf:tiny:{tmp_path}/tiny")
    assert proc.returncode == 0, proc.stderr
    assert "shard 1/2 on the CPUs" in proc.stdout
    [search] = [c for c in calls if " search " in c]
    assert search.startswith("CVD=unset ") and search.endswith(f" --model hf:tiny:{tmp_path}/tiny")
    assert "tensor_parallel_size" not in search


def test_slurm_rerun_of_one_index_runs_that_shard(slurm):
    """`sbatch --array=3` (SLURM: index 3, 1 task, min = max = 3) runs shard 3 of TASKS and,
    being the first task of its array, queues the merge of all of them; without TASKS the task
    stops with one error line instead of running shard 0 of 1."""
    rerun = {"CPU": "1", "SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_COUNT": "1",
             "SLURM_ARRAY_TASK_MIN": "3", "SLURM_ARRAY_TASK_MAX": "3"}
    proc, calls = slurm("", **rerun)
    assert proc.returncode == 2 and not calls
    assert proc.stderr.strip() == ("error: TASKS: the array is not 0..N-1 (indexes 3 to 3, 1 "
                                   "tasks): set TASKS to the size of the array whose indexes "
                                   "this reruns")
    proc, calls = slurm("", TASKS="8", **rerun)
    assert proc.returncode == 0, proc.stderr
    [search] = [c for c in calls if " search " in c]
    assert "--shard 3/8 " in search and "shard-3-of-8 --resume" in search
    [merge] = [c for c in calls if c.startswith("sbatch")]
    assert "afterok:77 --kill-on-invalid-dep=yes" in merge
    assert "shard-0-of-8" in merge and "shard-7-of-8" in merge
    proc, calls = slurm("", TASKS="3", **rerun)
    assert proc.returncode == 2 and not calls
    assert proc.stderr.strip() == "error: TASKS: array index 3 is not below the array size 3"


def test_model_shape_from_the_hub_cache_offline(tmp_path, monkeypatch):
    """A hub id is read from the local cache (where `hf download` put it), never downloaded."""
    import json

    from huggingface_hub import constants

    repo = tmp_path / "models--org--m"
    snap = repo / "snapshots" / "abc123"
    snap.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("abc123")
    (snap / "config.json").write_text(json.dumps(
        {"text_config": {"num_attention_heads": 40, "num_key_value_heads": 8}}))
    (snap / "model-00001.safetensors").write_bytes(b"x" * 1000)
    (snap / "model-00002.safetensors").write_bytes(b"x" * 24)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    assert doctor.model_shape("org/m") == (40, 8, 1024)
    with pytest.raises(DoctorError, match="org/other: no config.json"):
        doctor.model_shape("org/other")
