"""Every `bert <command>` that is not data preparation (those are in data_prep/):
each module defines its flags, parses them and hands a config to the library.
google-research/bert's top-level scripts (`run_classifier.py`, ...) run these
modules (`classify`, ...)."""
