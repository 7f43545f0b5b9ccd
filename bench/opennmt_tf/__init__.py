"""The OpenNMT-tf side-by-side harness (`bench/opennmt_tf_side_by_side.py`), one concept a module.

* `recipe`: the project's run recipe (a configs/*.flags file) read into the settings both toolkits get.
* `peer_config`: the peer's files written from that recipe (vocabulary, configuration, model
  definition) and OpenNMT-tf's Transformer parameter count from them.
* `peer_venv`: the peer's own virtual environment, its pinned packages and constraints, its versions.
* `corpus`: the sentences both read (plain text) and the shared SentencePiece model's view of them.
* `toolkits`: the command lines of each toolkit (train, translate, export); the project's versions.
* `processes`: a command run as a child process, its lines time-stamped, its peak RSS; SIGTERM and
  SIGHUP stopping the harness (and its child) as Ctrl-C does.
* `workspace`: one measurement's work folder, its shared tokenizer and data, every child's record.
* `journal`: the measurement's finished units of work and the flags and host that define it,
  so that a later session resumes it (--resume).
* `training_logs`: what each toolkit's training console says: updates, target tokens/s, first
  update, when each checkpoint was made.
* `wallclock`: quality at equal wall-clock: T, the slower toolkit's checkpoint at T, whether both
  chosen checkpoints are still on disk.
* `train_runs`: training runs and the parts measured on them (speed, start-up, quality at equal
  updates and at equal wall-clock).
* `serve_runs`: the exports and the serving engines, each timed in a process of its own.
* `peer_engine`: the peer's SavedModel as a serving worker (runs under the peer's Python).
* `report`: the Markdown table (ours / peer ratios) of a measurement record.

Nothing here imports TensorFlow or OpenNMT-tf: each toolkit runs in child processes of its own.
"""
