"""A workdir remembers its config (config.json): a rerun with other values is refused.

A rerun may change, without refusal, the knobs that do not change what a step computes:
`train.steps` upward (extending a run), the `eval.every` cadence, every `log.*` knob (output
cadences, the progress bar, the surge test) and the cache locations `sft.cache_dir`,
`task.data_dir`. Any other change, or fewer `train.steps`, is refused with the list of changed
keys unless the caller allows it (`--allow_config_change`); config.json then records each
change under "config_changes" with the RL step it took effect after. A knob that config.json
lacks (added to the schema after the run began) is unchanged where it is at its default: a new
knob's default is the behaviour from before it (`train.share_prompt=False`, say), except where
the default changed the behaviour (`meant_before`: `train.delayed_scales`, whose default "batch"
came after runs with delayed scaling pushed their scales per update; `train.same_forward`, on
by default since after runs took their old and new log-probs from two programs).
"""

from __future__ import annotations

import json
import os
from typing import Any

from ml_collections import ConfigDict

from calclip_jax.config import RunConfig, RunSpec, resolved_record
from calclip_jax.workdir import run_record as R
from calclip_jax.workdir.lock import WorkdirError

CHANGES_KEY = "config_changes"  # config.json: [{"after_step": s, "changed": {key: [old, new]}}]
FREE_KEYS = ("train.steps", "eval.every", "sft.cache_dir", "task.data_dir")
FREE_PREFIXES = ("log.",)
ABSENT = "<absent>"
TASK_DATA_KEY = "task_data"  # resolved: the task's data, by its data knobs and file contents
Change = tuple[Any, Any]  # (old, new)


class ConfigChangeError(WorkdirError):
    pass


def config_knobs(config: ConfigDict | RunConfig) -> dict[str, Any]:
    """The knobs as config.json stores them (JSON types)."""
    return json.loads(config.to_json()) if isinstance(config, ConfigDict) else config.to_dict()


def flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{"a": {"b": 1}} -> {"a.b": 1}."""
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict) and value:
            flat.update(flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def meant_before(key: str, old: dict[str, Any]) -> Any:
    """What knob `key`, absent from the flat config `old`, meant in that run where the knob's
    default is not the behaviour from before it; None elsewhere."""
    if key == "train.delayed_scales" and "delayed" in str(old.get("train.precision", "")):
        return "update"  # every update pushed its amaxes before the trainer froze them per batch
    if key == "train.same_forward":
        return False  # two programs (the fused step's and the no-grad old log-probs') before it
    return None


def changed_keys(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Change]:
    """Dotted key -> (old, new) for every knob that differs (ABSENT where a side lacks it), but
    for knobs `old` lacks that `new` holds at their schema default (unless `meant_before` says
    what the absent knob meant)."""
    skip = (R.RESOLVED, CHANGES_KEY)
    a = flatten({k: v for k, v in old.items() if k not in skip})
    b = flatten({k: v for k, v in json.loads(json.dumps(new)).items() if k not in skip})
    a |= {k: v for k in b.keys() - a.keys() if (v := meant_before(k, a)) is not None}
    defaults = flatten(config_knobs(RunConfig()))
    added_at_default = lambda k: k not in a and k in defaults and b.get(k, ABSENT) == defaults[k]
    return {
        k: (a.get(k, ABSENT), b.get(k, ABSENT))
        for k in sorted(a.keys() | b.keys())
        if a.get(k, ABSENT) != b.get(k, ABSENT) and not added_at_default(k)
    }


def is_free(key: str, change: Change) -> bool:
    """Whether a rerun may make `change` to `key` without refusal (see the module doc)."""
    if key == "train.steps":
        old, new = change
        return isinstance(old, int) and isinstance(new, int) and new >= old
    return key in FREE_KEYS or key.startswith(FREE_PREFIXES)


def check_config(
    workdir: str, config: ConfigDict | RunConfig, allow: bool, spec: RunSpec | None = None
) -> dict[str, Change]:
    """The changes from workdir's config.json to `config` ({} for a new workdir); raises
    ConfigChangeError listing the refused ones unless `allow`. With `spec`, a change of the
    task's data under unchanged knobs (a local file's new bytes) is the change `task.data`."""
    stored = R.load_config(workdir)
    if stored is None:
        if os.path.exists(os.path.join(workdir, R.CONFIG_FILE)):
            raise ConfigChangeError(
                f"{os.path.join(workdir, R.CONFIG_FILE)} is unreadable; the workdir's config is "
                "unknown (restore the file or use another --workdir)"
            )
        return {}
    changes = changed_keys(stored, config_knobs(config))
    data = stored.get(R.RESOLVED, {}).get(TASK_DATA_KEY)
    if spec is not None and data is not None and data != spec.task.config_name():
        changes["task.data"] = (data, spec.task.config_name())
    refused = {k: c for k, c in changes.items() if not is_free(k, c)}
    if refused and not allow:
        listed = "; ".join(f"{k}: {old!r} -> {new!r}" for k, (old, new) in refused.items())
        raise ConfigChangeError(
            f"{workdir} holds a run with another config ({listed}); rerun with its config, use "
            "another --workdir, or pass --allow_config_change to continue it with the new values"
        )
    return changes


def write_config(
    workdir: str,
    config: ConfigDict | RunConfig,
    spec: RunSpec,
    changes: dict[str, Change] | None = None,
    after_step: int = 0,
) -> None:
    """config.json: the knobs as given, a "resolved" section (`resolved_record`) and the history
    of changes (kept from the previous file, plus `changes` made after RL step `after_step`)."""
    history = list((R.load_config(workdir) or {}).get(CHANGES_KEY, []))
    if changes:
        history.append(
            {"after_step": after_step, "changed": {k: list(c) for k, c in changes.items()}}
        )
    resolved = {**resolved_record(spec), TASK_DATA_KEY: spec.task.config_name()}
    record = {**config_knobs(config), R.RESOLVED: resolved}
    if history:
        record[CHANGES_KEY] = history
    path = os.path.join(workdir, R.CONFIG_FILE)
    with open(path + ".tmp", "w") as f:
        json.dump(record, f, indent=2)
    os.replace(path + ".tmp", path)
