"""Tasks: the runs a user starts, wiring the three layers below them together.

`pipelines/` (text -> ids), `keras_transformer/` (ids -> logits -> ids) and `export/`
(strings -> strings) know nothing of each other's runs; a task puts them together, reading and
writing a run through its one owner, `keras_transformer.training_directory.TrainingDirectory`:

  task            `Task`: what a kind of run owns (decoding defaults, dev scores, the metrics
                  that may rank its checkpoints, its checks of training settings); `TranslationTask`.
  registry        the tasks by name (`register_task`, `lookup`), by data set (`of_dataset`) and by
                  training directory (`of_run`).
  training        train (or resume) a model on a data set (sections 5, 6.1): `train`.
  fine_tuning     `InitSource`: a new run started from another run's model (`--init_from`).
  disk_cache      the training pairs' disk cache in MODEL_DIR/cache (`--cache=disk`).
  dev_evaluation  a model scored on a split: during training (`build_evaluator`), after it
                  (`evaluate`, `--evaluate_only`).
  translation     translate files (`translate_file`) and the n-best output lines.
  scoring         log P(target | source) of sentence pairs from files.
  flags           the one definition of the flags the commands share (data, decoding) and
                  the frozen configs they parse into; only entry points call it.
  training_process  the training command in a child process (chains of runs: Table 3, benches).
  model_variations  Table 3 (section 6.2) at a recipe's size: each row trained, scored on dev.
  variations_table  a model-variations run's table: table.csv, table.md and table.png.
  parsing/        section 6.3, sentences -> trees: model, PCFG baseline, reranking, EVALB F1.

Entry points (`python -m keras_transformer.train`, `... .translate`, `... .parse`, `... .score`,
`python -m keras_transformer.export`, `python -m keras_transformer.pipelines`) parse flags and call one function here or in the
layer they serve.
"""
