"""A plugin module for the commands' tests (KT_PLUGINS=tests.helpers.plugin_probe): says it was imported."""

import sys

print("plugin_probe imported", file=sys.stderr, flush=True)
