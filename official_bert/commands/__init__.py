"""Every `bert <command>`, data preparation included: each module defines its
flags, parses them and hands a config to the library (`official_bert`, or
`data_prep` for the data commands). google-research/bert's top-level scripts
(`run_classifier.py`, `create_pretraining_data.py`, ...) run these modules
(`classify`, `create_pretraining_data`, ...)."""
