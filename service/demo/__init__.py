"""The ready-made `mwms-demo` template, loaded on first start."""
from __future__ import annotations

import json
from importlib import resources

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.auth.service import get_or_create_team
from service.models import Template
from service.templates import service as templates
from service.templates.schemas import TemplateCreate


def demo_template() -> TemplateCreate:
    raw = resources.files(__package__).joinpath("mwms-demo.json").read_text()
    return TemplateCreate.model_validate(json.loads(raw))


def seed(session: Session, team_name: str = "default") -> bool:
    """Create the demo template in a team unless it has one of that name (even archived)."""
    body = demo_template()
    team = get_or_create_team(session, team_name)
    if session.scalar(select(Template.id).where(Template.team_id == team.id, Template.name == body.name)):
        return False
    templates.create(session, team.id, body, "trainjobs")
    session.commit()
    return True
