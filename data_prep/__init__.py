"""Data preparation: raw files → examples → features (pre-training corpus, vocabulary, TFRecords)."""
