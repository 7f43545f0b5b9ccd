"""The test suite, one folder per package it tests (pytest; `make test`)."""
