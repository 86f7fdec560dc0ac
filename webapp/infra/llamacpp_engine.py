"""llama.cpp as a continuous-batching engine with a LoRA adapter per request.

One thread owns the llama.cpp context and runs the loop: it admits waiting requests into
sequence slots (within the KV cache's room, lower ``priority`` first), and at each step decodes
one batch for the requests of one adapter (llama.cpp applies one adapter set per decode),
taking the adapters in turn: a new request's prompt in chunks, a running one's last token.
Logits are sampled here, in numpy, so the log-probs returned are those of the distribution the
token was drawn from (after temperature, top-k and top-p), as vLLM's ``processed_logprobs``
are, which the trainer's importance weights divide by.

Prompts are tokenized and rendered by the base model's own Hugging Face tokenizer and chat
template, so the token ids the trainer reads are exactly those the engine ran.
"""

from __future__ import annotations

import ctypes
import heapq
import itertools
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from webapp.infra.guided import GrammarMask, GuidedError
from webapp.infra.llama_library import library
from webapp.infra.sampling import Sampling, Token, sample

log = logging.getLogger(__name__)


QUANTUM = 4
"""Steps one adapter's answers run before the next adapter's: setting another adapter on the
context costs about as much as a step, so people with their own adapters take turns of a few
tokens rather than of one."""


class EngineError(Exception):
    """A request the engine cannot run (it does not fit, or names no such adapter)."""


Emit = Callable[[Token | None, str | None], None]
"""Called from the engine thread with each sampled token, then once with (None, finish
reason): "stop" (an end-of-sequence token), "length", "abort" or an error's message."""


@dataclass(order=True)
class _Waiting:
    priority: int
    order: int
    request: Request = field(compare=False)


@dataclass(eq=False)
class Request:
    prompt: list[int]
    sampling: Sampling
    adapter: str | None
    emit: Emit
    priority: int = 0
    cancelled: bool = False
    seq: int = -1
    fed: int = 0  # prompt tokens decoded so far
    generated: int = 0
    last: int = -1
    output: list[int] = field(default_factory=list)
    mask: GrammarMask | None = None
    rng: np.random.Generator = field(default_factory=np.random.default_rng)

    def cancel(self) -> None:
        self.cancelled = True


@dataclass
class _Adapter:
    handle: Any
    path: str
    users: int = 0
    retired: bool = False
    used: int = 0  # the admission count when a request last named it


class LlamaEngine:
    def __init__(
        self,
        gguf: str | Path,
        *,
        context: int,
        slots: int = 8,
        threads: int = 2,
        batch: int = 512,
        eos_ids: set[int] | None = None,
        max_adapters: int = 32,
    ) -> None:
        llama = library()
        self._llama = llama
        params = llama.llama_model_default_params()
        self._model = llama.llama_model_load_from_file(str(gguf).encode(), params)
        if not self._model:
            raise EngineError(f"llama.cpp could not load {gguf}")
        self.context = context
        self.kv_room = context * 2
        cparams = llama.llama_context_default_params()
        cparams.n_ctx = self.kv_room
        cparams.n_batch = batch
        cparams.n_ubatch = batch
        cparams.n_seq_max = slots
        cparams.n_threads = threads
        cparams.n_threads_batch = threads
        cparams.kv_unified = True
        cparams.no_perf = True
        self._ctx = llama.llama_init_from_model(self._model, cparams)
        if not self._ctx:
            raise EngineError("llama.cpp could not make a context")
        self._memory = llama.llama_get_memory(self._ctx)
        vocab = llama.llama_model_get_vocab(self._model)
        self._vocab = vocab
        self.vocab_size = llama.llama_vocab_n_tokens(vocab)
        self.eos_ids = eos_ids or {llama.llama_vocab_eos(vocab)}
        self._batch_size = batch
        self._batch = llama.llama_batch_init(batch, 0, 1)
        self._free_slots = list(range(slots))
        self._waiting: list[_Waiting] = []
        self._running: list[Request] = []
        self._adapters: dict[str, _Adapter] = {}
        self.max_adapters = max_adapters
        self._admitted = 0
        self._applied: Any = None  # the adapter handle set on the context
        self._turn = 0
        self._orders = itertools.count()
        self._commands: list[Callable[[], None]] = []
        self._wake = threading.Condition()
        self._thread = threading.Thread(target=self._loop, name="llamacpp", daemon=True)
        self._thread.start()

    # --- requests and adapters (any thread) --------------------------------------------------

    def submit(self, request: Request) -> None:
        if request.adapter is not None and request.adapter not in self._adapters:
            raise EngineError(f"The model `{request.adapter}` does not exist.")
        if len(request.prompt) + request.sampling.max_tokens > self.context:
            raise EngineError(
                f"This model's maximum context length is {self.context} tokens. However, your "
                f"prompt contains {len(request.prompt)} input tokens and "
                f"{request.sampling.max_tokens} output tokens were asked for."
            )
        if request.sampling.seed is not None:
            request.rng = np.random.default_rng(int(request.sampling.seed) % 2**64)
        with self._wake:
            heapq.heappush(self._waiting, _Waiting(request.priority, next(self._orders), request))
            self._wake.notify()

    def adapters(self) -> dict[str, str]:
        """Served name → adapter folder of each adapter a request may name."""
        return {name: a.path for name, a in list(self._adapters.items()) if not a.retired}

    def load_adapter(self, name: str, gguf: str | Path, folder: str) -> None:
        """Load a GGUF LoRA under ``name`` (replacing one of that name for new requests)."""
        done = threading.Event()
        failure: list[BaseException] = []

        def load() -> None:
            try:
                handle = self._llama.llama_adapter_lora_init(self._model, str(gguf).encode())
                if not handle:
                    raise EngineError(f"llama.cpp could not load the adapter {gguf}")
                old = self._adapters.get(name)
                if old is not None:
                    self._retire(old, name)
                self._adapters[name] = _Adapter(handle, folder, used=self._admitted)
                self._evict(keep=name)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                failure.append(exc)
            finally:
                done.set()

        self._command(load)
        done.wait()
        if failure:
            raise failure[0]

    def unload_adapter(self, name: str) -> bool:
        """Forget ``name`` for new requests; its memory goes when its last request ends."""
        adapter = self._adapters.get(name)
        if adapter is None or adapter.retired:
            return False
        done = threading.Event()

        def unload() -> None:
            try:
                self._retire(adapter, name)
            finally:
                done.set()

        self._command(unload)
        done.wait()
        return True

    def _command(self, command: Callable[[], None]) -> None:
        with self._wake:
            self._commands.append(command)
            self._wake.notify()

    # --- the engine thread -------------------------------------------------------------------

    def _evict(self, *, keep: str) -> None:
        """Past ``max_adapters``, forget the least recently used idle ones (as vLLM's
        --max-cpu-loras does): a request naming one gets a 404, and Parley loads it again."""
        with self._wake:
            waiting = {entry.request.adapter for entry in self._waiting}
        idle = sorted(
            (a.used, name)
            for name, a in self._adapters.items()
            if name != keep and a.users == 0 and name not in waiting
        )
        for _, name in idle[: max(0, len(self._adapters) - self.max_adapters)]:
            self._retire(self._adapters[name], name)

    def _retire(self, adapter: _Adapter, name: str) -> None:
        adapter.retired = True
        if self._adapters.get(name) is adapter:
            del self._adapters[name]
        self._free_if_unused(adapter)

    def _free_if_unused(self, adapter: _Adapter) -> None:
        if adapter.retired and adapter.users == 0 and adapter.handle is not None:
            if self._applied is adapter.handle:
                self._set_adapter(None)
            self._llama.llama_adapter_lora_free(adapter.handle)
            adapter.handle = None

    def _set_adapter(self, adapter: _Adapter | None) -> None:
        handle = adapter.handle if adapter is not None else None
        if handle is self._applied:
            return
        llama = self._llama
        if handle is None:
            llama.llama_set_adapters_lora(self._ctx, None, 0, None)
        else:
            handles = (llama.llama_adapter_lora_p_ctypes * 1)(handle)
            scales = (ctypes.c_float * 1)(1.0)
            llama.llama_set_adapters_lora(self._ctx, handles, 1, scales)
        self._applied = handle

    def _loop(self) -> None:
        while True:
            try:
                self._turn_once()
            except Exception as exc:  # the thread must live on: every request hears of it
                log.exception("the llama.cpp engine's step failed")
                for request in list(self._running):
                    self._finish(request, f"error: {exc}")

    def _turn_once(self) -> None:
        with self._wake:
            while not (self._commands or self._waiting or self._running):
                self._wake.wait()
            commands, self._commands = self._commands, []
        for command in commands:
            command()
        self._admit()
        self._drop_cancelled()
        if self._running:
            self._step()

    def alive(self) -> bool:
        return self._thread.is_alive()

    def _reserved(self) -> int:
        return sum(len(r.prompt) + r.sampling.max_tokens for r in self._running)

    def _admit(self) -> None:
        with self._wake:
            while self._waiting and self._free_slots:
                request = self._waiting[0].request
                if request.cancelled:
                    heapq.heappop(self._waiting)
                    request.emit(None, "abort")
                    continue
                need = len(request.prompt) + request.sampling.max_tokens
                if self._running and self._reserved() + need > self.kv_room:
                    break
                heapq.heappop(self._waiting)
                adapter = self._adapters.get(request.adapter) if request.adapter else None
                if request.adapter and adapter is None:
                    request.emit(None, f"The model `{request.adapter}` does not exist.")
                    continue
                if request.sampling.grammar:
                    try:
                        request.mask = GrammarMask(
                            self._vocab, request.sampling.grammar, self.vocab_size
                        )
                    except GuidedError as exc:
                        request.emit(None, str(exc))
                        continue
                if adapter is not None:
                    adapter.users += 1
                    self._admitted += 1
                    adapter.used = self._admitted
                request.seq = self._free_slots.pop()
                request._adapter = adapter  # type: ignore[attr-defined]
                self._running.append(request)

    def _drop_cancelled(self) -> None:
        for request in [r for r in self._running if r.cancelled]:
            self._finish(request, "abort")

    def _finish(self, request: Request, reason: str) -> None:
        self._llama.llama_memory_seq_rm(self._memory, request.seq, -1, -1)
        self._free_slots.append(request.seq)
        if request.mask is not None:
            request.mask.free()
        self._running.remove(request)
        adapter: _Adapter | None = request._adapter  # type: ignore[attr-defined]
        if adapter is not None:
            adapter.users -= 1
            self._free_if_unused(adapter)
        request.emit(None, reason)

    def _step(self) -> None:
        groups: dict[int, list[Request]] = {}
        for request in self._running:
            groups.setdefault(id(request._adapter), []).append(request)  # type: ignore[attr-defined]
        starting = [r for r in self._running if r.fed < len(r.prompt)]
        if starting:  # a new answer's prompt first: its first token waits on nothing else
            group = groups[id(starting[0]._adapter)]  # type: ignore[attr-defined]
        else:  # each adapter's answers in turn, QUANTUM steps each (switching costs a step)
            keys = sorted(groups)
            group = groups[keys[(self._turn // QUANTUM) % len(keys)]]
            self._turn += 1
        self._set_adapter(group[0]._adapter)  # type: ignore[attr-defined]
        batch = self._batch
        rows: list[tuple[Request, int]] = []
        n = 0
        for request in group:
            if n >= self._batch_size:
                break
            if request.fed < len(request.prompt):
                take = min(len(request.prompt) - request.fed, self._batch_size - n)
                tokens = request.prompt[request.fed : request.fed + take]
                start = request.fed
                request.fed += take
                ends_prompt = request.fed == len(request.prompt)
            else:
                tokens, start, ends_prompt = (
                    [request.last],
                    len(request.prompt) + request.generated - 1,
                    True,
                )
            for offset, token in enumerate(tokens):
                batch.token[n] = token
                batch.pos[n] = start + offset
                batch.n_seq_id[n] = 1
                batch.seq_id[n][0] = request.seq
                last = offset == len(tokens) - 1 and ends_prompt
                batch.logits[n] = 1 if last else 0
                if last:
                    rows.append((request, n))
                n += 1
        batch.n_tokens = n
        status = self._llama.llama_decode(self._ctx, batch)
        if status != 0:
            raise EngineError(f"llama_decode returned {status}")
        for request, row in rows:
            pointer = self._llama.llama_get_logits_ith(self._ctx, row)
            logits = np.ctypeslib.as_array(pointer, shape=(self.vocab_size,)).copy()
            allowed = request.sampling.allowed(request.output, self.eos_ids)
            if request.mask is not None:
                allowed = request.mask.allowed() or sorted(self.eos_ids)
            token = sample(
                logits, request.sampling, request.rng, request.prompt, request.output, allowed
            )
            request.output.append(token.id)
            if request.mask is not None and token.id not in self.eos_ids:
                request.mask.accept(token.id)
            request.generated += 1
            request.last = token.id
            request.emit(token, None)
            if token.id in self.eos_ids and not request.sampling.ignore_eos:
                self._finish(request, "stop")
            elif request.generated >= request.sampling.max_tokens:
                self._finish(request, "length")
