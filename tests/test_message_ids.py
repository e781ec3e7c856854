"""Public message ids: msg_ + 24 base-62 characters, drawn uniformly (conversations.models.new_message_id)."""

from collections import Counter

from conversations.models import _ID_ALPHABET, is_message_id, new_message_id


def test_ids_have_the_published_shape_and_do_not_repeat():
    ids = [new_message_id() for _ in range(5000)]

    assert all(is_message_id(message_id) for message_id in ids)
    assert len(set(ids)) == len(ids)


def test_every_position_uses_the_whole_alphabet_evenly():
    ids = [new_message_id() for _ in range(31_000)]  # 500 expected per character and position

    for position in (4, 15, 27):  # the first, a middle and the last character after "msg_"
        counts = Counter(message_id[position] for message_id in ids)
        assert set(counts) == set(_ID_ALPHABET)
        assert min(counts.values()) > 380 and max(counts.values()) < 620  # far outside chance if skewed
