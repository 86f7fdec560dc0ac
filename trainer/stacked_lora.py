"""Several people's LoRA adapters on one frozen base, each row of a batch through its own.

``StackedPolicy`` wraps a base causal LM whose LoRA target projections are replaced by
``RoutedLoraLinear``: the frozen projection plus every person's (A, B) pair, each person's own
``nn.Parameter``s. Which person a row belongs to is set around each forward pass:

- ``person(k)``: every row through person k's adapter — what one person's update does, so
  ``run_update``'s planning, refinement and teacher code runs on it unchanged;
- ``rows(persons)``: row i through ``persons[i]``'s adapter, for one forward and backward pass
  over several people's rows (``trainer.multi_person``);
- ``disable_adapter()``: the base alone (the teacher, the KL reference, the anchor's base).

A row only meets its own person's weights, so each person's gradient comes from their own rows
and nothing else. Several people's rows go through their pairs gathered per row, two batched
matmuls for the whole batch (``torch.bmm``); where the people's ranks differ, or one has no
pair on a projection, one matmul pair per run of consecutive rows of one person instead. One
forward and backward pass over 24 rows of 8 people on SmolLM2-135M (2 CPU cores, median of 5):
gathered 7.6 s, runs 8.1 s, peft's mixed-batch forward (``adapter_names``, which indexes each
adapter's rows out of the batch and adds them back) 10.2 s (``python -m
bench.multi_person_step --routing``).

Adapters are read and written in peft's format (``adapter_config.json`` and
``adapter_model.safetensors``, the keys ``PeftModel.save_pretrained`` writes), and a new one is
initialised by peft itself from the config's seed, so a person's adapter here is the one
``trainer.policy.load_policy`` would give them. Plain LoRA only: no DoRA, rsLoRA or per-module
rank or alpha patterns; LoRA dropout is refused, since a row's dropout draw could not match.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from peft import LoraConfig, get_peft_model
from safetensors.torch import load_file, save_file
from torch import Tensor
from transformers import PreTrainedModel

from trainer.config import UpdateConfig
from trainer.policy import lora_config

PEFT_PREFIX = "base_model.model."
"""Where ``PeftModel.save_pretrained`` puts a module's path in an adapter's weight names."""

WEIGHTS_FILE = "adapter_model.safetensors"
META = {"format": "pt"}

Runs = list[tuple[int, int, int]]
"""Rows of one person in a batch, as (person, first row, row after the last)."""

_OFF = "off"
_UNSET = "unset"


@dataclass
class PersonLora:
    """One person's adapter: peft's config and, per target module path, the (A, B) weights."""

    config: LoraConfig
    weights: dict[str, tuple[Tensor, Tensor]]

    @property
    def scaling(self) -> float:
        return float(self.config.lora_alpha) / float(self.config.r)


def new_person_lora(base: PreTrainedModel, config: UpdateConfig) -> PersonLora:
    """A new adapter as ``load_policy`` initialises it (A random from ``config.seed``, B zero):
    peft injects one into ``base``, its weights are copied, and peft takes it out again."""
    torch.manual_seed(config.seed)
    peft_model = get_peft_model(base, lora_config(config))
    weights: dict[str, tuple[Tensor, Tensor]] = {}
    for path, module in base.named_modules():
        lora_a = getattr(module, "lora_A", None)
        if lora_a is not None and "default" in lora_a:
            pair = (lora_a["default"].weight, module.lora_B["default"].weight)
            weights[path] = (pair[0].detach().float().clone(), pair[1].detach().float().clone())
    made = copy.deepcopy(peft_model.peft_config["default"])
    peft_model.unload()
    return PersonLora(made, weights)


def load_person_lora(adapter_dir: str | Path) -> PersonLora:
    """A saved adapter (peft's files), its weights in fp32."""
    folder = Path(adapter_dir)
    config = LoraConfig.from_pretrained(str(folder))
    state = load_file(str(folder / WEIGHTS_FILE))
    pairs: dict[str, dict[str, Tensor]] = {}
    for key, value in state.items():
        path, _, rest = key.removeprefix(PEFT_PREFIX).rpartition(".lora_")
        pairs.setdefault(path, {})[rest.split(".")[0]] = value.float()
    weights = {path: (pair["A"], pair["B"]) for path, pair in pairs.items()}
    return PersonLora(config, weights)


def check_plain_lora(lora: PersonLora, where: str) -> None:
    """ValueError unless the adapter is plain LoRA without dropout (what this module runs)."""
    config = lora.config
    if config.use_dora or config.use_rslora or config.rank_pattern or config.alpha_pattern:
        raise ValueError(f"{where}: only plain LoRA adapters can be stacked")
    if config.lora_dropout:
        raise ValueError(f"{where}: LoRA dropout cannot be stacked (a row's draw would differ)")


class RoutedLoraLinear(torch.nn.Module):
    """A frozen linear layer plus each person's LoRA pair; the router says whose each row is."""

    def __init__(self, base: torch.nn.Module, router: _Router) -> None:
        super().__init__()
        self.base_layer = base
        self.router = router
        self.lora_A = torch.nn.ParameterDict()
        self.lora_B = torch.nn.ParameterDict()
        self.scaling: dict[str, float] = {}

    def add_person(self, person: int, a: Tensor, b: Tensor, scaling: float) -> None:
        # copies: new adapters made from one seed start equal, never sharing their storage
        device = self.base_layer.weight.device
        self.lora_A[str(person)] = torch.nn.Parameter(a.to(device, torch.float32, copy=True))
        self.lora_B[str(person)] = torch.nn.Parameter(b.to(device, torch.float32, copy=True))
        self.scaling[str(person)] = scaling

    def _delta(self, person: int, x: Tensor) -> Tensor | None:
        key = str(person)
        if key not in self.lora_A:
            return None
        a, b = self.lora_A[key], self.lora_B[key]
        return F.linear(F.linear(x.to(a.dtype), a), b) * self.scaling[key]

    def _gathered(self, keys: list[str], slot_R: Tensor, x_R_T_I: Tensor) -> Tensor:
        """Each row through its person's pair: their A and B gathered per row, then bmm."""
        a_R_r_I = torch.stack([self.lora_A[key] for key in keys])[slot_R]
        b_R_O_r = torch.stack([self.lora_B[key] for key in keys])[slot_R]
        x_R_T_I = x_R_T_I.to(a_R_r_I.dtype)
        h_R_T_r = torch.bmm(x_R_T_I, a_R_r_I.transpose(1, 2))
        delta_R_T_O = torch.bmm(h_R_T_r, b_R_O_r.transpose(1, 2))
        scalings = [self.scaling[key] for key in keys]
        if len(set(scalings)) == 1:
            return delta_R_T_O * scalings[0]
        scale_R = torch.tensor(scalings, device=x_R_T_I.device, dtype=delta_R_T_O.dtype)[slot_R]
        return delta_R_T_O * scale_R[:, None, None]

    def forward(self, x: Tensor) -> Tensor:
        result = self.base_layer(x)
        runs = self.router.runs()
        if runs is None:
            return result
        if len(runs) == 1:  # one person's rows: peft's own arithmetic, no slicing
            delta = self._delta(runs[0][0], x)
            return result if delta is None else (result + delta).to(result.dtype)
        persons, slot_R = self.router.slots(x.device)
        keys = [str(person) for person in persons]
        if x.dim() == 3 and all(key in self.lora_A for key in keys):
            shapes = {self.lora_A[key].shape for key in keys}
            if len(shapes) == 1:  # one rank: every row's pair gathered, two batched matmuls
                return (result + self._gathered(keys, slot_R, x)).to(result.dtype)
        deltas = []
        for person, start, stop in runs:
            delta = self._delta(person, x[start:stop])
            if delta is None:
                delta = result.new_zeros((stop - start, *result.shape[1:]), dtype=torch.float32)
            deltas.append(delta)
        return (result + torch.cat(deltas)).to(result.dtype)


class _Router:
    """Whose adapter each row goes through: one person's, runs of rows, or none ("off")."""

    def __init__(self) -> None:
        self.state: str | int | Runs = _UNSET
        self._slots: dict[torch.device, tuple[list[int], Tensor]] = {}

    def slots(self, device: torch.device) -> tuple[list[int], Tensor]:
        """The people of the current runs, in order, and each row's index among them (R,),
        on ``device``: made once per routing, not once per layer."""
        if device not in self._slots:
            runs = self.runs() or []
            persons = list(dict.fromkeys(person for person, _, _ in runs))
            slot_R = torch.tensor(
                [persons.index(person) for person, start, stop in runs for _ in range(start, stop)]
            )
            self._slots[device] = (persons, slot_R.to(device))
        return self._slots[device]

    def runs(self) -> Runs | None:
        """None for the base alone; a single run (stop -1) covers every row."""
        if isinstance(self.state, int):
            return [(self.state, 0, -1)]
        if self.state == _OFF:
            return None
        if self.state == _UNSET:
            raise RuntimeError("no routing set: use person(k), rows(persons) or disable_adapter()")
        assert isinstance(self.state, list)
        return self.state

    @contextlib.contextmanager
    def routed(self, state: str | int | Runs) -> Iterator[None]:
        previous, self.state = self.state, state
        saved, self._slots = self._slots, {}
        try:
            yield
        finally:
            self.state, self._slots = previous, saved


def person_runs(persons: Sequence[int]) -> Runs:
    """Consecutive rows of one person as (person, start, stop).

    >>> person_runs([0, 0, 2, 2, 2, 1])
    [(0, 0, 2), (2, 2, 5), (1, 5, 6)]
    """
    runs: Runs = []
    for row, person in enumerate(persons):
        if runs and runs[-1][0] == person:
            runs[-1] = (person, runs[-1][1], row + 1)
        else:
            runs.append((person, row, row + 1))
    return runs


class StackedPolicy(torch.nn.Module):
    """A frozen base with several people's trainable fp32 LoRA adapters, routed per row."""

    def __init__(self, base: PreTrainedModel, people: Sequence[PersonLora]) -> None:
        super().__init__()
        for param in base.parameters():
            param.requires_grad_(False)
        self.base_model = base
        self.lora_configs = [person.config for person in people]
        self._router = _Router()
        self._order: list[list[torch.nn.Parameter]] = [[] for _ in people]
        paths = {path for person in people for path in person.weights}
        for path, module in list(base.named_modules()):
            if path not in paths:
                continue
            routed = RoutedLoraLinear(module, self._router)
            for k, person in enumerate(people):
                if path in person.weights:
                    a, b = person.weights[path]
                    routed.add_person(k, a, b, person.scaling)
                    # peft's order of trainable parameters, so optimizer.pt files carry over
                    self._order[k] += [routed.lora_A[str(k)], routed.lora_B[str(k)]]
            parent_path, _, name = path.rpartition(".")
            setattr(base.get_submodule(parent_path), name, routed)
        self._paths = [path for path, _ in base.named_modules() if path in paths]

    @property
    def config(self) -> Any:
        return self.base_model.config

    @property
    def generation_config(self) -> Any:
        return self.base_model.generation_config

    def get_base_model(self) -> PreTrainedModel:
        """The causal LM, its projections routed (``trainer.policy.token_logprobs`` calls it)."""
        return self.base_model

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.base_model(*args, **kwargs)

    def generate(self, *args: Any, **kwargs: Any) -> Any:
        return self.base_model.generate(*args, **kwargs)

    def disable_adapter(self) -> contextlib.AbstractContextManager[None]:
        """Within the block every row goes through the base alone."""
        return self._router.routed(_OFF)

    def person(self, k: int) -> contextlib.AbstractContextManager[None]:
        """Within the block every row goes through person ``k``'s adapter."""
        return self._router.routed(k)

    def rows(self, persons: Sequence[int]) -> contextlib.AbstractContextManager[None]:
        """Within the block row i goes through ``persons[i]``'s adapter. Keep the backward
        pass inside it too: gradient checkpointing recomputes the forward there."""
        return self._router.routed(person_runs(persons))

    def person_parameters(self, k: int) -> list[torch.nn.Parameter]:
        """Person ``k``'s LoRA weights, in the order a ``PeftModel`` of their adapter lists them."""
        return list(self._order[k])

    def save_person(self, k: int, out_dir: str | Path) -> Path:
        """Write person ``k``'s adapter as ``PeftModel.save_pretrained`` does (config and
        weights; not its model card), which vLLM's ``/v1/load_lora_adapter`` loads."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        state: dict[str, Tensor] = {}
        for path in self._paths:
            routed = self.base_model.get_submodule(path)
            if str(k) in routed.lora_A:
                state[f"{PEFT_PREFIX}{path}.lora_A.weight"] = routed.lora_A[str(k)].detach().cpu()
                state[f"{PEFT_PREFIX}{path}.lora_B.weight"] = routed.lora_B[str(k)].detach().cpu()
        save_file({n: t.contiguous() for n, t in state.items()}, str(out / WEIGHTS_FILE), META)
        config = copy.deepcopy(self.lora_configs[k])
        config.inference_mode = True
        config.save_pretrained(str(out))
        return out
