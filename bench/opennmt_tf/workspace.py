"""One measurement's work folder and what every part of it shares.

    space = Workspace.create(work, commands, options, decoding, threads, book, dev_sentences, log)
    space.tokenizer        # the shared SentencePiece model (trained once, by the project's command)
    space.data             # the plain-text splits both toolkits read
    space.run(name, command, toolkit)   # a child process, logged to WORK/logs/NAME.log
    space.journal          # the measurement's finished units (`opennmt_tf.journal`)

    WORK/
      journal.json the measurement's finished units, each one's result (`opennmt_tf.journal`)
      data/        the Multi30k splits as plain stripped text (`corpus.write_plain_splits`)
      tfds/        tensorflow-datasets' copy of Multi30k for the project's commands
      tokenizer/   the project's tokenizer (`python -m keras_transformer.pipelines train_tokenizer`), every run's
      runs/        one folder per training run: ours a training directory, the peer's its
                   config.yml, model.py, vocab.txt and run/ (its model_dir)
      exports/     the SavedModels and CTranslate2 folders of both toolkits
      logs/        each child process's time-stamped output
      engines/     the serving workers' specs

Every child's record (`Workspace.processes`) keeps its name, toolkit, kind (training, export,
serving, ...), command line (`shlex.join`), wall time and peak RSS: the memory rows of the table
come from there, and each number of the record names its process, so its command. A resumed
measurement starts from the journal's records, parameter counts, data files and tokenizer.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import shutil
from typing import Any, Callable, Optional, Sequence

from keras_transformer.config import DecodingConfig

from opennmt_tf import corpus, peer_config, processes
from opennmt_tf.journal import WORKSPACE, Journal
from opennmt_tf.recipe import Recipe
from opennmt_tf.toolkits import Commands

PROGRESS_MARKS = ("step ", "Step = ", "precision auto:", "done:", "Number of model parameters", "error:",
                  "Traceback", "Error")


def progress_line(line: str) -> bool:
    """The lines of a child that the harness prints as it goes (progress, parameters, errors)."""
    return any(mark in line for mark in PROGRESS_MARKS) and "eval step" not in line


@dataclasses.dataclass
class Workspace:
    """Attributes:
        work: the folder.
        commands: both toolkits' command lines.
        recipe: the recipe at its shape.
        data: split -> (source, target) plain-text files.
        tokenizer: the shared SentencePiece model.
        peer_options: the peer's choices (`peer_config.PeerOptions`).
        decoding: beam size, alpha, max_extra_length for both toolkits.
        threads: threads of every serving engine.
        journal: the measurement's journal (`opennmt_tf.journal.Journal`).
        log: where the harness's own lines go.
        processes: a record per child process run so far.
        parameters: toolkit -> the trainable parameters its runs said they have (each checked).
    """

    work: str
    commands: Commands
    recipe: Recipe
    data: dict
    tokenizer: corpus.SentencePieceModel
    peer_options: peer_config.PeerOptions
    decoding: DecodingConfig
    threads: int
    journal: Journal
    log: Callable[[str], None] = print
    processes: list = dataclasses.field(default_factory=list)
    parameters: dict = dataclasses.field(default_factory=dict)

    def folder(self, *parts: str) -> str:
        path = os.path.join(self.work, *parts)
        os.makedirs(path, exist_ok=True)
        return path

    def fresh_folder(self, *parts: str) -> str:
        """`folder`, emptied first: what a unit cut short in an earlier session left there is removed."""
        shutil.rmtree(os.path.join(self.work, *parts), ignore_errors=True)
        return self.folder(*parts)

    def run(self, name: str, command: Sequence[str], toolkit: str, kind: str, env: Optional[dict] = None,
            stop_when: Optional[Callable[[str], bool]] = None, check: bool = True) -> processes.Finished:
        """Runs one child (from the repository root), prints its progress lines, records it."""
        self.log(f"[{name}] {shlex.join(command)}")
        finished = processes.run(command, os.path.join(self.folder("logs"), f"{name}.log"), env=env,
                                 cwd=self.commands.repo, echo=progress_line, prefix=f"  [{name}] ",
                                 stop_when=stop_when)
        self.processes.append({"name": name, "toolkit": toolkit, "kind": kind, "command": shlex.join(command),
                               "seconds": finished.seconds, "peak_rss_bytes": finished.peak_rss_bytes,
                               "returncode": finished.returncode, "log": finished.log_path})
        self.log(f"[{name}] {finished.seconds:,.1f} s, peak RSS {finished.peak_rss_bytes / 2**20:,.0f} MB, "
                 f"status {finished.returncode}{' (stopped)' if finished.stopped else ''}")
        return finished.check(name) if check else finished

    def record_process(self, name: str, toolkit: str, kind: str, command: Sequence[str], seconds: float,
                       peak_rss_bytes: int) -> None:
        """A child this workspace did not start through `run` (a serving worker)."""
        self.processes.append({"name": name, "toolkit": toolkit, "kind": kind, "command": shlex.join(command),
                               "seconds": seconds, "peak_rss_bytes": peak_rss_bytes, "returncode": 0, "log": None})

    def peak_rss(self, toolkit: str, kind: str) -> Optional[int]:
        """The largest peak RSS of this toolkit's children of this kind (None: none ran)."""
        peaks = [p["peak_rss_bytes"] for p in self.processes if p["toolkit"] == toolkit and p["kind"] == kind]
        return max(peaks) if peaks else None

    @classmethod
    def create(cls, work: str, commands: Commands, peer_options: peer_config.PeerOptions,
               decoding: DecodingConfig, threads: int, book: Journal, dev_sentences: int = 0,
               log: Callable[[str], None] = print) -> "Workspace":
        """Writes the data splits (and "dev_translation": the validation split, or its first
        `dev_sentences` pairs) and trains the shared tokenizer (the project's command, once): the
        journal's unit `opennmt_tf.journal.WORKSPACE`, whose files a resumed measurement reuses."""
        space = cls(work, commands, commands.recipe, {}, None,  # type: ignore[arg-type]  (data, tokenizer: below)
                    peer_options, decoding, threads, book, log, book.processes, book.parameters)
        entry = book.entry(WORKSPACE)
        if entry is None:
            files = book.record(WORKSPACE, space._prepare(dev_sentences), processes=space.processes,
                                parameters=space.parameters)
        else:
            files = entry["result"]
            log(f"data and tokenizer: from the journal (session {entry['session']}, {entry['date']})")
        space.data = {split: tuple(paths) for split, paths in files["data"].items()}
        space.tokenizer = corpus.SentencePieceModel(files["tokenizer"])
        log(f"tokenizer: {space.tokenizer.settings.get('type')}, {len(space.tokenizer.pieces()):,} pieces "
            f"({files['tokenizer']})")
        return space

    def _prepare(self, dev_sentences: int) -> dict:
        """The data splits and the shared tokenizer (`create`); returns their paths."""
        flags = self.recipe.flags
        data = corpus.write_plain_splits(self.commands.data_dir, os.path.join(self.work, "data"),
                                         flags["source_lang"], flags["target_lang"])
        data["dev_translation"] = data["validation"]
        if dev_sentences:
            data["dev_translation"] = tuple(
                corpus.write_lines(f"{path}.first{dev_sentences}", corpus.read_lines(path)[:dev_sentences])
                for path in data["validation"])
        tokenizer_dir = os.path.join(self.work, "tokenizer")
        shutil.rmtree(tokenizer_dir, ignore_errors=True)  # a tokenizer cut short in an earlier session
        self.run("tokenizer", self.commands.ours_tokenizer(tokenizer_dir), "ours", "tokenizer")
        return {"data": data, "tokenizer": tokenizer_dir}

    def copy_tokenizer(self, run_dir: str) -> None:
        """Gives a new project run the shared tokenizer (MODEL_DIR/tokenizer, which training reuses)."""
        shutil.copytree(os.path.dirname(self.tokenizer.path), os.path.join(run_dir, "tokenizer"))

    def peer_data(self) -> peer_config.DataFiles:
        return peer_config.DataFiles(*self.data["train"], *self.data["validation"])

    def summary(self) -> dict[str, Any]:
        return {"work": self.work, "tokenizer_pieces": len(self.tokenizer.pieces()),
                "tokenizer": self.tokenizer.settings}
