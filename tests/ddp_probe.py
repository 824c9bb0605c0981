"""`clew train` as `accelerate launch` runs it, recording what each process wrote under the
output folder (tests/test_ddp_train.py).

Writes are seen at Python's audit hook (files opened for writing, renames) and at the savers
that write from native code, whose calls are recorded with their target: ``torch.save``,
safetensors' ``save_file``, and ``save_pretrained`` of models, PEFT models and tokenizers (a fast
tokenizer writes tokenizer.json from Rust). Each process also records the process group it
trained in. The record goes to ``$PROBE_LOG/rank-<RANK>.json`` when the command ends.

    accelerate launch ... tests/ddp_probe.py train --config ... output_dir=OUT
"""

from __future__ import annotations

import functools
import json
import os
import sys
from pathlib import Path

OUT = Path(os.environ["PROBE_OUT"]).resolve()
WRITES: list[str] = []
GROUP: dict[str, object] = {}


def note(what: str, target) -> None:
    try:
        path = Path(os.fsdecode(target)).resolve()
    except TypeError:                         # a file descriptor or a buffer
        return
    if path == OUT or OUT in path.parents:
        WRITES.append(f"{what} {path.relative_to(OUT)}")


def audit(event: str, args: tuple) -> None:
    if event == "open" and args[0] is not None:
        path, mode, flags = args
        if (mode and any(c in mode for c in "wax+")) or \
                (flags and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT)):
            note("open", path)
    elif event in ("os.rename", "os.replace"):
        note("rename", args[1])


def recorded(name: str, func, position: int, keyword: str):
    """``func`` noting its target (argument ``position``, or ``keyword``) before it writes."""
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        target = args[position] if len(args) > position else kwargs.get(keyword)
        if isinstance(target, (str, os.PathLike)):
            note(name, target)
        return func(*args, **kwargs)
    return wrapper


def install() -> None:
    """Wrap the native-code savers before transformers and PEFT import them (they bind
    safetensors' ``save_file`` to names of their own)."""
    import safetensors.torch
    import torch
    import torch.distributed as dist

    sys.addaudithook(audit)
    torch.save = recorded("torch.save", torch.save, 1, "f")
    safetensors.torch.save_file = recorded("save_file", safetensors.torch.save_file, 1,
                                           "filename")
    import peft
    import transformers

    for cls in (transformers.PreTrainedModel, peft.PeftModel,
                transformers.PreTrainedTokenizerBase):
        cls.save_pretrained = recorded(f"{cls.__name__}.save_pretrained", cls.save_pretrained,
                                       1, "save_directory")

    train = transformers.Trainer.train

    @functools.wraps(train)
    def recording_train(self, *args, **kwargs):
        if dist.is_initialized():
            GROUP.update(world_size=dist.get_world_size(), backend=dist.get_backend())
        return train(self, *args, **kwargs)
    transformers.Trainer.train = recording_train


def main() -> int:
    install()
    from clew.cli.main import main as clew

    code = 1
    try:
        code = clew(sys.argv[1:])
    finally:
        record = {"rank": int(os.environ.get("RANK", "0")), "code": code, **GROUP,
                  "writes": sorted(set(WRITES))}
        log = Path(os.environ["PROBE_LOG"]) / f"rank-{record['rank']}.json"
        log.write_text(json.dumps(record))
    return code


if __name__ == "__main__":
    sys.exit(main())
