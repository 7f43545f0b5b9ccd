"""A trained Transformer as a CTranslate2 model: the same weights, run by CTranslate2 4.x.

For users who serve on CPU outside TF Serving (CTranslate2 runs the same network in C++, with
int8 weights if asked). Written by `python -m keras_transformer.export --format=ctranslate2 [--quantization=int8]`,
or in Python:

    path, _ = convert("runs/base", "out/ct2")                  # averaged/ else latest checkpoint
    translator = Ctranslate2Translator(path)                   # pip install "ctranslate2>=4,<5"
    translator.translate(["A dog runs."])                      # [[("Ein Hund läuft.", -1.23)]]

    import ctranslate2                                         # or CTranslate2 alone, with pieces:
    ctranslate2.Translator(path).translate_batch([["▁A", "▁dog", "▁runs", "."]], beam_size=4)

`output_dir` holds what `ctranslate2.Translator` loads (model.bin, config.json,
shared_vocabulary.json or source_/target_vocabulary.json), the run's tokenizer folder
(`tokenizer/`, the layout of MODEL_DIR/tokenizer, so `keras_transformer.pipelines.tokenizers.load_pair` reads it)
and `export.json` (model and decoding settings, checkpoint, quantization). It appears whole or
not at all: everything is written into a hidden folder beside it and renamed at the end.

The mapping (section 3 of the paper -> `ctranslate2.specs.TransformerSpec`):

    TransformerSpec.from_config(N, h, pre_norm=layer_norm == "pre", activation=RELU)
    encoder.embeddings[0].weight       <- source_embedding.embeddings          (V_src, d_model)
    decoder.embeddings.weight          <- target_embedding.embeddings          (V_tgt, d_model)
    decoder.projection.weight          <- target_embedding.embeddings (tied, no bias; aliased on save)
    {encoder,decoder}.scale_embeddings <- SharedEmbedding.scale (x sqrt(d_model))
    {encoder,decoder}.position_encodings.encodings <- the project's own table (interleaved
                                          sin/cos from position 0; CT2's built-in one differs)
    layer_i.self_attention.linear[0]   <- [W^Q; W^K; W^V]^T, biases concatenated   (3 h d_k, d_model)
    layer_i.self_attention.linear[1]   <- W^O^T, b^O                               (d_model, h d_v)
    layer_i.self_attention.layer_norm  <- self_attention_residual.norm (post: after the residual
                                          sum; pre: on the sub-layer input; CT2 does the same)
    layer_i.attention.linear[0]        <- W^Q^T (decoder only: encoder-decoder attention)
    layer_i.attention.linear[1]        <- [W^K; W^V]^T
    layer_i.attention.linear[2]        <- W^O^T
    layer_i.attention.layer_norm       <- cross_attention_residual.norm
    layer_i.ffn.linear_0 / linear_1    <- feed_forward.inner_dense / output_dense (kernels transposed)
    layer_i.ffn.layer_norm             <- feed_forward_residual.norm
    {encoder,decoder}.layer_norm       <- encoder_norm / decoder_norm (pre-LN only)
    *.queries_scale                    <- d_k ** -0.5 (CT2's default is (d_model / h) ** -0.5)
    config: unk/bos/eos = the pieces of UNK_ID/BOS_ID/EOS_ID, decoder_start_token = BOS,
            add_source_eos = True, add_source_bos = False, layer_norm_epsilon = the model's

Decoding is not part of a CTranslate2 model: it is chosen per `translate_batch` call.
`translation_options` gives the call that follows `keras_transformer.decoding.search` as closely as
CTranslate2 allows, and `rescore` re-ranks CTranslate2's finished hypotheses with the GNMT
length penalty the project uses (CTranslate2 divides by |Y| ** alpha instead).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
from typing import Any, Callable, Optional, Sequence, Union

import numpy as np

from keras_transformer.export import versions
from keras_transformer.config import DecodingConfig, SamplingConfig, TransformerConfig
from keras_transformer.special_ids import BOS_ID, EOS_ID, PAD_ID, UNK_ID

VMAP_FILE = "vmap.txt"  # CTranslate2's vocabulary map in a model folder (`convert`'s shortlist_file)

CTRANSLATE2_REQUIREMENT = "ctranslate2>=4,<5"


# ctranslate2, imported when needed ---------------------------------------------------------

def _ctranslate2():
    """The `ctranslate2` module, or a one-line error saying how to install it."""
    try:
        import ctranslate2  # pylint: disable=g-import-not-at-top
    except ImportError:
        raise ValueError(f"a CTranslate2 export needs the ctranslate2 package: pip install "
                         f"\"{CTRANSLATE2_REQUIREMENT}\"") from None
    major = int(ctranslate2.__version__.split(".")[0])
    if major != 4:
        # The spec layout (TransformerSpec revision 7), `queries_scale` and `layer_norm_epsilon`
        # are those of 4.x; 3.x lacks add_source_eos in config.json, 5.x is unknown.
        raise ValueError(f"ctranslate2 {ctranslate2.__version__} is installed; this export needs "
                         f"{CTRANSLATE2_REQUIREMENT}")
    return ctranslate2


def check_quantization(quantization: Optional[str]) -> None:
    """Raises a one-line ValueError unless `quantization` is None or a type CTranslate2 accepts
    (int8, int8_float32, int8_float16, int8_bfloat16, int16, float16, bfloat16, float32).

    Cheap (no TensorFlow, no model): a command calls it before anything is built.
    """
    ctranslate2 = _ctranslate2()
    accepted = ctranslate2.specs.model_spec.ACCEPTED_MODEL_TYPES
    if quantization is not None and quantization not in accepted:
        raise ValueError(f"--quantization={quantization}: not a CTranslate2 type; choose one of "
                         f"{', '.join(accepted)}")


# Vocabularies --------------------------------------------------------------------------------

def vocabulary(tokenizer) -> list[str]:
    """A `keras_transformer.pipelines.tokenizers.Tokenizer`'s pieces in id order: what CTranslate2 reads and writes.

    SentencePiece: `id_to_piece(i)` for every id ("<pad>", "<unk>", "<s>", "</s>", byte pieces
    "<0x00>".., then "▁the", ...). WordPiece: the lines of vocab.txt ("[PAD]", "[UNK]", "[BOS]",
    "[EOS]", then "the", "##s", ...).
    """
    return tokenizer.pieces()


def special_tokens(source_pieces: Sequence[str], target_pieces: Sequence[str]) -> dict[str, str]:
    """The pieces of PAD, UNK, BOS and EOS, which CTranslate2 knows by their strings.

    Its config holds one unk/bos/eos token for both sides (the source EOS it appends is looked
    up in the source vocabulary by the same string), so the two sides must agree.
    """
    names = {"pad": PAD_ID, "unk": UNK_ID, "bos": BOS_ID, "eos": EOS_ID}
    tokens = {name: target_pieces[i] for name, i in names.items()}
    differing = [name for name in ("unk", "bos", "eos") if source_pieces[names[name]] != target_pieces[names[name]]]
    if differing:
        raise ValueError(f"the source and target vocabularies name {', '.join(differing)} differently "
                         f"({[source_pieces[names[n]] for n in differing]} vs "
                         f"{[target_pieces[names[n]] for n in differing]}); CTranslate2 needs one name each")
    return tokens


def _sized(pieces: Sequence[str], rows: int, side: str) -> list[str]:
    """`pieces` with one entry per embedding row: the export's Translator accepts a tokenizer
    with fewer ids than the model's vocabulary (serving_module.Translator), CTranslate2 wants
    exactly one token per row."""
    pieces = list(pieces)
    if len(pieces) > rows:
        raise ValueError(f"the {side} tokenizer has {len(pieces)} ids but the model's embedding only {rows} rows")
    # Rows without a piece do not occur in this project's runs (training_directory/vocabulary.py sizes the
    # model by its tokenizer); a model that has them may output them, with CTranslate2 as without.
    return pieces + [f"<unused_{i}>" for i in range(len(pieces), rows)]


# Weights -------------------------------------------------------------------------------------

def _array(variable) -> np.ndarray:
    """A Keras variable as a C-contiguous float32 NumPy array (variables are float32 under every
    precision policy of this project)."""
    import keras  # pylint: disable=g-import-not-at-top

    return np.ascontiguousarray(keras.ops.convert_to_numpy(variable), dtype=np.float32)


def _weight(kernel, fan_in: int) -> np.ndarray:
    """A kernel `input_shape + output_shape` (Keras: x W) as CTranslate2's `[out, in]` (W x).

    HeadProjection W^Q/W^K/W^V (d_model, h, d) -> (h*d, d_model), head-major rows: the order in
    which CTranslate2 splits a projection into heads ((B, T, h*d) -> (B, T, h, d)).
    HeadProjection W^O (h, d_v, d_model) -> (d_model, h*d_v): columns head-major, as CTranslate2
    concatenates the heads. Dense (in, out) -> (out, in).
    """
    return np.ascontiguousarray(_array(kernel).reshape(fan_in, -1).T)


def _set_linear(spec, parts: Sequence[tuple[np.ndarray, Optional[np.ndarray]]]) -> None:
    """Sets a LinearSpec from one or more (weight [out, in], bias [out] or None), concatenated
    along the output axis (as `ctranslate2.converters.utils.fuse_linear` does)."""
    spec.weight = np.concatenate([w for w, _ in parts], axis=0)
    if any(b is not None for _, b in parts):
        spec.bias = np.concatenate([b if b is not None else np.zeros(w.shape[0], np.float32) for w, b in parts])


def _projection(layer) -> tuple[np.ndarray, Optional[np.ndarray]]:
    """A `HeadProjection` (keras_transformer.layers.multi_head_attention) as (weight, bias)."""
    weight = _weight(layer.kernel, math.prod(layer.input_shape_))
    bias = _array(layer.bias).reshape(-1) if layer.use_bias else None
    return weight, bias


def _dense(layer) -> tuple[np.ndarray, Optional[np.ndarray]]:
    """A `keras.layers.Dense` as (weight, bias)."""
    kernel = layer.kernel  # property over Dense._kernel (the checkpoint's key)
    return _weight(kernel, kernel.shape[0]), (_array(layer.bias) if layer.use_bias else None)


def _set_layer_norm(spec, norm) -> None:
    spec.gamma = _array(norm.gamma)
    spec.beta = _array(norm.beta)


def _set_attention(spec, attention, norm, self_attention: bool) -> None:
    """One `MultiHeadAttention` and the LayerNorm of its residual connection.

    Self-attention: linear[0] = fused Q, K, V; linear[1] = output. Encoder-decoder attention:
    linear[0] = Q, linear[1] = fused K, V, linear[2] = output
    (ctranslate2/converters/opennmt_tf.py set_multi_head_attention).
    """
    q, k, v = (_projection(p) for p in (attention.query_dense, attention.key_dense, attention.value_dense))
    if self_attention:
        _set_linear(spec.linear[0], [q, k, v])
    else:
        _set_linear(spec.linear[0], [q])
        _set_linear(spec.linear[1], [k, v])
    _set_linear(spec.linear[-1], [_projection(attention.output_dense)])
    # Eq. (1) divides by sqrt(d_k); CTranslate2 divides by sqrt(d_model / h) unless told
    # (src/layers/attention_layer.cc). Equal for every preset but Table 3 row (B).
    spec.queries_scale = np.float32(attention.key_dim ** -0.5)
    _set_layer_norm(spec.layer_norm, norm)


def _set_feed_forward(spec, feed_forward, norm) -> None:
    _set_linear(spec.linear_0, [_dense(feed_forward.inner_dense)])  # W_1: (d_ff, d_model), ReLU
    _set_linear(spec.linear_1, [_dense(feed_forward.output_dense)])  # W_2: (d_model, d_ff)
    _set_layer_norm(spec.layer_norm, norm)


def position_table(model, positions, rows: int) -> np.ndarray:
    """`rows` position encodings of `model.source_positions` or `model.target_positions`,
    float32 (rows, d_model); row p is what the model adds at position p (0 = the first token
    of a source, BOS of a target). The model's kind of positions writes it
    (`keras_transformer.position_encodings.PositionEncoding.ctranslate2_table`): sinusoids the
    project's own (interleaved sin/cos from position 0), which CTranslate2's built-in table is
    not (src/layers/common.cc: positions from 1, log(10000) / (d/2 - 1), sin and cos
    concatenated); a learned table with its last row repeated, as the model clips later
    positions to it and CTranslate2 rejects positions past its table. A kind without a table
    is a one-line ValueError.
    """
    return model.config.positions.ctranslate2_table(positions, rows, model.config)


def default_max_positions(config: TransformerConfig, decoding: DecodingConfig) -> int:
    """Rows of the position tables: every position the project's own decoding reaches (a source
    of at most `max_length` tokens, EOS included; an output of at most that + max_extra_length),
    and at least CTranslate2's default `max_input_length` of 1024, so that a call with default
    options fails on nothing the model could run."""
    # A translate_batch with a longer max_decoding_length fails with "No position encodings are
    # defined for positions >= N" (src/layers/common.cc), never silently; a row costs
    # 4 * d_model bytes, stored once when the encoder's and decoder's tables are equal.
    return max(config.max_length + decoding.max_extra_length, 1024)


def _check_supported(model) -> None:
    """Raises a one-line ValueError for a model CTranslate2's Transformer cannot express."""
    config = model.config
    problems = []
    if config.key_dim != config.value_dim:
        # CTranslate2 splits the fused Q|K|V (or K|V) projection into 3h (2h) equal heads.
        problems.append(f"d_k={config.key_dim} differs from d_v={config.value_dim}")
    for layer in model.encoder_layers + model.decoder_layers:
        if layer.feed_forward.activation != "relu":
            problems.append(f"feed-forward activation {layer.feed_forward.activation!r} (only relu)")
            break
    try:  # CTranslate2 adds a table of encodings per position
        position_table(model, model.source_positions, 1)
    except ValueError as error:
        problems.append(str(error))
    if problems:
        raise ValueError(f"the model cannot be converted to CTranslate2: {'; '.join(problems)}")


def build_spec(model, source_pieces: Sequence[str], target_pieces: Sequence[str], max_positions: int):
    """The `ctranslate2.specs.TransformerSpec` of a built, restored `Transformer`, unvalidated.

    Args:
        model: a `keras_transformer.model.Transformer` (weights restored).
        source_pieces, target_pieces: the tokenizers' pieces in id order (`vocabulary`).
        max_positions: rows of each position table (`default_max_positions`).
    """
    ctranslate2 = _ctranslate2()
    _check_supported(model)
    config = model.config
    spec = ctranslate2.specs.TransformerSpec.from_config(
        (config.encoder_depth, config.decoder_depth),  # each stack its own depth
        config.num_heads,
        pre_norm=config.layer_norm == "pre",  # adds the final encoder/decoder LayerNorm
        activation=ctranslate2.specs.Activation.RELU,
    )

    source_pieces = _sized(source_pieces, model.source_embedding.vocab_size, "source")
    target_pieces = _sized(target_pieces, model.target_embedding.vocab_size, "target")
    tokens = special_tokens(source_pieces, target_pieces)
    spec.register_source_vocabulary(source_pieces)
    spec.register_target_vocabulary(target_pieces)  # saved once as shared_vocabulary.json if equal
    spec.config.unk_token = tokens["unk"]
    spec.config.bos_token = tokens["bos"]
    spec.config.eos_token = tokens["eos"]
    spec.config.decoder_start_token = tokens["bos"]  # losses.decoder_inputs / search.translate_ids
    spec.config.add_source_bos = False
    spec.config.add_source_eos = True  # sources are pieces + EOS (pipelines/batching.py, serving_module)
    spec.config.layer_norm_epsilon = float(config.layer_norm_epsilon)  # CT2's default is 1e-5

    # Section 3.4: one matrix for the embeddings and the pre-softmax projection. Equal arrays
    # are stored once (ModelSpec.optimize aliases them; an int8 scale follows its alias).
    target = _array(model.target_embedding.embeddings)  # (V_tgt, d_model)
    source = target if model.source_embedding is model.target_embedding else _array(
        model.source_embedding.embeddings)
    spec.encoder.embeddings[0].weight = source
    spec.decoder.embeddings.weight = target
    spec.decoder.projection.weight = target  # logits = x E^T: E is already [out, in]; no bias
    spec.encoder.scale_embeddings = bool(model.source_embedding.scale)  # x sqrt(d_model)
    spec.decoder.scale_embeddings = bool(model.target_embedding.scale)

    spec.encoder.position_encodings.encodings = position_table(model, model.source_positions, max_positions)
    spec.decoder.position_encodings.encodings = position_table(model, model.target_positions, max_positions)

    for layer_spec, layer in zip(spec.encoder.layer, model.encoder_layers, strict=True):
        _set_attention(layer_spec.self_attention, layer.self_attention, layer.self_attention_residual.norm, True)
        _set_feed_forward(layer_spec.ffn, layer.feed_forward, layer.feed_forward_residual.norm)
    for layer_spec, layer in zip(spec.decoder.layer, model.decoder_layers, strict=True):
        _set_attention(layer_spec.self_attention, layer.self_attention, layer.self_attention_residual.norm, True)
        _set_attention(layer_spec.attention, layer.cross_attention, layer.cross_attention_residual.norm, False)
        _set_feed_forward(layer_spec.ffn, layer.feed_forward, layer.feed_forward_residual.norm)
    if model.encoder_norm is not None:  # pre-LN
        _set_layer_norm(spec.encoder.layer_norm, model.encoder_norm)
        _set_layer_norm(spec.decoder.layer_norm, model.decoder_norm)
    return spec


# Writing -------------------------------------------------------------------------------------

def _copy_tokenizers(source, target, directory: str) -> None:
    """The tokenizer pair in `directory`, laid out as `keras_transformer.pipelines.tokenizers.save_pair` does."""
    from keras_transformer.pipelines import tokenizers as tokenizers_lib  # pylint: disable=g-import-not-at-top

    saved = {id(t): t.asset_path for t in (source, target)}
    try:
        tokenizers_lib.save_pair(source, target, directory)
    finally:  # `save` points asset_path at the copy, a temporary folder about to be renamed
        for tokenizer in (source, target):
            tokenizer.asset_path = saved[id(tokenizer)]


def convert(model_dir_or_model: Union[str, Any], output_dir: str, quantization: Optional[str] = None, *,
            tokenizers: Optional[tuple] = None, checkpoint: Optional[str] = None,
            decoding_config: DecodingConfig = DecodingConfig(), max_positions: Optional[int] = None,
            publish: Optional[Callable[[str], str]] = None, shortlist_file: Optional[str] = None
            ) -> tuple[str, Optional[str]]:
    """Writes a CTranslate2 model of a training directory (or of a built model) to `output_dir`.

    The folder appears whole or not at all: it is written as a hidden sibling
    (`versions.temporary_folder`) and renamed at the end (`versions.publish`, which also gives
    every file the mode the umask allows).

    Args:
        model_dir_or_model: a training directory (its averaged checkpoint, else the newest
            readable one, as `keras_transformer.run_dir.layout.restore_model` chooses) or a built
            `Transformer` with restored weights.
        output_dir: the CTranslate2 model folder to create (must not exist).
        quantization: None (float32 weights) or a CTranslate2 type such as "int8", "int16",
            "float16", "int8_float16" (`check_quantization`).
        tokenizers: (source, target) `keras_transformer.pipelines.tokenizers.Tokenizer`s; default the training
            directory's (required with a model).
        checkpoint: a checkpoint prefix instead of the default one (training directory only).
        decoding_config: recorded in export.json (CTranslate2 decodes as each call says; see
            `translation_options`) and used for the default `max_positions`.
        max_positions: rows of the position tables (default `default_max_positions`).
        publish: renames the finished temporary folder into place and returns where (default:
            to `output_dir`, `versions.publish`; `export_model_dir` claims a version number).
        shortlist_file: a vocabulary map (`keras_transformer.decoding.shortlist`), checked
            against the vocabularies and kept as the model's vmap.txt, CTranslate2's own
            vocabulary map: `Ctranslate2Translator` then translates with `use_vmap`.

    Returns:
        (the folder written, the checkpoint converted or None for a model object).

    Raises:
        ValueError, FileNotFoundError: bad input, raised before anything is written.
    """
    check_quantization(quantization)
    if os.path.lexists(output_dir):
        raise ValueError(f"{output_dir} already exists; a CTranslate2 export never overwrites")
    from keras_transformer.run_dir import layout  # pylint: disable=g-import-not-at-top

    if isinstance(model_dir_or_model, str):  # the SavedModel export's reading and checks
        from keras_transformer.export import serving_module  # pylint: disable=g-import-not-at-top

        translator, checkpoint = serving_module.from_model_dir(model_dir_or_model, decoding_config, checkpoint,
                                                               shortlist_file=shortlist_file)  # read before the model
        model = translator.model
        tokenizers = tokenizers or (translator.source_tokenizer, translator.target_tokenizer)
    else:
        if tokenizers is None:
            raise ValueError("converting a model object needs tokenizers=(source, target)")
        if checkpoint is not None:
            raise ValueError("checkpoint= only applies to a training directory")
        model = model_dir_or_model
    source_tokenizer, target_tokenizer = tokenizers
    config = model.config
    rows = max_positions or default_max_positions(config, decoding_config)
    source_pieces, target_pieces = source_tokenizer.pieces(), target_tokenizer.pieces()
    shortlist = None
    if shortlist_file:
        from keras_transformer.decoding import shortlist as shortlist_lib  # pylint: disable=g-import-not-at-top

        shortlist = shortlist_lib.read(shortlist_file, source_pieces, target_pieces)
        shortlist.check_vocabularies(config.vocab_size, config.output_vocab_size)
    spec = build_spec(model, source_pieces, target_pieces, rows)
    spec.validate()  # every weight set; vocabulary sizes = embedding rows
    spec.optimize(quantization=quantization)  # aliases the tied embeddings, quantizes
    tokens = special_tokens(source_pieces, target_pieces)
    settings = {
        "format": "ctranslate2",
        "ctranslate2": _ctranslate2().__version__,
        "quantization": quantization,
        "checkpoint": checkpoint,
        "model": config.to_dict(),
        "decoding": decoding_config.to_dict(),
        "source_tokenizer": source_tokenizer.settings(),
        "target_tokenizer": target_tokenizer.settings(),
        "position_rows": rows,
        "special_tokens": tokens,
    }
    if shortlist is not None:
        settings["shortlist"] = {"file": VMAP_FILE, "frequent": int(shortlist.frequent.size),
                                 "per_source_piece": int(shortlist.table.shape[1])}

    parent, name = os.path.split(os.path.abspath(output_dir))
    os.makedirs(parent, exist_ok=True)
    temporary = versions.temporary_folder(parent, name)
    try:
        spec.save(temporary)  # model.bin, config.json, shared_vocabulary.json (or one per side)
        _copy_tokenizers(source_tokenizer, target_tokenizer, os.path.join(temporary, layout.TOKENIZER_DIR))
        if shortlist_file:
            shutil.copyfile(shortlist_file, os.path.join(temporary, VMAP_FILE))
        with open(os.path.join(temporary, versions.SETTINGS_FILE), "w", encoding="utf-8") as file:
            json.dump(settings, file, indent=2, sort_keys=True)
            file.write("\n")
        if publish is None:
            versions.publish(temporary, output_dir)
        else:
            output_dir = publish(temporary)
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise
    return output_dir, checkpoint


def export_model_dir(model_dir: str, export_dir: str, decoding_config: DecodingConfig = DecodingConfig(),
                     checkpoint: Optional[str] = None, version: Optional[int] = None,
                     quantization: Optional[str] = None, log: Callable[[str], None] = print,
                     shortlist_file: Optional[str] = None) -> tuple[str, Optional[str]]:
    """`python -m keras_transformer.export --format=ctranslate2`: EXPORT_DIR/<version>/ (the SavedModel export's
    layout, `keras_transformer.export.versions`) holding a CTranslate2 model. Returns (version folder, checkpoint)."""
    versions.check_export_dir(export_dir, version)
    check_quantization(quantization)
    os.makedirs(export_dir, exist_ok=True)
    versions.remove_stale_temporaries(export_dir, log)
    guess = versions.next_version(export_dir) if version is None else version  # claimed when published
    return convert(model_dir, os.path.join(export_dir, str(guess)), quantization,
                   checkpoint=checkpoint, decoding_config=decoding_config, shortlist_file=shortlist_file,
                   publish=lambda temporary: versions.publish_version(temporary, export_dir, version))


# Decoding with CTranslate2 -------------------------------------------------------------------

def translation_options(decoding: DecodingConfig, config: TransformerConfig, source_length: int, *,
                        pad_token: str = "<pad>", bos_token: str = "<s>", patience: float = 1.0,
                        sampling: Optional[SamplingConfig] = None) -> dict:
    """Keyword arguments of `ctranslate2.Translator.translate_batch` for sources of
    `source_length` pieces (EOS not counted), following `keras_transformer.decoding.search`:

    * max_input_length = config.max_length: CTranslate2 keeps the first max_length - 1 pieces
      and EOS (src/vocabulary.cc), as serving_module.Translator.source_ids truncates.
    * max_decoding_length = source tokens (EOS included) + max_extra_length, capped at
      max_length for learned positions (search.max_decode_lengths); CTranslate2 counts the
      EOS in it as the project does. One value per call: `translate_pieces` groups by length.
    * min_decoding_length = 0: the project may end at the first step (CTranslate2's default 1
      forbids an empty output).
    * suppress_sequences = [[PAD], [BOS]]: search.step_fn never outputs them; CTranslate2
      masks before its log-softmax, so scores are renormalised the same way.
    * Greedy search (beam 1): length_penalty = 0, scores are log P(Y) as in the project.
    * Beam search: CTranslate2 ranks finished hypotheses by log P(Y) / |Y| ** length_penalty,
      the project by the GNMT penalty ((5 + |Y|) / 6) ** alpha (section 6.1). No option gives
      the latter, but a non-zero penalty only changes the ranking (normalisation happens when
      a hypothesis finishes; src/decoding.cc), so every finished one is returned
      (num_hypotheses = round(beam * patience)), with its EOS so its length is known, and
      `rescore` ranks them as the project does.

    Two rules of the searches still differ, so beam outputs agree on most sentences, not all:
    CTranslate2 finishes a hypothesis only when EOS is among the best `beam` candidates of a
    step (the project: among its 2 * beam), and stops an example after round(beam * patience)
    finished ones (the project: when no live one can still win). `patience` > 1 narrows it.

    With `sampling` (`keras_transformer.decoding.sampling`'s settings) CTranslate2 samples
    instead: beam 1 and its sampling_topk / sampling_topp / sampling_temperature (the same
    meanings; temperature 0, the project's greedy search, is sampling_topk 1), scores log P(Y).
    """
    source_tokens = min(source_length, config.max_length - 1) + 1
    limit = source_tokens + decoding.max_extra_length
    if config.positions.bounded:  # learned positions end at max_length
        limit = min(limit, config.max_length)
    options = dict(
        beam_size=decoding.beam_size,
        max_input_length=config.max_length,
        max_decoding_length=limit,
        min_decoding_length=0,
        suppress_sequences=[[pad_token], [bos_token]],
        return_scores=True,
        return_end_token=True,
    )
    if sampling is not None:
        greedy = sampling.temperature == 0.0
        options.update(beam_size=1, length_penalty=0.0, num_hypotheses=1,
                       sampling_topk=1 if greedy else sampling.topk, sampling_topp=sampling.topp,
                       sampling_temperature=1.0 if greedy else sampling.temperature)
    elif decoding.beam_size == 1:  # greedy search (n_best <= beam_size)
        options.update(length_penalty=0.0, num_hypotheses=1)
    else:
        candidates = max(round(decoding.beam_size * patience), decoding.n_best)
        options.update(patience=candidates / decoding.beam_size, num_hypotheses=candidates,
                       length_penalty=1.0)  # any non-zero value: rescore undoes it
    return options


def rescore(results, decoding: DecodingConfig, ct2_length_penalty: float, eos_token: str = "</s>"
            ) -> list[list[tuple[list[str], float]]]:
    """`ctranslate2.TranslationResult`s (of `translation_options`' call) ranked as the project
    ranks finished hypotheses: by log P(Y) / lp(|Y|), lp = `beam_search.length_penalty`, |Y|
    counting the EOS. Returns per result the `decoding.n_best` best (pieces without EOS, score).

    CTranslate2 returned log P(Y) / |Y| ** ct2_length_penalty (src/decoding.cc
    finalize_hypothesis_score, EOS in |Y|), so log P(Y) = score * |Y| ** ct2_length_penalty.
    Greedy search keeps log P(Y), as `keras_transformer.decoding.search.translate_ids` does.
    """
    from keras_transformer.decoding import beam_search  # pylint: disable=g-import-not-at-top

    alpha = 0.0 if decoding.beam_size == 1 and decoding.n_best == 1 else decoding.alpha
    lengths = np.array([len(tokens) for result in results for tokens in result.hypotheses], np.int32)
    penalties = iter(beam_search.length_penalty(lengths, alpha).numpy()) if lengths.size else iter(())
    ranked_results = []
    for result in results:
        ranked = []
        for tokens, score in zip(result.hypotheses, result.scores):
            penalty = next(penalties)
            if not tokens:  # an empty source: CTranslate2 skips it with score 0, as the project does
                ranked.append(([], 0.0))
                continue
            log_prob = score * len(tokens) ** ct2_length_penalty
            ended = tokens[-1] == eos_token
            ranked.append((list(tokens[:-1]) if ended else list(tokens), float(log_prob / penalty)))
        ranked.sort(key=lambda pair: pair[1], reverse=True)  # stable: ties keep CTranslate2's order
        ranked_results.append(ranked[: decoding.n_best] or [([], 0.0)])
    return ranked_results


def translate_pieces(translator, sources: Sequence[Sequence[str]], decoding: DecodingConfig,
                     config: TransformerConfig, *, special: Optional[dict] = None, patience: float = 1.0,
                     max_batch_size: int = 0, sampling: Optional[SamplingConfig] = None,
                     use_vmap: bool = False) -> list[list[tuple[list[str], float]]]:
    """Source piece lists (no EOS) -> per source the n-best (pieces, score), in input order.

    The project's output limit depends on the source length, CTranslate2's max_decoding_length
    is one number per call. One `translate_batch` call takes every source, with the largest of
    their limits; a limit matters only to a search that reaches it, and each search stops when
    its last finished hypothesis (all are returned, `translation_options`) ends. So a source
    whose hypotheses are all shorter than its own limit got what a call with its own limit
    gives; the others (rare: an output as long as source + max_extra_length) are translated
    again, in one call per source length with their own limit.
    `special`: export.json's "special_tokens" (default SentencePiece's pieces). `sampling`: one
    random sample per source instead of the search (`translation_options`), a source that
    reached its limit sampled again. `use_vmap`: restrict each call's search by the model's
    vocabulary map (its vmap.txt, `convert`'s `shortlist_file`).
    """
    special = special or {"pad": "<pad>", "bos": "<s>", "eos": "</s>"}
    if sampling is not None:  # one hypothesis, ranked and scored as greedy search's
        decoding = dataclasses.replace(decoding, beam_size=1, n_best=1)
    lengths = [min(len(source), config.max_length - 1) for source in sources]
    results: list = [None] * len(sources)

    def options(length):
        return translation_options(decoding, config, length, pad_token=special["pad"], bos_token=special["bos"],
                                   patience=patience, sampling=sampling)

    def run(indices, length) -> list[tuple[int, int]]:
        """Translates `indices` with the limit of `length`; returns (index, longest hypothesis)."""
        call = options(length)
        if use_vmap:
            call["use_vmap"] = True
        outputs = translator.translate_batch([list(sources[i]) for i in indices], max_batch_size=max_batch_size,
                                             **call)
        for i, ranked in zip(indices, rescore(outputs, decoding, call["length_penalty"], special["eos"])):
            results[i] = ranked
        return [(i, max((len(tokens) for tokens in output.hypotheses), default=0))
                for i, output in zip(indices, outputs)]

    if not sources:
        return results
    limits = {length: options(length)["max_decoding_length"] for length in set(lengths)}
    again: dict[int, list[int]] = {}
    for i, longest in run(range(len(sources)), max(lengths)):
        if longest >= limits[lengths[i]]:  # it reached its own limit
            again.setdefault(lengths[i], []).append(i)
    for length, indices in again.items():
        run(indices, length)
    return results


class Ctranslate2Translator:
    """Text in, text out with a CTranslate2 export, decoding as the SavedModel does.

        translator = Ctranslate2Translator("OUT/1")
        translator.translate(["A dog runs."])  # [[("Ein Hund läuft.", -1.23)]]

    Sentences are stripped and tokenized by the export's own tokenizers
    (`keras_transformer.pipelines.tokenizers`, in-graph as in the SavedModel), so the pieces are the SavedModel's.

    Args:
        path: a folder written by `convert` (a version folder of the export).
        decoding: the default decoding (default: the one the export recorded).
        **translator_kwargs: `ctranslate2.Translator` arguments (device, compute_type,
            inter_threads, intra_threads, ...).
    """

    def __init__(self, path: str, decoding: Optional[DecodingConfig] = None, **translator_kwargs):
        from keras_transformer.run_dir import layout  # pylint: disable=g-import-not-at-top
        from keras_transformer.pipelines import tokenizers as tokenizers_lib  # pylint: disable=g-import-not-at-top

        with open(os.path.join(path, versions.SETTINGS_FILE), encoding="utf-8") as file:
            settings = json.load(file)
        self.config = TransformerConfig.from_dict(settings["model"])
        self.decoding = decoding or DecodingConfig(**settings["decoding"])
        self.special = settings["special_tokens"]
        self.source_tokenizer, self.target_tokenizer = tokenizers_lib.load_pair(
            os.path.join(path, layout.TOKENIZER_DIR))
        self._source_pieces = self.source_tokenizer.pieces()
        self._target_ids = {piece: i for i, piece in enumerate(self.target_tokenizer.pieces())}
        self.translator = _ctranslate2().Translator(path, **translator_kwargs)
        self.use_vmap = "shortlist" in settings  # its vmap.txt restricts every search

    def tokenize(self, sentences: Sequence[str]) -> list[list[str]]:
        """Stripped sentences as source pieces (no EOS)."""
        ids = self.source_tokenizer.tokenize([s.strip() for s in sentences]).to_list()
        return [[self._source_pieces[i] for i in row] for row in ids]

    def detokenize(self, pieces: Sequence[Sequence[str]]) -> list[str]:
        import tensorflow as tf  # pylint: disable=g-import-not-at-top

        # A piece the tokenizer lacks (the vocabulary's <unused_i> padding rows) detokenizes as UNK;
        # byte-fallback pieces can end mid-character: U+FFFD, as in the SavedModel.
        rows = [[self._target_ids.get(p, UNK_ID) for p in row] for row in pieces]
        ids = tf.ragged.constant(rows, dtype=tf.int32, ragged_rank=1) if rows else tf.zeros([0, 0], tf.int32)
        return [t.decode("utf-8", errors="replace") for t in self.target_tokenizer.detokenize(ids).numpy()]

    def translate(self, sentences: Sequence[str], decoding: Optional[DecodingConfig] = None, *,
                  patience: float = 1.0, max_batch_size: int = 0, sampling: Optional[SamplingConfig] = None
                  ) -> list[list[tuple[str, float]]]:
        """Per sentence its n-best (translation, score), best first; with `sampling`, one sample.
        `sampling.seed` is not used: `ctranslate2.set_random_seed` before a call was seen not to
        reproduce the samples of CTranslate2's worker threads."""
        decoding = decoding or self.decoding
        nbest = translate_pieces(self.translator, self.tokenize(sentences), decoding, self.config,
                                 special=self.special, patience=patience, max_batch_size=max_batch_size,
                                 sampling=sampling, use_vmap=self.use_vmap)
        flat = [pieces for hypotheses in nbest for pieces, _ in hypotheses]
        texts = iter(self.detokenize(flat))
        return [[(next(texts), score) for _, score in hypotheses] for hypotheses in nbest]


def load_translate_fn(path: str, n_best: int = 1) -> Callable:
    """The CTranslate2 export in `path` as a translate function (`--format=ctranslate2`'s loader,
    `keras_transformer.export.exporters`): `fn(tf.string [N]) -> {"translations", "scores"}`,
    [N], or with `n_best` > 1 [N, n_best] best first with the export's recorded beam and alpha,
    a slot no hypothesis fills "" scored `beam_search.NEG_INF`, as the SavedModel's
    `translate_n_best`."""
    from keras_transformer.decoding.beam_search import NEG_INF  # pylint: disable=g-import-not-at-top

    translator = Ctranslate2Translator(path)
    decoding = dataclasses.replace(translator.decoding, n_best=n_best)

    def translate(sentences):
        texts = [s.decode("utf-8", errors="replace") for s in np.asarray(sentences).tolist()]
        nbest = translator.translate(texts, decoding)
        if n_best == 1:
            return {"translations": [hypotheses[0][0] for hypotheses in nbest],
                    "scores": np.array([hypotheses[0][1] for hypotheses in nbest], np.float32)}
        rows = [list(hypotheses[:n_best]) + [("", NEG_INF)] * (n_best - len(hypotheses)) for hypotheses in nbest]
        return {"translations": [[text for text, _ in row] for row in rows],
                "scores": np.array([[score for _, score in row] for row in rows], np.float32).reshape(-1, n_best)}

    translate.translator = translator
    return translate
