"""Training: the custom loop of section 5 and what it is made of, each part testable alone.

  trainer         the loop (`Trainer`: step, report, checkpoint, evaluate, stop), `build_trainer`.
  schedules       equation (3) and Adam(0.9, 0.98, 1e-9) (section 5.3).
  checkpoints     `Checkpoints` (save, restore the newest readable) and `CheckpointTimer` (when).
  ema             the exponential moving average of the weights (`--ema_decay`).
  evaluation      dev loss, perplexity and BLEU of a model (`Evaluator`).
  early_stopping  patience on dev BLEU, replayed from the history on resume.
  reporting       the console line and ETA, TensorBoard scalars, eval/history.json.
  interrupts      SIGINT/SIGTERM become "save after this update, then stop".
  run_lock        one trainer per training directory.
  distribution    the tf.distribute strategy (`--num_gpus`, `--cpu_replicas`, TF_CONFIG), precision.
"""
