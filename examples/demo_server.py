"""A stand-in for SGLang's server, for envsync's built-in example on machines without GPUs.

It starts the way `python -m sglang.launch_server` (0.5.11) does, with the same imports at
the same moments, and serves SGLang's HTTP API, with made-up text:

  1. the HTTP server's module imports `soundfile` (SGLang's transcription routes,
     streaming_asr.py:5): missing, it dies at once with SGLang's ImportError;
  2. "loads the model" for --load-seconds (SGLang: weights, KV cache, CUDA graphs);
  3. creates the grammar backend chosen by --grammar-backend, importing the real package
     with the names SGLang's xgrammar_backend.py imports (`StructuralTag`, ...): xgrammar
     0.1.10 dies here with the story's `cannot import name 'StructuralTag'`;
  4. listens; /health answers 503 until a warmup /generate succeeds, then prints SGLang's
     "The server is fired up and ready to roll!".

Serves GET /health, /health_generate, /get_model_info and POST /generate (SGLang's shape)
and /v1/completions. Any other SGLang flag is accepted and ignored. Use your real SGLang
command in your inventory; this file is only for the example and envsync's tests.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

LOG = logging.getLogger("sglang.srt.entrypoints.http_server")
READY_LINE = "The server is fired up and ready to roll!"
WORDS = [
    "the",
    "draft",
    "tree",
    "proposes",
    "tokens",
    "and",
    "the",
    "target",
    "model",
    "verifies",
    "them",
    "in",
    "parallel",
]


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="demo_server", description=__doc__.splitlines()[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=30000)
    p.add_argument("--model-path", default="demo/dflash-draft")
    p.add_argument(
        "--grammar-backend",
        default="xgrammar",
        choices=["xgrammar", "outlines", "llguidance", "none"],
    )
    p.add_argument("--speculative-algorithm", default=None)
    p.add_argument("--attention-backend", default=None)
    p.add_argument(
        "--load-seconds", type=float, default=float(os.environ.get("DEMO_LOAD_SECONDS", "1.0"))
    )
    p.add_argument("--tokens-per-second", type=float, default=400.0)
    args, _ = p.parse_known_args(argv)  # SGLang has a hundred more flags
    return args


def create_grammar_backend(name: str) -> Any:
    """What SGLang's scheduler does last, after the model is loaded."""
    if name == "xgrammar":
        from xgrammar import (  # noqa: F401  (sglang/srt/constrained/xgrammar_backend.py:22)
            CompiledGrammar,
            GrammarCompiler,
            GrammarMatcher,
            StructuralTag,
            StructuralTagItem,
            TokenizerInfo,
            allocate_token_bitmask,
        )

        return GrammarCompiler
    if name == "outlines":
        import outlines

        return outlines
    if name == "llguidance":
        import llguidance

        return llguidance
    return None


class State:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.ready = False


def make_handler(state: State) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def reply(self, code: int, body: Any) -> None:
            data = json.dumps(body).encode() if body is not None else b""
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path in ("/health", "/health_generate"):
                self.reply(200 if state.ready else 503, None)
            elif self.path in ("/get_model_info", "/model_info"):
                self.reply(200, {"model_path": state.args.model_path, "is_generation": True})
            else:
                self.reply(404, {"error": f"no route {self.path}"})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except ValueError:
                self.reply(400, {"error": "invalid JSON"})
                return
            if self.path == "/generate":
                n = int((body.get("sampling_params") or {}).get("max_new_tokens", 16))
                text = self.generate(n)
                prompt = len(str(body.get("text", "")).split())
                self.reply(
                    200,
                    {
                        "text": text,
                        "meta_info": {
                            "id": uuid.uuid4().hex,
                            "prompt_tokens": prompt,
                            "completion_tokens": n,
                            "finish_reason": {"type": "length", "length": n},
                        },
                    },
                )
            elif self.path == "/v1/completions":
                n = int(body.get("max_tokens", 16))
                text = self.generate(n)
                self.reply(
                    200,
                    {
                        "id": uuid.uuid4().hex,
                        "object": "text_completion",
                        "model": state.args.model_path,
                        "choices": [{"index": 0, "text": text, "finish_reason": "length"}],
                        "usage": {
                            "prompt_tokens": len(str(body.get("prompt", "")).split()),
                            "completion_tokens": n,
                        },
                    },
                )
            else:
                self.reply(404, {"error": f"no route {self.path}"})

        def generate(self, n: int) -> str:
            time.sleep(n / state.args.tokens_per_second)
            return " ".join(WORDS[i % len(WORDS)] for i in range(n))

    return Handler


def warmup(state: State) -> None:
    import urllib.request

    url = f"http://{state.args.host}:{state.args.port}/generate"
    payload = json.dumps({"text": "warmup", "sampling_params": {"max_new_tokens": 4}}).encode()
    request = urllib.request.Request(url, payload, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        response.read()
    state.ready = True
    LOG.info(READY_LINE)


def main(argv: list[str]) -> int:
    logging.basicConfig(
        level=logging.INFO, stream=sys.stdout, force=True, format="[%(asctime)s] %(message)s"
    )
    args = parse(argv)
    LOG.info(
        "server_args: port=%s grammar_backend=%s speculative_algorithm=%s",
        args.port,
        args.grammar_backend,
        args.speculative_algorithm,
    )
    import soundfile  # noqa: F401  (sglang/srt/entrypoints/openai/streaming_asr.py:5)

    LOG.info("Load weight begin. model=%s", args.model_path)
    time.sleep(args.load_seconds)
    LOG.info("Load weight end. Capture cuda graph end.")
    create_grammar_backend(args.grammar_backend)
    state = State(args)
    server = ThreadingHTTPServer((args.host, args.port), make_handler(state))
    threading.Thread(target=warmup, args=(state,), daemon=True).start()
    LOG.info("Uvicorn running on http://%s:%s", args.host, args.port)
    sys.stdout.flush()
    server.serve_forever()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
