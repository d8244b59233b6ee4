"""A world's random draws: ``random.Random``'s, made the same way from the same bits, in compiled code.

A world takes about a hundred draws (``choice``, ``randint``, ``randrange``),
and ``random.py`` makes each in three interpreted calls around one call of
the generator for its bits: with the compiled build, about 1% of checking a
world (valgrind's instruction count). ``Draw`` asks the same Mersenne Twister for the same bits
and reads them as Python's own ``_randbelow_with_getrandbits`` does, so a
seed gives the very worlds it gave (``tests/workloads/test_worlds.py``
holds every method to ``random.Random``'s).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")


class Draw:
    def __init__(self, seed: str) -> None:
        self._rng = random.Random(seed)

    def random(self) -> float:
        """A float in [0, 1), as ``random.Random.random``."""
        return self._rng.random()

    def below(self, n: int) -> int:
        """An int in [0, n), drawn as ``random.Random._randbelow`` draws it: the fewest bits, again while too big."""
        if n <= 0:
            raise ValueError(f"nothing to draw below {n}")
        bits = n.bit_length()
        r = self._rng.getrandbits(bits)
        while r >= n:
            r = self._rng.getrandbits(bits)
        return r

    def choice(self, seq: Sequence[T]) -> T:
        if not seq:
            raise IndexError("Cannot choose from an empty sequence")
        return seq[self.below(len(seq))]

    def randrange(self, stop: int) -> int:
        return self.below(stop)

    def randint(self, a: int, b: int) -> int:
        """An int in [a, b], both included."""
        return a + self.below(b - a + 1)
