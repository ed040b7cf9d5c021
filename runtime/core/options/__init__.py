"""Every configuration option Millrace reads, by family (Flink's *Options classes), and the registry.

Each family module declares its options as module constants (`ConfigOption`s) and, where a
family is read as a whole, the one pydantic settings model that parses it:

- execution:     parallelism, runtime mode, chaining, buffer timeout, watermarks (ExecutionOptions, PipelineOptions)
- deployment:    where jobs go and TaskManagers come from (DeploymentOptions, RestOptions)
- checkpointing: checkpoints and savepoints -> CheckpointingSettings (CheckpointingOptions)
- state:         state backends, RocksDB, the changelog -> StateBackendSettings (StateBackendOptions)
- restart:       restart strategies and the failover strategy -> RestartStrategySettings (RestartStrategyOptions)
- batch:         adaptive parallelism, speculative execution, blocking results (BatchExecutionOptions)
- jobmanager:    the scheduler's slot requests (JobManagerOptions)
- high_availability: leader election through ZooKeeper and the HA stores (HighAvailabilityOptions)
- task:          what a task reads when it runs -> TaskSettings (TaskManagerOptions)
- logs:          the client's log files (Flink's env.log.*)

The registry is read from those modules (as Flink's docs generator reads the *Options classes):
`all_options()` for the reference (docs/configuration.md, `python -m runtime.core.options.docs`),
`lookup(key)` for a key or a deprecated key. Importing this package loads no family.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from runtime.core.config_options import ConfigOption

# the family modules in the order the reference lists them
FAMILIES = ("execution", "deployment", "checkpointing", "state", "restart", "batch", "jobmanager", "high_availability", "task", "logs")


@dataclass(frozen=True)
class OptionFamily:
    name: str  # the module's name, e.g. "checkpointing"
    title: str  # e.g. "Checkpointing"
    description: str  # the module docstring's first paragraph
    options: tuple[ConfigOption[Any], ...]  # in declaration order


def _family_module(name: str) -> ModuleType:
    return importlib.import_module(f"{__name__}.{name}")


def families() -> list[OptionFamily]:
    """Every family with its options, in declaration order."""
    out = []
    for name in FAMILIES:
        module = _family_module(name)
        options = tuple(v for v in vars(module).values() if isinstance(v, ConfigOption))
        doc = (module.__doc__ or "").strip().split("\n\n")[0]
        out.append(OptionFamily(name, getattr(module, "TITLE", name.title()), " ".join(doc.split()), options))
    return out


def all_options() -> list[ConfigOption[Any]]:
    """Every declared option; a key declared twice (or shadowing another's deprecated key) raises."""
    seen: dict[str, str] = {}
    out = []
    for family in families():
        for option in family.options:
            for k in (option.key, *option.deprecated_keys):
                if k in seen and seen[k] != f"{family.name}:{option.key}":
                    raise ValueError(f"configuration key {k!r} is declared twice: in {seen[k]} and {family.name}:{option.key}")
                seen[k] = f"{family.name}:{option.key}"
            out.append(option)
    return out


_index: dict[str, ConfigOption[Any]] | None = None


def lookup(key: str) -> ConfigOption[Any] | None:
    """The option whose key or deprecated key is `key`, or None for a key Millrace does not know."""
    global _index
    if _index is None:
        _index = {k: o for o in all_options() for k in (o.key, *o.deprecated_keys)}
    return _index.get(key)


__all__ = ["FAMILIES", "OptionFamily", "all_options", "families", "lookup"]
