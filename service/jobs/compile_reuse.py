"""A submit's compile and price, reused by the next submit of the same template version
with the same parameters and overrides (service.jobs.submitter).

Why: compiling (the merge, the parameters, the substitution, the spec's rules, the
CustomJob's JSON) and pricing were a quarter of a submit's CPU in a served process
(bench/README.md, "fifth session"), and scripts submit one template with the same values
again and again. What differs between such jobs is only the CustomJob's outer keys: its
display name and its labels (each job's id is a label). The jobSpec, the replicas and the
price are the same, because `jobspec.build_from` is a function of the template version,
the values and the overrides alone.

So a hit runs the checks `build_from` runs on the name and labels and writes only the
outer JSON around the jobSpec's, byte for byte what `build_from` writes
(tests/jobs/test_compile_reuse.py compares them). Anything else is `build_from` itself: a
miss, and a hit whose name or labels have a problem (its errors, in its order). Nothing
with a problem is kept, and a sweep trial's job (its trial id is in every replica's env)
is never reused.

The key holds a digest of the values and overrides as sent (their JSON, key order kept:
the order of env names reaches the CustomJob), never the text itself, and the kept jobs
are bounded by the size of their JSON (TRAINJOBS_COMPILE_CACHE_BYTES)."""
from __future__ import annotations

import copy
import hashlib
import json
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from service import jobspec
from service.cost.schemas import CostEstimate
from service.jobspec.compile import dumps
from service.jobspec.validate import MAX_LABELS

Key = tuple[uuid.UUID, int, str]      # template id, version, digest of the values and overrides

# An entry above this share of the whole budget is not kept: one huge job must not empty the cache.
LARGEST_SHARE = 10


@dataclass
class _Entry:
    labels: Mapping[str, str]         # the spec's own labels, first in every job's
    base: jobspec.CompiledJob         # the first job's; its outer JSON is never reused
    job_spec_text: str                # its CustomJob's jobSpec as JSON
    weight: int                       # bytes of JSON kept
    costs: dict[str, CostEstimate] = field(default_factory=dict)   # by backend, never handed out


@dataclass(frozen=True)
class Built:
    """A compiled job, and (when it came from or went into the cache) the entry its price is kept in."""

    compiled: jobspec.CompiledJob
    entry: _Entry | None = None

    def cost(self, backend: str, price: Callable[[], CostEstimate]) -> CostEstimate:
        """The job's estimate on `backend`: `price()` once per entry and backend, then a copy
        (the caller sets the copy's `accrued`)."""
        if self.entry is None:
            return price()
        kept = self.entry.costs.get(backend)
        if kept is None:
            kept = price()
            self.entry.costs[backend] = kept    # two threads may both price it: the same figures
        return kept.model_copy()


def _digest(values: Mapping[str, Any] | None, overrides: Any) -> str | None:
    """None: not JSON (a caller's own types), or nested past what the encoder walks: such a
    submit is compiled, never reused (build_from refuses overrides deeper than 16 levels)."""
    try:
        text = json.dumps([values or {}, overrides], separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return None
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class CompileReuse:
    """Least recently used out, at most `max_bytes` of kept JSON in all (0: nothing is reused)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._items: OrderedDict[Key, _Entry] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()   # requests run in a thread pool

    def build(self, template: tuple[uuid.UUID, int], prepared: jobspec.Prepared, values: Mapping[str, Any] | None,
              overrides: Any, *, display_name: str, labels: Mapping[str, str],
              reserved_labels: Mapping[str, str], trial: jobspec.Trial | None = None) -> Built:
        """`jobspec.build_from(prepared, ...)`'s CompiledJob (and its errors), `template` naming
        `prepared` (its template id and version)."""
        def fresh() -> tuple[jobspec.JobSpec, jobspec.CompiledJob]:
            return jobspec.build_from(prepared, values, overrides, display_name=display_name, labels=labels,
                                      reserved_labels=reserved_labels, trial=trial)
        digest = _digest(values, overrides) if self.max_bytes > 0 and trial is None else None
        if digest is None:
            return Built(fresh()[1])
        key = (template[0], template[1], digest)
        entry = self._get(key)
        if entry is None:
            spec, compiled = fresh()  # raises on any problem: nothing is kept
            return Built(compiled, self._keep(key, spec, compiled))
        # build_from's checks of what differs between the jobs of one entry: the name, the labels.
        all_labels = jobspec.job_labels(entry.labels, labels, reserved_labels, None)
        if jobspec.name_and_label_problems(display_name, labels) or len(all_labels) > MAX_LABELS:
            return Built(fresh()[1])  # raises: build_from's problems, in its order
        return Built(_assemble(entry, display_name, all_labels), entry)

    def _get(self, key: Key) -> _Entry | None:
        with self._lock:
            found = self._items.get(key)
            if found is not None:
                self._items.move_to_end(key)
            return found

    def _keep(self, key: Key, spec: jobspec.JobSpec, compiled: jobspec.CompiledJob) -> _Entry | None:
        # Read at once, from the dict compile_spec wrote the JSON from (nobody else has read it yet).
        job_spec_text = dumps(compiled.custom_job_dict["jobSpec"])
        weight = len(compiled.to_json_text()) + len(job_spec_text)
        if weight * LARGEST_SHARE > self.max_bytes:
            return None
        # The first job is handed out as build_from made it: the entry keeps copies of its own.
        base = replace(compiled, retry=_copy(compiled.retry), vertex=_copy(compiled.vertex))
        entry = _Entry(dict(spec.labels), base, job_spec_text, weight)
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= old.weight
            self._items[key] = entry
            self._bytes += weight
            while self._bytes > self.max_bytes:
                _, gone = self._items.popitem(last=False)
                self._bytes -= gone.weight
        return entry

    def __len__(self) -> int:
        return len(self._items)

    @property
    def bytes(self) -> int:
        return self._bytes


def _assemble(entry: _Entry, display_name: str, labels: Mapping[str, str]) -> jobspec.CompiledJob:
    """compile_spec's CompiledJob for this name and these labels: its custom_job_json is
    dumps({"displayName": ..., "jobSpec": ..., "labels": ...}) (no labels: no key)."""
    text = f'{{"displayName":{dumps(display_name)},"jobSpec":{entry.job_spec_text}'
    if labels:
        text += f',"labels":{dumps(dict(labels))}'
    base = entry.base
    # Each job its own copy of what a reader could change (the replicas and the texts are
    # immutable); `replace` carries every other field, a field added later included.
    return replace(base, custom_job_json=text + "}", retry=_copy(base.retry), vertex=_copy(base.vertex))


def _copy(value: Any) -> Any:
    return copy.deepcopy(value) if value is not None else None
