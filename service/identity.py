"""Who is calling. Until tokens exist every caller is the same local user;
the dependency is the one place that will change when they do."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends


@dataclass(frozen=True)
class Actor:
    name: str


def current_actor() -> Actor:
    return Actor("anonymous")


ActorDep = Annotated[Actor, Depends(current_actor)]
