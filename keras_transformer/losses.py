"""Label-smoothed cross-entropy over non-padding tokens (section 5.4).

"During training, we employed label smoothing of value epsilon_ls = 0.1. This
hurts perplexity, as the model learns to be more unsure, but improves accuracy
and BLEU score."

The smoothed target distribution is q(k) = (1 - epsilon) [k = y] + epsilon / V
(Szegedy et al., 2016), so the loss per token is

    (1 - epsilon) * (-log p(y)) + epsilon * (-1/V sum_k log p(k)).

Both terms come from the log-sum-exp of the logits, without materialising the
(B, T, V) log-probabilities.

Not in the paper: `symmetric_kl`, the consistency term of R-Drop (Liang et al., 2021,
"R-Drop: Regularized Dropout for Neural Networks"), which the trainer adds with
`--rdrop_alpha` (`keras_transformer.training.trainer`).
"""

from __future__ import annotations

import keras
import tensorflow as tf

from keras_transformer.special_ids import BOS_ID


def decoder_inputs(target_ids):
    """Teacher forcing: the targets (ids + EOS, PAD-padded) shifted right behind BOS.

    [[5, 6, EOS, PAD]] -> [[BOS, 5, 6, EOS]]; position t of the decoder then predicts
    target_ids[:, t] (section 3.1: "the output embeddings are offset by one position").
    """
    target_ids = tf.convert_to_tensor(target_ids, tf.int32)
    bos = tf.fill([tf.shape(target_ids)[0], 1], tf.constant(BOS_ID, tf.int32))
    return tf.concat([bos, target_ids[:, :-1]], axis=1)  # (B, T)


def label_smoothed_cross_entropy(labels, logits, epsilon=0.1, pad_id=0, compiled=False):
    """Summed label-smoothed cross-entropy and the number of tokens it covers.

    Args:
        labels: int `(B, T)` target ids; `pad_id` positions are ignored.
        logits: float `(B, T, V)`; computed in float32 whatever their dtype.
        epsilon: float, epsilon_ls.
        pad_id: int, the padding id.
        compiled: compute the loss and its gradient with XLA (`_token_losses`): the same
            values, fewer passes over the logits; for training, not for graphs that are
            exported (TF Serving runs no XLA cluster).

    Returns:
        `(loss_sum, num_tokens)`: float32 scalars. Divide the first by the
        second summed over all replicas (and accumulation steps) to get the
        per-token loss of a global batch.
    """
    labels = tf.cast(labels, tf.int32)
    loss = token_losses(labels, logits, epsilon, compiled)  # (B, T)
    weights = _token_weights(labels, pad_id)
    return tf.reduce_sum(loss * weights), tf.reduce_sum(weights)


def _token_weights(labels, pad_id):
    """float32 `(B, T)`: 1 at real target tokens, 0 at padding."""
    return tf.cast(tf.not_equal(tf.cast(labels, tf.int32), pad_id), tf.float32)


def symmetric_kl(logits_a, logits_b, labels, pad_id=0):
    """Summed R-Drop consistency term (Liang et al., 2021, equation 2) over non-padding positions.

    Two forward passes of one batch with different dropout masks give output distributions
    P_a and P_b; per position the term is 1/2 (KL(P_a || P_b) + KL(P_b || P_a)), which is
    1/2 sum_k (p_a(k) - p_b(k)) (log p_a(k) - log p_b(k)). Both directions carry gradients, as
    in the paper (neither pass is a fixed target).

    Args:
        logits_a, logits_b: float `(B, T, V)`, the two passes; computed in float32.
        labels: int `(B, T)` target ids; `pad_id` positions are left out.
        pad_id: int, the padding id.

    Returns:
        float32 scalar: the sum over non-padding positions.
    """
    log_a = tf.nn.log_softmax(tf.cast(logits_a, tf.float32), axis=-1)
    log_b = tf.nn.log_softmax(tf.cast(logits_b, tf.float32), axis=-1)
    per_position = 0.5 * tf.reduce_sum((tf.exp(log_a) - tf.exp(log_b)) * (log_a - log_b), axis=-1)  # (B, T)
    return tf.reduce_sum(per_position * _token_weights(labels, pad_id))


def token_losses(labels, logits, epsilon=0.0, compiled=False):
    """The loss of every position, float32 `(B, T)`, padding included: -log p(y_t) with
    `epsilon` 0 (what `keras_transformer.decoding.sequence_scores` sums per sentence), the smoothed loss otherwise.
    `compiled`: by XLA, for training (`label_smoothed_cross_entropy`)."""
    return _token_losses(tf.cast(logits, tf.float32), tf.cast(labels, tf.int32), float(epsilon), compiled)


def _token_losses(logits, labels, epsilon, compiled=False):
    """The per-token loss `(B, T)`, with its gradient in one pass over the logits.

    The derivative of the loss with respect to the logits is softmax(logits) - q:
    one (B, T, V) tensor, where automatic differentiation would add the gradients of
    the log-sum-exp, the gather and the mean as three. The vocabulary projection's
    output is the largest tensor of a training step, so this matters for speed.

    With `compiled`, the forward pass and the gradient are each one XLA computation: without
    XLA every step of the formula is a TensorFlow kernel that reads, and most write, the whole
    logits (about eleven passes: the log-sum-exp's max, subtraction, exponential and sum, the
    mean, then the gradient's exponential, one-hot, additions and products), which XLA fuses into
    a few loops. Each (B, T) shape is compiled once, on first use; a length bucket's batches mostly
    share one shape (each is padded to its longest pair, usually at the bucket's bound), so a run
    sees a few dozen.
    """
    forward, backward = (_xla_forward, _xla_gradient) if compiled else (_forward, _gradient)

    @tf.custom_gradient
    def losses(logits):
        loss, log_normalizer = forward(logits, labels, epsilon)

        def gradient(upstream):  # upstream: (B, T)
            return backward(logits, labels, log_normalizer, upstream, epsilon)

        return loss, gradient

    return losses(logits)


def _forward(logits, labels, epsilon):
    """The per-token loss and log sum_k exp(logit_k), both (B, T)."""
    log_normalizer = tf.reduce_logsumexp(logits, axis=-1)
    nll = log_normalizer - tf.gather(logits, labels, batch_dims=2)  # -log p(y)
    if not epsilon:
        return nll, log_normalizer
    uniform = log_normalizer - tf.reduce_mean(logits, axis=-1)  # -1/V sum_k log p(k)
    return (1.0 - epsilon) * nll + epsilon * uniform, log_normalizer


def _gradient(logits, labels, log_normalizer, upstream, epsilon):
    """(softmax(logits) - q) * upstream, (B, T, V)."""
    vocab = tf.shape(logits)[-1]
    probabilities = tf.exp(logits - log_normalizer[..., tf.newaxis])  # (B, T, V)
    smoothed = tf.one_hot(labels, vocab, on_value=1.0 - epsilon, off_value=0.0)  # (B, T, V)
    if epsilon:
        smoothed += epsilon / tf.cast(vocab, tf.float32)
    return (probabilities - smoothed) * upstream[..., tf.newaxis]


_xla_forward = tf.function(_forward, jit_compile=True, reduce_retracing=True, autograph=False)
_xla_gradient = tf.function(_gradient, jit_compile=True, reduce_retracing=True, autograph=False)


@keras.saving.register_keras_serializable(package="keras_transformer")
class LabelSmoothedCrossEntropy(keras.losses.Loss):
    """`label_smoothed_cross_entropy` as a Keras loss: the mean over non-padding tokens of a batch.

    For `model.fit` users; the training loop of `keras_transformer.train` uses the
    function directly so that it can normalise by the global token count.
    """

    def __init__(self, epsilon=0.1, pad_id=0, name="label_smoothed_cross_entropy", **kwargs):
        super().__init__(name=name, reduction=None, **kwargs)
        self.epsilon = epsilon
        self.pad_id = pad_id

    def __call__(self, y_true, y_pred, sample_weight=None):
        loss_sum, num_tokens = label_smoothed_cross_entropy(y_true, y_pred, self.epsilon, self.pad_id)
        return loss_sum / tf.maximum(num_tokens, 1.0)

    def call(self, y_true, y_pred):
        return self(y_true, y_pred)

    def get_config(self):
        return {"epsilon": self.epsilon, "pad_id": self.pad_id, "name": self.name}
