"""Task base class: knobs as dataclass fields, deterministic train/test generation, verify API."""

from __future__ import annotations

import abc
import dataclasses
import functools
import hashlib
import json
import random
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from calclip_jax.data.example import Example
from calclip_jax.data.verify import VerifyResult, rewards_to_arrays

SPLITS = ("train", "test")
TEST_FRACTION = 0.1  # share of the prompt space (by prompt hash) reserved for the test split
PATIENCE = 10_000  # stop after this many draws in a row add nothing (prompt space exhausted)


def verifier_knob(default: Any) -> Any:
    """A knob that changes only scoring, not the generated data (excluded from `config_name`)."""
    return dataclasses.field(default=default, metadata={"verifier": True})


@dataclasses.dataclass(frozen=True, kw_only=True)
class Task(abc.ABC):
    """A verifiable task. Subclasses add knobs as dataclass fields and implement sample/verify.

    A prompt is assigned to the test split iff its hash falls in the first TEST_FRACTION of the
    hash range, so the splits are disjoint and neither depends on the other's size. Prompts are
    unique within a split. If the prompt space is small, splits come out smaller than asked.
    """

    name: ClassVar[str] = ""
    stores_system: ClassVar[bool] = False  # its examples carry a system message (tfds feature)
    prompt_alphabet: ClassVar[str] = ""
    answer_alphabet: ClassVar[str] = ""

    seed: int = 0  # generation seed
    num_train: int = 10_000  # examples in the train split (at most)
    num_test: int = 500  # examples in the test split (at most)
    format_reward: float = verifier_knob(0.0)  # added to the reward of every well-formed response

    def __post_init__(self) -> None:
        for knob in ("num_train", "num_test"):
            if getattr(self, knob) < 0:
                raise ValueError(f"{self.name}: {knob} must be >= 0, got {getattr(self, knob)}")

    @abc.abstractmethod
    def sample(self, rng: random.Random) -> Example:
        """Draws one example (prompts may repeat; generation deduplicates)."""

    @abc.abstractmethod
    def verify(self, example: Example, response: str, *, finished: bool = True) -> VerifyResult:
        """Scores `response` (the text after the prompt, up to but excluding the end marker).

        finished: whether the response ended with the end marker (EOS); unfinished is garbled.
        """

    def response_metrics(
        self, examples: Sequence[Example], responses: Sequence[str]
    ) -> dict[str, float]:
        """Task-specific shares of a rollout batch, logged beside its reward (none by default)."""
        del examples, responses
        return {}

    @property
    def alphabet(self) -> str:
        """Every character that prompts and answers use, in first-seen order."""
        return "".join(dict.fromkeys(self.prompt_alphabet + self.answer_alphabet))

    def demonstration(self, example: Example) -> str:
        """SFT text: the prompt followed by the reference answer (the EOS token ends it)."""
        return example.prompt + example.answer

    def knobs(self) -> dict[str, Any]:
        """All knobs (dataclass fields) as a JSON-able dict."""
        return dataclasses.asdict(self)

    def data_knobs(self) -> dict[str, Any]:
        """The knobs that determine the generated examples (all but verifier knobs)."""
        fields = dataclasses.fields(self)
        return {f.name: getattr(self, f.name) for f in fields if not f.metadata.get("verifier")}

    def config_name(self) -> str:
        """A stable short name of the data knobs (tfds config name / cache key)."""
        blob = json.dumps({"task": self.name, **self.data_knobs()}, sort_keys=True)
        return "v" + hashlib.sha256(blob.encode()).hexdigest()[:12]

    def examples(self, split: str) -> list[Example]:
        """The examples of `split` ("train" or "test"), generated deterministically from `seed`."""
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
        return list(_generate_splits(type(self), tuple(sorted(self.data_knobs().items())))[split])

    def verify_batch(
        self,
        examples: Sequence[Example],
        responses: Sequence[str],
        finished: Sequence[bool] | None = None,
    ) -> dict[str, np.ndarray]:
        """Verifies a batch: returns reward_B float32, correct_B bool, garbled_B bool."""
        if finished is None:
            finished = [True] * len(responses)
        if not len(examples) == len(responses) == len(finished):
            raise ValueError("examples, responses and finished must have the same length")
        results = [
            self.verify(ex, text, finished=bool(done))
            for ex, text, done in zip(examples, responses, finished, strict=True)
        ]
        return rewards_to_arrays(results)


def is_test_prompt(prompt: str, fraction: float = TEST_FRACTION) -> bool:
    """Whether `prompt` belongs to the test split: its hash falls in the first `fraction` of the
    hash range (deterministic, independent of the seed and of the other prompts)."""
    digest = hashlib.sha256(prompt.encode()).digest()
    return int.from_bytes(digest[:8], "big") < fraction * 2**64


@functools.lru_cache(maxsize=16)
def _generate_splits(
    cls: type[Task], data_knobs: tuple[tuple[str, Any], ...]
) -> dict[str, tuple[Example, ...]]:
    task = cls(**dict(data_knobs))
    rng = random.Random(task.seed)
    wanted = {"train": task.num_train, "test": task.num_test}
    out: dict[str, list[Example]] = {split: [] for split in SPLITS}
    seen: set[str] = set()
    idle = 0
    while idle < PATIENCE and any(len(out[s]) < wanted[s] for s in SPLITS):
        example = task.sample(rng)
        split = "test" if is_test_prompt(example.prompt) else "train"
        if example.prompt in seen or len(out[split]) >= wanted[split]:
            idle += 1
            continue
        seen.add(example.prompt)
        out[split].append(example)
        idle = 0
    return {split: tuple(out[split]) for split in SPLITS}
