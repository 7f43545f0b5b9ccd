"""The Markdown table of a side-by-side record: one row per measure, ours, the peer's, ours / peer.

    print(markdown(rows(record)))

`rows` reads the record the harness writes as JSON (parts that did not run give no rows):
training target tokens/s (float32 against float32, and each toolkit in the precision its
documentation recommends on the CPU; the note names the updates the rounds recorded, and says so
when ours did not run its XLA-compiled loss throughout them), start-up to the first update, training peak RSS, dev BLEU
per seed in both conventions and their mean (at equal updates: each toolkit's averaged model; at
equal wall-clock: single checkpoints, a note naming T and the slower toolkit's update at T, or
why a seed was not measured), test2016 BLEU at equal updates likewise (the averaged models,
translated once), export times, serving sentences/s and output
tokens/s of both SavedModels and both CTranslate2 conversions (the sentences/s note says when the
two models' outputs differ in length by more than `UNEQUAL_OUTPUTS`: different searches), serving
peak RSS, parameters.
Each row says which way is better; the ratio is always ours / peer, so above 1 is ours ahead
where higher is better and ours behind where lower is better.
"""

from __future__ import annotations

import dataclasses
import statistics
from typing import Optional

MB = 2**20
# Outputs longer than this many times the other toolkit's (tokens a sentence) make the serving
# rows' sentences/s a comparison of different searches, which their note says.
UNEQUAL_OUTPUTS = 1.5
FORMATS = {"tokens/s": "{:,.0f}", "sentences/s": "{:,.1f}", "s": "{:,.1f}", "MB": "{:,.0f}", "BLEU": "{:.2f}",
           "parameters": "{:,.0f}", "tokens": "{:,.0f}", "min": "{:,.1f}"}


@dataclasses.dataclass(frozen=True)
class Row:
    """One measure: its name, unit (a key of `FORMATS`), both values (None: not measured), which
    way is better ("higher", "lower" or "" for a fact), a note."""

    measure: str
    unit: str
    ours: Optional[float]
    peer: Optional[float]
    better: str = "higher"
    note: str = ""

    @property
    def ratio(self) -> Optional[float]:
        """ours / peer, None if either is missing or the peer's is 0."""
        if self.ours is None or self.peer is None or self.peer == 0:
            return None
        return self.ours / self.peer


def _value(row: Row, value: Optional[float]) -> str:
    return "-" if value is None else FORMATS[row.unit].format(value)


def markdown(table: list[Row]) -> str:
    """The rows as a Markdown table."""
    lines = ["| measure | unit | ours | OpenNMT-tf | ours / OpenNMT-tf | better | note |",
             "|---|---|---:|---:|---:|---|---|"]
    for row in table:
        ratio = "-" if row.ratio is None else f"{row.ratio:.2f}x"
        lines.append(f"| {row.measure} | {row.unit} | {_value(row, row.ours)} | {_value(row, row.peer)} | {ratio} | "
                     f"{row.better} | {row.note} |")
    return "\n".join(lines)


def _mb(value: Optional[float]) -> Optional[float]:
    return None if value is None else value / MB


OURS_LOSS_NOTES = {  # `train_runs.ours_loss` of the speed window ("compiled": ours' steady state, no note)
    "uncompiled": "; ours' loss uncompiled throughout (its XLA-compiled loss starts later): below its steady state",
    "both": "; ours' loss XLA-compiled from inside the window (its compilations counted)",
}


def speed_window(speed: dict) -> str:
    """The updates the speed rounds were measured over, as each round recorded them: "updates
    400-1000" (rounds that differ: each window, with its rounds)."""
    windows: dict[tuple, list] = {}
    for kind in ("float32", "recommended"):
        for toolkit, summary in speed[kind].items():
            if summary.get("same_runs_as"):
                continue
            for r in summary.get("rounds", []):
                windows.setdefault((r["from_update"], r["to_update"]), []).append(
                    f"{NAMES[toolkit]} {r.get('precision', kind)} {r.get('round', '')}".strip())
    if len(windows) == 1:
        [(first, last)] = windows
        return f"updates {first}-{last}"
    return "updates " + "; ".join(f"{first}-{last} ({', '.join(rounds)})" for (first, last), rounds in windows.items())


def _speed_rows(speed: dict) -> list[Row]:
    float32, recommended = speed["float32"], speed["recommended"]
    span = speed_window(speed) + OURS_LOSS_NOTES.get(speed.get("ours_loss"), "")
    return [
        Row("training, float32", "tokens/s", float32["ours"]["tokens_per_second"],
            float32["peer"]["tokens_per_second"], note=f"target tokens, best of {len(float32['ours']['rounds'])} "
                                                       f"round(s), {span}"),
        Row("training, recommended precision", "tokens/s", recommended["ours"]["tokens_per_second"],
            recommended["peer"]["tokens_per_second"],
            note=f"ours --precision=auto ({recommended['ours']['precision']}); OpenNMT-tf float32 (its float16 mode "
                 "is for GPUs)"),
        Row("tokens per update, float32", "tokens", float32["ours"]["tokens_per_update"],
            float32["peer"]["tokens_per_update"], better="", note="target tokens (EOS included) in one batch"),
    ]


CONVENTIONS = (("bleu", "cased sacreBLEU"), ("bleu_lc_moses", "lowercased Moses-tok."))
NAMES = {"ours": "ours", "peer": "OpenNMT-tf"}
OF = {"ours": "ours'", "peer": "OpenNMT-tf's"}


def _wallclock_note(measured: dict) -> str:
    """T and the slower toolkit's update at T, or why the seed was not measured."""
    if not measured.get("measured"):
        return f"not measured: {measured.get('reason', 'no reason recorded')}"
    faster, slower = measured["faster"], measured["slower"]
    return (f"T = {measured['t_minutes']:.1f} min, {OF[faster]} last checkpoint (update "
            f"{measured[faster]['update']}); {NAMES[slower]} at T: update {measured[slower]['update']} of "
            f"{measured[slower]['last_update']}; single checkpoints, beam search")


def _wallclock_rows(wallclock: list) -> list[Row]:
    """Dev BLEU at equal wall-clock per seed in both conventions (None where not measured), and the
    mean over the seeds measured when there are two or more."""
    table = []
    measured = [w for w in wallclock if w.get("measured")]
    for key, convention in CONVENTIONS:
        name = f"dev BLEU at equal wall-clock, {convention}"
        for w in wallclock:
            ours, peer = ((w["ours"][key], w["peer"][key]) if w.get("measured") else (None, None))
            table.append(Row(f"{name}, seed {w['seed']}", "BLEU", ours, peer, note=_wallclock_note(w)))
        if len(measured) > 1:
            table.append(Row(f"{name}, mean of {len(measured)} seeds", "BLEU",
                             statistics.mean(w["ours"][key] for w in measured),
                             statistics.mean(w["peer"][key] for w in measured),
                             note="T per seed: " + ", ".join(f"{w['t_minutes']:.1f} min" for w in measured)))
    return table


def _seed_rows(measure: str, pairs: list) -> list[Row]:
    """BLEU rows in both conventions: one per seed (`pairs`: (seed, ours' scores, the peer's,
    note)), then their mean over two or more seeds."""
    table = []
    for key, convention in CONVENTIONS:
        name = f"{measure}, {convention}"
        for seed, ours, peer, note in pairs:
            table.append(Row(f"{name}, seed {seed}", "BLEU", ours[key], peer[key], note=note))
        if len(pairs) > 1:
            table.append(Row(f"{name}, mean of {len(pairs)} seeds", "BLEU",
                             statistics.mean(ours[key] for _, ours, _, _ in pairs),
                             statistics.mean(peer[key] for _, _, peer, _ in pairs)))
    return table


def _test_rows(tested: list) -> list[Row]:
    """test2016 BLEU at equal updates per seed in both conventions, and their mean over two or more seeds."""
    return _seed_rows("test2016 BLEU", [
        (t["seed"], t["ours"], t["peer"], f"after {t['ours']['updates']} / {t['peer']['updates']} updates; the "
                                          f"averaged models, {t['sentences']:,} sentences translated once, beam search")
        for t in tested])


def _quality_rows(quality: dict) -> list[Row]:
    table = _seed_rows("dev BLEU", [
        (ours["seed"], ours, peer, f"after {ours['updates']} / {peer['updates']} updates; beam search, averaged "
                                   "checkpoints") for ours, peer in zip(quality["ours"], quality["peer"])])
    table += _test_rows(quality.get("test", []))
    table += _wallclock_rows(quality.get("wallclock", []))
    table.append(Row("training run (recipe), wall time", "min",
                     statistics.mean(r["train_minutes"] for r in quality["ours"]),
                     statistics.mean(r["train_minutes"] for r in quality["peer"]), better="lower",
                     note="mean over seeds; dev evaluations included (each toolkit's own)"))
    return table


def _serving_rows(serving: dict) -> list[Row]:
    engines = serving["engines"]
    table = []
    for kind, label in (("saved_model", "SavedModel `serving_default`"), ("ctranslate2", "CTranslate2 float32")):
        ours, peer = engines[f"ours_{kind}"], engines[f"peer_{kind}"]
        note = (f"{serving['sentences']:,} test sentences, batches of {serving['batch_size']}, beam "
                f"{serving['decoding']['beam_size']}, best of {serving['repeats']} round(s)")
        lengths = ours["output_tokens_per_sentence"], peer["output_tokens_per_sentence"]
        if max(lengths) > UNEQUAL_OUTPUTS * min(lengths):
            note += (f"; NOT THE SAME WORK: the models' outputs have {lengths[0]:.1f} and {lengths[1]:.1f} tokens a "
                     "sentence (short-trained models?), so sentences/s compares different searches")
        table += [
            Row(f"serving, {label}", "sentences/s", ours["sentences_per_second"], peer["sentences_per_second"],
                note=note + ("; strings in and out" if kind == "saved_model" else "; pieces in and out, "
                             "the same CTranslate2 4.x runs both")),
            Row(f"serving, {label}", "tokens/s", ours["target_tokens_per_second"], peer["target_tokens_per_second"],
                note=f"output tokens per sentence {ours['output_tokens_per_sentence']:.1f} / "
                     f"{peer['output_tokens_per_sentence']:.1f}"),
            Row(f"export, {label}", "s", ours["export_seconds"], peer["export_seconds"], better="lower",
                note="the export command, start to end"),
            Row(f"serving peak RSS, {label}", "MB", _mb(ours["peak_rss_bytes"]), _mb(peer["peak_rss_bytes"]),
                better="lower"),
        ]
    return table


def rows(record: dict) -> list[Row]:
    """The table's rows of a record (module docstring)."""
    table: list[Row] = []
    if "speed" in record:
        table += _speed_rows(record["speed"])
    if "startup" in record:
        startup = record["startup"]
        table.append(Row("start-up to the first update, float32", "s", startup["ours_float32"]["seconds"],
                         startup["peer_float32"]["seconds"], better="lower", note="from the train command's start"))
        table.append(Row("start-up to the first update, recommended precision", "s", startup["ours_auto"]["seconds"],
                         startup["peer_float32"]["seconds"], better="lower",
                         note=f"ours --precision=auto ({startup['ours_auto']['precision']}), its timing included"))
    peaks = record.get("peak_rss", {})
    if peaks.get("training"):
        table.append(Row("training peak RSS", "MB", _mb(peaks["training"]["ours"]), _mb(peaks["training"]["peer"]),
                         better="lower", note="largest of the training processes"))
    if "quality" in record:
        table += _quality_rows(record["quality"])
    if "serving" in record:
        table += _serving_rows(record["serving"])
    if "parameters" in record:
        parameters = record["parameters"]
        table.append(Row("parameters", "parameters", parameters["ours"], parameters["peer"], better="",
                         note="each checked against its formula on every run; the peer has an output-layer bias "
                              "and, pre-LN, its encoder's and decoder's final LayerNorms"))
    return table
