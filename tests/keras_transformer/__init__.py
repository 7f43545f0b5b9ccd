"""Tests of keras_transformer's root modules (model, config, losses, metrics) and its commands."""
