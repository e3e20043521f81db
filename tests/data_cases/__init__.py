"""Helpers for the data tests: small local tokenizers and generated malformed files."""
