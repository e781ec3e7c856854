from django.contrib import admin
from django.urls import include, path, re_path

from config import errors
from console.views.accounts import landing
from ingestion import urls as ingestion_urls
from ingestion.views import DocsView, SchemaView, api_not_found

urlpatterns = [
    # The API's own patterns first and spliced in rather than include()d: an accepted message's path is matched
    # by the first pattern tried, without a nested resolver around it (docs/benchmarks.md, "The accept path
    # against the bare view").
    *ingestion_urls.urlpatterns,
    # The channel providers' callbacks (Twilio, Meta, Telegram, BlueBubbles), authenticated by their signatures.
    # Second, after the API: Django tries the patterns in order, and behind the console's ~70 a callback's path
    # took a tenth of its request's own work to resolve. Every path here starts with channels/, which nothing else
    # uses.
    path("", include("channels.urls")),
    path("admin/", admin.site.urls),
    # The OpenAPI document, and a docs page that renders it with assets served from here (no CDN).
    path("api/schema/", SchemaView.as_view(), name="openapi-schema"),
    # The split view serves its script from a URL, not inline, for the Content Security Policy.
    path("api/docs/", DocsView.as_view(url_name="openapi-schema"), name="api-docs"),
    # The web console: server-rendered pages, session-authenticated, CSRF on every POST.
    path("", landing, name="landing"),
    path("", include("console.urls")),
    # Keep last among the /api/ routes: anything unknown under /api/ answers JSON.
    re_path(r"^api/", api_not_found),
]

handler400 = errors.bad_request
handler404 = errors.not_found
handler500 = errors.server_error
