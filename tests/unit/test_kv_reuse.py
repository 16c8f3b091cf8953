"""The split point of KV reuse: always a multiple of the evaluation chunk, never the last token."""

from needle_action.providers.local.kv_reuse import aligned, common_prefix


def test_split_points_are_multiples_of_the_chunk():
    assert aligned(0, 900, 128) == 0
    assert aligned(127, 900, 128) == 0
    assert aligned(300, 900, 128) == 256
    assert aligned(900, 900, 128) == 896  # the whole prompt shared: its last (partial) chunk runs again
    assert aligned(1024, 1025, 128) == 1024
    assert aligned(1025, 1025, 128) == 1024


def test_common_prefix():
    assert common_prefix([1, 2, 3], [1, 2, 4]) == 2
    assert common_prefix([], [1]) == 0
