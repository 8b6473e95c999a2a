"""A Mersenne Twister (MT19937) that reproduces numpy's legacy ``RandomState`` draw for draw.

Determined's master used a Go port of numpy's RandomKit so that an experiment seed gives the same
hyperparameters in the master and in Python. This is the same generator, written for Python, with a
JSON-serialisable state (``{"key": [624 uint32], "pos": int}``, the layout upstream snapshots use).
"""

from __future__ import annotations

from typing import Any

_N = 624
_M = 397
_MATRIX_A = 0x9908B0DF
_UPPER_MASK = 0x80000000
_LOWER_MASK = 0x7FFFFFFF
_U32 = 0xFFFFFFFF
_U64 = 0xFFFFFFFFFFFFFFFF


class RandomState:
    """MT19937 seeded like ``numpy.random.RandomState(seed)``.

    ``random_sample()`` and ``randint(low, high)`` return exactly what numpy's legacy generator
    returns for the same seed and call sequence; ``intn``/``int64n``/``uniform`` are the names the
    Go master used for the same draws.

    Args:
        seed: an unsigned 32-bit seed (larger values are reduced modulo 2**32, as Go's ``uint32()``).
    """

    def __init__(self, seed: int = 0) -> None:
        self._key: list[int] = [0] * _N
        self._pos = _N
        self.seed(seed)

    def seed(self, seed: int) -> None:
        """Re-seed with ``init_genrand(seed)`` (Knuth's multiplier 1812433253)."""
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise TypeError(f"seed: expected an int, got {type(seed).__name__}")
        value = seed & _U32
        key = self._key
        for i in range(_N):
            key[i] = value
            value = (1812433253 * (value ^ (value >> 30)) + i + 1) & _U32
        self._pos = _N

    def _twist(self) -> None:
        key = self._key
        for i in range(_N):
            y = (key[i] & _UPPER_MASK) | (key[(i + 1) % _N] & _LOWER_MASK)
            key[i] = key[(i + _M) % _N] ^ (y >> 1) ^ (_MATRIX_A if y & 1 else 0)
        self._pos = 0

    def bits32(self) -> int:
        """The next tempered 32-bit output, in ``[0, 2**32)``."""
        if self._pos >= _N:
            self._twist()
        y = self._key[self._pos]
        self._pos += 1
        y ^= y >> 11
        y ^= (y << 7) & 0x9D2C5680
        y ^= (y << 15) & 0xEFC60000
        y ^= y >> 18
        return y & _U32

    def bits64(self) -> int:
        """Two 32-bit draws, the first as the high word."""
        upper = self.bits32()
        return (upper << 32) | self.bits32()

    def read(self, n: int) -> bytes:
        """``n`` random bytes: each 32-bit draw yields four bytes, least significant first."""
        out = bytearray()
        while len(out) < n:
            out += self.bits32().to_bytes(4, "little")
        return bytes(out[:n])

    def _bits_limit(self, limit: int) -> int:
        """A uniform integer in ``[0, limit]`` by masked rejection sampling (numpy's "masked")."""
        if limit == 0:
            return 0
        mask = (1 << limit.bit_length()) - 1
        if limit <= _U32:
            while True:
                value = self.bits32() & mask
                if value <= limit:
                    return value
        while True:
            value = self.bits64() & mask
            if value <= limit:
                return value

    def intn(self, n: int) -> int:
        """A uniform integer in ``[0, n)``; ``n`` must be positive."""
        if n <= 0:
            raise ValueError(f"n: must be positive, got {n}")
        return self._bits_limit(n - 1)

    def int64n(self, n: int) -> int:
        """A uniform integer in ``[0, n)`` for ``0 < n <= 2**63`` (Go's ``Int64n``)."""
        if n <= 0 or n > 1 << 63:
            raise ValueError(f"n: must be in (0, 2**63], got {n}")
        return self._bits_limit(n - 1)

    int63n = int64n

    def randint(self, low: int, high: int | None = None) -> int:
        """Like ``numpy.random.RandomState.randint(low, high)`` for one int64 value in ``[low, high)``.

        With one argument the range is ``[0, low)``, as in numpy.
        """
        if high is None:
            low, high = 0, low
        if high <= low:
            raise ValueError(f"high: must be greater than low ({low}), got {high}")
        return low + self._bits_limit(high - low - 1)

    def random_sample(self) -> float:
        """A float in ``[0, 1)`` with 53 random bits, as numpy's ``random_sample()``."""
        a = self.bits32() >> 5
        b = self.bits32() >> 6
        return (a * 67108864.0 + b) / 9007199254740992.0

    unit_interval = random_sample

    def uniform(self, low: float, high: float) -> float:
        """A float in ``[low, high)``; ``high`` must be greater than ``low``."""
        if not high > low:
            raise ValueError(f"high: must be greater than low ({low}), got {high}")
        low, high = float(low), float(high)
        return low + (high - low) * self.random_sample()

    def state_dict(self) -> dict[str, Any]:
        """The generator state as JSON-ready data: ``{"key": [624 ints], "pos": int}``."""
        return {"key": list(self._key), "pos": self._pos}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a state produced by :meth:`state_dict` (or by upstream's Go ``nprand.State``)."""
        key = state.get("key")
        pos = state.get("pos")
        if not isinstance(key, list) or len(key) != _N:
            raise ValueError(f"rand.key: expected a list of {_N} integers")
        if not all(isinstance(k, int) and 0 <= k <= _U32 for k in key):
            raise ValueError("rand.key: every entry must be an unsigned 32-bit integer")
        if not isinstance(pos, int) or not 0 <= pos <= _N:
            raise ValueError(f"rand.pos: expected an int in [0, {_N}], got {pos!r}")
        self._key = list(key)
        self._pos = pos
