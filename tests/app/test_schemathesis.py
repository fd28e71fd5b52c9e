"""Property-based API test: schemathesis drives every operation from /openapi.json and checks
that nothing answers 5xx and every answer matches the schema (status codes, content types,
bodies), on SQLite and on PostgreSQL (``PLANNER_TEST_POSTGRES_URL``; the database variant is
what catches NUL and NaN ``DataError`` 500s). A stateful run follows the OpenAPI links: plan
jobs and batches are created, then read, their plans fetched and the jobs cancelled. Runs
against the real planner and the built-in catalog; plan jobs only queue. The app runs as in
production (``PLANNER_AUTH=api-key``) and every call carries a valid admin key."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test

from app.core.engine import make_engine, make_session_factory, unit_of_work
from app.core.settings import Settings
from app.keys.service import ApiKeyStore
from app.main import create_app, prepare_database
from app.planning.schemas import PLAN_EXAMPLE
from tests.conftest import DATABASES, POSTGRES_URL, _reset_postgres

schemathesis.experimental.OPEN_API_3_1.enable()  # FastAPI emits OpenAPI 3.1

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not hasattr(
            __import__("hypothesis.internal.conjecture.utils").internal.conjecture.utils.many,
            "more",
        ),
        reason="hypothesis >= 6.170.10 breaks hypothesis-jsonschema 0.23: pin hypothesis<6.170.10",
    ),
]


AUTH: dict[str, str] = {}
CHECKS = (
    schemathesis.checks.not_a_server_error,
    schemathesis.checks.status_code_conformance,
    schemathesis.checks.content_type_conformance,
    schemathesis.checks.response_schema_conformance,
)


def _app(folder: Path, database: str) -> Any:
    """The production-mode app on a fresh database, and an admin key in AUTH."""
    if database == "postgres":
        if not POSTGRES_URL:
            pytest.skip("set PLANNER_TEST_POSTGRES_URL to run the PostgreSQL variant")
        _reset_postgres(POSTGRES_URL)
    config = Settings(
        data_dir=folder,
        database_url=POSTGRES_URL if database == "postgres" else "",
        workers=0,
        env="production",
        auth="api-key",
        secret_key="Zq3v9Lr2Wm8Kx1Tb7Nc4Hd6Pf0Gj5Ys-RuAeIoQ",
        rate_limit_per_s=0,
        rate_limit_ip_per_s=0,
    )
    prepare_database(config)
    engine = make_engine(config.database_url)
    with unit_of_work(make_session_factory(engine)) as session:
        AUTH["X-API-Key"], _ = ApiKeyStore(session).create(["admin"])
    engine.dispose()
    app = create_app(config)
    app.state.worker_pool = None
    return app


@pytest.fixture(scope="module", params=DATABASES)
def api_schema(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    app = _app(tmp_path_factory.mktemp("schemathesis"), request.param)
    return schemathesis.from_asgi("/openapi.json", app)


schema = schemathesis.from_pytest_fixture(
    "api_schema",
    data_generation_methods=[
        schemathesis.DataGenerationMethod.positive,
        schemathesis.DataGenerationMethod.negative,
    ],
)


@schema.parametrize()
@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)
def test_api_conforms_and_never_fails(case: schemathesis.Case) -> None:
    case.call_and_validate(headers=AUTH, checks=CHECKS)


@pytest.mark.parametrize("database", DATABASES)
def test_plan_job_workflows_follow_the_links(
    database: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    app = _app(tmp_path_factory.mktemp("stateful"), database)
    with TestClient(app):  # runs the lifespan: migrations and the catalog
        stateful = schemathesis.from_asgi("/openapi.json", app).include(
            path_regex="^/v1/(plan-jobs|batches)"
        )
        machine = stateful.as_state_machine()

        class Workflow(machine):  # type: ignore[misc,valid-type]
            def get_call_kwargs(self, case: schemathesis.Case) -> dict[str, Any]:
                return {"headers": AUTH}

            def before_call(self, case: schemathesis.Case) -> None:
                # generated plan requests are almost never plannable (a real model and GPU, a
                # batch the GPUs divide): every other one is the documented example, so that
                # the links from a created job get followed too
                if case.operation.verbose_name == "POST /v1/plan-jobs":
                    self.plan_bodies = getattr(self, "plan_bodies", 0) + 1  # per run: replayable
                    if self.plan_bodies % 2 == 1:
                        case.body = {**PLAN_EXAMPLE, "seed": self.plan_bodies}
                # a batch with one unplannable job is a 422 as a whole (validated at submission)
                if case.operation.verbose_name == "POST /v1/batches":
                    self.batch_bodies = getattr(self, "batch_bodies", 0) + 1
                    if self.batch_bodies == 1:  # once a run: plan-job links need steps too
                        case.body = {"jobs": [{**PLAN_EXAMPLE, "seed": self.batch_bodies}]}

            def _add_results_to_targets(self, targets: Any, results: Any) -> None:
                # schemathesis 3 routes a response to the bundle of its links by overriding
                # hypothesis's old _add_result_to_targets; hypothesis now calls this plural
                # method, so route here (else every result lands in "catch_all", no link is
                # ever followed, and the root POSTs are blocked after the first call)
                for result in results:
                    target = None if result is None else self._get_target_for_result(result)
                    if target is not None:
                        super()._add_results_to_targets((target,), [result])

            def validate_response(
                self, response: Any, case: schemathesis.Case, **kwargs: Any
            ) -> None:
                called[(case.operation.verbose_name, response.status_code)] += 1
                case.validate_response(response, checks=CHECKS)

        called: Counter[Any] = Counter()
        run_state_machine_as_test(
            Workflow,
            settings=settings(
                max_examples=10,
                stateful_step_count=6,
                deadline=None,
                suppress_health_check=list(HealthCheck),
                derandomize=True,
            ),
        )
    followed = {key[0] for key in called if isinstance(key, tuple) and key[1] < 300}
    assert "GET /v1/plan-jobs/{job_id}" in followed, called  # created, then read ...
    assert "POST /v1/plan-jobs/{job_id}/cancel" in followed, called  # ... and cancelled
    assert "GET /v1/batches/{batch_id}" in followed, called
