"""The parsing task (section 6.3, Table 4): sentences -> constituency trees, and their EVALB F1.

"Attention Is All You Need" trains the translation model on sentence -> linearized tree
pairs of the Penn Treebank and decodes with "a beam size of 21 and alpha = 0.3", output length
up to "input length + 300", and here only trees over the input's words (`tree_constraint`,
`keras_transformer.config.PARSING_DECODING`). Training is the
translation task's (`keras_transformer.tasks.training.train` on the `ptb` data set, `pipelines/treebank.py`);
this module runs a trained model or its SavedModel over sentences, turns each decoded sequence
into a tree over exactly the input's words (`keras_transformer.pipelines.linearized_trees.to_tree`, which names
its repairs), and scores trees against gold ones with EVALB's COLLINS.prm (`keras_transformer.tasks.parsing.evalb`):

    report = parse_file("sentences.txt", "trees.txt", model_dir="runs/ptb_parsing",
                        reference="gold.trees")
    report = parse_file(None, "-", baseline="right_branching",
                        treebank_split=("../shared/data/ptb_sample", "test"))

A reference file holds one gold tree per line in the treebank's bracketed form, part-of-speech
tags included (`(S (NP (DT The) (NN dog)) (VP (VBZ barks)) (. .))`); it is cleaned as the
training trees are, and its tags decide which words are punctuation. Output trees have no tag
level (the model predicts none): `(S (NP The dog) (VP barks) .)`, one per line; an empty input
line gives an empty output line (and cannot be scored: a reference has a tree on every line).
Input words are Penn Treebank tokens: a bare "(" or ")" is read as the treebank's -LRB- / -RRB-
(what the model was trained on, and what keeps the output trees readable).

The right-branching baseline puts every word but the first into a constituent of its own,
nested to the right: (S w1 (NP w2 (NP w3 ... (NP wn-1 wn)))), labelled with the root and phrase
labels most frequent in the WSJ (S, NP), so that it has a labelled F1 as well as the unlabelled
one it is usually quoted with.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import sys
import time
from typing import Optional, Sequence

from keras_transformer.files import command_files
from keras_transformer.files import atomic
from keras_transformer.config import PARSING_DECODING, DecodingConfig
from keras_transformer.pipelines import linearized_trees, treebank
from keras_transformer.pipelines.errors import DataError
from keras_transformer.tasks.parsing import evalb

BASELINES = ("right_branching", "pcfg")


def right_branching(words: Sequence[str]):
    """The right-branching tree over `words` (module docstring); None for no word."""
    import nltk  # pylint: disable=g-import-not-at-top

    if not words:
        return None
    node = list(words[-2:])
    for word in reversed(words[:-2]):
        node = [word, nltk.Tree("NP", node)]
    return nltk.Tree(linearized_trees.FALLBACK_ROOT, node)


def format_tree(tree) -> str:
    """A tree on one line, e.g. "(S (NP The dog) (VP barks) .)"; "" for None."""
    return "" if tree is None else tree.pformat(margin=sys.maxsize)


@dataclasses.dataclass(frozen=True)
class Parses:
    """Trees of many sentences, and what it took to make them trees.

    Attributes:
        trees: one `nltk.Tree` per sentence (None for an empty sentence).
        repairs: per sentence, the repairs `linearized_trees.to_tree` made (empty: none).
    """
    trees: tuple
    repairs: tuple

    @property
    def repaired(self) -> int:
        """Sentences whose decoded output needed at least one repair."""
        return sum(1 for r in self.repairs if r)

    def repair_counts(self) -> collections.Counter:
        """Sentences with each kind of repair."""
        return collections.Counter(kind for r in self.repairs for kind in set(r))

    def summary(self) -> str:
        n = len(self.trees)
        kinds = ", ".join(f"{kind} {count}" for kind, count in sorted(self.repair_counts().items()))
        return (f"repaired: {self.repaired} of {n} outputs ({100 * self.repaired / max(n, 1):.1f}%)"
                + (f": {kinds}" if kinds else ""))


def trees_from_outputs(outputs: Sequence[str], sentences: Sequence[Sequence[str]]) -> Parses:
    """`Parses` of decoded linearized trees, each over its sentence's words."""
    trees, repairs = [], []
    for output, words in zip(outputs, sentences, strict=True):
        if not words:
            trees.append(None)
            repairs.append(())
            continue
        tree, made = linearized_trees.to_tree(output, words)
        trees.append(tree)
        repairs.append(made)
    return Parses(tuple(trees), tuple(repairs))


def parse_sentences(translate_fn, sentences: Sequence[Sequence[str]], batch_size: int = 16,
                    progress: Optional[bool] = None, sources: Optional[Sequence[str]] = None) -> Parses:
    """Parses tokenized sentences with a `serving_default` (tf.string [N] -> {"translations", ...}),
    which reads `sources` (default: the words; a tagged model's, the words with their tags,
    `source_sentences`)."""
    from keras_transformer.export import client  # pylint: disable=g-import-not-at-top  (TensorFlow)

    sources = sources if sources is not None else [" ".join(w) for w in sentences]
    outputs, _ = client.translate_lines(translate_fn, [s.encode("utf-8") for s in sources], batch_size, progress)
    return trees_from_outputs(outputs, sentences)


def model_data(model_dir: Optional[str], export_dir: Optional[str]):
    """(the data settings a parsing model was trained with, the folder of its tagger): a run's
    "data" section of model_config.json and the run itself, or an export's export.json (which
    holds "source_tags" and "tree_targets") and its assets.extra."""
    if model_dir:
        from keras_transformer.training_directory import TrainingDirectory  # pylint: disable=g-import-not-at-top

        return TrainingDirectory(model_dir).settings().get("data", {}), model_dir
    from keras_transformer.export import versions  # pylint: disable=g-import-not-at-top

    saved = versions.saved_model_path(export_dir)
    return versions.read_settings(saved), os.path.join(saved, versions.ASSETS_EXTRA)


def model_source_tags(settings: dict, folder: str):
    """(source tags, tagger) of a parsing model (`keras_transformer.pipelines.pos_tags`) from `model_data`'s settings
    and folder: "none", "predicted" with the tagger the run saved (an export holds a copy in
    assets.extra), or "gold" (tagger None)."""
    from keras_transformer.pipelines import pos_tags  # pylint: disable=g-import-not-at-top

    tags = settings.get("source_tags", "none")
    return tags, pos_tags.load(os.path.join(folder, pos_tags.TAGGER_FILE)) if tags == "predicted" else None


def source_sentences(sentences: Sequence[Sequence[str]], source_tags: str, tagger=None,
                     gold: Optional["Gold"] = None) -> list[str]:
    """What a model trained with `source_tags` reads for each sentence: its words, or its words
    each followed by its tag, by `tagger` ("predicted") or by the gold trees ("gold"; a
    `DataError` without them: raw text has no gold tags)."""
    from keras_transformer.pipelines import pos_tags  # pylint: disable=g-import-not-at-top

    if source_tags == "none":
        return [" ".join(words) for words in sentences]
    if source_tags == "gold":
        if gold is None:
            raise DataError("the model was trained with --source_tags=gold: it parses only sentences whose gold "
                            "trees give the tags (--treebank_split or --reference)")
        tags = [s.tags for s in gold.sentences]
    else:
        tags = [pos_tags.tag_words(tagger, words) for words in sentences]
    return [pos_tags.tagged_source(words, t) for words, t in zip(sentences, tags)]


@dataclasses.dataclass(frozen=True)
class Gold:
    """Gold trees of the sentences being parsed: `keras_transformer.pipelines.treebank.ParsedSentence`s."""
    sentences: tuple

    @classmethod
    def from_treebank(cls, data_dir: str, split: str) -> "Gold":
        return cls(treebank.read_split(data_dir, split))

    @classmethod
    def from_file(cls, path: str) -> "Gold":
        """One bracketed gold tree per line (tags included); `DataError` naming a bad line."""
        import nltk  # pylint: disable=g-import-not-at-top

        parsed = []
        for number, line in enumerate(command_files.read_lines(path), 1):
            try:
                text = line.decode("utf-8")
            except UnicodeDecodeError:
                raise DataError(f"{path} line {number}: not UTF-8") from None
            try:
                sentence = treebank.clean(nltk.Tree.fromstring(text)) if text.strip() else None
            except ValueError:
                raise DataError(f"{path} line {number}: not a bracketed tree") from None
            if sentence is None:
                raise DataError(f"{path} line {number}: no tree with a word")
            if "" in sentence.tags:
                raise DataError(f"{path} line {number}: a word without its part-of-speech tag, e.g. "
                                "(S (NP (DT The) (NN dog)) ...); gold trees need them (EVALB drops punctuation "
                                "by its tag)")
            parsed.append(sentence)
        return cls(tuple(parsed))

    def check_words(self, sentences: Sequence[Sequence[str]], what: str) -> None:
        if len(sentences) != len(self.sentences):
            raise DataError(f"{what}: {len(self.sentences)} gold trees but {len(sentences)} sentences")
        for number, (gold, words) in enumerate(zip(self.sentences, sentences), 1):
            if tuple(words) != gold.words:
                raise DataError(f"{what} line {number}: the gold tree's words are not the sentence's")

    def scores(self, trees: Sequence, labelled: bool = True, max_words: Optional[int] = None) -> evalb.Scores:
        return evalb.score([s.tree for s in self.sentences], trees, [s.tags for s in self.sentences],
                           labelled=labelled, max_words=max_words)

    def take(self, count: int) -> "Gold":
        """The first `count` gold trees."""
        return Gold(self.sentences[:count])

    def dev_scores(self, outputs: Sequence[str]) -> dict:
        """{"f1": labelled EVALB F1, "repaired": % of outputs repaired} of decoded linearized trees
        of these sentences (the dev evaluation's `task_scores`)."""
        parses = trees_from_outputs(outputs, [s.words for s in self.sentences])
        return {"f1": self.scores(parses.trees).f1, "repaired": 100 * parses.repaired / max(len(outputs), 1)}

    def report(self, trees: Sequence) -> str:
        """EVALB's summary lines: all sentences, len <= 40, and unlabelled."""
        return "\n".join([
            f"labelled (EVALB, COLLINS.prm): {self.scores(trees)}",
            f"labelled, len <= {evalb.COLLINS.cutoff_length}: "
            f"{self.scores(trees, max_words=evalb.COLLINS.cutoff_length)}",
            f"unlabelled: {self.scores(trees, labelled=False)}"])


PTB_BRACKETS = {"(": "-LRB-", ")": "-RRB-"}


def read_sentences(path: str) -> list[list[str]]:
    """Tokenized sentences, one per line (words separated by spaces, "(" and ")" read as -LRB- and
    -RRB-); `DataError` on invalid UTF-8."""
    sentences = []
    for number, line in enumerate(command_files.read_lines(path), 1):
        try:
            words = line.decode("utf-8").split()
        except UnicodeDecodeError:
            raise DataError(f"{path} line {number}: not UTF-8") from None
        sentences.append([PTB_BRACKETS.get(word, word) for word in words])
    return sentences


def parse_file(input_path: Optional[str], output_path: str = "-", *, model_dir: Optional[str] = None,
               export_dir: Optional[str] = None, baseline: Optional[str] = None,
               decoding: DecodingConfig = PARSING_DECODING, checkpoint: Optional[str] = None,
               reference: Optional[str] = None, treebank_split: Optional[tuple[str, str]] = None,
               batch_size: int = 16, progress: Optional[bool] = None, pcfg_data_dir: Optional[str] = None,
               pcfg_markov: tuple[int, int] = (1, 1), ensemble_model_dirs: Sequence[str] = (),
               rerank_kbest: int = 0, pcfg_weight: Optional[float] = None) -> Optional[str]:
    """Parses a file of sentences (or a treebank split) and writes one tree per line.

    Args:
        input_path: tokenized sentences, one per line ("-": stdin); None with `treebank_split`.
        output_path: where the trees go ("-": stdout); replaced atomically at the end.
        model_dir, export_dir, baseline: what parses, exactly one: a training directory (its
            averaged or latest checkpoint, or `checkpoint`, decoded with `decoding`), a SavedModel
            (decoding fixed at export), "right_branching", or "pcfg" (`keras_transformer.tasks.parsing.pcfg`: the grammar
            of the training split of the treebank in `pcfg_data_dir`, markovized by
            `pcfg_markov` = (horizontal, vertical)).
        rerank_kbest: with `model_dir` or `export_dir`, and > 0: instead of decoding, rerank the
            `rerank_kbest` most probable distinct trees of the PCFG (as for "pcfg") by the model's
            log-probability of each + `pcfg_weight` (None: `keras_transformer.tasks.parsing.reranking.PCFG_WEIGHT`) times the
            PCFG's (`keras_transformer.tasks.parsing.reranking`; with `ensemble_model_dirs`, the mean of the models'); with
            gold trees the report adds the candidates' oracle F1.
        ensemble_model_dirs: with `model_dir`, more training directories: parse with the
            ensemble of their models and `model_dir`'s (`keras_transformer.decoding.ensemble`, the
            same search and tree constraint; Vinyals et al. 2015 ensembled parsers of different
            seeds). They must read and write as `model_dir` does: vocabulary, source tags,
            tagger, tree targets (`keras_transformer.export.ensemble_members.check_members`, before any model is
            built); the input is tagged by `model_dir`'s tagger.
        reference: gold trees, one per line, of the input's sentences: score the output.
        treebank_split: (data_dir, split): parse that split's sentences and score against its trees.
        batch_size: sentences per decoding batch (each holds beam_size hypotheses).

    Returns:
        With gold trees, the report: EVALB labelled F1 (all, len <= 40), unlabelled F1 and the
        share of outputs that needed repair; else None. Bad input (`DataError`, `ValueError`)
        is found before the model loads.
    """
    if sum(x is not None for x in (model_dir, export_dir, baseline)) != 1:
        raise ValueError("give exactly one of model_dir, export_dir and baseline")
    if ensemble_model_dirs and not model_dir:
        raise ValueError("an ensemble is of training directories: ensemble_model_dirs only with model_dir")
    if baseline is not None and baseline not in BASELINES:
        raise ValueError(f"baseline must be one of {', '.join(BASELINES)}, got {baseline!r}")
    if (input_path is None) == (treebank_split is None):
        raise ValueError("give exactly one of an input file and a treebank split")
    if baseline == "pcfg" and not pcfg_data_dir:
        raise ValueError("the pcfg baseline needs the treebank whose training split it is read from")
    if rerank_kbest and (baseline is not None or not pcfg_data_dir):
        raise ValueError("reranking needs a model (model_dir or export_dir) and the treebank of the PCFG")
    command_files.check_output_path(output_path, inputs={"input": input_path, "reference": reference})
    gold = None
    if treebank_split is not None:
        gold = Gold.from_treebank(*treebank_split)
        sentences = [list(s.words) for s in gold.sentences]
        source = f"{treebank_split[0]} [{treebank_split[1]}]"
    else:
        sentences = read_sentences(input_path)
        source = input_path
        if reference:
            gold = Gold.from_file(reference)
            gold.check_words(sentences, reference)
    start = time.perf_counter()
    oracle_line = ""
    if baseline == "pcfg":
        from keras_transformer.tasks.parsing import pcfg  # pylint: disable=g-import-not-at-top

        grammar, parser = _grammar(pcfg_data_dir, pcfg_markov)
        print(f"parsing {len(sentences)} sentences of {source} with {parser}", file=sys.stderr)
        trees, fallbacks = pcfg.parse_all(grammar, sentences, right_branching)
        parser += f"; {fallbacks} sentence(s) not derived, parsed right-branching"
        parses = Parses(trees, tuple(() for _ in sentences))
    elif baseline:
        parses = Parses(tuple(right_branching(w) for w in sentences), tuple(() for _ in sentences))
        parser = baseline
    elif rerank_kbest:
        parses, parser, oracle_line = _rerank(sentences, source, gold, model_dir, export_dir, checkpoint,
                                              ensemble_model_dirs, pcfg_data_dir, pcfg_markov, rerank_kbest,
                                              pcfg_weight)
    else:
        from keras_transformer.export import client  # pylint: disable=g-import-not-at-top  (TensorFlow)

        settings, folder = model_data(model_dir, export_dir)
        source_tags, tagger = model_source_tags(settings, folder)
        inputs = source_sentences(sentences, source_tags, tagger, gold)  # refused before the model loads
        translate_fn, parser = client.load_translate_fn(model_dir, export_dir, decoding, checkpoint,
                                                        ensemble_model_dirs=ensemble_model_dirs)
        if ensemble_model_dirs:
            parser = f"an ensemble of {len(ensemble_model_dirs) + 1} models ({parser})"
        if source_tags != "none":
            parser += f", source tags {source_tags}"
        if settings.get("tree_targets", "words") != "words":
            parser += ", placeholder targets"  # trees with "XX" for each word, given the input's words back
        print(f"parsing {len(sentences)} sentences of {source} with {parser}", file=sys.stderr)
        parses = parse_sentences(translate_fn, sentences, batch_size, progress, inputs)
    for tree, words in zip(parses.trees, sentences):  # the contract, whatever the decoder emitted
        if (tree.leaves() if tree is not None else []) != list(words):
            raise AssertionError(f"a tree over other words than its sentence's: {format_tree(tree)}")
    atomic.write_output(output_path, "".join(format_tree(t) + "\n" for t in parses.trees))
    elapsed = time.perf_counter() - start
    print(f"{len(sentences)} sentences in {elapsed:.1f} s ({len(sentences) / max(elapsed, 1e-9):.1f} sentences/s)",
          file=sys.stderr)
    if gold is None:
        return None
    return f"{parser}\n{gold.report(parses.trees)}\n{parses.summary()}{oracle_line}"


def _grammar(data_dir: str, markov: tuple[int, int]):
    """(the PCFG of `data_dir`'s training split, its description)."""
    from keras_transformer.tasks.parsing import pcfg  # pylint: disable=g-import-not-at-top

    grammar = pcfg.Grammar.induce(treebank.read_split(data_dir, "train"), *markov)
    return grammar, (f"pcfg (the {data_dir} training split, horizontal {markov[0]}, vertical {markov[1]}: "
                     f"{len(grammar.symbols)} symbols, {len(grammar.binary)} binary rules)")


def _rerank(sentences, source: str, gold: Optional[Gold], model_dir, export_dir, checkpoint, ensemble_model_dirs,
            data_dir: str, markov: tuple[int, int], k: int, pcfg_weight: Optional[float]) -> tuple:
    """(`Parses`, the parser's description, the oracle's report line or "") of `parse_file`'s
    reranking (`keras_transformer.tasks.parsing.reranking`)."""
    from keras_transformer.tasks.parsing import reranking  # pylint: disable=g-import-not-at-top

    from keras_transformer.pipelines import sources as data_sources  # pylint: disable=g-import-not-at-top

    weight = reranking.PCFG_WEIGHT if pcfg_weight is None else pcfg_weight
    settings, folder = model_data(model_dir, export_dir)
    dataset = settings.get("dataset", "")
    trees = dataset in data_sources.DATASETS and data_sources.source_of(dataset).trees
    if model_dir and not trees:  # an export's task is checked by the command
        raise ValueError(f"{model_dir}: a model trained on {dataset or 'another data set'}; reranking trees needs one "
                         "trained on a treebank (--dataset=ptb)")
    source_tags, tagger = model_source_tags(settings, folder)
    inputs = source_sentences(sentences, source_tags, tagger, gold)  # refused before the model loads
    if model_dir:
        score_fns = [reranking.run_score_fn(model_dir, checkpoint)]
        score_fns += [reranking.run_score_fn(member) for member in ensemble_model_dirs]
    else:
        score_fns = [reranking.export_score_fn(export_dir)]
    grammar, grammar_name = _grammar(data_dir, markov)
    models = ", ".join(str(name) for _, name in score_fns)
    parser = (f"the {k} best trees of the {grammar_name}, reranked by {models} with PCFG weight {weight}"
              + (f", source tags {source_tags}" if source_tags != "none" else ""))
    print(f"parsing {len(sentences)} sentences of {source} with {parser}", file=sys.stderr)
    candidates = reranking.pcfg_candidates(grammar, sentences, k, right_branching)
    print(f"{candidates.count} candidate trees ({candidates.count / max(len(sentences), 1):.1f} a sentence); "
          f"scoring them", file=sys.stderr)
    placeholders = settings.get("tree_targets", "words") == "placeholders"
    per_model = [reranking.model_scores(fn, inputs, candidates, placeholders) for fn, _ in score_fns]
    scores = reranking.mean_scores(per_model)
    trees = reranking.choose(candidates, scores, weight)
    parser += f"; {candidates.not_derived} sentence(s) not derived by the PCFG, parsed right-branching"
    oracle_line = ""
    if gold is not None:
        oracle_line = f"\nthe candidates' oracle, labelled: {gold.scores(reranking.oracle(candidates, gold))}"
    return Parses(trees, tuple(() for _ in sentences)), parser, oracle_line
