"""Float16 packing of per-token values: a list of floats as little-endian IEEE 754 half floats (2 bytes a value).

The store keeps each completion's per-token log-probabilities, KL and entropies this way
(:class:`storage.tables.TokenStatsRow`): half the bytes of float32, a quarter of float64, and precise to about three
significant digits, more than a heatmap shows. Pure standard library (``struct``'s ``e`` format); no numpy, no torch.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence

FLOAT16_MAX = 65504.0
"""The largest finite float16; finite values beyond it are stored as ±inf."""


def _half(value: float) -> float:
    value = float(value)
    if math.isfinite(value) and abs(value) > FLOAT16_MAX:
        return math.copysign(math.inf, value)
    return value


def pack_float16(values: Sequence[float]) -> bytes:
    """``values`` as ``2 * len(values)`` bytes of little-endian float16, rounded to nearest.

    NaN and ±inf are kept; finite values beyond ±65504 become ±inf (float16's range).

    Raises:
        TypeError / ValueError: a value is not a number.
    """
    layout = f"<{len(values)}e"
    try:
        return struct.pack(layout, *values)  # the common case, in C: every value a number within float16's range
    except (OverflowError, struct.error):
        return struct.pack(layout, *(_half(v) for v in values))


def unpack_float16(data: bytes) -> list[float]:
    """The floats packed by :func:`pack_float16` (``len(data) // 2`` of them).

    Raises:
        ValueError: ``data`` has an odd number of bytes.
    """
    if len(data) % 2:
        raise ValueError(f"float16 data must have an even number of bytes, got {len(data)}")
    return list(struct.unpack(f"<{len(data) // 2}e", data))
