"""The one way TRAINJOBS_* variables are read: a `Section`, pydantic settings with that prefix.

Each package declares the variables it owns as a Section of its own (service/<package>/settings.py,
a backend's in its package): the field's name is the variable without `TRAINJOBS_`, its default,
limits and description are stated there once. The composition root (service/slices.py) joins
every section into the one `Settings` the process reads at start, and hands each package the
slice cut from it; docs/settings.md is generated from the sections (scripts/settings_doc.py)."""
from __future__ import annotations

from pydantic_settings import BaseSettings, SettingsConfigDict


class Section(BaseSettings):
    # extra="ignore": the environment holds every package's variables; a section reads its own.
    model_config = SettingsConfigDict(env_prefix="TRAINJOBS_", extra="ignore")
