"""Operator ids: the names state is stored under in checkpoints and savepoints (Flink: StreamGraphHasherV2).

Every StreamNode gets an id that is the same each time the same program is built, in any process:

- `uid("...")` set: the id IS the uid (kept readable: `millrace state --operator UID`, Spark SQL);
- `set_uid_hash(h)` set: `h` (32 lowercase hex characters, Flink's rule); it wins over the uid;
- neither: a hash of the operator's place in the topology: nodes are visited breadth-first from
  the sources (sources in creation order; a node once all its inputs are visited) and each hash
  covers the node's visit position and its inputs' hashes in input order.

Unlike Flink, chaining is deliberately left out of the hash: turning chaining off or
`disable_chaining()` never changes an id. Node ids (process-wide counters) never enter it.
Adding an operator downstream leaves the ids upstream of it unchanged; adding one upstream
changes what follows it; give stateful operators a uid before changing a program's shape.
"""
from __future__ import annotations

import hashlib
import re
from collections import deque

from runtime.core.errors import InvalidProgramError
from runtime.graph.stream_graph import StreamGraph, StreamNode

_UID_HASH = re.compile(r"^[0-9a-f]{32}$")


def _topology_hash(position: int, inputs: list[tuple[int, str]]) -> str:
    h = hashlib.blake2b(digest_size=16)
    h.update(f"millrace-operator/{position}".encode())
    for type_number, input_hash in inputs:
        h.update(f"|{type_number}:{input_hash}".encode())
    return h.hexdigest()


def _visit_order(graph: StreamGraph) -> list[StreamNode]:
    """Breadth-first from the sources (in creation order); a node once every input was visited."""
    pending_inputs = {nid: len({e.source_id for e in n.in_edges}) for nid, n in graph.nodes.items()}
    queue = deque(sorted((n for n in graph.nodes.values() if not n.in_edges), key=lambda n: n.id))
    order: list[StreamNode] = []
    seen: set[int] = set()
    while queue:
        node = queue.popleft()
        if node.id in seen:
            continue
        seen.add(node.id)
        order.append(node)
        for target in sorted({e.target_id for e in node.out_edges}):
            pending_inputs[target] -= 1
            if pending_inputs[target] == 0:
                queue.append(graph.nodes[target])
    return order


def assign_operator_ids(graph: StreamGraph) -> None:
    """Set `operator_id` on every node of `graph`; refuses bad uid hashes and clashing ids."""
    hashes: dict[int, str] = {}
    owners: dict[str, StreamNode] = {}
    for position, node in enumerate(_visit_order(graph)):
        inputs = sorted(
            ((e.type_number, hashes[e.source_id]) for e in node.in_edges),
            key=lambda x: x,
        )
        hashes[node.id] = _topology_hash(position, inputs)
        if node.uid_hash is not None:
            if not _UID_HASH.match(node.uid_hash):
                raise InvalidProgramError(
                    f"job '{graph.job_name}': operator '{node.name}' has set_uid_hash({node.uid_hash!r}); "
                    "a uid hash is 32 lowercase hexadecimal characters"
                )
            node.operator_id = node.uid_hash
        elif node.uid is not None:
            node.operator_id = node.uid
        else:
            node.operator_id = hashes[node.id]
        other = owners.get(node.operator_id)
        if other is not None:
            raise InvalidProgramError(
                f"job '{graph.job_name}': operators '{other.name}' and '{node.name}' have the same operator id "
                f"{node.operator_id!r} (from uid / set_uid_hash); operator ids must be unique"
            )
        owners[node.operator_id] = node
