"""The llama.cpp engine behind the part of vLLM's OpenAI server that Parley uses.

    python -m webapp.infra.llamacpp_server --gguf MODEL.gguf --tokenizer MODEL_DIR --port 8001

Routes, with vLLM's request and answer shapes, so ``webapp.inference``, the publisher and the
judge talk to either engine alike: ``POST /v1/chat/completions`` (real streaming, ``n``,
``logprobs``, ``return_token_ids``, usage), ``GET /v1/models``, ``POST /v1/load_lora_adapter``
(a peft folder, converted to GGUF on load: ``trainer.gguf_lora``), ``POST
/v1/unload_lora_adapter``, ``POST /tokenize`` and ``GET /health``. ``/v1`` routes want the API
key (``VLLM_API_KEY``) when one is set. What it cannot do as vLLM does (guided decoding:
``response_format``, ``tool_choice`` "required" or a named tool) it refuses with a 400 that
says so, rather than answering something else.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import secrets
import time
from pathlib import Path
from typing import Any

from aiohttp import web

from webapp.infra.llama_library import weights_as
from webapp.infra.llamacpp_choices import Choice, EngineFailed, merged, message, usage
from webapp.infra.llamacpp_engine import EngineError, LlamaEngine, Request
from webapp.infra.llamacpp_requests import (
    Refused,
    eos_ids,
    load_tokenizer,
    prompt_ids,
    sampling,
)
from webapp.infra.sampling import Sampling

log = logging.getLogger(__name__)
BASE_NAME = "base"
DONE = "data: [DONE]\n\n"


def _error(status: int, message: str, kind: str = "BadRequestError") -> web.Response:
    body = {"error": {"message": message, "type": kind, "param": None, "code": status}}
    return web.json_response(body, status=status)


class Server:
    def __init__(
        self, engine: LlamaEngine, tokenizer: Any, *, served_name: str, api_key: str
    ) -> None:
        self.engine = engine
        self.tokenizer = tokenizer
        self.served_name = served_name
        self.api_key = api_key

    # --- rendering -----------------------------------------------------------------------

    def prompt_ids(self, body: dict[str, Any]) -> list[int]:
        return prompt_ids(self.tokenizer, body)

    def sampling(self, body: dict[str, Any], prompt: int) -> Sampling:
        return sampling(self.tokenizer, body, window=self.engine.context, prompt=prompt)

    def adapter_for(self, model: str) -> str | None:
        if model in (self.served_name, BASE_NAME):
            return None
        if model not in self.engine.adapters():
            raise Refused(404, f"The model `{model}` does not exist.", "NotFoundError")
        return model

    # --- routes ------------------------------------------------------------------------------

    async def chat(self, http: web.Request) -> web.StreamResponse:
        body = await _json(http)
        prompt = self.prompt_ids(body)
        adapter = self.adapter_for(str(body.get("model") or ""))
        sampling = self.sampling(body, len(prompt))
        n = int(body.get("n") or 1)
        streams = [Choice(self, index, body) for index in range(n)]
        for choice in streams:
            choice_sampling = Sampling(**{**sampling.__dict__})
            if sampling.seed is not None:
                choice_sampling.seed = int(sampling.seed) + choice.index
            choice.request = Request(
                prompt,
                choice_sampling,
                adapter,
                choice.emit,
                priority=int(body.get("priority") or 0),
            )
            try:
                self.engine.submit(choice.request)
            except EngineError as exc:
                for started in streams[: choice.index]:
                    started.request.cancel()
                status = 404 if "does not exist" in str(exc) else 400
                raise Refused(
                    status, str(exc), "NotFoundError" if status == 404 else "BadRequestError"
                ) from exc
        head = {
            "id": f"chatcmpl-{secrets.token_hex(12)}",
            "created": int(time.time()),
            "model": body.get("model"),
        }
        try:
            if body.get("stream"):
                return await self._stream(http, body, head, prompt, streams)
            return await self._whole(body, head, prompt, streams)
        finally:
            for choice in streams:
                choice.request.cancel()

    async def _stream(
        self,
        http: web.Request,
        body: dict[str, Any],
        head: dict[str, Any],
        prompt: list[int],
        streams: list[Choice],
    ) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(http)
        first: dict[str, Any] = {
            **head,
            "object": "chat.completion.chunk",
            "choices": [
                {
                    "index": c.index,
                    "delta": {"role": "assistant", "content": ""},
                    "logprobs": None,
                    "finish_reason": None,
                }
                for c in streams
            ],
        }
        if body.get("return_token_ids"):
            first["prompt_token_ids"] = prompt
        await response.write(_event(first))
        try:
            async for choice, delta in merged(streams):
                chunk = {
                    **head,
                    "object": "chat.completion.chunk",
                    "choices": [choice.chunk(delta, body)],
                }
                await response.write(_event(chunk))
        except EngineFailed as exc:
            error = {"message": f"the engine failed: {exc}", "type": "InternalServerError"}
            await response.write(_event({"error": {**error, "code": 500}}))
            await response.write(DONE.encode())
            return response
        if (body.get("stream_options") or {}).get("include_usage"):
            last = {
                **head,
                "object": "chat.completion.chunk",
                "choices": [],
                "usage": usage(prompt, streams),
            }
            await response.write(_event(last))
        await response.write(DONE.encode())
        await response.write_eof()
        return response

    async def _whole(
        self,
        body: dict[str, Any],
        head: dict[str, Any],
        prompt: list[int],
        streams: list[Choice],
    ) -> web.Response:
        try:
            async for _ in merged(streams):
                pass
        except EngineFailed as exc:
            raise Refused(500, f"the engine failed: {exc}", "InternalServerError") from exc
        choices = []
        for choice in streams:
            entry: dict[str, Any] = {
                "index": choice.index,
                "message": message(choice),
                "logprobs": {"content": choice.logprob_items} if body.get("logprobs") else None,
                "finish_reason": choice.finish,
            }
            if body.get("return_token_ids"):
                entry["token_ids"] = choice.ids
            choices.append(entry)
        answer: dict[str, Any] = {**head, "object": "chat.completion", "choices": choices}
        answer["usage"] = usage(prompt, streams)
        if body.get("return_token_ids"):
            answer["prompt_token_ids"] = prompt
        return web.json_response(answer)

    async def models(self, http: web.Request) -> web.Response:
        now = int(time.time())
        data = [
            {
                "id": self.served_name,
                "object": "model",
                "created": now,
                "owned_by": "parley",
                "root": self.served_name,
                "parent": None,
                "max_model_len": self.engine.context,
            }
        ]
        for name, path in sorted(self.engine.adapters().items()):
            data.append(
                {
                    "id": name,
                    "object": "model",
                    "created": now,
                    "owned_by": "parley",
                    "root": path,
                    "parent": self.served_name,
                }
            )
        return web.json_response({"object": "list", "data": data})

    async def load_adapter(self, http: web.Request) -> web.Response:
        body = await _json(http)
        name, path = str(body.get("lora_name") or ""), str(body.get("lora_path") or "")
        if not name or not path:
            raise Refused(400, "'lora_name' and 'lora_path' are required.")
        if name in self.engine.adapters() and not body.get("load_inplace"):
            raise Refused(400, f"The lora adapter '{name}' has already been loaded.")
        loop = asyncio.get_running_loop()
        try:
            gguf = await loop.run_in_executor(None, self._convert, path)
            await loop.run_in_executor(None, self.engine.load_adapter, name, gguf, path)
        except (OSError, ValueError, KeyError, EngineError) as exc:
            raise Refused(400, f"loading the adapter '{name}' from {path} failed: {exc}") from exc
        return web.Response(text=f"Success: LoRA adapter '{name}' added successfully.")

    def _convert(self, path: str) -> Path:
        from trainer.gguf_lora import convert

        config = self.tokenizer.model_config
        return convert(
            path,
            heads=config["num_attention_heads"],
            kv_heads=config.get("num_key_value_heads") or config["num_attention_heads"],
        )

    async def unload_adapter(self, http: web.Request) -> web.Response:
        body = await _json(http)
        name = str(body.get("lora_name") or "")
        loop = asyncio.get_running_loop()
        if not await loop.run_in_executor(None, self.engine.unload_adapter, name):
            raise Refused(404, f"The lora adapter '{name}' cannot be found.", "NotFoundError")
        return web.Response(text=f"Success: LoRA adapter '{name}' removed successfully.")

    async def tokenize(self, http: web.Request) -> web.Response:
        body = await _json(http)
        ids = self.prompt_ids(body)
        return web.json_response(
            {"count": len(ids), "max_model_len": self.engine.context, "tokens": ids}
        )

    async def health(self, http: web.Request) -> web.Response:
        return web.Response(text="", status=200 if self.engine.alive() else 503)


def _event(payload: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(payload, ensure_ascii=False)}\n\n".encode()


async def _json(http: web.Request) -> dict[str, Any]:
    try:
        body = await http.json()
    except ValueError as exc:
        raise Refused(400, f"the body is not JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise Refused(400, "the body must be a JSON object.")
    return body


def application(server: Server) -> web.Application:
    @web.middleware
    async def guard(http: web.Request, handler: Any) -> web.StreamResponse:
        if server.api_key and http.path.startswith("/v1"):
            if http.headers.get("Authorization") != f"Bearer {server.api_key}":
                return _error(401, "Unauthorized", "AuthenticationError")
        try:
            return await handler(http)
        except Refused as exc:
            return _error(exc.status, str(exc), exc.kind)
        except (web.HTTPException, ConnectionResetError):
            raise
        except (ValueError, TypeError, KeyError) as exc:  # a field of the wrong kind
            return _error(400, f"the request could not be read: {exc!r}")
        except Exception as exc:
            log.exception("%s failed", http.path)
            return _error(500, f"the engine failed: {exc!r}", "InternalServerError")

    app = web.Application(middlewares=[guard], client_max_size=64 * 1024 * 1024)
    app.router.add_post("/v1/chat/completions", server.chat)
    app.router.add_get("/v1/models", server.models)
    app.router.add_post("/v1/load_lora_adapter", server.load_adapter)
    app.router.add_post("/v1/unload_lora_adapter", server.unload_adapter)
    app.router.add_post("/tokenize", server.tokenize)
    app.router.add_get("/health", server.health)
    return app


def default_threads() -> int:
    """Half the cores (one on two): the other half is training's. llama.cpp's threads wait for
    each other at every layer, so one that loses its core stalls them all: on 2 cores, with a
    busy process beside it (training, even at nice 10), 2 threads fell from 90 to 1.5 tok/s,
    and 1 thread held 73-82 tok/s, busy neighbour or not."""
    return max(1, (os.cpu_count() or 2) // 2)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gguf", required=True)
    parser.add_argument("--tokenizer", required=True, help="the base model's Hugging Face folder")
    parser.add_argument("--served-model-name", default=BASE_NAME)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8001)
    parser.add_argument("--max-model-len", type=int, default=8192)
    parser.add_argument("--slots", type=int, default=8)
    parser.add_argument("--threads", type=int, default=0, help="0: default_threads()")
    parser.add_argument("--max-cpu-loras", type=int, default=32, help="adapters kept loaded")
    parser.add_argument(
        "--weights",
        choices=["f16", "f32", "file"],
        default="f16",
        help="the weights' type served (file: the GGUF's own); see llamacpp_engine.weights_as",
    )
    parser.add_argument(
        "--lora-modules", nargs="*", default=[], help="NAME=FOLDER, loaded at start"
    )
    args = parser.parse_args(argv)
    tokenizer = load_tokenizer(args.tokenizer)
    engine = LlamaEngine(
        weights_as(args.gguf, args.weights),
        context=args.max_model_len,
        slots=args.slots,
        threads=args.threads or default_threads(),
        eos_ids=eos_ids(args.tokenizer, tokenizer),
        max_adapters=args.max_cpu_loras,
    )
    server = Server(
        engine,
        tokenizer,
        served_name=args.served_model_name,
        api_key=os.environ.get("VLLM_API_KEY", ""),
    )
    for entry in args.lora_modules:
        name, _, folder = entry.partition("=")
        try:
            engine.load_adapter(name, server._convert(folder), folder)
        except (OSError, ValueError, EngineError) as exc:
            print(f"serve: adapter {name} from {folder} not loaded: {exc}")
    print(f"llama.cpp engine ready on http://{args.host}:{args.port}", flush=True)
    web.run_app(application(server), host=args.host, port=args.port, print=None, access_log=None)


if __name__ == "__main__":
    main()
