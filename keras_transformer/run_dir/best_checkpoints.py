"""The K best checkpoints of a run by a dev metric, kept apart from the rotation of the last ones.

Section 6.1 averages the last checkpoints of a fixed-length run. A run that goes on past its
best dev score (a small corpus, a fast host) would average overfitted weights; fairseq keeps
`checkpoint.best_*` (`--keep-best-checkpoints`, `--best-checkpoint-metric`) and OpenNMT-tf
exports on the best evaluation for that reason. Here, after each dev evaluation the checkpoint
of that step is offered; if its score ranks among the K best so far it is copied (hard-linked
where the filesystem allows) into MODEL_DIR/best/ and the list is rewritten:

    best = BestCheckpoints(os.path.join(model_dir, "best"), keep=6, metric="bleu")
    best.offer(step=2100, results={"bleu": 37.2, "loss": 2.1}, prefix=".../checkpoints/ckpt-2100")
    best.prefixes()        # best first: [".../best/ckpt-2100", ...]

`rebuild` writes at once the list that offering a run's evaluations one by one would leave (a
run started as a copy of another one at some update: `bench/compute_robustness.py`);
`copy_checkpoint` is the one copy of a checkpoint's files that both use.

MODEL_DIR/best/best.json holds `{"metric": "bleu", "checkpoints": [{"step", "value", "name"}, ...]}`,
best first, written atomically after the files it names are complete, and the files of a
checkpoint that leaves the list are removed only after the list no longer names them. So a kill
at any point leaves a list whose every entry is whole; files it does not name (a copy cut short)
are removed when the run resumes. Every entry names a checkpoint of the folder itself: one that
leads elsewhere (`../other/checkpoints/ckpt-30`, an absolute path, a symbolic link) makes reading
the list a one-line ValueError naming best.json, before anything is read or removed, and no file
outside the folder is ever removed. Which score is better is the metric's
(`keras_transformer.dev_metrics`, the registry of metrics): a higher BLEU, a lower loss, a higher F1
(a parsing run's labelled EVALB F1 of its dev trees, section 6.3, which the dev evaluation of a
treebank run computes: `keras_transformer.tasks.parsing.parse_files.Gold.dev_scores`); ties keep
the earlier step.
"""

from __future__ import annotations

import json
import os
import shutil
from typing import Callable, Iterable, Optional

from keras_transformer import dev_metrics
from keras_transformer.files import atomic
from keras_transformer.run_dir import readable_checkpoints

LIST_FILE = "best.json"


def is_better(value: float, than: Optional[float], metric: str) -> bool:
    """Whether `value` is strictly better than `than` (None: nothing yet) for `metric`, a
    registered dev metric (`keras_transformer.dev_metrics`: its `sign`)."""
    sign = dev_metrics.lookup(metric).sign
    return than is None or sign * value > sign * than


def metric_value(results: dict, metric: str) -> Optional[float]:
    """The `metric` of a dev evaluation's results (a registered dev metric: "bleu", "loss", "f1", ...),
    None if it was not computed."""
    if metric not in dev_metrics.names():
        raise ValueError(f"the selection metric must be one of {sorted(dev_metrics.names())}, got {metric!r}")
    value = results.get(metric)
    return None if value is None else float(value)


def _read(directory: str) -> tuple[Optional[str], list[dict]]:
    """(the metric, the entries best first) of `directory`/best.json; (None, []) without one. A
    damaged list is a one-line `ValueError` naming the file."""
    path = os.path.join(directory, LIST_FILE)
    if not os.path.isfile(path):
        return None, []
    try:
        with open(path, encoding="utf-8") as file:
            saved = json.load(file)
        entries = [{"step": int(e["step"]), "value": float(e["value"]), "name": str(e["name"])}
                   for e in saved["checkpoints"]]
        metric = saved.get("metric")
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{path}: not a list of best checkpoints ({error}); move it away to start the "
                         "list again") from None
    named = [(entry["name"], prefix) for entry, prefix in zip(entries, _prefixes(directory, entries))]
    readable_checkpoints.check_own(directory, path, named, "remove the entry, or move the file away to start the "
                                                           "list again")
    return metric, entries


def read_list(directory: str) -> list[dict]:
    """The entries of `directory`/best.json, best first ([] without one)."""
    return _read(directory)[1]


def listed_prefixes(directory: str) -> list[str]:
    """The checkpoint prefixes of `directory`'s list, best first."""
    return _prefixes(directory, read_list(directory))


def _prefixes(directory: str, entries: list[dict]) -> list[str]:
    return [os.path.join(directory, entry["name"]) for entry in entries]


def _files(prefix: str) -> list[str]:
    return [prefix + ".index"] + readable_checkpoints.data_files(prefix)


def _remove(directory: str, prefix: str) -> None:
    """Removes the files of the checkpoint `prefix`, which must be `directory`'s own: one that
    leads elsewhere (`readable_checkpoints.outside_folder`) is a ValueError, nothing removed."""
    if readable_checkpoints.outside_folder(prefix, directory):
        raise ValueError(f"{prefix}: outside {directory}; the best checkpoints remove only their own files")
    for path in _files(prefix):
        if os.path.lexists(path):
            os.remove(path)


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:  # another filesystem, or one without hard links
        shutil.copyfile(source, target)


def copy_checkpoint(prefix: str, directory: str) -> str:
    """The files of the checkpoint `prefix` hard-linked (copied where the filesystem allows no
    link) into `directory` (created if needed) under their own names, a file of the same name
    there (a copy a kill cut short) replaced; returns the copy's prefix. A checkpoint's files are
    never written again once saved, so a link shares nothing that changes."""
    os.makedirs(directory, exist_ok=True)
    for source in _files(prefix):
        name = os.path.join(directory, os.path.basename(source))
        if os.path.exists(name):
            os.remove(name)
        _link_or_copy(source, name)
    return os.path.join(directory, os.path.basename(prefix))


def _ranked(entries: list[dict], metric: str) -> list[dict]:
    """`entries` best first by `metric`, ties to the earlier step."""
    sign = dev_metrics.lookup(metric).sign
    return sorted(entries, key=lambda e: (-sign * e["value"], e["step"]))


def rebuild(directory: str, keep: int, metric: str, offers: Iterable[tuple[int, dict, str]]) -> list[dict]:
    """Writes in `directory` (MODEL_DIR/best, which must hold no list yet) the list a
    `BestCheckpoints(directory, keep, metric)` would hold after `offer` of each of `offers`
    (`(step, the dev evaluation's results, the checkpoint's prefix)`, in the run's order): the
    `keep` best by `metric`, ties to the earlier step, results without the metric skipped. Only
    the kept checkpoints are copied (`copy_checkpoint`), then best.json is written (none when
    nothing is kept, as a run that offered nothing has none). Returns its entries, best first.

    Raises:
        ValueError: `directory` already holds a list.
        FileNotFoundError: a kept checkpoint's files are missing (nothing written).
    """
    if keep < 1:
        raise ValueError(f"keep must be positive, got {keep}")
    metric_value({}, metric)  # an unknown metric is refused there
    if read_list(directory):
        raise ValueError(f"{os.path.join(directory, LIST_FILE)}: already holds a list; rebuild makes a new one")
    entries, prefixes = [], {}
    for step, results, prefix in offers:
        value = metric_value(results, metric)
        if value is not None and step not in prefixes:
            entries.append({"step": step, "value": value, "name": os.path.basename(prefix)})
            prefixes[step] = prefix
    kept = _ranked(entries, metric)[:keep]
    missing = [prefixes[e["step"]] for e in kept if not os.path.isfile(prefixes[e["step"]] + ".index")]
    if missing:
        raise FileNotFoundError(f"{missing[0]}.index: not found; the best checkpoints need it")
    for entry in kept:
        copy_checkpoint(prefixes[entry["step"]], directory)
    if kept:
        _write_list(directory, metric, kept)
    return kept


def _write_list(directory: str, metric: str, entries: list[dict]) -> None:
    """best.json, atomically, after the files it names are complete."""
    text = json.dumps({"metric": metric, "checkpoints": entries}, indent=1) + "\n"
    atomic.write_atomically(os.path.join(directory, LIST_FILE), text.encode("utf-8"))


class BestCheckpoints:
    """The `keep` best checkpoints of a run by `metric`, in `directory` (MODEL_DIR/best).

    Args:
        directory: where the copies and best.json live (created on the first copy).
        keep: how many to keep (>= 1).
        metric: a registered dev metric (`keras_transformer.dev_metrics`): "bleu" (higher is
            better), "loss" (the dev loss; lower is better) or "f1" (a parsing run's dev EVALB F1;
            higher is better).
        write: False on the workers of a cluster that are not the chief: they only read.
        log: where the line about each checkpoint entering the list goes.
    """

    def __init__(self, directory: str, keep: int, metric: str = "bleu", write: bool = True,
                 log: Callable[[str], None] = print):
        if keep < 1:
            raise ValueError(f"keep must be positive, got {keep}")
        metric_value({}, metric)  # an unknown metric is refused there
        self.directory, self.keep, self.metric, self.write, self.log = directory, keep, metric, write, log
        ranked_by, self.entries = _read(directory)
        if self.entries and ranked_by != metric:
            raise ValueError(f"{os.path.join(directory, LIST_FILE)} ranks the run's checkpoints by {ranked_by}, "
                             f"not {metric}: keep the run's metric, or use another --model_dir")
        if write:
            self._remove_unlisted()

    def prefixes(self) -> list[str]:
        """The kept checkpoints' prefixes, best first."""
        return _prefixes(self.directory, self.entries)

    def offer(self, step: int, results: dict, prefix: str) -> bool:
        """Keeps the checkpoint `prefix` (saved at `step`, scored `results`) if it ranks among the
        `keep` best; returns whether it did. A step already listed is not offered twice."""
        value = metric_value(results, self.metric)
        if not self.write or value is None or any(entry["step"] == step for entry in self.entries):
            return False
        entry = {"step": step, "value": value, "name": os.path.basename(prefix)}
        ranked = _ranked(self.entries + [entry], self.metric)
        kept, dropped = ranked[: self.keep], ranked[self.keep:]
        if entry not in kept:
            return False
        copy_checkpoint(prefix, self.directory)  # replaces a copy a kill cut short; never a listed one
        _write_list(self.directory, self.metric, kept)
        for old in dropped:
            _remove(self.directory, os.path.join(self.directory, old["name"]))
        self.entries = kept
        rank = kept.index(entry) + 1
        self.log(f"best checkpoints: {entry['name']} ({self.metric} {value:.4g}) is number {rank} of "
                 f"{len(kept)} in {self.directory}")
        return True

    def _remove_unlisted(self) -> None:
        """Removes the files of best/ that the list does not name (a copy a kill cut short, or a
        checkpoint dropped from the list just before a kill)."""
        if not os.path.isdir(self.directory):
            return
        listed = {os.path.basename(path) for entry in self.entries
                  for path in _files(os.path.join(self.directory, entry["name"]))}
        for name in os.listdir(self.directory):
            if name.startswith("ckpt-") and name not in listed:
                os.remove(os.path.join(self.directory, name))
