"""Metrics as pure functions: classification, SQuAD, NER."""
