"""A plug-in export format for the tests (KT_PLUGINS=tests.helpers.plugin_exporter): "run_copy".

An export of this format is a self-contained copy of a run's model: run/ holds the run's
model_config.json, its tokenizer and the exported checkpoint's weights (a training directory of
its own), and export.json records the format, the decoding and the checkpoint. Its loader builds
the export's `Translator` from that copy, so `python -m keras_transformer.translate
--export_dir=OUT` translates as `--model_dir` did, also once the run is gone. It takes none of the
stock formats' options and serves plain translation only (`Exporter.accepts` empty).
"""

from __future__ import annotations

import os
import shutil

from keras_transformer.config import DecodingConfig
from keras_transformer.export import exporters, versions
from keras_transformer.files import json_files

RUN = "run"  # the copied training directory inside a version folder


@exporters.register_exporter
class RunCopyExporter(exporters.Exporter):
    name = "run_copy"
    title = "run copy"
    help = "the run's model, tokenizer and settings copied (a test plug-in)"

    def export(self, model_dir, export_dir, decoding, options, *, checkpoint=None, version=None,
               shortlist_file=None, log=print):
        import tensorflow as tf  # pylint: disable=g-import-not-at-top

        from keras_transformer.export import serving_module  # pylint: disable=g-import-not-at-top
        from keras_transformer.run_dir import layout  # pylint: disable=g-import-not-at-top

        translator, checkpoint = serving_module.from_model_dir(model_dir, decoding, checkpoint)
        os.makedirs(export_dir, exist_ok=True)
        temporary = versions.temporary_folder(export_dir, versions.next_version(export_dir) if version is None
                                              else version)
        run = os.path.join(temporary, RUN)
        shutil.copytree(os.path.join(model_dir, layout.TOKENIZER_DIR), os.path.join(run, layout.TOKENIZER_DIR))
        shutil.copyfile(os.path.join(model_dir, layout.CONFIG_FILE), os.path.join(run, layout.CONFIG_FILE))
        tf.train.CheckpointManager(tf.train.Checkpoint(model=translator.model),
                                   os.path.join(run, layout.CHECKPOINT_DIR), max_to_keep=1).save()
        json_files.write_json_atomically(exporters.settings_file(temporary), {
            "format": self.name, "decoding": decoding.to_dict(), "checkpoint": checkpoint})
        path = versions.publish_version(temporary, export_dir, version)
        log(f"exported {checkpoint} to {path} ({self.title})")
        return path

    def load(self, folder, request):
        from keras_transformer.export import serving_module  # pylint: disable=g-import-not-at-top

        decoding = DecodingConfig(**self.settings(folder)["decoding"])
        translator, _ = serving_module.from_model_dir(os.path.join(folder, RUN), decoding)

        def translate(sentences):  # holds the Translator: its tf.function keeps only a weak reference
            return translator.serving_default(sentences)

        return translate
