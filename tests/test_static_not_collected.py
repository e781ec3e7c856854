"""With DEBUG off, console pages name their stylesheets by collectstatic's hashed names: until it has run, the 500
says what to run (config/errors.py)."""

import pytest
from django.contrib.staticfiles.storage import staticfiles_storage
from django.test import Client
from django.utils.functional import empty


@pytest.fixture
def uncollected(settings, tmp_path):
    settings.DEBUG = False
    settings.STATIC_ROOT = tmp_path  # empty: collectstatic has not run
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
    }
    staticfiles_storage._wrapped = empty  # built again from the settings above
    yield
    staticfiles_storage._wrapped = empty


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/login/", "/signup/"])
def test_a_console_page_says_to_run_collectstatic(uncollected, path):
    response = Client(raise_request_exception=False).get(path)

    assert response.status_code == 500
    assert "python manage.py collectstatic --no-input" in response.content.decode()


@pytest.mark.django_db
def test_the_api_is_not_concerned(uncollected, v2):
    from tests.conftest import CURRENT, post

    assert post(Client(), CURRENT, v2[1], {"message": "hi"}).status_code == 200
