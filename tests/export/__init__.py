"""Tests of export: the SavedModel, the CTranslate2 model, version folders and warm-up."""
