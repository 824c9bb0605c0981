"""The OpenAI-compatible backend against a fake server on 127.0.0.1 (docs/architecture.md#contracts)."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from clew.agents.lm.base import ChatRequest, LMError, Sampling, request_usage
from clew.agents.lm.spec import load_model


class FakeServer:
    """A chat-completions server whose behaviour a test scripts.

    ``mode``: "ok" answers; "hang" never answers in time; "fail:K" answers 503 K times, then
    ok; "bad" answers 400. Every request body is kept in ``bodies``.
    """

    def __init__(self, mode: str = "ok", delay: float = 0.0, models=("tiny",)):
        self.mode, self.delay, self.models = mode, delay, list(models)
        self.bodies: list[dict] = []
        self.attempts = 0
        self.in_flight = self.max_in_flight = 0
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def _send(self, code: int, payload: dict):
                data = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if self.path.endswith("/models"):
                    self._send(200, {"object": "list", "data": [
                        {"id": m, "object": "model", "created": 0, "owned_by": "me"}
                        for m in server.models]})
                else:
                    self._send(404, {"error": {"message": "no such path"}})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server.lock:
                    server.attempts += 1
                    server.bodies.append(body)
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    server.answer(self, body)
                finally:
                    with server.lock:
                        server.in_flight -= 1

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def answer(self, handler, body: dict) -> None:
        if self.mode == "hang":
            time.sleep(5)
            return
        if self.mode == "bad":
            handler._send(400, {"error": {"message": "max_tokens is too large"}})
            return
        if self.mode.startswith("fail:"):
            left = int(self.mode.split(":")[1])
            if left > 0:
                self.mode = f"fail:{left - 1}"
                handler._send(503, {"error": {"message": "overloaded"}})
                return
        time.sleep(self.delay)
        last = body["messages"][-1]["content"]
        n = body.get("n", 1)
        choices = [{"index": i, "finish_reason": "stop", "logprobs": None,
                    "message": {"role": "assistant", "content": f"echo {i}: {last}"}}
                   for i in range(n)]
        handler._send(200, {
            "id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
            "choices": choices,
            "usage": {"prompt_tokens": 11, "completion_tokens": 7,
                      "total_tokens": 18},
        })

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def req(text: str = "hello", n: int = 1, **kw) -> ChatRequest:
    return ChatRequest([{"role": "user", "content": text}], Sampling(n=n, **kw), role="value")


def test_answers_with_n_samples_and_sends_the_sampling():
    with FakeServer() as srv:
        lm = load_model(f"openai:{srv.url}#tiny", shared=False)
        comps = asyncio.run(lm.complete(req("hi", n=3, temperature=0.5, top_p=0.9, seed=4,
                                            stop=["\n"], max_tokens=9)))
    assert [c.text for c in comps] == ["echo 0: hi", "echo 1: hi", "echo 2: hi"]
    [body] = srv.bodies  # the n samples travel in one request
    assert (body["n"], body["temperature"], body["top_p"], body["seed"], body["stop"],
            body["max_tokens"], body["model"]) == (3, 0.5, 0.9, 4, ["\n"], 9, "tiny")
    usage = request_usage(comps)
    assert (usage.prompt_tokens, usage.completion_tokens, usage.calls) == (11, 7, 1)


def test_sampling_the_server_would_fill_from_the_generation_config_is_sent_neutral():
    """The in-process vllm: engine samples with top-k, min-p and penalties off; a vllm serve
    server would fill what a request leaves out from the model's generation_config.json."""
    with FakeServer() as srv:
        asyncio.run(load_model(f"openai:{srv.url}#tiny", shared=False).complete(req()))
        lm = load_model(f"openai:{srv.url}#tiny", shared=False,
                        extra_body={"top_k": 5, "chat_template_kwargs": {"x": 1}})
        asyncio.run(lm.complete(req()))
        lm = load_model(f"openai:{srv.url}#tiny", shared=False, neutral_sampling=False)
        asyncio.run(lm.complete(req()))
    neutral, chosen, plain = srv.bodies
    assert {k: neutral[k] for k in ("top_k", "min_p", "repetition_penalty", "presence_penalty",
                                    "frequency_penalty")} == {
        "top_k": -1, "min_p": 0.0, "repetition_penalty": 1.0, "presence_penalty": 0.0,
        "frequency_penalty": 0.0}
    assert chosen["top_k"] == 5 and chosen["min_p"] == 0.0 and chosen["chat_template_kwargs"]
    assert not {"top_k", "min_p", "repetition_penalty", "presence_penalty"} & set(plain)


def test_model_is_discovered_when_the_spec_names_none():
    with FakeServer(models=["only-one"]) as srv:
        lm = load_model(f"openai:{srv.url}", shared=False)
        asyncio.run(lm.complete(req()))
    assert srv.bodies[0]["model"] == "only-one"
    with FakeServer(models=["a", "b"]) as srv:
        lm = load_model(f"openai:{srv.url}", shared=False)
        with pytest.raises(LMError, match="serves 2"):
            asyncio.run(lm.complete(req()))


def test_server_errors_are_retried_then_succeed():
    with FakeServer(mode="fail:2") as srv:
        lm = load_model(f"openai:{srv.url}#tiny", shared=False, retries=3, backoff=0.01)
        assert asyncio.run(lm.complete(req("x")))[0].text == "echo 0: x"
    assert srv.attempts == 3


def test_a_bad_request_is_not_retried():
    with FakeServer(mode="bad") as srv:
        lm = load_model(f"openai:{srv.url}#tiny", shared=False, retries=3, backoff=0.01)
        with pytest.raises(LMError) as err:
            asyncio.run(lm.complete(req()))
    assert srv.attempts == 1
    msg = str(err.value)
    assert srv.url in msg and "HTTP 400" in msg and "max_tokens is too large" in msg


def _dead_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_dead_server_gives_a_clear_error_after_bounded_retries():
    url = f"http://127.0.0.1:{_dead_port()}/v1"
    lm = load_model(f"openai:{url}#m", shared=False, retries=2, backoff=0.05, timeout=2.0)
    start = time.monotonic()
    with pytest.raises(LMError) as err:
        asyncio.run(lm.complete(req()))
    assert time.monotonic() - start < 5.0
    msg = str(err.value)
    assert url in msg and "3 attempt(s)" in msg and "cannot connect" in msg


def test_hanging_server_times_out_within_a_bound():
    with FakeServer(mode="hang") as srv:
        lm = load_model(f"openai:{srv.url}#tiny", shared=False, retries=1, backoff=0.05,
                        timeout=0.3)
        start = time.monotonic()
        with pytest.raises(LMError) as err:
            asyncio.run(lm.complete(req()))
        elapsed = time.monotonic() - start
    # two attempts of 0.3 s plus one backoff, with generous slack for a loaded machine
    assert elapsed < 3.0
    assert "timeout" in str(err.value) and "2 attempt(s)" in str(err.value)
    assert srv.attempts == 2


def test_concurrency_is_bounded():
    with FakeServer(delay=0.1) as srv:
        lm = load_model(f"openai:{srv.url}#tiny", shared=False, max_concurrency=2)

        async def many():
            return await lm.generate([req(str(i)) for i in range(6)])

        out = asyncio.run(many())
    assert [c[0].text for c in out] == [f"echo 0: {i}" for i in range(6)]
    assert srv.max_in_flight == 2


def test_one_model_serves_several_event_loops():
    with FakeServer() as srv:
        lm = load_model(f"openai:{srv.url}#tiny", shared=False)
        for i in range(3):
            assert asyncio.run(lm.complete(req(str(i))))[0].text == f"echo 0: {i}"


def test_every_retry_is_logged_with_its_reason_and_wait(caplog):
    """Transport retries are visible: one warning line per retry (issue 11 item 5)."""
    with FakeServer(mode="fail:2") as srv:
        lm = load_model(f"openai:{srv.url}#tiny", shared=False, retries=3, backoff=0.01)
        with caplog.at_level(logging.WARNING, logger="clew.agents.lm.openai_backend"):
            asyncio.run(lm.complete(req("x")))
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2 and all("\n" not in line for line in lines)
    assert srv.url in lines[0] and "HTTP 503: overloaded" in lines[0]
    assert "retry 1 of 3 in 0.01 s" in lines[0] and "retry 2 of 3 in 0.02 s" in lines[1]


def test_a_connection_failure_is_logged_too(caplog):
    url = f"http://127.0.0.1:{_dead_port()}/v1"
    lm = load_model(f"openai:{url}#m", shared=False, retries=1, backoff=0.01, timeout=2.0)
    with caplog.at_level(logging.WARNING, logger="clew.agents.lm.openai_backend"), \
            pytest.raises(LMError):
        asyncio.run(lm.complete(req()))
    [line] = [r.getMessage() for r in caplog.records]
    assert "cannot connect" in line and "retry 1 of 1" in line


def test_a_programming_error_propagates_at_once_with_its_traceback(monkeypatch, caplog):
    """Not a transport failure: no retry, no LMError, the original exception."""
    attempts = []

    class Completions:
        async def create(self, **kwargs):
            attempts.append(kwargs)
            raise TypeError("create() got an unexpected keyword argument 'n_samples'")

    class Client:
        chat = type("Chat", (), {"completions": Completions()})()

    with FakeServer() as srv:
        lm = load_model(f"openai:{srv.url}#tiny", shared=False, retries=3, backoff=0.01)
        monkeypatch.setattr(lm, "_client", lambda: (Client(), asyncio.Semaphore(1)))
        with caplog.at_level(logging.WARNING), pytest.raises(TypeError) as err:
            asyncio.run(lm.complete(req()))
    assert len(attempts) == 1 and not caplog.records and srv.attempts == 0
    assert any(frame.name == "create" for frame in err.traceback)   # the bug's own frame


def test_choices_go_as_a_structured_outputs_regex():
    """Constrained answers (docs/methods/parsing.md#constrained-answers): the body carries the
    regex as vLLM's OpenAI-compatible server reads it, next to the model's extra_body."""
    import re

    from clew.agents.lm.base import choices_regex

    with FakeServer() as srv:
        lm = load_model(f"openai:{srv.url}#tiny", shared=False, extra_body={"top_k": 5})
        asyncio.run(lm.complete(req(choices=["up", "backtrack S1"])))
        asyncio.run(lm.complete(req()))
    constrained, free = srv.bodies
    regex = constrained["structured_outputs"]["regex"]
    assert regex == choices_regex(["up", "backtrack S1"]) and constrained["top_k"] == 5
    assert re.fullmatch(regex, "I go.\nNext action: ```backtrack S1```")
    assert not re.fullmatch(regex, "Next action: ```down```")
    assert "structured_outputs" not in free and lm.extra_body == {
        "top_k": 5, "min_p": 0.0, "repetition_penalty": 1.0}
