"""Parses sentences into constituency trees with a trained parsing model or its export (section 6.3).

One tokenized sentence per line (Penn Treebank tokens separated by spaces) in, one tree per line
out, without part-of-speech tags: `(S (NP The dog) (VP barks) .)`. The model is one trained with
`--dataset=ptb` (configs/ptb_parsing.flags), and the decoding is section 6.3's: beam 21, alpha 0.3,
output up to input length + 300 (an export has its own, fixed when it was exported). The search
decodes only trees over exactly the input's words (--tree_constraint, on by default); a decoded
sequence that is not one is repaired, and the share of repaired outputs is reported. With gold
trees (--reference, or --treebank_split with --data_dir) it prints EVALB's labelled bracketing F1
with COLLINS.prm.

Other parsers, scored the same way: --ensemble_model_dirs (runs of one recipe with different
seeds, Vinyals et al. 2015), --rerank_kbest=K (the K best trees of the training split's PCFG,
reranked by the model; Charniak & Johnson 2005), --baseline=pcfg and --baseline=right_branching.

Typical command lines:

    python -m keras_transformer.parse --model_dir=runs/ptb_parsing --input=sentences.txt \\
        --output=trees.txt
    python -m keras_transformer.parse --model_dir=runs/ptb_parsing \\
        --treebank_split=test --data_dir=../shared/data/ptb_sample
    python -m keras_transformer.parse --model_dir=runs/ptb_parsing --rerank_kbest=100 \\
        --treebank_split=test --data_dir=../shared/data/ptb_sample
    python -m keras_transformer.parse --export_dir=/tmp/serving/parser --input=- < sentences.txt
    python -m keras_transformer.parse --baseline=pcfg \\
        --treebank_split=test --data_dir=../shared/data/ptb_sample

docs/guide/parsing.md explains each parser and docs/results.md#parsing gives their scores;
docs/reference/errors.md lists what it refuses; docs/reference/commands.md every flag.
"""

from __future__ import annotations

import sys

from absl import flags

from keras_transformer import cli
from keras_transformer.export import client
from keras_transformer.files import command_files
from keras_transformer.tasks import flags as task_flags
from keras_transformer.tasks.parsing.task import ParsingTask

FLAGS = flags.FLAGS
flags.DEFINE_string("model_dir", None, "Training directory of a parsing model (checkpoint + tokenizer).")
flags.DEFINE_string("export_dir", None, "SavedModel of a parsing model: a version folder or its base folder.")
flags.DEFINE_enum("baseline", None, ["right_branching", "pcfg"], "Parse with a baseline instead of a model: "
                  "right-branching trees, or the PCFG of the treebank's training split under --data_dir "
                  "(tasks/parsing/pcfg.py).")
flags.DEFINE_integer("rerank_kbest", 0, "With --model_dir or --export_dir: instead of decoding, rerank the K most "
                     "probable distinct trees of the PCFG of --data_dir's training split by the model's log P(tree | "
                     "sentence) + --pcfg_weight * the PCFG's log P (tasks/parsing/reranking.py; 50 and 100 "
                     "measured in docs/results.md#parsing); 0: decode (beam search).", lower_bound=0)
flags.DEFINE_float("pcfg_weight", None, "With --rerank_kbest: the weight of the PCFG's log-probability beside the "
                   "model's (default: tasks/parsing/reranking.py PCFG_WEIGHT, chosen on validation).",
                   lower_bound=0.0)
flags.DEFINE_integer("pcfg_horizontal", 1, "--baseline=pcfg, --rerank_kbest: siblings an intermediate symbol of "
                     "the binarized grammar remembers (horizontal markovization).", lower_bound=0)
flags.DEFINE_integer("pcfg_vertical", 1, "--baseline=pcfg, --rerank_kbest: parent labels a phrase is annotated "
                     "with (vertical markovization; 0: none).", lower_bound=0, upper_bound=2)
task_flags.define_checkpoint_flag("With --model_dir: this checkpoint prefix instead of averaged/latest.")
task_flags.define_ensemble_flag("Parsing (ensembles of seeds, Vinyals et al. 2015): the runs must also share "
                                "--model_dir's source tags, tree targets and, with predicted tags, its tagger, "
                                "which tags the input of every model.")
flags.DEFINE_string("input", None, "Tokenized sentences, one per line; '-' for stdin.")
flags.DEFINE_enum("treebank_split", None, ["train", "validation", "test"], "Instead of --input: parse this split "
                  "of the treebank under --data_dir and score it against its gold trees.")
flags.DEFINE_string("data_dir", None, "With --treebank_split: the folder of treebank.zip (NLTK's sample) or of "
                    "the WSJ .mrg files.")
flags.DEFINE_string("output", "-", "Where to write the trees, one per line; '-' for stdout.")
flags.DEFINE_string("reference", None, "Gold trees of the --input sentences, one bracketed tree per line: "
                    "print EVALB F1.")
task_flags.define_decoding_flags(defaults=ParsingTask.decoding)
flags.DEFINE_integer("batch_size", 16, "Sentences per batch (each holds beam_size hypotheses).", lower_bound=1)


def _check_flags() -> list[str]:
    """Refuses bad flags with one line before TensorFlow starts; returns --ensemble_model_dirs' folders."""
    client.exactly_one(model_dir=FLAGS.model_dir, export_dir=FLAGS.export_dir, baseline=FLAGS.baseline)
    if not FLAGS.model_dir:
        task_flags.check_model_dir_only("an export has its decoding built in; a baseline has none")
    if (FLAGS.input is None) == (FLAGS.treebank_split is None):
        raise ValueError("give exactly one of --input and --treebank_split")
    rerank = FLAGS.rerank_kbest > 0
    if rerank and FLAGS.baseline:
        raise ValueError("--rerank_kbest: with --model_dir or --export_dir (the model reranks the PCFG's trees)")
    if FLAGS.pcfg_weight is not None and not rerank:
        raise ValueError("--pcfg_weight: only with --rerank_kbest")
    if rerank:
        given_decoding = [f"--{name}" for name in task_flags.DECODING_FLAGS if FLAGS[name].present]
        if given_decoding:
            raise ValueError(f"{', '.join(given_decoding)}: not with --rerank_kbest (the model scores the PCFG's "
                             "trees, it decodes nothing)")
    uses_grammar = FLAGS.baseline == "pcfg" or rerank
    if FLAGS.treebank_split is not None:
        if FLAGS.reference:
            raise ValueError("--reference: only with --input (a treebank split has its gold trees)")
        from keras_transformer.pipelines import treebank  # pylint: disable=g-import-not-at-top

        if not FLAGS.data_dir:
            raise ValueError(f"--treebank_split needs --data_dir, {treebank.DATA_DIR_IS}")
        treebank.check_inputs(FLAGS.data_dir)
    elif uses_grammar:
        from keras_transformer.pipelines import treebank  # pylint: disable=g-import-not-at-top

        what = "--baseline=pcfg" if FLAGS.baseline else "--rerank_kbest"
        if not FLAGS.data_dir:
            raise ValueError(f"{what} needs --data_dir, {treebank.DATA_DIR_IS} (its training split gives the "
                             "grammar)")
        treebank.check_inputs(FLAGS.data_dir)
    elif FLAGS.data_dir:
        raise ValueError("--data_dir: only with --treebank_split, --baseline=pcfg or --rerank_kbest")
    if not uses_grammar:
        for flag in ("pcfg_horizontal", "pcfg_vertical"):
            if FLAGS[flag].present:
                raise ValueError(f"--{flag}: only with --baseline=pcfg or --rerank_kbest")
    command_files.check_input_file(FLAGS.input, "input")
    command_files.check_input_file(FLAGS.reference, "reference", stdin=False)  # the gold trees
    engine = None if FLAGS.baseline else client.Engine(FLAGS.model_dir, FLAGS.export_dir, FLAGS.checkpoint)
    if FLAGS.model_dir:
        engine.check()  # the run exists
    ensemble_model_dirs = task_flags.ensemble_model_dirs(FLAGS.model_dir)  # refused without --model_dir
    if FLAGS.export_dir:
        engine.check()  # an export of a registered format
        recorded = engine.settings().get("task", ParsingTask.name)
        problem = ParsingTask().model_problem(recorded)  # recorded by export; an export without the key passes
        if problem:
            raise ValueError(f"--export_dir={FLAGS.export_dir}: an export of {problem}")
    return ensemble_model_dirs


def main(argv):
    if len(argv) > 1:
        raise ValueError(f"unexpected arguments: {' '.join(argv[1:])}")
    ensemble_model_dirs = _check_flags()
    from keras_transformer.tasks.parsing import parse_files  # pylint: disable=g-import-not-at-top

    command_files.check_output_path(FLAGS.output, inputs={"input": FLAGS.input, "reference": FLAGS.reference})
    decoding = task_flags.decoding_config()
    if FLAGS.baseline is None:
        cli.start_tensorflow()
    report = parse_files.parse_file(
        FLAGS.input, FLAGS.output, model_dir=FLAGS.model_dir, export_dir=FLAGS.export_dir, baseline=FLAGS.baseline,
        decoding=decoding, checkpoint=FLAGS.checkpoint, reference=FLAGS.reference,
        treebank_split=(FLAGS.data_dir, FLAGS.treebank_split) if FLAGS.treebank_split else None,
        batch_size=FLAGS.batch_size, pcfg_data_dir=FLAGS.data_dir,
        pcfg_markov=(FLAGS.pcfg_horizontal, FLAGS.pcfg_vertical), ensemble_model_dirs=ensemble_model_dirs,
        rerank_kbest=FLAGS.rerank_kbest, pcfg_weight=FLAGS.pcfg_weight)
    if report:
        print(report, file=sys.stderr if FLAGS.output == "-" else sys.stdout)

