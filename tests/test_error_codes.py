"""One list of error codes (ops/errors.py ERROR_CODES) and one builder of the error body (ops.errors.error_body):
the exception classes, the OpenAPI document, the documentation's table, gunicorn's refusals and every hand-built error
agree with the list, and each failure says what to add where."""

import ast
import gc
from pathlib import Path

import pytest
from rest_framework import exceptions as drf

from ingestion import exceptions as api_errors
from ops.errors import ERROR_CODES, UnknownErrorCode, json_error, markdown_table, status_of

ROOT = Path(__file__).resolve().parent.parent
BUILDERS = {"error_body": 0, "json_error": 0, "error_response": 1}  # the builder's name -> position of the code


def _project_sources() -> list[Path]:
    skip = {".venv", "tests", "node_modules", ".git"}
    return [path for path in ROOT.rglob("*.py") if not skip & set(path.relative_to(ROOT).parts)]


def _subclasses(cls: type) -> list[type]:
    found = []
    for sub in cls.__subclasses__():
        found += [sub, *_subclasses(sub)]
    return found


def test_the_documentations_table_is_generated_from_the_list():
    """docs/reference/errors.md asks the build for the table (docs/_ext/generated_pages.py): nothing to keep in step."""
    page = (ROOT / "docs" / "reference" / "errors.md").read_text()
    assert "\n<!-- generated: error-codes -->\n" in page
    table = markdown_table()
    for entry in ERROR_CODES.values():
        assert f"| {entry.status} | `{entry.code}` |" in table


def test_every_exception_class_has_a_listed_code_and_takes_its_status():
    for cls in [api_errors.ApiError, *_subclasses(api_errors.ApiError)]:
        assert cls.default_code in ERROR_CODES, (
            f"{cls.__name__}.default_code {cls.default_code!r}: add ErrorCode({cls.default_code!r}, <status>, "
            "'<when>') to ERROR_CODES in ops/errors.py"
        )
        assert cls.status_code == ERROR_CODES[cls.default_code].status, cls


def test_an_unlisted_code_fails_at_once_and_says_where_to_add_it():
    with pytest.raises(UnknownErrorCode, match=r"ops/errors.py.*ErrorCode\('made_up', <status>"):

        class MadeUp(api_errors.ApiError):
            default_code = "made_up"

    with pytest.raises(UnknownErrorCode):
        json_error("made_up", "A code nobody listed.")

    # The refused class is still among ApiError's subclasses until the collector frees it (a class refers to
    # itself): collect it now, or the test that checks every subclass fails whenever it runs after this one.
    gc.collect()
    assert "MadeUp" not in {cls.__name__ for cls in _subclasses(api_errors.ApiError)}


@pytest.mark.parametrize(
    "exc",
    [
        drf.ParseError(),
        drf.AuthenticationFailed(),
        drf.NotAuthenticated(),
        drf.PermissionDenied(),
        drf.NotFound(),
        drf.MethodNotAllowed("PUT"),
        drf.NotAcceptable(),
        drf.UnsupportedMediaType("text/plain"),
        drf.Throttled(wait=3),
        drf.ValidationError("no"),
        drf.APIException(),
    ],
    ids=lambda exc: type(exc).__name__,
)
def test_the_exceptions_drf_raises_itself_get_a_listed_code_and_its_status(exc):
    response = api_errors.api_exception_handler(exc, {"view": None})

    code = response.data["code"]
    assert code in ERROR_CODES, f"{type(exc).__name__} answers {code!r}: list it in ERROR_CODES (ops/errors.py)"
    assert response.status_code == status_of(code)
    # A 429 adds its wait in milliseconds (retryAfterMs, which the official poke.mcp helper reads).
    extra = {"retryAfterMs"} if response.status_code == 429 else set()
    assert set(response.data) == {"success", "message", "code", *extra} and response.data["success"] is False


def test_the_openapi_document_names_every_code_where_it_can_be_answered(client, db):
    document = client.get("/api/schema/", headers={"Accept": "application/vnd.oai.openapi+json"}).json()
    components = document["components"]["schemas"]

    assert components["Error"]["properties"]["code"]["allOf"] == [{"$ref": "#/components/schemas/CodeEnum"}]
    assert components["CodeEnum"]["enum"] == sorted(ERROR_CODES), "the Error schema's code enum is ERROR_CODES"
    documented = {
        (int(status), code)
        for item in document["paths"].values()
        for operation in item.values()
        for status, response in operation.get("responses", {}).items()
        for code in ERROR_CODES
        if f"{code}:" in response["description"]
    }
    for entry in ERROR_CODES.values():
        if entry.in_openapi:
            assert (entry.status, entry.code) in documented, (
                f"{entry.code} ({entry.status}) has in_openapi=True but no operation of /api/schema/ declares a "
                f"{entry.status} response: add {entry.status} to the operation's responses(...) in "
                "ingestion/openapi.py, or set in_openapi=False in ops/errors.py"
            )
    unlisted = {(status, code) for status, code in documented if not ERROR_CODES[code].in_openapi}
    assert not unlisted, f"set in_openapi=True in ops/errors.py for {unlisted}"


@pytest.mark.slow
def test_no_error_body_is_written_by_hand_and_every_built_one_has_a_listed_code():
    for path in _project_sources():
        tree = ast.parse(path.read_text(), filename=str(path))
        where = path.relative_to(ROOT)
        for node in ast.walk(tree):
            if isinstance(node, ast.Dict) and path != ROOT / "ops" / "errors.py":
                keys = {key.value for key in node.keys if isinstance(key, ast.Constant)}
                is_error = any(
                    isinstance(key, ast.Constant)
                    and key.value == "success"
                    and isinstance(value, ast.Constant)
                    and value.value is False
                    for key, value in zip(node.keys, node.values, strict=True)
                )
                assert not (is_error and "code" in keys), (
                    f"{where}:{node.lineno} writes the error body by hand: use ops.errors.error_body(code, message) "
                    "(or json_error(code, message) for a Django response)"
                )
            if isinstance(node, ast.Call):
                name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
                position = BUILDERS.get(str(name))
                if position is not None and len(node.args) > position:
                    code = node.args[position]
                    if isinstance(code, ast.Constant):
                        assert code.value in ERROR_CODES, (
                            f"{where}:{node.lineno} answers code {code.value!r}: add ErrorCode({code.value!r}, "
                            "<status>, '<when>') to ERROR_CODES in ops/errors.py, then run "
                            "'.venv/bin/python -m ops.errors'"
                        )


def test_gunicorn_refuses_with_listed_codes_and_their_statuses():
    tree = ast.parse((ROOT / "gunicorn.conf.py").read_text())
    (refusals,) = [
        ast.literal_eval(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) in ("_REFUSALS",)
    ]
    failed = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "_FAILED"
    ]
    for status, (code, _) in [*refusals.items(), (500, ast.literal_eval(failed[0].value))]:
        assert code in ERROR_CODES and ERROR_CODES[code].status == status, (status, code)
