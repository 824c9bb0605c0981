"""transformers backend: ``hf:PATH`` and ``hf:PATH+lora:ADAPTER`` (docs/architecture.md#contracts "Language models").

For small models, CPU runs and tests; GPU works too. Requests from every concurrent caller go to
one worker thread, which gathers what arrives within ``batch_window`` seconds (up to
``max_batch_size`` requests) and generates it as left-padded batches, so many episodes running
concurrently share forward passes. The event loop never blocks on the model.

Semantics follow vLLM / OpenAI-compatible servers so the backends are interchangeable:

* the chat template of the model's tokenizer renders the prompt (``add_generation_prompt``), and
  the rendered text is tokenised without adding special tokens;
* ``temperature <= 0`` is greedy; greedy requests with ``n > 1`` return ``n`` copies of one
  decode (all samples of a greedy decode are equal anyway);
* sampling uses temperature and top-p only (top-k and repetition penalty are neutralised, not
  taken from the model's generation config);
* a stop string ends a sample and is cut from its text; an EOS token ends it and is not shown;
* usage (docs/methods/rmcts.md#token-accounting): prompt tokens of the rendered prompt, counted once per request;
  completion tokens generated per sample, the EOS token included (as vLLM counts them).

Decisions: a request with a ``seed`` and temperature > 0 is generated in a batch of its own under
a forked, seeded torch RNG, so its samples do not depend on what else ran concurrently; unseeded
sampled requests batch freely. Greedy requests batch regardless of seed. Logprobs, when asked
for, are those of the raw model distribution (before temperature / top-p), as vLLM reports them,
one ``{"token", "logprob", "id", "top_logprobs": [{"token", "logprob", "id"}, ...]}`` per
generated token, best first (the shape every backend returns; the openai one has no ids).

Constrained answers (``Sampling.choices``, docs/methods/parsing.md#constrained-answers), exactly
rather than by rejection: (a) the free part is generated with the answer phrase as one more stop
string and a budget of ``max_tokens`` minus the tokens of the longest answer (line break,
phrase, fence, choice, fence, end of turn; at least one token); (b) the phrase and an opening
fence follow it (a line break first when the model stopped mid-line without writing the
phrase); (c) each
choice's continuation, ``CHOICE`` + closing fence + end of turn (any of the model's EOS tokens),
is scored by its total log-probability after that text: the text is run once and its KV cache
repeated for the choices, which go in chunks of ``max_batch_size``; (d) greedy takes the argmax,
sampling draws from ``softmax(logprob / temperature)`` (top-p is not applied) with a generator
seeded by the request's seed, each of the ``n`` samples on its own; (e) the text is the free part,
the phrase and the fenced choice, finish reason ``stop``; its completion tokens are the free
part's generated tokens plus those of the text appended and the end-of-turn token, as a
constrained decoder would have generated them. Logprobs are not returned with choices (an
error).
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import copy
import queue
import threading
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from transformers import StoppingCriteria

try:
    from tokenizers.decoders import DecodeStream
except ImportError:  # older tokenizers
    DecodeStream = None

from clew.agents.lm.base import (
    FENCE,
    ChatRequest,
    Completion,
    ContextLengthError,
    LMError,
    LocalTokenizerModel,
    Sampling,
    answer_suffix,
)
from clew.agents.lm.sampling import cut_at_stop, validate_sampling
from clew.agents.usage import Usage


@dataclass
class _Job:
    request: ChatRequest
    future: concurrent.futures.Future
    prompt_ids: list[int] = field(default_factory=list)


class HFModel(LocalTokenizerModel):
    """Hugging Face transformers model with an optional PEFT adapter, batched across callers."""

    def __init__(self, path: str | Path, adapter: str | Path | None = None, *,
                 device: str = "auto", dtype: str | None = None, batch_window: float = 0.01,
                 max_batch_size: int = 32, trust_remote_code: bool = False,
                 context_length: int | None = None):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.name = f"hf:{path}" + (f"+lora:{adapter}" if adapter else "")
        self.spec = self.name
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.device = device
        self.gpus = 1 if device.startswith("cuda") else None   # compute accounting
        if dtype is None:
            dtype = "float32" if device == "cpu" else "auto"
        torch_dtype = dtype if dtype == "auto" else getattr(torch, dtype)
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(
                str(path), trust_remote_code=trust_remote_code)
            model = AutoModelForCausalLM.from_pretrained(
                str(path), dtype=torch_dtype, trust_remote_code=trust_remote_code)
        except (OSError, ValueError) as e:
            raise LMError(f"{self.name}: cannot load the model: {e}") from e
        if adapter:
            from peft import PeftModel

            try:
                model = PeftModel.from_pretrained(model, str(adapter))
            except (OSError, ValueError) as e:
                raise LMError(f"{self.name}: cannot load the LoRA adapter: {e}") from e
        self.model = model.to(device).eval()
        if not getattr(self.tokenizer, "chat_template", None):
            raise LMError(f"{self.name}: the tokenizer has no chat template")
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.eos_ids = self._eos_ids()
        self.max_positions = getattr(model.config, "max_position_embeddings", None)
        #: prompt + completion tokens per request: the option, else the model's positions
        self.context_length = context_length or self.max_positions
        self.batch_window = batch_window
        self.max_batch_size = max_batch_size
        self.batches: list[int] = []  # requests per generate batch, for tests and benchmarks
        self._queue: queue.Queue[_Job | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()

    def _eos_ids(self) -> set[int]:
        ids: set[int] = set()
        gen_eos = getattr(self.model.generation_config, "eos_token_id", None)
        for value in (gen_eos, self.tokenizer.eos_token_id):
            if isinstance(value, int):
                ids.add(value)
            elif value:
                ids.update(int(v) for v in value)
        if not ids:
            raise LMError(f"{self.name}: neither the tokenizer nor the model names an EOS token")
        return ids

    # --- public API ----------------------------------------------------------------------
    async def generate(self, requests: list[ChatRequest]) -> list[list[Completion]]:
        for r in requests:
            validate_sampling(self.name, r.sampling)
            if r.sampling.choices and r.sampling.logprobs is not None:
                raise LMError(f"{self.name}: sampling logprobs are not returned with choices")
        self._ensure_worker()
        futures = []
        for r in requests:
            job = _Job(r, concurrent.futures.Future())
            self._queue.put(job)
            futures.append(asyncio.wrap_future(job.future))
        return list(await asyncio.gather(*futures))

    async def aclose(self) -> None:
        await asyncio.to_thread(self.stop_worker)

    def stop_worker(self, timeout: float | None = None) -> None:
        """Let the worker thread finish its batch and end."""
        thread = self._thread
        if thread is not None and thread.is_alive():
            self._queue.put(None)
            thread.join(timeout)
        self._thread = None

    def text_ids(self, text: str) -> list[int]:
        """Token ids of a piece of completion text (no special tokens added)."""
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def decode(self, prompt_ids: list[int], tokens: list[int]) -> str:
        """Completion text as a streaming detokenizer gives it (vLLM's way).

        Decoding token by token, primed with the prompt, drops an unfinished multi-byte character
        at the end instead of showing U+FFFD, so cut-off completions read the same on every
        backend. Slow (Python) tokenizers fall back to a plain decode.
        """
        backend = getattr(self.tokenizer, "_tokenizer", None)
        if backend is None or DecodeStream is None:
            return self.tokenizer.decode(tokens, skip_special_tokens=True)
        try:
            stream = DecodeStream(ids=prompt_ids, skip_special_tokens=True)
            return "".join(chunk for t in tokens
                           if (chunk := stream.step(backend, t)) is not None)
        except Exception:  # noqa: BLE001 - invalid-prefix corner cases of the stream decoder
            return self.tokenizer.decode(tokens, skip_special_tokens=True)

    # --- worker thread -------------------------------------------------------------------
    def _ensure_worker(self) -> None:
        with self._start_lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._work, name="clew-hf", daemon=True)
                self._thread.start()
                _WORKING.add(self)

    def _work(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            batch = [job]
            deadline = time.monotonic() + self.batch_window
            stop = False
            while len(batch) < self.max_batch_size:
                try:
                    nxt = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    break
                if nxt is None:
                    stop = True
                    break
                batch.append(nxt)
            self._run(batch)
            if stop:
                return

    def _run(self, batch: list[_Job]) -> None:
        live = []
        for job in batch:
            if job.future.set_running_or_notify_cancel():
                try:
                    job.prompt_ids = self.prompt_ids(job.request.messages)
                    need = len(job.prompt_ids) + job.request.sampling.max_tokens
                    if self.context_length and need > self.context_length:
                        raise ContextLengthError(
                            f"{self.name}: prompt of {len(job.prompt_ids)} tokens + max_tokens "
                            f"{job.request.sampling.max_tokens} exceed the context of "
                            f"{self.context_length}")
                except Exception as e:  # noqa: BLE001 - handed to the caller
                    job.future.set_exception(e if isinstance(e, (LMError, ContextLengthError))
                                             else LMError(
                        f"{self.name}: cannot render the chat prompt: {e}"))
                    continue
                live.append(job)
        if not live:
            return
        self.batches.append(len(live))
        groups: dict[tuple, list[_Job]] = {}
        for job in live:
            groups.setdefault(self._group_key(job), []).append(job)
        for group in groups.values():
            try:
                results = self._generate_group(group)
            except Exception as e:  # noqa: BLE001 - every caller in the group gets the error
                err = LMError(f"{self.name}: generation failed: {type(e).__name__}: {e}")
                for job in group:
                    job.future.set_exception(err)
                continue
            for job, comps in zip(group, results):
                job.future.set_result(comps)

    @staticmethod
    def _group_key(job: _Job) -> tuple:
        s = job.request.sampling
        if s.temperature <= 0:
            return ("greedy",)
        if s.seed is not None:
            return ("seeded", id(job))
        return ("sample", s.temperature, s.top_p)

    def _free_limits(self, s: Sampling) -> tuple[list[str], int]:
        """Stop strings and token budget of a row's generated text. With choices that is the free
        part: the answer phrase stops it, and the longest answer's tokens stay unspent."""
        stops = list(s.stop or [])
        if not s.choices:
            return stops, s.max_tokens
        longest = max(len(self.text_ids("\n" + answer_suffix(c, s.answer_phrase)))
                      for c in s.choices)
        return [*stops, s.answer_phrase], max(1, s.max_tokens - longest - 1)

    def _generate_group(self, group: list[_Job]) -> list[list[Completion]]:
        first = group[0].request.sampling
        greedy = first.temperature <= 0
        rows: list[tuple[int, _Job]] = []  # (job index, job) per generated row
        for i, job in enumerate(group):
            rows.extend([(i, job)] * (1 if greedy else job.request.sampling.n))
        limits = [self._free_limits(job.request.sampling) for _, job in rows]
        padded = self.tokenizer.pad({"input_ids": [job.prompt_ids for _, job in rows]},
                                    padding=True, return_tensors="pt")
        input_ids = padded["input_ids"].to(self.device)
        attention = padded["attention_mask"].to(self.device)
        criteria = _RowStops(self.tokenizer, input_ids.shape[1], self.eos_ids,
                             [stops for stops, _ in limits], [budget for _, budget in limits])
        want_logprobs = any(job.request.sampling.logprobs is not None for job in group)
        kwargs: dict[str, Any] = {
            "input_ids": input_ids, "attention_mask": attention,
            "max_new_tokens": max(budget for _, budget in limits),
            "stopping_criteria": [criteria], "pad_token_id": self.tokenizer.pad_token_id,
            "eos_token_id": sorted(self.eos_ids), "repetition_penalty": 1.0,
            "return_dict_in_generate": True, "output_logits": want_logprobs,
        }
        if greedy:
            kwargs.update(do_sample=False, temperature=None, top_p=None)
        else:
            kwargs.update(do_sample=True, temperature=first.temperature, top_p=first.top_p,
                          top_k=0)
        with torch.inference_mode():
            if not greedy and first.seed is not None:
                devices = [torch.device(self.device)] if self.device.startswith("cuda") else []
                with torch.random.fork_rng(devices=devices):
                    torch.manual_seed(first.seed)
                    out = self.model.generate(**kwargs)
            else:
                out = self.model.generate(**kwargs)
        generated = out.sequences[:, input_ids.shape[1]:]
        comps: list[Completion] = []
        constrained: list[tuple[int, bool]] = []   # rows answered below, and wrote_phrase
        for r, (_, job) in enumerate(rows):
            s = job.request.sampling
            end, reason = criteria.result(r, generated.shape[1])
            tokens = generated[r, :end].tolist()
            full = self.decode(job.prompt_ids, tokens)
            text, cut = cut_at_stop(full, limits[r][0])
            if cut:
                reason = "stop"
            logprobs = None
            if s.logprobs is not None:
                logprobs = self._logprobs(out.logits, r, tokens, s.logprobs)
            comps.append(Completion(text, reason,
                                    Usage(len(job.prompt_ids), len(tokens), 1), logprobs))
            if s.choices:   # did the model write the phrase (its free part stopped there)?
                constrained.append((r, cut and full[len(text):].startswith(s.answer_phrase)))
        if constrained:
            self._answer([comps[r] for r, _ in constrained], [rows[r][1] for r, _ in constrained],
                         [wrote for _, wrote in constrained])
        per_job: list[list[Completion]] = [[] for _ in group]
        for (i, _), comp in zip(rows, comps):
            per_job[i].append(comp)
        if greedy:  # n copies of the one greedy decode
            for i, job in enumerate(group):
                per_job[i] = per_job[i] * job.request.sampling.n
        return per_job

    # --- constrained answers -------------------------------------------------------------
    def _answer(self, comps: list[Completion], jobs: list[_Job], wrote_phrase: list[bool]
                ) -> None:
        """Complete each free part (``comps``, in place) with its phrase and a chosen answer
        (see the module docstring): all choices of all rows are scored together; each request
        draws its rows' answers from one generator seeded by its seed."""
        heads, contexts = [], []
        for comp, job, wrote in zip(comps, jobs, wrote_phrase):
            phrase = job.request.sampling.answer_phrase
            free = comp.text
            if free and not wrote and not free[-1].isspace():
                free += "\n"
            head = f"{free}{phrase} {FENCE}"
            heads.append(head)
            contexts.append(job.prompt_ids + self.text_ids(head))
        scores = self.choice_logprobs(contexts, [job.request.sampling.choices for job in jobs])
        generators: dict[int, torch.Generator | None] = {}
        for comp, job, head, lps, wrote in zip(comps, jobs, heads, scores, wrote_phrase):
            s = job.request.sampling
            if s.temperature <= 0:
                k = max(range(len(lps)), key=lps.__getitem__)
            else:
                if id(job) not in generators:
                    generators[id(job)] = (None if s.seed is None
                                           else torch.Generator().manual_seed(s.seed))
                probs = torch.softmax(torch.tensor(lps) / s.temperature, dim=0)
                k = int(torch.multinomial(probs, 1, generator=generators[id(job)]))
            forced = f"{head}{s.choices[k]}{FENCE}"[len(comp.text):]
            if wrote:   # its tokens were generated (and counted) already
                forced = forced.removeprefix(s.answer_phrase)
            comp.text = f"{head}{s.choices[k]}{FENCE}"
            comp.finish_reason = "stop"
            comp.usage = Usage(comp.usage.prompt_tokens, comp.usage.completion_tokens
                               + len(self.text_ids(forced)) + 1, 1)

    def choice_logprobs(self, contexts: list[list[int]], choices: list[list[str]]
                        ) -> list[list[float]]:
        """Per context, the log-probability of each choice's continuation: ``CHOICE`` and the
        closing fence, then the end of the turn (any EOS token). The context is run once and
        its KV cache repeated for its choices (an EL answer may have dozens of ``backtrack S<k>``
        choices after a 2k-token context); the continuations go right-padded in chunks of
        ``max_batch_size``. A context met again with the same choices (the samples of a request
        whose free parts are alike, as a one-turn policy's mostly are) is scored once."""
        eos = torch.tensor(sorted(self.eos_ids), device=self.device)
        pad = self.tokenizer.pad_token_id
        out: list[list[float]] = []
        scored: dict[tuple, list[float]] = {}
        for ctx, cs in zip(contexts, choices):
            key = (tuple(ctx), tuple(cs))
            if key in scored:
                out.append(list(scored[key]))
                continue
            conts = [self.text_ids(c + FENCE) for c in cs]
            with torch.inference_mode():
                head = self.model(input_ids=torch.tensor([ctx], device=self.device),
                                  use_cache=True, logits_to_keep=1)
            first = torch.log_softmax(head.logits[0, -1].float(), dim=-1)
            scores: list[float] = []
            for start in range(0, len(conts), self.max_batch_size):
                chunk = conts[start:start + self.max_batch_size]
                width = max(len(c) for c in chunk)
                cache = copy.deepcopy(head.past_key_values)   # the forward pass extends it
                cache.batch_repeat_interleave(len(chunk))
                ids = torch.tensor([c + [pad] * (width - len(c)) for c in chunk],
                                   device=self.device)
                mask = torch.tensor([[1] * (len(ctx) + len(c)) + [0] * (width - len(c))
                                     for c in chunk], device=self.device)
                positions = torch.arange(len(ctx), len(ctx) + width,
                                         device=self.device).expand(len(chunk), -1)
                with torch.inference_mode():
                    logits = self.model(input_ids=ids, attention_mask=mask, position_ids=positions,
                                        past_key_values=cache, use_cache=True).logits
                logp = torch.log_softmax(logits.float(), dim=-1)
                for row, cont in enumerate(chunk):
                    # token j of the continuation is predicted after token j - 1 (or the context)
                    total = float(first[cont[0]]) + sum(float(logp[row, j - 1, cont[j]])
                                                        for j in range(1, len(cont)))
                    total += float(torch.logsumexp(logp[row, len(cont) - 1, eos], dim=0))
                    scores.append(total)
            scored[key] = scores
            out.append(scores)
        return out

    def _logprobs(self, logits: tuple, row: int, tokens: list[int], top: int) -> list[dict]:
        out = []
        for t, tok in enumerate(tokens):
            lp = torch.log_softmax(logits[t][row].float(), dim=-1)
            entry = {"token": self.tokenizer.decode([tok]), "logprob": float(lp[tok]), "id": tok}
            if top:
                vals, ids = torch.topk(lp, top)
                entry["top_logprobs"] = [
                    {"token": self.tokenizer.decode([int(j)]), "logprob": float(v), "id": int(j)}
                    for v, j in zip(vals, ids)]
            out.append(entry)
        return out


#: models whose worker thread may be running, stopped at exit (see :func:`_stop_workers`)
_WORKING: weakref.WeakSet = weakref.WeakSet()


@atexit.register
def _stop_workers() -> None:
    """Before the interpreter goes, let each worker finish its batch: a daemon thread still
    inside torch then aborts the process ("terminate called without an active exception"),
    e.g. after SIGTERM stopped a run while a batch was generating."""
    for lm in list(_WORKING):
        lm.stop_worker(timeout=120)


class _RowStops(StoppingCriteria):
    """Per-row stopping: EOS, the row's stop strings, the row's own max_tokens.

    Remembers where each row ended, so the completion keeps exactly the tokens generated up to
    its end (the padding ``generate`` adds after a finished row is dropped).
    """

    def __init__(self, tokenizer, prompt_len: int, eos_ids: set[int], stops: list[list[str]],
                 max_tokens: list[int]):
        self.tokenizer = tokenizer
        self.prompt_len = prompt_len
        self.eos_ids = eos_ids
        self.stops = stops
        self.max_tokens = max_tokens
        self.ends: list[tuple[int, str] | None] = [None] * len(stops)
        # a stop string of L characters spans at most 4L byte-level tokens
        self.windows = [4 * max((len(s) for s in row), default=0) + 2 for row in stops]

    def __call__(self, input_ids, scores, **kwargs):
        gen_len = input_ids.shape[1] - self.prompt_len
        for r, end in enumerate(self.ends):
            if end is not None:
                continue
            eos = int(input_ids[r, -1]) in self.eos_ids
            if eos or (self.stops[r] and self._has_stop(input_ids[r], gen_len, r)):
                self.ends[r] = (gen_len, "stop")
            elif gen_len >= self.max_tokens[r]:
                self.ends[r] = (gen_len, "length")
        return torch.tensor([e is not None for e in self.ends], device=input_ids.device)

    def _has_stop(self, ids, gen_len: int, r: int) -> bool:
        tail = ids[self.prompt_len + max(0, gen_len - self.windows[r]):].tolist()
        text = self.tokenizer.decode(tail, skip_special_tokens=True)
        return any(s and s in text for s in self.stops[r])

    def result(self, r: int, gen_len: int) -> tuple[int, str]:
        return self.ends[r] or (gen_len, "length")
