"""YAML from strangers: PyYAML's safe loader (no Python tags), with bounds.

yaml.safe_load alone is not enough for untrusted text. Aliases share one object,
so nine nested anchors of nine aliases each ("billion laughs") load in
microseconds and then explode in whatever walks them (json.dumps, the converter).
Merge keys (`<<: [*a, *a]`) are worse: PyYAML's flatten_mapping copies every merged
pair into each mapping before duplicates collapse, so twenty-five such lines (715
bytes, 50 aliases) cost 2**25 copies, minutes of CPU and GiBs. So the size a node
would have with its aliases expanded is counted while the document is composed (a
node's size is known once it is complete; an alias adds its node's whole size), and
the pairs merge keys copy are counted again where they are copied: the work done is
bounded by the source's length plus max_nodes, whatever the nesting. Deep nesting
recurses in the composer until Python gives up. Duplicate keys keep the last value
without a word. Each is refused here with a Problem that says where.

PyYAML is pure Python: a 64 KiB source takes up to a second of CPU. The service runs this
loader in an import worker process (service/interop/parse_worker.py), never on the API
process's GIL."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml
from yaml.nodes import MappingNode, SequenceNode

from service.core.errors import Invalid, Problem
from service.interop.numbers import MAX_DIGITS, too_long


@dataclass(frozen=True)
class YamlLimits:
    max_bytes: int
    max_aliases: int
    max_nodes: int
    max_depth: int
    max_expanded_bytes: int = 262_144


class _Refused(Exception):
    def __init__(self, problem: Problem):
        super().__init__(problem.message)
        self.problem = problem


def _too_big(limits: YamlLimits, field: str, what: str) -> _Refused:
    return _Refused(Problem(field, f"more than {limits.max_nodes} values once its aliases {what}",
                            "write a smaller config, or raise TRAINJOBS_IMPORT_MAX_YAML_NODES"))


def _loader(limits: YamlLimits, field: str):
    # Over 60 lines on purpose: one class whose overrides share the counters the limits need.
    class BoundedLoader(yaml.SafeLoader):
        _aliases = 0
        _depth = 0
        _merged = 0
        _values = 0   # values composed so far, each alias counted as its node's whole size
        _bytes = 0

        def __init__(self, stream):
            super().__init__(stream)
            # id(node) -> (values, bytes of text) with aliases expanded, once the node is complete
            self._sizes: dict[int, tuple[int, int]] = {}

        def save_possible_simple_key(self):
            # Each open `[` or `{` may start a key the scanner keeps looking for, up to 1,024
            # characters ahead, checking all of them at every token (quadratic): refuse deep flow
            # nesting here, before the composer would see its first level.
            if self.flow_level > limits.max_depth:
                raise _Refused(Problem(field, f"nested deeper than {limits.max_depth} levels at line "
                                       f"{self.line + 1}", "an AI Platform config is a few levels deep"))
            return super().save_possible_simple_key()

        def compose_node(self, parent, index):
            if self.check_event(yaml.AliasEvent):
                self._aliases += 1
                mark = self.peek_event().start_mark
                if self._aliases > limits.max_aliases:
                    raise _Refused(Problem(field, f"more than {limits.max_aliases} YAML aliases "
                                           f"(*name), line {mark.line + 1}",
                                           "write the values out, or raise TRAINJOBS_IMPORT_MAX_YAML_ALIASES"))
                node = super().compose_node(parent, index)
                if id(node) not in self._sizes:  # an alias inside its own anchor: a structure with no end
                    raise _Refused(Problem(field, f"the alias at line {mark.line + 1} refers to a value that "
                                           "contains it", "write the values out"))
                self._count(*self._sizes[id(node)])
                return node
            self._count(1, 0)
            self._depth += 1
            try:
                if self._depth > limits.max_depth:
                    mark = self.peek_event().start_mark
                    raise _Refused(Problem(field, f"nested deeper than {limits.max_depth} levels at line "
                                           f"{mark.line + 1}", "an AI Platform config is a few levels deep"))
                node = super().compose_node(parent, index)
            finally:
                self._depth -= 1
            sizes = self._sizes
            if isinstance(node, SequenceNode):
                parts = [sizes[id(child)] for child in node.value]
            elif isinstance(node, MappingNode):
                parts = [sizes[id(n)] for pair in node.value for n in pair]
            else:  # a scalar: its text
                parts = [(0, len(node.value.encode("utf-8", "surrogatepass")))]
                self._count(*parts[0])
            size = (1 + sum(p[0] for p in parts), sum(p[1] for p in parts))
            self._check(*size)
            sizes[id(node)] = size
            return node

        def _count(self, values: int, size: int) -> None:
            # The running totals are at most the document's expanded size: refusing on them refuses a
            # long flat list as soon as it passes the bound, not once it is all read.
            self._values += values
            self._bytes += size
            self._check(self._values, self._bytes)

        def _check(self, values: int, size: int) -> None:
            if values > limits.max_nodes:
                raise _too_big(limits, field, "and merge keys are expanded")
            if size > limits.max_expanded_bytes:
                raise _Refused(Problem(field, f"more than {limits.max_expanded_bytes} bytes of text once its "
                                       "aliases and merge keys are expanded",
                                       "write a smaller config, or raise TRAINJOBS_IMPORT_MAX_YAML_EXPANDED_BYTES"))

        def flatten_mapping(self, node):
            # PyYAML copies the pairs of every merged mapping (its merges already flattened) into
            # this one; count them so that copying stays within the same budget.
            for key_node, value_node in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    sources = value_node.value if isinstance(value_node, SequenceNode) else [value_node]
                    for source in sources:
                        if isinstance(source, MappingNode):
                            self._merged += len(source.value)
            if self._merged > limits.max_nodes:
                raise _too_big(limits, field, "and merge keys (<<) are expanded")
            super().flatten_mapping(node)

        def construct_document(self, node):
            self._root = node  # where a value that cannot be read is named from
            return super().construct_document(node)

        def construct_yaml_int(self, node):
            # An integer of more than 4,300 digits is a ValueError in int() (CVE-2020-10735's
            # limit; hex and binary have none, and str() of such a number fails later): it killed the
            # import worker (a 503). More than numbers.MAX_DIGITS is no count.
            text = node.value.replace("_", "").lstrip("+-")
            digits = len(text[2:] if text[:2] in ("0x", "0b") else text)
            if digits > MAX_DIGITS:
                raise _Refused(too_long(_path_of(self._root, node) or field, digits))
            return super().construct_yaml_int(node)

        def construct_mapping(self, node, deep=False):
            if isinstance(node, MappingNode):
                seen: dict[Any, int] = {}
                for key_node, _ in node.value:
                    if key_node.tag == "tag:yaml.org,2002:merge":
                        continue  # `<<: *base` then own keys: overriding merged keys is the point
                    key = self.construct_object(key_node, deep=True)
                    try:
                        hash(key)
                    except TypeError:
                        continue  # the base class reports unhashable keys itself
                    if key in seen:
                        raise _Refused(Problem(field, f"key {key!r} appears twice in one mapping (lines "
                                               f"{seen[key] + 1} and {key_node.start_mark.line + 1}); YAML "
                                               "readers would silently keep only the last",
                                               "keep one of them"))
                    seen[key] = key_node.start_mark.line
            return super().construct_mapping(node, deep=deep)

    BoundedLoader.add_constructor("tag:yaml.org,2002:int", BoundedLoader.construct_yaml_int)
    return BoundedLoader


def _path_of(root, target) -> str:
    """Where `target` sits in the composed document, as the converters name fields
    (trainingInput.workerConfig.acceleratorConfig.count, workerPoolSpecs[0].replicaCount);
    empty at the root. The document is already bounded (max_nodes), so is this walk."""
    stack = [(root, "")]
    seen = set()
    while stack:
        node, where = stack.pop()
        if node is target:
            return where
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, SequenceNode):
            stack.extend((child, f"{where}[{i}]") for i, child in enumerate(node.value))
        elif isinstance(node, MappingNode):
            for key, value in node.value:
                name = key.value if isinstance(key.value, str) else "(key)"
                stack.append((key, f"{where}.{name} (its key)".lstrip(".")))
                stack.append((value, f"{where}.{name}".lstrip(".")))
    return ""


def load(text: str, limits: YamlLimits, field: str = "source") -> Any:
    """The single YAML document in `text`, or Invalid naming what is wrong."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > limits.max_bytes:
        raise Invalid.of([Problem(field, f"{size} bytes; imports take at most {limits.max_bytes}",
                                  "send a smaller file, or raise TRAINJOBS_IMPORT_MAX_BYTES")])
    try:
        doc = yaml.load(text, Loader=_loader(limits, field))  # noqa: S506 - a SafeLoader subclass
    except _Refused as e:
        raise Invalid.of([e.problem]) from None
    except yaml.YAMLError as e:
        raise Invalid.of([Problem(field, f"not valid YAML: {_one_line(e)}",
                                  "check the indentation and quoting near that line")]) from None
    except RecursionError:
        raise Invalid.of([Problem(field, "nested too deeply to read", "an AI Platform config is a few levels deep")]
                         ) from None
    _check_expanded_size(doc, limits, field)
    return doc


def _check_expanded_size(doc: Any, limits: YamlLimits, field: str) -> None:
    # Walks shared (aliased) objects each time they are reached: the size the
    # converter and json.dumps would see. Stops as soon as the budget is spent.
    budget, stack = limits.max_nodes, [doc]
    while stack:
        item = stack.pop()
        budget -= 1
        if budget < 0:
            raise Invalid.of([Problem(field, f"more than {limits.max_nodes} values once its aliases are expanded",
                                      "write a smaller config, or raise TRAINJOBS_IMPORT_MAX_YAML_NODES")])
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def _one_line(e: yaml.YAMLError) -> str:
    return " ".join(str(e).split())
