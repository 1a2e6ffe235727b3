"""Import bombs: small sources whose naive parse costs minutes of CPU or GiBs of memory
are refused for the reason that bounds them (the setting named in the fix), while they
are parsed. How fast is measured in bench/import_bombs.py, not here."""
from __future__ import annotations

import pytest

from service.core.errors import Invalid
from service.interop import shell_text
from service.interop.safe_yaml import YamlLimits, load
from tests.conftest import ONE_DATABASE
from tests.interop.conftest import assert_problem

pytestmark = ONE_DATABASE

LIMITS = YamlLimits(max_bytes=65_536, max_aliases=50, max_nodes=5000, max_depth=32, max_expanded_bytes=262_144)


def merge_bomb(levels: int) -> str:
    """`aN: &aN {<<: [*aN-1, *aN-1]}`: two aliases a level, 2**levels merged pairs (715 bytes at 25)."""
    return "a0: &a0 {k: v}\n" + "".join(f"a{i}: &a{i} {{<<: [*a{i - 1}, *a{i - 1}]}}\n" for i in range(1, levels + 1))


def refusal(source: str, limits: YamlLimits = LIMITS) -> str:
    with pytest.raises(Invalid) as e:
        load(source, limits)
    problem = e.value.problems[0]
    return f"{problem.message} | {problem.fix}"


def test_merge_key_bomb_is_refused_by_the_node_budget():
    source = merge_bomb(25)
    assert len(source) < 800 and source.count("*") == 50  # within the alias limit: only the expansion tells
    why = refusal(source)
    assert "merge keys" in why and "TRAINJOBS_IMPORT_MAX_YAML_NODES" in why


def test_merges_within_the_budget_still_load():
    doc = load(merge_bomb(6), LIMITS)
    assert doc["a6"] == {"k": "v"}


def test_merged_pairs_are_counted_where_they_are_copied():
    # One mapping of 40 pairs merged 40 times: 1,600 copies. Each mapping is small, so only the
    # count of copies (the same budget) refuses it when the budget is below that.
    base = "b: &b {" + ", ".join(f"k{i}: {i}" for i in range(40)) + "}\n"
    source = base + "".join(f"m{i}: {{<<: *b}}\n" for i in range(40))
    assert isinstance(load(source, LIMITS), dict)
    tight = YamlLimits(65_536, 50, 1000, 32, 262_144)
    assert "TRAINJOBS_IMPORT_MAX_YAML_NODES" in refusal(source, tight)


def test_an_alias_inside_its_own_anchor_is_refused():
    assert "contains it" in refusal("a: &a [1, *a]\n")
    assert "contains it" in refusal("a: &a {<<: *a}\n")


def test_expanded_text_is_bounded_in_bytes():
    # 40 aliases of one 10 KB string: 50 values, 400 KB once expanded.
    source = f"s: &s {'x' * 10_000}\nl: [" + ", ".join(["*s"] * 40) + "]\n"
    assert "TRAINJOBS_IMPORT_MAX_YAML_EXPANDED_BYTES" in refusal(source)
    assert len(load(source, YamlLimits(65_536, 50, 5000, 32, 1_000_000))["l"]) == 40


def test_heredoc_scan_is_linear_and_still_reads_config_files():
    # 4,700 headers with no end line: the old regex looked for an end from each (quadratic).
    files, rest = shell_text.heredocs("cat > f <<EOF\n" * 4700)
    assert files == {} and rest.count("\n") == 4700
    text = ("cat > a.yaml <<'EOF'\nx: 1\ncat > b <<EOF\nEOF\n"
            "cat > c.yaml <<END\ny: 2\nEND\ngcloud ai custom-jobs create --config=a.yaml")
    files, rest = shell_text.heredocs(text)
    assert files == {"a.yaml": "x: 1\ncat > b <<EOF", "c.yaml": "y: 2"}
    assert rest == "gcloud ai custom-jobs create --config=a.yaml"


@pytest.fixture
def settings(settings):
    return settings.model_copy(update={"import_max_bytes": 65_536})


@pytest.mark.parametrize("fmt,source,why", [
    ("aiplatform-config", merge_bomb(25), "TRAINJOBS_IMPORT_MAX_YAML_NODES"),
    ("vertex-config", merge_bomb(25), "TRAINJOBS_IMPORT_MAX_YAML_NODES"),
    ("gcloud", "cat > c.yaml <<EOF\n" + merge_bomb(25) + "EOF\ngcloud ai custom-jobs create --config=c.yaml",
     "TRAINJOBS_IMPORT_MAX_YAML_NODES"),
    ("gcloud", "cat > f <<EOF\n" * 4600, "gcloud ai custom-jobs create"),
    ("gcloud", "cat > f <<EOF\nx\n" * 4000 + "gcloud ai custom-jobs create --config f",
     "paste the whole command"),
    ("aiplatform-config", "x" * 65_537, "TRAINJOBS_IMPORT_MAX_BYTES"),
    ("vertex-config", "[" * 65_000, "deeper than 32"),          # refused by the scanner, at once
    ("vertex-config", "[" + "a, " * 21_000 + "]", "TRAINJOBS_IMPORT_MAX_YAML_NODES"),  # by the running total
])
def test_bombs_answer_422_for_the_right_reason(client, fmt, source, why):
    r = client.post("/v1/templates:import", json={"format": fmt, "source": source})
    body = assert_problem(r, 422)
    assert any(why in f"{e['message']} {e['fix']}" for e in body["errors"]), body


def test_the_expanded_bytes_bound_is_a_setting(api_client, settings, tokens):

    source = ("trainingInput:\n  scaleTier: CUSTOM\n  masterType: n1-standard-4\n"
              f"  masterConfig: {{imageUri: 'img:1', containerArgs: [&a '{'x' * 600}', *a, *a, *a]}}\n")
    body = {"format": "aiplatform-config", "source": source}
    with api_client(settings.model_copy(update={"import_max_yaml_expanded_bytes": 2048}), tokens["admin"]) as c:
        problem = assert_problem(c.post("/v1/templates:import", json=body), 422, "source")
        assert "more than 2048 bytes" in problem["errors"][0]["message"]
    with api_client(settings, tokens["admin"]) as c:
        r = c.post("/v1/templates:import", json=body)
        assert r.status_code == 200, r.text
        assert r.json()["spec"]["container"]["args"] == ["x" * 600] * 4


HUGE = "9" * 5000  # int() refuses more than 4,300 digits: it killed the import worker (503) or answered 500


@pytest.mark.parametrize("fmt,source,field", [
    ("aiplatform-config", "trainingInput:\n  scaleTier: CUSTOM\n  masterType: n1-standard-4\n  masterConfig:\n"
                          f"    imageUri: img:1\n    acceleratorConfig: {{type: NVIDIA_TESLA_T4, count: {HUGE}}}\n",
     "trainingInput.masterConfig.acceleratorConfig.count"),
    ("aiplatform-config", "trainingInput:\n  scaleTier: CUSTOM\n  masterType: n1-standard-4\n  masterConfig:\n"
                          f"    imageUri: img:1\n    acceleratorConfig: {{type: NVIDIA_TESLA_T4, count: '{HUGE}'}}\n",
     "trainingInput.masterConfig.acceleratorConfig.count"),  # as a string, JSON's int64 form: the API process
    ("aiplatform-config", "trainingInput:\n  scaleTier: BASIC\n  scheduling: {maxRunningTime: " + HUGE + "s}\n",
     "trainingInput.scheduling.maxRunningTime"),
    ("vertex-config", '{"workerPoolSpecs": [{"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": '
                      f'{HUGE}, "containerSpec": {{"imageUri": "img:1"}}}}]}}', "workerPoolSpecs[0].replicaCount"),
    ("vertex-config", "workerPoolSpecs:\n- machineSpec: {machineType: n1-standard-4}\n  replicaCount: '"
                      f"{HUGE}'\n  containerSpec: {{imageUri: 'img:1'}}\n", "workerPoolSpecs[0].replicaCount"),
    ("vertex-config", "workerPoolSpecs:\n- machineSpec: {machineType: n1-standard-4}\n  containerSpec: "
                      "{imageUri: 'img:1'}\nscheduling: {timeout: '" + HUGE + "s'}\n", "scheduling.timeout"),
    ("vertex-config", f"workerPoolSpecs:\n- machineSpec: {{machineType: n1-standard-4}}\n  replicaCount: 0x{HUGE}\n"
                      "  containerSpec: {imageUri: 'img:1'}\n", "workerPoolSpecs[0].replicaCount"),  # hex: no limit
    ("gcloud", "cat > c.yaml <<EOF\nworkerPoolSpecs:\n- machineSpec: {machineType: n1-standard-4}\n  replicaCount: "
               f"{HUGE}\n  containerSpec: {{imageUri: 'img:1'}}\nEOF\ngcloud ai custom-jobs create --region=us-central1"
               " --display-name=x --config=c.yaml", "workerPoolSpecs[0].replicaCount"),
    ("gcloud", "gcloud ai custom-jobs create --region=us-central1 --display-name=x --worker-pool-spec="
               f"machine-type=n1-standard-4,replica-count={HUGE},container-image-uri=img:1", "replica-count"),
    ("vertex-config", "workerPoolSpecs:\n- machineSpec: {machineType: n1-standard-4, acceleratorCount: '²'}\n"
                      "  containerSpec: {imageUri: 'img:1'}\n", "workerPoolSpecs[0].machineSpec.acceleratorCount"),
])
def test_a_number_too_long_to_convert_is_a_422_naming_its_field(client, fmt, source, field):
    r = client.post("/v1/templates:import", json={"format": fmt, "source": source})
    body = assert_problem(r, 422)
    assert any(e["field"].endswith(field) for e in body["errors"]), body
    assert len(r.text) < 4000  # the number is not echoed back whole
