"""Target shapes for `tf.reshape` that are constants wherever the static shape allows.

Under `tf.function` (and in a SavedModel) a shape built from `tf.shape(x)` is a few graph
nodes (Shape, StridedSlice, ConcatV2) that run at every call: in a decoding loop, at every
step, for every reshape. A decoding step's tensors are `(B, 1, ...)` with only the batch
unknown, so `-1` can stand for it and the target shape is one constant.
"""

from __future__ import annotations

import tensorflow as tf


def leading_and(x: tf.Tensor, num_leading: int, trailing) -> list | tf.Tensor:
    """The shape of `x`'s first `num_leading` axes followed by the int sizes `trailing`.

    A Python list (a constant in the graph, -1 for the one unknown leading axis) when at
    most one leading axis is statically unknown (and no size is 0); else an int32 tensor
    from `tf.shape(x)`.
    """
    leading = tf.TensorShape(x.shape)[:num_leading]
    trailing = [int(size) for size in trailing]
    if leading.is_fully_defined():
        return leading.as_list() + trailing
    known = [size for size in leading if size is not None] + trailing
    if leading.rank is not None and sum(size is None for size in leading) == 1 and 0 not in known:
        return [-1 if size is None else size for size in leading] + trailing  # (-1 is not inferred beside a 0)
    return tf.concat([tf.shape(x)[:num_leading], trailing], axis=0)
