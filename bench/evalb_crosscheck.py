"""Cross-checks `keras_transformer.tasks.parsing.evalb` against a compiled EVALB on random tree pairs.

    python bench/evalb_crosscheck.py --evalb=EVALB/evalb --prm=EVALB/COLLINS.prm
    python bench/evalb_crosscheck.py --evalb=EVALB/evalb --prm=EVALB/COLLINS.prm --pairs=2000 --seeds=5

EVALB's C code is not part of this project (nor committed to it); bring your own build:

    git clone https://github.com/nikitakit/self-attentive-parser
    make -C self-attentive-parser/EVALB      # -> EVALB/evalb, beside EVALB/COLLINS.prm

(or the original from https://nlp.cs.nyu.edu/evalb/, `make` in its folder).

For each seed 0 .. --seeds-1, --pairs random gold trees of 1 .. --max_words words are drawn with
their part-of-speech tags: punctuation (deleted by COLLINS.prm), -NONE- traces (deleted, and not
counted in the length), unary chains (repeated labels included), ADVP and PRT (equivalent), and a
few sentences of punctuation only (EVALB's skipped sentences). Each test tree is either its gold
tree with random edits (nodes dropped, relabelled, wrapped in a unary) or an unrelated random tree
over the same words. Both are written in EVALB's input format (tags put back, under TOP; the
test side with the gold tags) and scored by the binary twice: with --prm (labelled) and with a
copy of it saying LABELED 0 (unlabelled), written to a temporary folder. `keras_transformer.tasks.parsing.evalb`
scores the same trees without the tag level, under a root of TOP, ROOT or "" (all three are no
constituent there).

Compared, for both runs: every sentence's length, status (0, or 2 for a skipped sentence),
matched, gold and test brackets; and both summaries ("All" and "len<=40"): the numbers of
sentences, error, skipped and valid sentences, recall, precision, F-measure and complete match,
as EVALB prints them (two decimals). The F-measure may differ by 0.01: EVALB computes 2PR/(P+R),
`keras_transformer.tasks.parsing.evalb` 200 matched/(gold + test), which can round the other way; and EVALB prints
nan where nothing matches, `keras_transformer.tasks.parsing.evalb` 0. --prm must hold COLLINS.prm's settings
(`keras_transformer.tasks.parsing.evalb.COLLINS`).

Prints one line per seed, then `agree: N pairs`, or the first mismatches and exits with status 1.
"""

from __future__ import annotations

import dataclasses
import os
import random
import re
import subprocess
import sys
import tempfile

from absl import app, flags
from nltk import Tree

from keras_transformer.tasks.parsing import evalb

FLAGS = flags.FLAGS
flags.DEFINE_string("evalb", None, "The compiled EVALB binary (evalb.c of EVALB, built with make).")
flags.DEFINE_string("prm", None, "EVALB's COLLINS.prm.")
flags.DEFINE_integer("pairs", 600, "Gold/test tree pairs per seed.", lower_bound=1)
flags.DEFINE_integer("seeds", 3, "Seeds 0 .. seeds-1, one EVALB run of --pairs pairs (labelled and unlabelled) each.",
                     lower_bound=1)
flags.DEFINE_integer("max_words", 60, "Words per sentence: 1 .. max_words (EVALB reads at most 200).",
                     lower_bound=1, upper_bound=150)
flags.mark_flags_as_required(["evalb", "prm"])

LABELS = ["S", "NP", "VP", "PP", "ADVP", "PRT", "SBAR", "ADJP", "NP", "NP", "VP"]  # NP and VP more often
TAGS = ["NN", "VB", "DT", "JJ", "RB", "IN", "NNS", "VBD", "PRP"]
PUNCTUATION = list(evalb.PUNCTUATION_TAGS)  # the tag is also the word
TRACE = ("-NONE-", "*T*-1")
ROOTS = ["TOP", "ROOT", ""]  # the root above the tree on the tasks.parsing.evalb side
# evalb.c's limits (MAX_SENT_LEN, MAX_BRACKET_IN_SENT): a pair over them is drawn again.
MAX_LINE_CHARACTERS = 5000
MAX_BRACKETS = 200
SHOWN_MISMATCHES = 10
_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\d)\s+\S+\s+\S+\s+(\d+)\s+(\d+)\s+(\d+)\s", re.M)
_SUMMARY_LINE = re.compile(r"^(Number of sentence|Number of Error sentence|Number of Skip  sentence|"
                           r"Number of Valid sentence|Bracketing Recall|Bracketing Precision|Bracketing FMeasure|"
                           r"Complete match)\s*=\s*(\S+)", re.M)


# Random trees: nltk Trees whose leaves are word indices. ---------------------------------------

def random_tags(rng: random.Random, count: int) -> list:
    if rng.random() < 0.03:
        return [rng.choice(PUNCTUATION) for _ in range(count)]  # no word left: a skipped sentence
    tags = []
    for _ in range(count):
        draw = rng.random()
        tags.append(rng.choice(PUNCTUATION) if draw < 0.2 else TRACE[0] if draw < 0.23 else rng.choice(TAGS))
    return tags


def random_children(rng: random.Random, first: int, end: int, depth: int) -> list:
    """Word indices and subtrees covering first .. end-1."""
    children, i = [], first
    while i < end:
        size = rng.randint(1, max(1, min(end - i, (end - first + 1) // 2 + 1)))
        children.append(i if size == 1 and rng.random() < 0.6 else random_tree(rng, i, i + size, depth + 1))
        i += size
    return children


def random_tree(rng: random.Random, first: int, end: int, depth: int = 0):
    label = rng.choice(LABELS)
    children = random_children(rng, first, end, depth) if end - first > 1 and depth < 12 else list(range(first, end))
    tree = Tree(label, children)
    while rng.random() < 0.15:  # unary chains, the same label repeated included
        tree = Tree(rng.choice([label, rng.choice(LABELS)]), [tree])
    return tree


def edit(rng: random.Random, tree, rate: float) -> list:
    """A test tree near `tree` (as a list of nodes): some nodes dropped (their children go to
    the parent), relabelled (ADVP often to its equivalent PRT) or wrapped in a unary."""
    if isinstance(tree, int):
        return [tree]
    children = [node for child in tree for node in edit(rng, child, rate)]
    draw = rng.random()
    if draw < rate:
        return children
    label = rng.choice(LABELS) if draw < 2 * rate else tree.label()
    if label == "ADVP" and rng.random() < 0.5:
        label = "PRT"
    result = Tree(label, children)
    if rng.random() < rate / 3:
        result = Tree(rng.choice(LABELS), [result])
    return [result]


def with_words(tree, words: list):
    if isinstance(tree, int):
        return words[tree]
    return Tree(tree.label(), [with_words(child, words) for child in tree])


def evalb_line(tree, words: list, tags: list) -> str:
    """EVALB's input: the tag level put back, TOP at the root."""
    def walk(node):
        if isinstance(node, int):
            return f"({tags[node]} {words[node]})"
        return f"({node.label()} " + " ".join(walk(child) for child in node) + ")"
    return "(TOP " + walk(tree) + ")"


def random_pair(rng: random.Random, max_words: int) -> tuple:
    """(words, tags, gold EVALB line, test EVALB line, gold tree, test tree), trees without tags."""
    while True:
        count = rng.randint(1, max_words)
        tags = random_tags(rng, count)
        words = [tag if tag in PUNCTUATION else TRACE[1] if tag == TRACE[0] else f"w{i}" for i, tag in enumerate(tags)]
        gold = random_tree(rng, 0, count)
        if rng.random() < 0.3:
            test = random_tree(rng, 0, count)  # unrelated
        else:
            nodes = edit(rng, gold, rng.choice([0.0, 0.0, 0.02, 0.05, 0.15, 0.3]))
            test = nodes[0] if len(nodes) == 1 else Tree("S", nodes)
        lines = [evalb_line(gold, words, tags), evalb_line(test, words, tags)]
        if all(len(line) < MAX_LINE_CHARACTERS and line.count("(") - count < MAX_BRACKETS for line in lines):
            return words, tags, *lines, with_words(gold, words), with_words(test, words)


# EVALB -------------------------------------------------------------------------------------------

def read_prm(text: str) -> evalb.EvalbParams:
    """The settings of a .prm file that `keras_transformer.tasks.parsing.evalb` knows, with the roots it deletes beside TOP."""
    values = {}
    for key, value in re.findall(r"^(DELETE_LABEL_FOR_LENGTH|DELETE_LABEL|EQ_LABEL|CUTOFF_LEN)[ \t]+(.*?)\s*$",
                                 text, re.M):
        values.setdefault(key, []).append(value)
    return evalb.EvalbParams(
        delete_labels=frozenset(values.get("DELETE_LABEL", [])) | set(evalb.ROOT_LABELS),
        delete_labels_for_length=frozenset(values.get("DELETE_LABEL_FOR_LENGTH", [])),
        equivalent_labels=tuple(tuple(pair.split()) for pair in values.get("EQ_LABEL", [])),
        cutoff_length=int(values.get("CUTOFF_LEN", ["40"])[-1]))


def run_evalb(binary: str, prm: str, folder: str, gold_lines: list, test_lines: list) -> tuple:
    """([(length, status, matched, gold, test) per sentence], {"All" and "len<=N": {name: value}})."""
    paths = {side: os.path.join(folder, f"{side}.trees") for side in ("gold", "test")}
    for side, lines in (("gold", gold_lines), ("test", test_lines)):
        with open(paths[side], "w", encoding="utf-8") as file:
            file.write("".join(line + "\n" for line in lines))
    result = subprocess.run([binary, "-p", prm, paths["gold"], paths["test"]], capture_output=True, text=True,
                            check=False)
    if result.returncode or result.stderr.strip() or "=== Summary ===" not in result.stdout:
        raise RuntimeError(f"{binary} -p {prm} exited with {result.returncode}: "
                           f"{(result.stderr.strip() or result.stdout.strip()[-300:])[:300]!r}")
    table, summary = result.stdout.split("=== Summary ===")
    sentence_rows = re.split(r"^=+$", table, flags=re.M)[1]  # between the header's ==== line and the totals'
    rows = [tuple(int(x) for x in match.groups()[1:]) for match in _ROW.finditer(sentence_rows)]
    parts = re.split(r"^-- (.*) --$", summary, flags=re.M)[1:]
    return rows, {name: dict(_SUMMARY_LINE.findall(text)) for name, text in zip(parts[::2], parts[1::2])}


def expected_summary(scores: evalb.Scores) -> dict:
    """`scores` as EVALB prints a summary."""
    return {"Number of sentence": str(scores.sentences), "Number of Error sentence": "0",
            "Number of Skip  sentence": str(scores.skipped), "Number of Valid sentence": str(scores.valid),
            "Bracketing Recall": f"{scores.recall:.2f}", "Bracketing Precision": f"{scores.precision:.2f}",
            "Bracketing FMeasure": f"{scores.f1:.2f}", "Complete match": f"{scores.exact_match:.2f}"}


def same_value(name: str, theirs: str, ours: str) -> bool:
    if theirs == ours:
        return True
    if name != "Bracketing FMeasure":
        return False
    if theirs in ("nan", "-nan"):
        return float(ours) == 0.0
    return abs(float(theirs) - float(ours)) <= 0.0100001  # 2PR/(P+R) against 200m/(g+t), each rounded


def check_seed(seed: int, folder: str, params: evalb.EvalbParams, prms: dict) -> tuple:
    """(the seed's line, [mismatch descriptions])."""
    rng = random.Random(seed)
    pairs = [random_pair(rng, FLAGS.max_words) for _ in range(FLAGS.pairs)]
    tags = [pair[1] for pair in pairs]
    gold_lines, test_lines = [pair[2] for pair in pairs], [pair[3] for pair in pairs]
    gold_trees = [Tree(rng.choice(ROOTS), [pair[4]]) for pair in pairs]
    test_trees = [Tree(rng.choice(ROOTS), [pair[5]]) for pair in pairs]
    mismatches, f1 = [], {}
    for name, labelled in (("labelled", True), ("unlabelled", False)):
        rows, summaries = run_evalb(FLAGS.evalb, prms[name], folder, gold_lines, test_lines)
        where = f"seed {seed}, {name}"
        if len(rows) != len(pairs):
            mismatches.append(f"{where}: EVALB printed {len(rows)} sentence rows for {len(pairs)} pairs")
        for index, (row, gold, test, sentence_tags) in enumerate(zip(rows, gold_trees, test_trees, tags)):
            ours = evalb.sentence_scores(gold, test, sentence_tags, params, labelled=labelled)
            expected = (evalb.sentence_length(sentence_tags, params), 2 if ours.skipped else 0, ours.matched,
                        ours.gold, ours.test)
            if row != expected:
                mismatches.append(f"{where}, sentence {index + 1}: (length, status, matched, gold, test) EVALB {row}, "
                                  f"tasks.parsing.evalb {expected}\n  gold {gold_lines[index]}\n"
                                  f"  test {test_lines[index]}")
        for title, max_words in (("All", None), (f"len<={params.cutoff_length}", params.cutoff_length)):
            theirs = summaries.get(title, {})
            ours = evalb.score(gold_trees, test_trees, tags, params, labelled=labelled, max_words=max_words)
            for key, value in expected_summary(ours).items():
                if not same_value(key, theirs.get(key, "missing"), value):
                    mismatches.append(f"{where}, -- {title} --: {key} EVALB {theirs.get(key, 'missing')}, "
                                      f"tasks.parsing.evalb {value}")
            if max_words is None:
                f1[name] = theirs.get("Bracketing FMeasure", "missing")
    lengths = [evalb.sentence_length(sentence_tags, params) for sentence_tags in tags]
    skipped = sum(all(tag in params.delete_labels for tag in sentence_tags) for sentence_tags in tags)
    complete = evalb.score(gold_trees, test_trees, tags, params).exact
    line = (f"seed {seed}: {len(pairs)} pairs, {sum(n > params.cutoff_length for n in lengths)} over "
            f"{params.cutoff_length} words, {skipped} skipped, {len(pairs) - skipped - complete} not complete matches; "
            f"EVALB F1 labelled {f1['labelled']}, unlabelled {f1['unlabelled']}: "
            f"{'agree' if not mismatches else f'{len(mismatches)} mismatches'}")
    return line, mismatches


def main(argv):
    del argv
    for flag in ("evalb", "prm"):
        if not os.path.isfile(getattr(FLAGS, flag)):
            print(f"error: --{flag}={getattr(FLAGS, flag)}: no such file", file=sys.stderr)
            return 2
    with open(FLAGS.prm, encoding="utf-8") as file:
        prm_text = file.read()
    params = read_prm(prm_text)
    differ = [field.name for field in dataclasses.fields(params)
              if getattr(params, field.name) != getattr(evalb.COLLINS, field.name)]
    if differ or not re.search(r"^LABELED[ \t]+1\b", prm_text, re.M):
        print(f"error: --prm={FLAGS.prm}: not COLLINS.prm's settings (LABELED 1 and tasks.parsing.evalb.COLLINS); "
              f"differ: {', '.join(differ or ['LABELED'])}", file=sys.stderr)
        return 2
    mismatches = []
    with tempfile.TemporaryDirectory(prefix="evalb_crosscheck_") as folder:
        unlabelled = os.path.join(folder, "unlabelled.prm")
        with open(unlabelled, "w", encoding="utf-8") as file:
            file.write(re.sub(r"^LABELED[ \t]+1\b", "LABELED 0", prm_text, flags=re.M))
        prms = {"labelled": FLAGS.prm, "unlabelled": unlabelled}
        for seed in range(FLAGS.seeds):
            try:
                line, found = check_seed(seed, folder, params, prms)
            except RuntimeError as error:
                print(f"error: {error}", file=sys.stderr)
                return 2
            print(line, flush=True)
            mismatches += found
    if mismatches:
        print(f"mismatches: {len(mismatches)}; the first {min(len(mismatches), SHOWN_MISMATCHES)}:")
        print("\n".join(mismatches[:SHOWN_MISMATCHES]))
        return 1
    print(f"agree: {FLAGS.pairs * FLAGS.seeds} pairs")
    return 0


if __name__ == "__main__":
    app.run(main)
