"""Anything under /api/ answers JSON, whatever goes wrong."""

import pytest

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("path", ["/api/", "/api/v1/nothing-here", "/api/v2/inbound/api-message"])
def test_unknown_api_paths_are_json_404s(client, path):
    response = client.post(path, data="{}", content_type="application/json")

    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert response.json()["code"] == "not_found"
    assert "X-Request-ID" in response


def test_an_unknown_api_path_points_to_the_document_that_lists_every_endpoint(client):
    answer = client.get("/api/v1/connections/calender").json()["message"]

    assert "/api/docs/" in answer and "/api/schema/" in answer
    assert client.get("/api/docs/").status_code == 200
