"""The collector settings of the test processes (tests/gc_settings.py, applied by tests/conftest.py)."""

import gc
import weakref

from gc_settings import GC_YOUNG


def test_what_was_collected_is_frozen_and_the_young_generation_is_larger():
    assert gc.isenabled()
    assert gc.get_threshold()[0] == GC_YOUNG > 700
    assert gc.get_freeze_count() > 10_000  # the libraries, the test modules and their tests


def test_a_tests_cyclic_garbage_is_still_collected_without_asking():
    class Node:
        pass

    gc.collect(1)  # the young generations' counters start from zero: no automatic pass before the cycle is garbage
    a, b = Node(), Node()
    a.other, b.other = b, a  # a cycle: reference counting alone never frees it
    gone = weakref.ref(a)
    del a, b
    keep = [[] for _ in range(2 * GC_YOUNG)]  # allocations enough for an automatic pass of the youngest generation
    assert gone() is None, "the cycle outlived a pass of the youngest generation"
    assert len(keep) == 2 * GC_YOUNG
