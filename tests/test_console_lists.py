"""The list pages' shared table and empty state (console/templatetags/lists.py)."""

import re

from django.template import engines


def render(source: str, **context: object) -> str:
    return engines["django"].from_string("{% load lists %}" + source).render(context)


def test_the_table_is_headed_by_its_columns_in_order_with_the_rows_in_its_body():
    html = render(
        '{% list_table "Name" "Created" %}{% for n in names %}<tr><td>{{ n }}</td></tr>{% endfor %}{% endlist_table %}',
        names=["a", "b"],
    )
    assert '<div class="table-wrap">' in html and '<table class="table table--stack">' in html
    assert re.findall(r'<th scope="col">([^<]*)</th>', html) == ["Name", "Created"]
    assert re.search(r"<tbody><tr><td>a</td></tr><tr><td>b</td></tr></tbody>", html)
    assert "Actions" not in html


def test_actions_adds_a_last_column_named_only_for_screen_readers():
    html = render('{% list_table "Name" actions=True %}{% endlist_table %}')
    assert html.index("Name") < html.index('<th scope="col"><span class="visually-hidden">Actions</span></th>')


def test_what_the_rows_print_is_escaped_once_as_on_the_page():
    html = render('{% list_table "Name" %}<tr><td>{{ name }}</td></tr>{% endlist_table %}', name="<b>&")
    assert "<td>&lt;b&gt;&amp;</td>" in html


def test_an_empty_state_with_a_title_puts_the_words_under_it():
    html = render('{% empty_state "No things yet" %}<p>Add <a href="/x">one</a>.</p>{% endempty_state %}')
    assert re.fullmatch(
        r'<div class="empty">\s*<h2>No things yet</h2>\s*<p>Add <a href="/x">one</a>.</p>\s*</div>\s*', html
    )


def test_an_empty_state_without_a_title_is_one_line():
    html = render("{% empty_state %}Nothing yet.{% endempty_state %}")
    assert html.strip() == '<p class="empty">Nothing yet.</p>'


def test_data_marks_the_table_for_scripts_to_find():
    assert '<table class="table table--stack" data-audit-log>' in render(
        '{% list_table "Time" data="audit-log" %}{% endlist_table %}'
    )
