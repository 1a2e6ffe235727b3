"""The mwms-demo template as seeded on start: the trainer image of TRAINJOBS_TRAINER_IMAGE,
no shared output folder (each job writes under its own), and a demo an admin changed is
left alone."""
from __future__ import annotations

from service import demo
from service.auth.service import get_or_create_team
from service.templates import service as templates
from service.templates.schemas import TemplateBody


def latest(session, team) -> dict:
    return templates.get_version(session, team.id, "mwms-demo", None).spec


def test_the_demo_runs_the_configured_trainer_image_and_follows_the_setting(session_factory):
    image = "us-central1-docker.pkg.dev/my-project/trainjobs/trainer:1"
    with session_factory() as s:
        assert demo.seed(s, image=image)
        team = get_or_create_team(s, "default")
        spec = latest(s, team)
        assert spec["container"]["image_uri"] == image
        assert "base_output_directory" not in spec or spec["base_output_directory"] is None
        assert not demo.seed(s, image=image)                     # nothing new: no new version
        assert demo.seed(s, image=image.replace(":1", ":2"))     # the setting changed: version 2
        assert latest(s, team)["container"]["image_uri"].endswith(":2")
        assert templates.get_template(s, team.id, "mwms-demo").latest_version == 2


def test_a_demo_an_admin_changed_is_left_alone(session_factory):
    with session_factory() as s:
        demo.seed(s, image="registry.example/trainer:1")
        team = get_or_create_team(s, "default")
        body = demo.demo_template("registry.example/trainer:mine")
        templates.update(s, team.id, "mwms-demo", TemplateBody(description=body.description, spec=body.spec,
                                                                   parameters=body.parameters), "alice@default")
        s.commit()
        assert not demo.seed(s, image="registry.example/trainer:2")
        assert latest(s, team)["container"]["image_uri"] == "registry.example/trainer:mine"
