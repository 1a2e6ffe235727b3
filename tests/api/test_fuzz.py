"""Property-based fuzzing of the whole OpenAPI schema (schemathesis), on a real
server: no input may cause a 5xx, and every response must match the schema.

Driven by hand over every operation (rather than schema.parametrize) so that it
runs on the same live server and database fixtures as the other API tests."""
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import (content_type_conformance, not_a_server_error, response_schema_conformance,
                                 status_code_conformance)

from tests.conftest import bearer

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
EXAMPLES = 40  # per operation: the whole run stays within a few minutes on 2 cores


def test_no_input_breaks_the_api(live_server, demo_live, tokens):
    schema = schemathesis.openapi.from_url(f"{live_server}/openapi.json")
    headers = bearer(tokens["admin"])
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 15
    tried = {}
    for op in operations:
        count = 0

        @given(case=op.as_strategy())
        @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
                  suppress_health_check=list(HealthCheck))
        def run(case):
            nonlocal count
            count += 1
            case.call_and_validate(base_url=live_server, headers=headers, checks=CHECKS, timeout=30)

        run()
        tried[op.label] = count
    print(tried)
    assert all(n > 0 for n in tried.values()), tried
