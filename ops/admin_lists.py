"""Django admin lists of tables that only grow (messages, deliveries, texts, actions, audit, trigger logs): each page
costs the same at ten million rows as at a thousand (docs/howto/use-the-console.md, "See a message in the admin").

- No full count: Django's paginator counts every row that matches, twice (filtered and unfiltered). Here the count
  reads at most ``COUNT_CAP`` + 1 rows; past that, an unfiltered list shows PostgreSQL's own estimate of the table's
  size (``pg_class.reltuples``, kept by autovacuum's ANALYZE), a filtered one "more than ``COUNT_CAP``".
- An order an index serves: newest first by primary key unless the admin names another, and no sorting by a column
  click (most columns have no index; a click would sort the whole table).
- No per-choice counts (facets) and no date drill-down, both of which read every row.
"""

from collections.abc import Callable
from functools import cached_property
from typing import Any, ClassVar

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.core.exceptions import BadRequest
from django.core.paginator import Paginator
from django.db import connections
from django.db.models import Q, QuerySet
from django.http import HttpRequest, HttpResponse

# A count reads at most this many rows (and the list then offers COUNT_CAP / per page pages of a filtered list).
COUNT_CAP = 10_000


class EstimatedCountPaginator(Paginator):
    """A paginator whose count never reads more than ``COUNT_CAP`` + 1 rows."""

    @cached_property
    def count(self) -> int:
        queryset: QuerySet[Any] = self.object_list  # type: ignore[assignment]  # the admin's lists are querysets
        if not queryset.query.where:
            estimate = _estimated_rows(queryset.db, queryset.model._meta.db_table)
            if estimate > COUNT_CAP:
                return estimate
        return queryset.order_by()[: COUNT_CAP + 1].count()


def _estimated_rows(alias: str, table: str) -> int:
    """PostgreSQL's estimate of a table's rows (0 elsewhere, or before its first ANALYZE)."""
    connection = connections[alias]
    if connection.vendor != "postgresql":
        return 0
    with connection.cursor() as cursor:
        cursor.execute("SELECT reltuples::bigint FROM pg_class WHERE oid = %s::regclass", [table])
        row = cursor.fetchone()
    return max(int(row[0]), 0) if row else 0


class LargeTableAdmin(admin.ModelAdmin):
    """A ModelAdmin for a table of millions of rows: see this module's docstring."""

    paginator = EstimatedCountPaginator
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    ordering: ClassVar[Any] = ("-pk",)
    sortable_by: ClassVar[Any] = ()
    list_per_page = 50

    def get_readonly_fields(self, request: Any, obj: Any = None) -> list[str]:
        """Every field: these rows are records, and an editable link to another large table (a message, a thread)
        would list every one of its rows in a drop-down."""
        named = list(self.readonly_fields)
        return named + [field.name for field in self.model._meta.fields if field.name not in named]

    def get_search_results(self, request: Any, queryset: Any, search_term: str) -> tuple[Any, bool]:
        """Only lookups an index serves (an id, an exact address): a substring search would read every row."""
        term = search_term.strip()
        if not term:
            return queryset, False
        return queryset.filter(self.search_condition(term)), False

    def search_condition(self, term: str) -> Q:
        """What the search box finds for ``term``: an admin of a large table says which exact lookups."""
        raise NotImplementedError

    def has_add_permission(self, request: Any) -> bool:
        return False  # records of what happened, never written by hand


def people_with_email(email: str) -> list[int]:
    """The ids of the accounts with this exact email, looked up first so that the list's own query filters its index
    by a constant (a join would leave the planner guessing how many rows one person has)."""
    return list(get_user_model().objects.filter(email=email).values_list("pk", flat=True))


class NoNulInAdminQueriesMiddleware:
    """A 400 for an admin page whose query holds a NUL (?status__exact=%00): a list filter hands its value to
    PostgreSQL, which refuses text with one, and the list was a 500. (The admin's own form checks only the search
    box's text.)"""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path_info.startswith("/admin/") and "%00" in request.META.get("QUERY_STRING", ""):
            raise BadRequest("A NUL character (%00) in an admin page's query.")
        return self.get_response(request)
