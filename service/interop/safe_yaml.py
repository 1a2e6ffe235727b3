"""YAML from strangers: PyYAML's safe loader (no Python tags), with bounds.

yaml.safe_load alone is not enough for untrusted text. Aliases share one object,
so nine nested anchors of nine aliases each ("billion laughs") load in
microseconds and then explode in whatever walks them (json.dumps, the converter).
Deep nesting recurses in the composer until Python gives up. Duplicate keys keep
the last value without a word. Each is refused here with a Problem that says where."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml
from yaml.nodes import MappingNode

from service.errors import Invalid, Problem


@dataclass(frozen=True)
class YamlLimits:
    max_bytes: int
    max_aliases: int
    max_nodes: int
    max_depth: int


class _Refused(Exception):
    def __init__(self, problem: Problem):
        super().__init__(problem.message)
        self.problem = problem


def _loader(limits: YamlLimits, field: str):
    class BoundedLoader(yaml.SafeLoader):
        _aliases = 0
        _depth = 0

        def compose_node(self, parent, index):
            if self.check_event(yaml.AliasEvent):
                self._aliases += 1
                if self._aliases > limits.max_aliases:
                    raise _Refused(Problem(field, f"more than {limits.max_aliases} YAML aliases "
                                           f"(*name), line {self.peek_event().start_mark.line + 1}",
                                           "write the values out, or raise TRAINJOBS_IMPORT_MAX_YAML_ALIASES"))
            self._depth += 1
            try:
                if self._depth > limits.max_depth:
                    mark = self.peek_event().start_mark
                    raise _Refused(Problem(field, f"nested deeper than {limits.max_depth} levels at line "
                                           f"{mark.line + 1}", "an AI Platform config is a few levels deep"))
                return super().compose_node(parent, index)
            finally:
                self._depth -= 1

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

    return BoundedLoader


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
