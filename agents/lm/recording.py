"""Recorded LM calls, and replay from them with no model (docs/methods/recording.md).

A run directory's ``lm/`` folder holds every request its episodes sent to a model and the
completions that came back::

    lm/meta.json            format, wave size of the run, each model's spec, context and GPUs
    lm/EPISODE.json.gz      one episode's calls, in the order they were sent

An episode file stores every text once, under its SHA-256 (``texts``): the system prompt, the
task and the history that each request repeats are kept once per episode, and the calls refer to
them. A call holds the model spec, the role, the sampling (seed included), the messages, the
completions (text, finish reason, tokens, logprobs) or the error it raised (a prompt that did not
fit), and its compute; and the token counts the roles asked of the model (``counts``), so that
prompts are fitted the same way without the tokenizer.

Who records: :class:`Recorder`, a session that :func:`clew.agents.lm.spec.load_model` consults
(:data:`SESSION`): it wraps each model it loads in a :class:`RecordingLM`. Who replays:
:class:`Replay`, for which ``load_model`` builds no model at all but a :class:`ReplayLM` that
answers from the recording. Calls are kept per episode (:data:`EPISODE`, set by the runner), and
within an episode a request is matched by its content and by how many times the same request was
asked before: identical requests asked twice in one episode get the two recorded answers in
turn. So the answer an episode gets does not depend on which other episodes run beside it.

An episode's file is written once, atomically, when the episode has finished (before its record
is appended to ``episodes.jsonl``): a kill leaves finished episodes with their calls and no half
file; an interrupted episode is rerun on resume and its file written then.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import json
from collections import Counter
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clew.agents.lm.base import (
    ChatRequest,
    Completion,
    ContextLengthError,
    LanguageModel,
    LMError,
    Message,
    estimate_tokens,
)
from clew.agents.usage import Usage
from clew.records import atomic_write_bytes, atomic_write_json

FORMAT = "clew.lm-recording/1"
FOLDER = "lm"   # in the run directory
META = "meta.json"

#: the episode whose calls are being made (the runner sets it per episode): calls are kept per
#: episode; "" outside any episode
EPISODE: ContextVar[str] = ContextVar("clew_lm_episode", default="")


class RecordingError(ValueError):
    """A recording that cannot be read or replayed from; the message names the file."""


class ReplayMismatch(LMError):
    """A request the recording does not hold: the run diverged from the recorded one. The
    message shows the field in which it differs from the nearest recorded request."""


def digest(text: str) -> str:
    """The address of a text in a recording: its SHA-256, 32 hex digits."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def episode_file(folder: Path, key: str) -> Path:
    """The file of episode ``key`` (calls made outside any episode: ``_outside``)."""
    return folder / f"{key.replace('/', '_') or '_outside'}.json.gz"


def _request(spec: str, request: ChatRequest, texts: dict[str, str]) -> dict[str, Any]:
    """A request as a recording holds it: model, role, sampling, and the messages with their
    contents by address (added to ``texts``); ``key`` is the address of the whole."""
    messages = []
    for m in request.messages:
        content = m.get("content") or ""
        sha = digest(content)
        texts[sha] = content
        messages.append({**m, "content": sha})
    # vars, not asdict: a shallow copy is enough to serialise and asdict's deep copy costs
    # more than the rest of the recording (benchmarks/bench_record.py)
    req = {"model": spec, "role": request.role, "sampling": dict(vars(request.sampling)),
           "messages": messages}
    req["key"] = digest(_canonical(req))
    return req


@dataclass
class _Tape:
    """One episode's calls while it plays (recording) or as recorded (replay)."""

    texts: dict[str, str] = field(default_factory=dict)
    calls: list[tuple[int, dict[str, Any]]] = field(default_factory=list)  # (order sent, call)
    counts: dict[tuple[str, str], int] = field(default_factory=dict)
    sent: int = 0   # requests sent so far
    asked: Counter = field(default_factory=Counter)   # request key -> times asked (replay)
    by_key: dict[str, list[dict[str, Any]]] = field(default_factory=dict)   # (replay)

    def add(self, order: int, req: dict[str, Any], completions: list[Completion] | None,
            error: BaseException | None = None) -> None:
        call = dict(req)
        if error is not None:
            call["error"] = [type(error).__name__, str(error)]
        else:
            outs = []
            for c in completions or []:
                sha = digest(c.text)
                self.texts[sha] = c.text
                u = c.usage
                outs.append({"text": sha, "finish_reason": c.finish_reason,
                             "tokens": [u.prompt_tokens, u.completion_tokens, u.calls],
                             **({"logprobs": c.logprobs} if c.logprobs is not None else {})})
            call["completions"] = outs
            if completions:
                u = completions[0].usage
                call["compute"] = {"engine_us": u.engine_us, "busy_us": u.busy_us,
                                   "gpu_us": u.gpu_us, "cached_tokens": u.cached_tokens}
        self.calls.append((order, call))

    def document(self, key: str) -> dict[str, Any]:
        return {"format": FORMAT, "episode": key, "texts": self.texts,
                "calls": [c for _, c in sorted(self.calls, key=lambda oc: oc[0])],
                "counts": [[m, sha, n] for (m, sha), n in sorted(self.counts.items())]}


def _messages_key(messages: list[Message]) -> str:
    return digest(_canonical(messages))


# --- recording -------------------------------------------------------------------------------
class Recorder:
    """Records the calls of one run into ``RUN/lm/`` (see the module docstring).

    ``model`` wraps each model the run loads; ``begin``/``finish`` bracket an episode (``finish``
    writes its file and returns its size); ``start`` (once the run directory is held) writes
    the meta file. ``wave_size``: the run's waves (what a replay must keep)."""

    replaying = False

    def __init__(self, run_dir: str | Path, wave_size: int | None = None):
        self.folder = Path(run_dir) / FOLDER
        self.wave_size = wave_size
        self.models: dict[str, dict[str, Any]] = {}
        self.tapes: dict[str, _Tape] = {}
        self.started = False

    def start(self) -> None:
        """Write the meta file, keeping the models of earlier sessions of the run; clear the
        temp files of a writer killed mid-write (the caller holds the run directory). A run
        that loads no model gets no ``lm/`` folder."""
        for p in self.folder.glob(".*.tmp"):
            p.unlink(missing_ok=True)
        old = self.folder / META
        if old.exists():
            try:
                self.models = {**json.loads(old.read_text()).get("models", {}), **self.models}
            except ValueError as exc:
                raise RecordingError(f"{old}: not valid JSON ({exc}); remove it to record "
                                     f"afresh") from None
        self.started = True
        self._write_meta()

    def _write_meta(self) -> None:
        if self.started and self.models:
            atomic_write_json(self.folder / META, {"format": FORMAT, "wave_size": self.wave_size,
                                                   "models": self.models})

    def model(self, lm: LanguageModel) -> LanguageModel:
        if isinstance(lm, RecordingLM):
            return lm
        info = {"context_length": lm.context_length, "gpus": lm.gpus}
        if self.models.get(lm.spec) != info:
            self.models[lm.spec] = info
            self._write_meta()
        return RecordingLM(lm, self)

    def tape(self) -> _Tape:
        return self.tapes.setdefault(EPISODE.get(), _Tape())

    def begin(self, key: str) -> None:
        self.tapes[key] = _Tape()

    def finish(self, key: str) -> int:
        """Write the episode's calls (none: no file); return the bytes written."""
        tape = self.tapes.pop(key, None)
        path = episode_file(self.folder, key)
        if tape is None or not (tape.calls or tape.counts):
            path.unlink(missing_ok=True)   # a stale file of an earlier attempt
            return 0
        data = gzip.compress(_canonical(tape.document(key)).encode("utf-8"), mtime=0)
        atomic_write_bytes(path, data)
        return len(data)

    def discard(self, key: str) -> None:
        """An episode that did not finish: its calls are not kept."""
        self.tapes.pop(key, None)
        episode_file(self.folder, key).unlink(missing_ok=True)

    def close(self) -> None:
        """Calls made outside any episode go in ``lm/_outside.json.gz``."""
        if "" in self.tapes and self.started:
            self.finish("")


class RecordingLM(LanguageModel):
    """A model whose calls (and token counts) a :class:`Recorder` keeps; everything else is the
    wrapped model's."""

    def __init__(self, inner: LanguageModel, recorder: Recorder):
        self.inner, self.recorder = inner, recorder
        self.spec = inner.spec

    @property
    def context_length(self) -> int | None:   # type: ignore[override]
        return self.inner.context_length

    @property
    def gpus(self) -> int | None:   # type: ignore[override]
        return self.inner.gpus

    def __getattr__(self, name: str) -> Any:   # the backend's own attributes (settings, ...)
        return getattr(self.inner, name)

    def count_tokens(self, messages: list[Message]) -> int:
        n = self.inner.count_tokens(messages)
        self.recorder.tape().counts[(self.spec, _messages_key(messages))] = n
        return n

    async def generate(self, requests: list[ChatRequest]) -> list[list[Completion]]:
        return list(await asyncio.gather(*(self.complete(r) for r in requests)))

    async def complete(self, request: ChatRequest) -> list[Completion]:
        tape = self.recorder.tape()
        order, tape.sent = tape.sent, tape.sent + 1
        req = _request(self.spec, request, tape.texts)
        try:
            completions = await self.inner.complete(request)
        except (ContextLengthError, LMError) as exc:
            tape.add(order, req, None, exc)
            raise
        tape.add(order, req, completions)
        return completions

    async def aclose(self) -> None:
        await self.inner.aclose()


def recording_size(run_dir: str | Path) -> tuple[int, int]:
    """(episode files, bytes) of a run's recording."""
    files = list((Path(run_dir) / FOLDER).glob("[!._]*.json.gz"))
    return len(files), sum(p.stat().st_size for p in files)


def merge_recordings(dest_run: str | Path, parts: list[tuple[Path, list[str]]]) -> int:
    """Gather the recordings of shard runs into ``dest_run``: each part is a shard's run
    directory and the episodes taken from it. Episode files are copied as they are (a key names
    one episode in every shard); the models of all meta files are kept. Returns the episode
    files copied."""
    models: dict[str, dict[str, Any]] = {}
    wave_sizes = set()
    copied = 0
    dest = Path(dest_run) / FOLDER
    for run, keys in parts:
        meta_file = Path(run) / FOLDER / META
        if not meta_file.exists():
            continue
        try:
            meta = json.loads(meta_file.read_text())
        except ValueError as exc:
            raise RecordingError(f"{meta_file}: not valid JSON ({exc})") from None
        models.update(meta.get("models") or {})
        wave_sizes.add(meta.get("wave_size"))
        for key in keys:
            src = episode_file(meta_file.parent, key)
            if src.exists():
                atomic_write_bytes(episode_file(dest, key), src.read_bytes())
                copied += 1
    if models or copied:
        # shards of one run share their concurrency; if not, waves of memory agents differ
        # between shards anyway and a replay of the merged run cannot follow them
        wave = wave_sizes.pop() if len(wave_sizes) == 1 else None
        atomic_write_json(dest / META, {"format": FORMAT, "wave_size": wave, "models": models})
    return copied


# --- replay ----------------------------------------------------------------------------------
_ERRORS = {"ContextLengthError": ContextLengthError, "LMError": LMError}


class Replay:
    """Answers every request of a run from the recording in ``RUN/lm/`` (see the module
    docstring); the models it hands out (:class:`ReplayLM`) load nothing."""

    replaying = True

    def __init__(self, run: str | Path):
        self.run = Path(run)
        self.folder = self.run / FOLDER
        meta_file = self.folder / META
        if not meta_file.exists():
            raise RecordingError(
                f"replay {self.run}: no LM recording there ({meta_file} is missing); runs record "
                f"their LM calls unless --no-record was given")
        try:
            meta = json.loads(meta_file.read_text())
        except ValueError as exc:
            raise RecordingError(f"{meta_file}: not valid JSON ({exc})") from None
        if meta.get("format") != FORMAT:
            raise RecordingError(f"{meta_file}: format {meta.get('format')!r}, expected "
                                 f"{FORMAT!r}")
        self.models: dict[str, dict[str, Any]] = meta.get("models") or {}
        self.wave_size: int | None = meta.get("wave_size")
        self.tapes: dict[str, _Tape] = {}

    def start(self) -> None:
        return None

    def close(self) -> None:
        return None

    def model(self, lm: LanguageModel | str) -> ReplayLM:
        return ReplayLM(lm if isinstance(lm, str) else lm.spec, self)

    def _load(self, key: str) -> _Tape:
        path = episode_file(self.folder, key)
        tape = _Tape()
        if not path.exists():
            return tape
        try:
            doc = json.loads(gzip.decompress(path.read_bytes()))
            tape.texts = doc["texts"]
            tape.calls = list(enumerate(doc["calls"]))
            tape.counts = {(m, sha): n for m, sha, n in doc.get("counts", [])}
            for _, call in tape.calls:
                tape.by_key.setdefault(call["key"], []).append(call)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise RecordingError(f"{path}: not a readable LM recording "
                                 f"({type(exc).__name__}: {exc})") from None
        return tape

    def tape(self) -> _Tape:
        key = EPISODE.get()
        if key not in self.tapes:
            self.tapes[key] = self._load(key)
        return self.tapes[key]

    def begin(self, key: str) -> None:
        self.tapes[key] = self._load(key)

    def finish(self, key: str) -> int:
        self.tapes.pop(key, None)
        return 0

    discard = finish

    def count(self, spec: str, messages: list[Message]) -> int | None:
        return self.tape().counts.get((spec, _messages_key(messages)))

    def answer(self, spec: str, request: ChatRequest) -> list[Completion]:
        tape = self.tape()
        order, tape.sent = tape.sent, tape.sent + 1
        req = _request(spec, request, {})
        key = req["key"]
        nth = tape.asked[key]
        tape.asked[key] += 1
        same = tape.by_key.get(key, [])
        if nth >= len(same):
            raise ReplayMismatch(self._mismatch(tape, req, request, order, len(same)))
        call = same[nth]
        if "error" in call:
            kind, message = call["error"]
            raise _ERRORS.get(kind, LMError)(message)
        compute = call.get("compute") or {}
        out = []
        for c in call["completions"]:
            p, n, calls = c["tokens"]
            usage = Usage(p, n, calls, compute.get("cached_tokens"), compute.get("engine_us", 0),
                          compute.get("busy_us", 0), compute.get("gpu_us"))
            out.append(Completion(tape.texts[c["text"]], c["finish_reason"], usage,
                                  c.get("logprobs")))
        return out

    def _mismatch(self, tape: _Tape, req: dict[str, Any], request: ChatRequest, order: int,
                  held: int) -> str:
        where = f"replay {self.run}: episode {EPISODE.get() or '(none)'}: request {order + 1} " \
                f"({req['role']})"
        if held:
            return (f"{where} was recorded {held} time(s) in this episode and is asked once "
                    f"more: the run diverged earlier")
        if not tape.calls:
            return f"{where} is not in the recording, which holds no calls for this episode"
        spec = req["model"]
        best = min(tape.calls, key=lambda oc: (len(_differences(spec, request, oc[1],
                                                                tape.texts)),
                                               abs(oc[0] - order), oc[0]))
        first = _differences(spec, request, best[1], tape.texts)
        return (f"{where} is not in the recording; the nearest recorded request (number "
                f"{best[0] + 1}, {best[1]['role']}) differs in "
                f"{first[0] if first else 'the fields of its messages'}")


def _snippet(a: str, b: str) -> str:
    i = next((k for k in range(min(len(a), len(b))) if a[k] != b[k]), min(len(a), len(b)))
    lo = max(0, i - 15)
    return f"at character {i}: {a[lo:i + 25]!r} here, {b[lo:i + 25]!r} recorded"


def _differences(spec: str, request: ChatRequest, call: dict[str, Any],
                 texts: dict[str, str]) -> list[str]:
    """The fields in which ``request`` to ``spec`` differs from the recorded ``call``, in order:
    model, role, each sampling field, the messages."""
    out: list[str] = []
    sampling = vars(request.sampling)
    fields = [("model", spec, call["model"]), ("role", request.role, call["role"])] + [
        (f"sampling.{k}", v, call["sampling"].get(k)) for k, v in sampling.items()]
    for name, here, there in fields:
        if here != there:
            out.append(f"{name}: {here!r} here, {there!r} recorded")
    recorded = [{**m, "content": texts.get(m["content"], "")} for m in call["messages"]]
    if len(request.messages) != len(recorded):
        out.append(f"the number of messages: {len(request.messages)} here, {len(recorded)} "
                   f"recorded")
    for i, (m, r) in enumerate(zip(request.messages, recorded)):
        if m.get("role") != r.get("role"):
            out.append(f"messages[{i}].role: {m.get('role')!r} here, {r.get('role')!r} recorded")
        elif m != r:
            out.append(f"messages[{i}].content "
                       f"{_snippet(m.get('content') or '', r.get('content') or '')}")
    return out


class ReplayLM(LanguageModel):
    """A stand-in for the model ``spec`` that answers from a :class:`Replay`: the recorded
    context length, token counts and completions (with their recorded usage and compute)."""

    def __init__(self, spec: str, replay: Replay):
        self.spec, self.replay = spec, replay
        info = replay.models.get(spec) or {}
        self.context_length = info.get("context_length")
        self.gpus = info.get("gpus")

    def count_tokens(self, messages: list[Message]) -> int:
        n = self.replay.count(self.spec, messages)
        return estimate_tokens(messages) if n is None else n

    async def generate(self, requests: list[ChatRequest]) -> list[list[Completion]]:
        return [self.replay.answer(self.spec, r) for r in requests]

    async def complete(self, request: ChatRequest) -> list[Completion]:
        return self.replay.answer(self.spec, request)


#: the recording or replay of the run in progress (:func:`clew.agents.lm.spec.load_model` reads
#: it); None: models are loaded and called as they are
SESSION: ContextVar[Recorder | Replay | None] = ContextVar("clew_lm_session", default=None)
