"""The ready-made `mwms-demo` template, loaded on first start.

Its image is the packaged trainer's, from TRAINJOBS_TRAINER_IMAGE; it sets no output
directory, so every job writes under a folder of its own: on Vertex AI
<TRAINJOBS_VERTEX_BASE_OUTPUT_DIRECTORY>/<job id>, locally the job's run folder."""
from __future__ import annotations

import json
from importlib import resources

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.auth.service import get_or_create_team
from service.persistence.models import Template, TemplateVersion
from service.templates import service as templates
from service.templates.schemas import TemplateBody, TemplateCreate

SEEDER = "trainjobs"
DEFAULT_IMAGE = "trainjobs-trainer:latest"


def demo_template(image: str | None = None) -> TemplateCreate:
    raw = json.loads(resources.files(__package__).joinpath("mwms-demo.json").read_text())
    raw["spec"]["container"]["image_uri"] = image or DEFAULT_IMAGE
    return TemplateCreate.model_validate(raw)


def seed(session: Session, team_name: str = "default", *, image: str | None = None) -> bool:
    """Create the demo template in a team unless it has one of that name (even archived).
    A demo still as this seeder wrote it follows TRAINJOBS_TRAINER_IMAGE: a new version when
    the setting changed. One an admin has changed is left alone."""
    body = demo_template(image)
    team = get_or_create_team(session, team_name)
    template = session.scalar(select(Template).where(Template.team_id == team.id, Template.name == body.name))
    if template is None:
        templates.create(session, team.id, body, SEEDER)
        session.commit()
        return True
    latest = session.scalar(select(TemplateVersion).where(TemplateVersion.template_id == template.id,
                                                          TemplateVersion.version == template.latest_version))
    if (latest is None or latest.created_by != SEEDER or template.archived_at is not None
            or latest.spec.get("container", {}).get("image_uri") == body.spec.container.image_uri):
        return False
    templates.update(session, team.id, body.name, TemplateBody(description=body.description, spec=body.spec,
                                                               parameters=body.parameters), SEEDER)
    session.commit()
    return True
