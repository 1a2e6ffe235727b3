"""Batch and step arithmetic: the global batch MWMS splits over the replicas, and the steps
that make one epoch."""

from __future__ import annotations

import math


def global_batch_size(per_replica_batch: int, replicas_in_sync: int) -> int:
    return per_replica_batch * replicas_in_sync


def steps_per_epoch(num_examples: int, global_batch: int) -> int:
    """Steps that cover every example once; the last batch may be short (ceil)."""
    if num_examples < 1 or global_batch < 1:
        raise ValueError(f"need positive sizes, got {num_examples} examples, batch {global_batch}")
    return math.ceil(num_examples / global_batch)
