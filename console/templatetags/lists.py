"""The table and the "nothing yet" box that every list page of the console draws.

Their markup lives once, in templates/includes/list_table.html and includes/empty_state.html; a list page writes
only its rows and its own words, so a new page looks like the others without copying them:

    {% load lists %}
    {% if things %}
      {% list_table "Name" "Created" actions=True %}
        {% for thing in things %}<tr>…<td data-label="Created">…</td>…</tr>{% endfor %}
      {% endlist_table %}
    {% else %}
      {% empty_state "No things yet" %}<p>Add one below.</p>{% endempty_state %}
    {% endif %}

Block tags rather than `{% include %}` because both wrap markup that the page writes (the rows, a paragraph with
links), which an include cannot take.
"""

from django import template
from django.template.loader import render_to_string
from django.utils.safestring import SafeString

register = template.Library()


@register.simple_block_tag
def list_table(content: SafeString, *columns: str, actions: bool = False, data: str = "") -> SafeString:
    """A stacking table (one card a row at phone width) headed by `columns`; `actions` adds a last column, named
    for screen readers only, for each row's buttons; `data="audit-log"` marks the table `data-audit-log` for
    scripts and tests to find. `content` is the rows, rendered in the page's own context."""
    context = {"columns": columns, "actions": actions, "data": data, "rows": content}
    return render_to_string("includes/list_table.html", context)


@register.simple_block_tag
def empty_state(content: SafeString, title: str = "") -> SafeString:
    """What a list shows with nothing in it: a title over the page's words and buttons, or, without a title,
    one line of text (inside a card that has its own heading)."""
    return render_to_string("includes/empty_state.html", {"title": title, "content": content})
