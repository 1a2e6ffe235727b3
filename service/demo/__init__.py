"""The ready-made `mwms-demo` template, loaded on first start."""
from __future__ import annotations

import json
from importlib import resources

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.models import Template
from service.templates import service as templates
from service.templates.schemas import TemplateCreate


def demo_template() -> TemplateCreate:
    raw = resources.files(__package__).joinpath("mwms-demo.json").read_text()
    return TemplateCreate.model_validate(json.loads(raw))


def seed(session: Session) -> bool:
    """Create the demo template unless a template of that name exists (even archived)."""
    body = demo_template()
    if session.scalar(select(Template.id).where(Template.name == body.name)):
        return False
    templates.create(session, body, "trainjobs")
    session.commit()
    return True
