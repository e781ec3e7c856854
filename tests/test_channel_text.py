"""Texts for a phone: markdown flattened for SMS, long texts cut at the provider's limit."""

import pytest

from channels.outbound.text import MAX_PARTS, flatten_markdown, split_text, units


def test_markup_goes_and_the_words_links_and_lists_stay():
    text = (
        "# Plan\n\nDeep work **13:00–15:00**, see [the calendar](https://cal.example/t) or <https://x.example>.\n\n"
        "- dentist at *10*\n- call `mum`\n\n3. first\n4. second\n\n```\nmake deploy\n```\n\n> quoted\n> line"
    )
    assert flatten_markdown(text) == (
        "Plan\n\nDeep work 13:00–15:00, see the calendar (https://cal.example/t) or https://x.example.\n\n"
        "• dentist at 10\n• call mum\n\n3. first\n4. second\n\nmake deploy\n\n> quoted\n> line"
    )


def test_plain_text_is_unchanged_and_asterisks_inside_code_survive():
    assert flatten_markdown("Meet at 5, bring the keys.") == "Meet at 5, bring the keys."
    assert flatten_markdown("Run `ls **/*.py` now") == "Run ls **/*.py now"


def test_a_short_text_is_one_part_and_an_empty_one_none():
    assert split_text("hello", 1600) == ["hello"]
    assert split_text("  \n ", 1600) == []


def test_a_long_text_is_cut_between_paragraphs_then_words_and_numbered():
    paragraph = "word " * 200  # 1,000 characters
    parts = split_text(f"{paragraph.strip()}\n\n{paragraph.strip()}", 1600)
    assert [part[-6:] for part in parts] == [" (1/2)", " (2/2)"]
    assert parts[0] == paragraph.strip() + " (1/2)"  # cut at the paragraph, not at 1,592 characters
    assert all(units(part) <= 1600 for part in parts)


@pytest.mark.parametrize("limit", [1600, 4096])
def test_no_part_exceeds_the_limit_counted_as_the_providers_count(limit):
    text = "😀" * limit  # each emoji is two UTF-16 units
    parts = split_text(text, limit)
    assert all(units(part) <= limit for part in parts)
    assert "".join(part.rsplit(" (", 1)[0] for part in parts) == text


def test_a_text_without_spaces_is_cut_at_the_limit():
    parts = split_text("x" * 3000, 1600)
    assert [units(p) for p in parts] == [1592 + 6, 3000 - 1592 + 6]  # the number takes its room


def test_an_endless_text_stops_after_the_last_part_with_an_ellipsis():
    parts = split_text("word " * 10_000, 1600)
    assert len(parts) == MAX_PARTS
    assert parts[-1].endswith(f"… ({MAX_PARTS}/{MAX_PARTS})")
    assert all(units(part) <= 1600 for part in parts)
