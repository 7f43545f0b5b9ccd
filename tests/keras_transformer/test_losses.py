"""Label-smoothed cross-entropy (section 5.4) against a hand computation and autodiff of the formula,
eagerly and as training computes it (`compiled=True`: XLA, in a graph whose batch shapes change)."""

import math

import numpy as np
import pytest

from keras_transformer import LabelSmoothedCrossEntropy, label_smoothed_cross_entropy
from keras_transformer.losses import symmetric_kl


@pytest.mark.parametrize("compiled", [False, True])
def test_hand_computed_value(compiled):
    # One sentence, vocabulary of 3, two real tokens and one pad (id 0).
    logits = np.array([[[0.0, 1.0, 2.0], [1.0, 1.0, 1.0], [5.0, -5.0, 0.0]]], "float32")
    labels = np.array([[2, 1, 0]])
    eps = 0.1
    # Token 1: log Z = log(1 + e + e^2); -log p(2) = log Z - 2; mean of -log p = log Z - 1.
    log_z = math.log(1 + math.e + math.e**2)
    token1 = (1 - eps) * (log_z - 2) + eps * (log_z - 1)
    # Token 2: uniform prediction, every -log p = log 3.
    token2 = math.log(3)
    loss_sum, num_tokens = label_smoothed_cross_entropy(labels, logits, epsilon=eps, pad_id=0, compiled=compiled)
    assert float(num_tokens) == 2.0
    assert float(loss_sum) == pytest.approx(token1 + token2, rel=1e-6)
    assert float(LabelSmoothedCrossEntropy(eps)(labels, logits)) == pytest.approx((token1 + token2) / 2, rel=1e-6)


def test_no_smoothing_is_cross_entropy():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(2, 3, 7)).astype("float32")
    labels = rng.integers(1, 7, size=(2, 3))
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    expected = -np.take_along_axis(log_probs, labels[..., None], -1).sum()
    loss_sum, _ = label_smoothed_cross_entropy(labels, logits, epsilon=0.0)
    assert float(loss_sum) == pytest.approx(expected, rel=1e-5)


def test_bfloat16_logits_give_float32_loss():
    import tensorflow as tf

    logits = tf.cast(tf.random.normal((2, 3, 7)), tf.bfloat16)
    loss_sum, _ = label_smoothed_cross_entropy(np.ones((2, 3), "int32"), logits)
    assert loss_sum.dtype == tf.float32 and np.isfinite(loss_sum.numpy())


@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_gradient_equals_autodiff_of_the_formula(eps, compiled):
    """The one-pass gradient (softmax - q) against TensorFlow differentiating the plain formula."""
    import tensorflow as tf

    rng = np.random.default_rng(1)
    logits = tf.constant(rng.normal(scale=3.0, size=(2, 4, 9)).astype("float32"))
    labels = tf.constant([[3, 1, 0, 0], [8, 2, 5, 1]])  # two pads in the first sentence

    def reference(logits):
        log_probs = tf.nn.log_softmax(logits, axis=-1)
        q = tf.one_hot(labels, 9) * (1 - eps) + eps / 9
        weights = tf.cast(labels != 0, tf.float32)
        return tf.reduce_sum(-tf.reduce_sum(q * log_probs, axis=-1) * weights)

    with tf.GradientTape(persistent=True) as tape:
        tape.watch(logits)
        ours, _ = label_smoothed_cross_entropy(labels, logits, epsilon=eps, compiled=compiled)
        expected = reference(logits)
    np.testing.assert_allclose(ours, expected, rtol=1e-6)
    gradient = tape.gradient(ours, logits)
    np.testing.assert_allclose(gradient, tape.gradient(expected, logits), atol=1e-6)
    np.testing.assert_array_equal(gradient[0, 2:], 0.0)  # padding gets no gradient


def test_compiled_equals_uncompiled_in_a_graph_whose_shapes_change():
    """Training's path: a tf.function with unknown batch shapes (the trainer's reduce_retracing),
    called with length-bucketed batches of different shapes: XLA's loss and gradient equal
    TensorFlow's kernels' at every shape; bfloat16 logits (mixed precision) give the loss of
    their float32 values."""
    import tensorflow as tf

    def loss_and_gradient(compiled, dtype=tf.float32):
        @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([None, None, None])])
        def run(labels, logits):
            with tf.GradientTape() as tape:
                tape.watch(logits)
                loss, tokens = label_smoothed_cross_entropy(labels, tf.cast(logits, dtype), 0.1, compiled=compiled)
            return loss, tokens, tape.gradient(loss, logits)
        return run

    eager, compiled, compiled_bf16 = loss_and_gradient(False), loss_and_gradient(True), loss_and_gradient(True, tf.bfloat16)
    rng = np.random.default_rng(2)
    for batch, length, vocab in ((3, 5, 11), (2, 9, 11), (4, 1, 13)):
        logits = tf.constant(rng.normal(scale=2.0, size=(batch, length, vocab)).astype("float32"))
        labels = tf.constant(rng.integers(0, vocab, size=(batch, length)).astype("int32"))
        expected, got = eager(labels, logits), compiled(labels, logits)
        np.testing.assert_allclose(got[0], expected[0], rtol=1e-6)
        assert float(got[1]) == float(expected[1])
        np.testing.assert_allclose(got[2], expected[2], atol=1e-6)
        rounded = eager(labels, tf.cast(tf.cast(logits, tf.bfloat16), tf.float32))
        np.testing.assert_allclose(compiled_bf16(labels, logits)[0], rounded[0], rtol=1e-6)


def test_symmetric_kl_is_half_the_two_kl_divergences_over_real_tokens():
    """R-Drop's term (Liang et al., 2021, equation 2) against KL(P||Q) = sum p log(p / q) by hand."""
    a = np.array([[[0.0, 1.0, 2.0], [3.0, 0.0, 0.0], [9.0, 0.0, -9.0]]], "float32")
    b = np.array([[[2.0, 1.0, 0.0], [3.0, 0.0, 0.0], [0.0, 0.0, 0.0]]], "float32")
    labels = np.array([[5, 6, 0]])  # the third position is padding

    def softmax(x):
        e = np.exp(x - x.max())
        return e / e.sum()

    p, q = softmax(a[0, 0].astype("float64")), softmax(b[0, 0].astype("float64"))
    expected = 0.5 * (np.sum(p * np.log(p / q)) + np.sum(q * np.log(q / p)))  # the second position: equal, 0
    assert float(symmetric_kl(a, b, labels)) == pytest.approx(expected, rel=1e-5)
    assert float(symmetric_kl(b, a, labels)) == pytest.approx(expected, rel=1e-5)
    assert float(symmetric_kl(a, a, np.array([[5, 6, 7]]))) == pytest.approx(0.0, abs=1e-6)
